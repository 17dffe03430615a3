#pragma once

// A small fixed-size thread pool for data-parallel loops. parallel_for splits [0, count)
// into chunks of `grain` elements. The chunk boundaries depend only on count and grain,
// never on the number of threads, so a kernel that reduces each chunk and then combines
// the chunk results in chunk order gets bitwise the same answer with any thread count.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/spin_wait.hpp"

namespace xlite {

class thread_pool {
public:
  // num_threads counts the calling thread, which works too: a pool of 1 has no workers.
  explicit thread_pool(std::size_t num_threads) : shares_(num_threads == 0 ? 1 : num_threads) {
    if (num_threads == 0) throw value_error("thread_pool: needs at least one thread");
    workers_.reserve(num_threads - 1);
    for (std::size_t slot = 1; slot < num_threads; ++slot) workers_.emplace_back([this, slot] { work(slot); });
  }

  ~thread_pool() {
    stopping_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release); // the workers see stopping_ after it
    generation_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  std::size_t num_threads() const noexcept { return workers_.size() + 1; }

  // Calls body(begin, end) once for every chunk [begin, end) of [0, count) and returns when
  // all are done. If a call throws, chunks not yet started are skipped and the first
  // exception is rethrown here. A parallel_for issued from inside a body runs serially on
  // the thread that issued it, so nesting cannot deadlock.
  //
  // Thread k first runs the k-th of num_threads() equal shares of the chunks, then helps
  // with the shares of threads that are late. A loop run again over the same data thus
  // finds each part in the cache of the core that ran it last time.
  template <std::invocable<std::int64_t, std::int64_t> Body>
  void parallel_for(std::int64_t count, std::int64_t grain, Body&& body) {
    if (grain < 1) throw value_error(detail::message("parallel_for: grain must be at least 1, got ", grain));
    if (count <= 0) return;
    const std::int64_t chunks = count / grain + (count % grain != 0);
    if (chunks == 1 || workers_.empty() || current_pool() == this) {
      for (std::int64_t begin = 0; begin < count; begin += grain) body(begin, std::min(count, begin + grain));
      return;
    }
    auto invoke = [&body](std::int64_t begin, std::int64_t end) { body(begin, end); };
    std::scoped_lock one_job_at_a_time(submit_mutex_);
    post(count, grain, chunks, &invoke,
         [](void* f, std::int64_t begin, std::int64_t end) { (*static_cast<decltype(invoke)*>(f))(begin, end); });
    const thread_pool* outer = std::exchange(current_pool(), this);
    run_chunks(0);
    current_pool() = outer;
    // No worker joins from here on; wait for those that did to finish their last chunk.
    open_.store(false, std::memory_order_seq_cst);
    detail::spin_until([&] { return participants_.load(std::memory_order_seq_cst) == 0; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

private:
  using call_type = void (*)(void* body, std::int64_t begin, std::int64_t end);

  // One thread's share of the chunks of a job: [next, end), claimed one by one, by its
  // owner first and by any thread that has run out of work.
  struct alignas(64) share {
    std::atomic<std::int64_t> next{0};
    std::int64_t end = 0;
  };

  static const thread_pool*& current_pool() {
    thread_local const thread_pool* pool = nullptr;
    return pool;
  }

  // How long an idle worker watches for the next job before it sleeps: waking a sleeping
  // thread costs more than a short loop takes, and parallel loops often come in series.
  static constexpr std::chrono::microseconds spin_before_sleep{200};

  void post(std::int64_t count, std::int64_t grain, std::int64_t chunks, void* body, call_type call) {
    count_ = count;
    grain_ = grain;
    body_ = body;
    call_ = call;
    const auto threads = static_cast<std::int64_t>(shares_.size());
    for (std::int64_t k = 0; k < threads; ++k) {
      shares_[static_cast<std::size_t>(k)].next.store(chunks * k / threads, std::memory_order_relaxed);
      shares_[static_cast<std::size_t>(k)].end = chunks * (k + 1) / threads;
    }
    open_.store(true, std::memory_order_seq_cst); // publishes the job to workers that check open_
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all(); // a system call only if a worker sleeps
  }

  // Runs chunks of the current job until none is left: those of share `slot`, then the
  // others' in turn.
  void run_chunks(std::size_t slot) {
    for (std::size_t k = 0; k < shares_.size(); ++k) {
      share& s = shares_[(slot + k) % shares_.size()];
      for (std::int64_t chunk; (chunk = s.next.fetch_add(1, std::memory_order_relaxed)) < s.end;) {
        const std::int64_t begin = chunk * grain_;
        try {
          call_(body_, begin, std::min(count_, begin + grain_));
        } catch (...) {
          std::scoped_lock lock(error_mutex_);
          if (!error_) error_ = std::current_exception();
          for (share& other : shares_) other.next.store(other.end, std::memory_order_relaxed);
        }
      }
    }
  }

  // A worker joins a job by counting itself in participants_ and then finding open_ set;
  // the caller closes the job by clearing open_ and then waiting for participants_ to
  // drop to zero. Both pairs are sequentially consistent, so a worker either is counted
  // before the caller checks or finds the job closed: the job is never touched after
  // parallel_for returns.
  void work(std::size_t slot) {
    current_pool() = this;
    for (std::uint32_t seen = 0;;) {
      seen = detail::wait_for_change(generation_, seen, spin_before_sleep);
      if (stopping_.load(std::memory_order_relaxed)) return;
      participants_.fetch_add(1, std::memory_order_seq_cst);
      if (open_.load(std::memory_order_seq_cst)) run_chunks(slot);
      participants_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  // The current job, written only while open_ is false and no worker participates.
  std::int64_t count_ = 0;
  std::int64_t grain_ = 1;
  void* body_ = nullptr;
  call_type call_ = nullptr;
  std::vector<share> shares_; // one per thread, the caller's first
  std::mutex error_mutex_;
  std::exception_ptr error_;

  std::mutex submit_mutex_; // one parallel_for at a time per pool
  std::atomic<bool> open_{false};
  std::atomic<int> participants_{0};
  std::atomic<std::uint32_t> generation_{0}; // counts posted jobs (32 bits: what a futex waits on)
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_; // last: the workers start once everything above exists
};

// The process-wide pool: XLITE_NUM_THREADS threads, or one per core.
inline thread_pool& default_thread_pool() {
  static thread_pool pool([] {
    const auto from_env = env_integer("XLITE_NUM_THREADS", 1, 1024);
    return from_env ? static_cast<std::size_t>(*from_env) : std::max(1u, std::thread::hardware_concurrency());
  }());
  return pool;
}

namespace detail {
inline thread_pool*& thread_pool_override() {
  thread_local thread_pool* pool = nullptr;
  return pool;
}
} // namespace detail

// The pool xlite's kernels use when called from this thread: the one a scoped_thread_pool
// installed, else the default pool.
inline thread_pool& current_thread_pool() {
  thread_pool* pool = detail::thread_pool_override();
  return pool != nullptr ? *pool : default_thread_pool();
}

// Runs the kernels called from this thread on `pool` for the scope, e.g. one thread:
//   xlite::thread_pool one(1);
//   xlite::scoped_thread_pool use(one);
class scoped_thread_pool {
public:
  explicit scoped_thread_pool(thread_pool& pool) : previous_(std::exchange(detail::thread_pool_override(), &pool)) {}
  ~scoped_thread_pool() { detail::thread_pool_override() = previous_; }
  scoped_thread_pool(const scoped_thread_pool&) = delete;
  scoped_thread_pool& operator=(const scoped_thread_pool&) = delete;

private:
  thread_pool* previous_;
};

} // namespace xlite
