#pragma once

// Waiting for another thread's next step: spin for a short while, then get off the core.
// A thread that sees the step within nanoseconds is what makes a parallel loop of a few
// microseconds worth splitting; one that keeps spinning when no step comes steals the core
// from the thread it waits for.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace xlite::detail {

// Tells the core that this thread is spinning (frees its resources for the sibling
// hyperthread, and keeps the spin from flooding the memory system).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause(); // _mm_pause without <immintrin.h>, which costs a second to parse
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// One try of a spin at a time: pauses for the first few microseconds, then yields the
// core at each try. On a machine with few cores a thread that keeps spinning keeps the
// thread it waits for, or one just woken to go on after it, from running: a lazy step of
// a 2^20-float chain on 2 cores (the caller, the device's worker and a pool worker) took
// 409-424 us with pauses only and 131-132 us with yields, 120 us of it computing. A
// yield returns at once when no other thread wants the core. The phases are timed, not
// counted: a pause lasts from a few cycles to over a hundred, by CPU.
class spinner {
public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds pause_phase{5};

  explicit spinner(clock::time_point deadline = clock::time_point::max()) : deadline_(deadline) {}

  // Pauses or yields once; false when the deadline has passed (checked at every yield, and
  // every 64th pause, since reading the clock costs as much as dozens of pauses).
  bool spin() {
    if (yielding_) {
      std::this_thread::yield();
      return clock::now() <= deadline_;
    }
    cpu_relax();
    if (++pauses_ % 64 != 0) return true;
    const auto now = clock::now();
    yielding_ = now - start_ > pause_phase;
    return now <= deadline_;
  }

private:
  clock::time_point start_ = clock::now();
  clock::time_point deadline_;
  unsigned pauses_ = 0;
  bool yielding_ = false;
};

// Calls done() until it returns true, for a wait that no notify ends.
template <class Done>
void spin_until(Done&& done) {
  for (spinner s; !done();) s.spin();
}

// The threads asleep until an atomic changes, and what wakes them: wake_all() after the
// change costs one load when none sleeps. std::atomic::notify_all is not so cheap with
// libstdc++ 12: it asks one of 16 waiter counts, chosen by address bits that are the same
// for every 64-byte-aligned atomic, so while any thread of the process slept on any such
// atomic, every notify of another made a futex system call. On the development VM that
// was 1-2 us on every job of the thread pool while another pool's worker slept, and a
// 2^16-float expression on two threads ran at 0.6 of the same loop split by hand.
class sleepers {
public:
  // Wakes the threads asleep on the value; call it after changing the value.
  void wake_all() noexcept {
    // With sleep_while's fence: either this load sees the sleeper, or it sees the change.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (count_.load(std::memory_order_relaxed) == 0) return;
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
  }

  // Sleeps while value is old, until a wake_all (it may return early: check value again).
  template <class T>
  void sleep_while(const std::atomic<T>& value, T old) noexcept {
    count_.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const std::uint32_t epoch = epoch_.load(std::memory_order_acquire);
    if (value.load(std::memory_order_acquire) == old) epoch_.wait(epoch, std::memory_order_acquire);
    count_.fetch_sub(1, std::memory_order_relaxed);
  }

private:
  std::atomic<std::uint32_t> count_{0};
  std::atomic<std::uint32_t> epoch_{0}; // what a sleeper waits on: a wake_all with sleepers moves it
};

// Waits until `value` is no longer `old` and returns what it is: spins for up to `spin`,
// then naps in short sleeps for up to `nap`, then sleeps on `asleep` until a wake_all after
// the change.
//
// Why nap: a thread asleep is woken onto the CPU of the thread that wakes it (the
// scheduler's wake-affine heuristic), and while that thread stays busy the woken one waits
// there, measured here at 0.6 to 2 ms with the other core idle. A thread that naps wakes
// from its own timer on its own CPU, within tens of microseconds.
template <class T>
T wait_for_change(const std::atomic<T>& value, T old, sleepers& asleep, std::chrono::microseconds spin,
                  std::chrono::microseconds nap = std::chrono::microseconds(0)) {
  for (spinner s(std::chrono::steady_clock::now() + spin);;) {
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    if (!s.spin()) break;
  }
  const auto nap_end = std::chrono::steady_clock::now() + nap;
  while (std::chrono::steady_clock::now() < nap_end) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
  }
  for (;;) {
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    asleep.sleep_while(value, old);
  }
}

} // namespace xlite::detail
