#pragma once

// A fork-join team of std::threads, for the impls that have no threads of their own (the
// hand-written xsimd loop, Eigen's and xtensor's element-wise expressions): what a user of
// those libraries writes to run a loop on t cores, at its cheapest. [0, n) is split into t
// equal parts, one per thread, the calling thread included. Idle workers spin rather than
// sleep, so a call costs a cache-line round trip, not a wake-up: the split costs these peers
// as little as it can, and a rate below theirs on small arrays is the cost of the impl's
// own threading.

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace xlite::bench {

class thread_team {
public:
  // Parts start at multiples of this many floats (4 KiB): aligned for every SIMD width.
  static constexpr std::int64_t part_alignment = 1024;

  explicit thread_team(int threads) : partial_sums_(static_cast<std::size_t>(std::max(threads, 1))) {
    for (int part = 1; part < threads; ++part) workers_.emplace_back([this, part] { work(part); });
  }

  ~thread_team() {
    stopping_.store(true, std::memory_order_relaxed);
    for (std::thread& worker : workers_) worker.join();
  }

  thread_team(const thread_team&) = delete;
  thread_team& operator=(const thread_team&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // Calls body(begin, end) for each part of [0, n) and returns when every part is done.
  template <class Body>
  void for_each_part(std::int64_t n, Body&& body) {
    run(n, [&body](int, std::int64_t begin, std::int64_t end) { body(begin, end); });
  }

  // The sum of body(begin, end) over the parts of [0, n), added in part order.
  template <class Body>
  float sum_parts(std::int64_t n, Body&& body) {
    run(n, [&](int part, std::int64_t begin, std::int64_t end) {
      partial_sums_[static_cast<std::size_t>(part)].value = body(begin, end);
    });
    float total = 0.0f;
    for (const padded_float& partial : partial_sums_) total += partial.value;
    return total;
  }

private:
  struct alignas(64) padded_float { // one cache line each: no false sharing between parts
    float value = 0.0f;
  };
  using call_type = void (*)(void* body, int part, std::int64_t begin, std::int64_t end);

  template <class Body>
  void run(std::int64_t n, Body&& body) {
    n_ = n;
    body_ = &body;
    call_ = [](void* f, int part, std::int64_t begin, std::int64_t end) {
      (*static_cast<std::remove_reference_t<Body>*>(f))(part, begin, end);
    };
    if (workers_.empty()) {
      run_part(0);
      return;
    }
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release); // publishes the job
    run_part(0);
    while (pending_.load(std::memory_order_acquire) != 0) pause();
  }

  void run_part(int part) const {
    const std::int64_t threads = size();
    const std::int64_t share = (n_ + threads - 1) / threads;
    const std::int64_t length = (share + part_alignment - 1) / part_alignment * part_alignment;
    const std::int64_t begin = std::min(n_, part * length);
    const std::int64_t end = std::min(n_, begin + length);
    if (begin < end) call_(body_, part, begin, end);
  }

  void work(int part) {
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t generation;
      while ((generation = generation_.load(std::memory_order_acquire)) == seen) {
        if (stopping_.load(std::memory_order_relaxed)) return;
        pause();
      }
      seen = generation;
      run_part(part);
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
  }

  // The job: written by the calling thread before it bumps generation_, read by the workers after.
  std::int64_t n_ = 0;
  void* body_ = nullptr;
  call_type call_ = nullptr;
  std::vector<padded_float> partial_sums_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_; // last: the workers start once everything above exists
};

} // namespace xlite::bench
