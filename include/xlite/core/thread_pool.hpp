#pragma once

// A small fixed-size thread pool for data-parallel loops. parallel_for splits [0, count)
// into chunks of `grain` elements. The chunk boundaries depend only on count and grain,
// never on the number of threads, so a kernel that reduces each chunk and then combines
// the chunk results in chunk order gets bitwise the same answer with any thread count.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"

namespace xlite {

class thread_pool {
public:
  // num_threads counts the calling thread, which works too: a pool of 1 has no workers.
  explicit thread_pool(std::size_t num_threads) {
    if (num_threads == 0) throw value_error("thread_pool: needs at least one thread");
    workers_.reserve(num_threads - 1);
    for (std::size_t i = 1; i < num_threads; ++i) workers_.emplace_back([this] { work(); });
  }

  ~thread_pool() {
    {
      std::scoped_lock lock(mutex_);
      stopping_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    job_posted_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  std::size_t num_threads() const noexcept { return workers_.size() + 1; }

  // Calls body(begin, end) once for every chunk [begin, end) of [0, count) and returns when
  // all are done. If a call throws, chunks not yet started are skipped and the first
  // exception is rethrown here. A parallel_for issued from inside a body runs serially on
  // the thread that issued it, so nesting cannot deadlock.
  template <std::invocable<std::int64_t, std::int64_t> Body>
  void parallel_for(std::int64_t count, std::int64_t grain, Body&& body) {
    if (grain < 1) throw value_error(detail::message("parallel_for: grain must be at least 1, got ", grain));
    if (count <= 0) return;
    auto invoke = [&body](std::int64_t begin, std::int64_t end) { body(begin, end); };
    job task(count, grain, &invoke,
             [](void* f, std::int64_t begin, std::int64_t end) { (*static_cast<decltype(invoke)*>(f))(begin, end); });
    if (task.chunks == 1 || workers_.empty() || current_pool() == this) {
      run_chunks(task);
    } else {
      std::scoped_lock one_job_at_a_time(submit_mutex_);
      bool wake = false;
      {
        std::scoped_lock lock(mutex_);
        job_ = &task;
        generation_.fetch_add(1, std::memory_order_release);
        wake = sleeping_ > 0;
      }
      if (wake) job_posted_.notify_all();
      const thread_pool* outer = std::exchange(current_pool(), this);
      run_chunks(task);
      current_pool() = outer;
      {
        std::scoped_lock lock(mutex_);
        job_ = nullptr; // workers that have not joined yet must not
      }
      // Only chunks already claimed are left: wait for them without sleeping.
      while (task.participants.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    }
    if (task.error) std::rethrow_exception(task.error);
  }

private:
  struct job {
    using call_type = void (*)(void* body, std::int64_t begin, std::int64_t end);
    job(std::int64_t count_, std::int64_t grain_, void* body_, call_type call_)
        : count(count_), grain(grain_), chunks(count / grain + (count % grain != 0)), body(body_), call(call_) {}

    const std::int64_t count;
    const std::int64_t grain;
    const std::int64_t chunks;
    void* const body;
    const call_type call;
    std::atomic<std::int64_t> next_chunk{0};
    std::atomic<int> participants{0}; // workers inside run_chunks; they join under the pool's mutex_
    std::mutex error_mutex;
    std::exception_ptr error;
  };

  static const thread_pool*& current_pool() {
    thread_local const thread_pool* pool = nullptr;
    return pool;
  }

  static void run_chunks(job& task) {
    for (;;) {
      const std::int64_t chunk = task.next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= task.chunks) return;
      const std::int64_t begin = chunk * task.grain;
      try {
        task.call(task.body, begin, std::min(task.count, begin + task.grain));
      } catch (...) {
        std::scoped_lock lock(task.error_mutex);
        if (!task.error) task.error = std::current_exception();
        task.next_chunk.store(task.chunks, std::memory_order_relaxed);
      }
    }
  }

  // How long an idle worker watches for the next job before it sleeps: waking a sleeping
  // thread costs more than a short loop takes, and parallel loops often come in series.
  static constexpr std::chrono::microseconds spin_before_sleep{200};

  void work() {
    current_pool() = this;
    std::uint64_t seen = 0;
    for (;;) {
      const auto spin_until = std::chrono::steady_clock::now() + spin_before_sleep;
      while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spin_until) {
        std::this_thread::yield();
      }
      std::unique_lock lock(mutex_);
      ++sleeping_;
      job_posted_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
      --sleeping_;
      if (stopping_) return;
      seen = generation_.load(std::memory_order_relaxed);
      if (job_ == nullptr) continue; // that job is already done
      job& task = *job_;
      task.participants.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      run_chunks(task);
      task.participants.fetch_sub(1, std::memory_order_release);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_; // one parallel_for at a time per pool
  std::mutex mutex_;        // guards job_, stopping_, sleeping_ and changes of generation_
  std::condition_variable job_posted_;
  job* job_ = nullptr;
  std::atomic<std::uint64_t> generation_{0}; // counts posted jobs; workers watch it while they spin
  int sleeping_ = 0;                         // workers waiting on job_posted_
  bool stopping_ = false;
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
