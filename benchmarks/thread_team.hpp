#pragma once

// A fork-join team of std::threads, for the impls that have no threads of their own (the
// hand-written xsimd loop, Eigen's and xtensor's element-wise expressions): what a user of
// those libraries writes to run a loop on t cores, at its cheapest. [0, n) is split into t
// equal parts, which the threads, the calling one included, claim from a counter. A
// waiting thread spins for up to spin_time before it sleeps, as in xlite's pool (both wait
// with xlite::detail::wait_for_change), so back-to-back calls cost a cache-line round trip,
// not a wake-up: the split costs these peers as little as it can, and a rate below theirs
// on small arrays is the cost of the impl's own threading. On a busy machine, claiming lets
// the caller run a part whose worker is not running, and sleeping keeps a wait from taking
// a whole time slice.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "xlite/core/spin_wait.hpp"

namespace xlite::bench {

class thread_team {
public:
  // Parts start at multiples of this many floats (4 KiB): aligned for every SIMD width.
  static constexpr std::int64_t part_alignment = 1024;

  explicit thread_team(int threads) : partial_sums_(static_cast<std::size_t>(std::max(threads, 1))) {
    for (int worker = 1; worker < threads; ++worker) workers_.emplace_back([this] { work(); });
  }

  ~thread_team() {
    stopping_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release); // wakes the workers, which see stopping_
    workers_asleep_.wake_all();
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
    for (padded_float& partial : partial_sums_) partial.value = 0.0f; // an empty part is not run
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
    finished_.store(0, std::memory_order_relaxed);
    next_part_.store(0, std::memory_order_release); // publishes the job to workers still claiming
    if (!workers_.empty()) {
      generation_.fetch_add(1, std::memory_order_release); // and to the others
      workers_asleep_.wake_all();                          // a system call only if a worker sleeps
    }
    run_parts();
    for (int finished = finished_.load(std::memory_order_acquire); finished != size();) {
      finished = xlite::detail::wait_for_change(finished_, finished, caller_asleep_, spin_time);
    }
  }

  // Claims parts of the current job and runs them until none is left.
  void run_parts() {
    const int parts = size();
    for (int part; (part = next_part_.fetch_add(1, std::memory_order_acquire)) < parts;) {
      const std::int64_t share = (n_ + parts - 1) / parts;
      const std::int64_t length = (share + part_alignment - 1) / part_alignment * part_alignment;
      const std::int64_t begin = std::min(n_, part * length);
      const std::int64_t end = std::min(n_, begin + length);
      if (begin < end) call_(body_, part, begin, end);
      if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) caller_asleep_.wake_all();
    }
  }

  void work() {
    std::uint32_t seen = 0;
    for (;;) {
      seen = xlite::detail::wait_for_change(generation_, seen, workers_asleep_, spin_time);
      if (stopping_.load(std::memory_order_relaxed)) return;
      run_parts();
    }
  }

  static constexpr std::chrono::microseconds spin_time{200};

  // The job: written by the calling thread before it resets next_part_, read after a claim.
  std::int64_t n_ = 0;
  void* body_ = nullptr;
  call_type call_ = nullptr;
  std::vector<padded_float> partial_sums_;
  std::atomic<int> next_part_{0};            // the next part to claim; the job is over at size()
  std::atomic<int> finished_{0};             // parts run to the end
  std::atomic<std::uint32_t> generation_{0}; // counts jobs (32 bits: what the kernel's futex waits on)
  std::atomic<bool> stopping_{false};
  xlite::detail::sleepers workers_asleep_; // until generation_ changes
  xlite::detail::sleepers caller_asleep_;  // until finished_ changes
  std::vector<std::thread> workers_; // last: the workers start once everything above exists
};

} // namespace xlite::bench
