#pragma once

// A small fixed-size thread pool for data-parallel loops. parallel_for splits [0, count)
// into chunks of `grain` elements. The chunk boundaries depend only on count and grain,
// never on the number of threads, so a kernel that reduces each chunk and then combines
// the chunk results in chunk order gets bitwise the same answer with any thread count.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/spin_wait.hpp"

namespace xlite {

class thread_pool {
public:
  // num_threads counts the calling thread, which works too: a pool of 1 has no workers.
  explicit thread_pool(std::size_t num_threads) : threads_(num_threads == 0 ? 1 : num_threads) {
    if (num_threads == 0) throw value_error("thread_pool: needs at least one thread");
    workers_.reserve(num_threads - 1);
    for (std::size_t slot = 1; slot < num_threads; ++slot) workers_.emplace_back([this, slot] { work(slot); });
  }

  ~thread_pool() {
    job_.stopping.store(true, std::memory_order_relaxed);
    job_.generation.fetch_add(2, std::memory_order_release); // the workers see stopping after it
    job_.asleep.wake_all();
    for (auto& worker : workers_) worker.join();
  }

  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  std::size_t num_threads() const noexcept { return threads_.size(); }

  // Calls body(begin, end) once for every chunk [begin, end) of [0, count) and returns when
  // all are done. If a call throws, chunks not yet started are skipped and the first
  // exception is rethrown here. A parallel_for issued from inside a body runs serially on
  // the thread that issued it, so nesting cannot deadlock.
  //
  // Thread k first runs the k-th of num_threads() equal shares of the chunks, then helps
  // with the shares of threads that are late. A loop run again over the same data thus
  // finds each part in the cache of the core that ran it last time.
  //
  // There may be at most 2^32 - 1 chunks (each a call of body), on any pool.
  template <std::invocable<std::int64_t, std::int64_t> Body>
  void parallel_for(std::int64_t count, std::int64_t grain, Body&& body) {
    run_job<false>(count, grain, body);
  }

  // Passed to parallel_for with a body that holds by value all it reads and only reads it,
  // as xlite's own loops do: the workers may then call a copy of it in the pool's own
  // lines (see worker_closure_). Every thread calls it as const; the calling thread calls
  // body itself.
  struct workers_may_copy_t {
    explicit workers_may_copy_t() = default;
  };
  static constexpr workers_may_copy_t workers_may_copy{};

  template <class Body>
  requires std::is_object_v<Body> && std::invocable<const Body&, std::int64_t, std::int64_t>
  void parallel_for(std::int64_t count, std::int64_t grain, const Body& body, workers_may_copy_t) {
    static_assert(std::is_trivially_copy_constructible_v<Body> && std::is_trivially_destructible_v<Body>,
                  "xlite::thread_pool::parallel_for(..., workers_may_copy): the body must copy trivially "
                  "(capture pointers and values, not containers)");
    // A body too large for the pool's lines is called in place.
    run_job<sizeof(Body) <= sizeof(worker_closure_) && alignof(Body) <= line_pair>(count, grain, body);
  }

private:
  using call_type = void (*)(void* body, std::int64_t begin, std::int64_t end);

  // parallel_for; with CopyForWorkers, the workers call a copy of body in worker_closure_.
  // Only what depends on the body is here, compiled for every loop; the rest is run_posted's,
  // compiled once per translation unit (a file that evaluates one expression has three loops).
  template <bool CopyForWorkers, class Body>
  void run_job(std::int64_t count, std::int64_t grain, Body& body) {
    const std::int64_t chunks = chunk_count(count, grain);
    if (chunks == 0) return;
    if (chunks == 1 || workers_.empty() || current_pool() == this) {
      for (std::int64_t begin = 0; begin < count; begin += grain) body(begin, std::min(count, begin + grain));
      return;
    }
    auto invoke = [&body](std::int64_t begin, std::int64_t end) { body(begin, end); };
    using copy = std::remove_cv_t<Body>;
    using callee = std::conditional_t<CopyForWorkers, const copy, decltype(invoke)>;
    const call_type call = [](void* f, std::int64_t begin, std::int64_t end) {
      (*static_cast<callee*>(f))(begin, end);
    };
    std::scoped_lock one_job_at_a_time(submit_mutex_);
    // A worker that helped read this share in the last job: ask for it back while the job
    // is posted, not when the first claim needs it (50 ns per job on the development VM).
    __builtin_prefetch(&threads_[0].share, 1, 3);
    if constexpr (CopyForWorkers) {
      // The calling thread calls body itself, not the copy (which it only compares).
      void* const copied = copy_for_workers(std::as_const(body));
      run_posted({0, count, grain, chunks, copied, call},
                 const_cast<void*>(static_cast<const void*>(std::addressof(body))));
    } else {
      run_posted({0, count, grain, chunks, &invoke, call}, &invoke);
    }
  }

  // The copy of body in worker_closure_, written only if the last copy made differs from
  // it in type or in any byte (padding too: an indeterminate pad costs a rewrite, nothing
  // else). A loop that runs again on the same operands (every step of a training loop,
  // every call of a benchmark) leaves the copy's lines shared between the cores, where
  // rewriting them took each back from the workers that read them before the job could be
  // posted: a hand-written sum over 2^16 floats on two threads took 0.3-0.5 us longer with
  // 512 bytes of captures than with 32, and no longer once unrewritten. The old copy is the
  // object the new job needs: of the same type, made by its trivial copy constructor, equal
  // in every byte (so a change a worker made through a mutable member shows too), and out
  // of use, since the last job has ended.
  template <class Copy>
  void* copy_for_workers(const Copy& body) {
    void* const storage = worker_closure_.data();
    if (closure_type_ == &closure_type_tag<Copy> && std::memcmp(storage, std::addressof(body), sizeof(Copy)) == 0) {
      return std::launder(static_cast<Copy*>(storage));
    }
    closure_type_ = &closure_type_tag<Copy>;
    return ::new (storage) Copy(body);
  }
  // An address of its own for each type of body copied, as closure_type_ records it.
  template <class Copy>
  static inline char closure_type_tag = 0;

  // How long an idle worker watches for the next job before it sleeps: waking a sleeping
  // thread costs more than a short loop takes, and parallel loops often come in series.
  static constexpr std::chrono::microseconds spin_before_sleep{200};
  // How much of the closure a joining worker prefetches: all of most closures (in
  // worker_closure_), or the caller's stack from the closure on, where its captures
  // usually are. 2 or 16 lines made no difference on the development VM.
  static constexpr std::uintptr_t prefetched_closure_lines = 8;

  // What a thread knows of the job it works on: job_'s fields, checked to be one job's.
  struct job_view {
    std::uint32_t generation = 0;
    std::int64_t count = 0;
    std::int64_t grain = 1;
    std::int64_t chunks = 0;
    void* body = nullptr;
    call_type call = nullptr;
  };

  // What threads write is laid out 128 bytes apart, not 64: the L2 caches of recent AMD and
  // Intel cores fetch lines in aligned pairs, so a thread that reads one line of a pair
  // also takes the other from the core that writes it. On the development VM, a worker's
  // count of finished chunks 64 bytes from another thread's took 90-110 ns more per job.
  static constexpr std::size_t line_pair = 128;

  // A job's chunks are claimed from shares, one per thread. A share's state packs the
  // generation of the job it was last claimed from or marked for (high half) with its next
  // chunk (low half). A share of another generation has not been claimed from in this job,
  // if the job is still posted: a thread checks that before its first claim, so that one
  // holding a job that has ended claims nothing. Posting a job writes no share, and while
  // every thread is on time each share stays in its owner's cache.
  //
  // A thread's progress packs the generation of the job it last worked on with the chunks
  // it has run to their end, or given up, in that job; the job is done when they add up to
  // its chunks. Each thread writes its own with one store: a count that all threads added
  // to cost a job two transfers between cores at its end (the last thread's add waited for
  // the line that the caller's add had just taken), and running totals over all jobs, a
  // load and a store each, 160-190 ns more per job than this.
  //
  // Every thread marks its share and writes its progress in each job it sees, so the 32-bit
  // generations compare exactly unless a thread misses 2^31 jobs in a row.
  static constexpr std::int64_t max_chunks = (std::int64_t{1} << 32) - 1;
  struct alignas(line_pair) tagged_count {
    std::atomic<std::uint64_t> state{0};
  };
  struct thread_state {
    tagged_count share;
    tagged_count progress;
  };

  static std::uint64_t pack(std::uint32_t generation, std::int64_t n) noexcept {
    return std::uint64_t{generation} << 32 | static_cast<std::uint64_t>(n);
  }
  static std::uint32_t generation_of(std::uint64_t state) noexcept { return static_cast<std::uint32_t>(state >> 32); }
  static std::int64_t count_of(std::uint64_t state) noexcept { return static_cast<std::int64_t>(state & 0xffff'ffffu); }

  static const thread_pool*& current_pool() {
    thread_local const thread_pool* pool = nullptr;
    return pool;
  }

  // A seqlock: an odd generation while the caller writes the job, the next even one once
  // it is whole. It is all on one cache line, written in one burst and only when a job is
  // posted, so that a waiting worker takes the job in one transfer from the caller's core
  // rather than one per field, and keeps it in its cache for the whole job.
  job_view post(job_view job) {
    const std::uint32_t writing = job_.generation.load(std::memory_order_relaxed) + 1;
    job_.generation.store(writing, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    job_.count.store(job.count, std::memory_order_relaxed);
    job_.grain.store(job.grain, std::memory_order_relaxed);
    job_.chunks.store(job.chunks, std::memory_order_relaxed);
    job_.body.store(job.body, std::memory_order_relaxed);
    job_.call.store(job.call, std::memory_order_relaxed);
    job_.generation.store(writing + 1, std::memory_order_release);
    job_.asleep.wake_all(); // a system call only if a worker sleeps
    job.generation = writing + 1;
    return job;
  }

  // The job of generation g, or nothing if a newer one is being written or was posted.
  std::optional<job_view> read_job(std::uint32_t g) const {
    job_view job{g,
                 job_.count.load(std::memory_order_relaxed),
                 job_.grain.load(std::memory_order_relaxed),
                 job_.chunks.load(std::memory_order_relaxed),
                 job_.body.load(std::memory_order_relaxed),
                 job_.call.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (job_.generation.load(std::memory_order_relaxed) != g) return std::nullopt;
    return job;
  }

  // Whether the job is still the one posted. A job ends only once every chunk has been
  // claimed, so a share with an unclaimed chunk of a job still posted belongs to that job.
  bool still_posted(const job_view& job) const noexcept {
    return job_.generation.load(std::memory_order_acquire) == job.generation;
  }

  bool all_done(const job_view& job) const noexcept {
    std::int64_t done = 0;
    for (const thread_state& t : threads_) {
      const std::uint64_t progress = t.progress.state.load(std::memory_order_acquire);
      if (generation_of(progress) == job.generation) done += count_of(progress);
    }
    return done == job.chunks;
  }

  // Takes chunks [first, last) of share k for the job: the next one, or with `rest` all that
  // no thread has claimed (so that none runs after an error); an empty range when it has
  // none left or the job has ended. Relaxed: the job itself reaches a thread through the
  // generation, and a share publishes nothing.
  std::pair<std::int64_t, std::int64_t> take(std::size_t k, const job_view& job, bool owner, bool rest = false) {
    const auto threads = static_cast<std::int64_t>(threads_.size());
    const auto slot = static_cast<std::int64_t>(k);
    const std::int64_t end = job.chunks * (slot + 1) / threads;
    std::atomic<std::uint64_t>& state = threads_[k].share.state;
    std::uint64_t seen = state.load(std::memory_order_relaxed);
    for (;;) {
      const bool claimed_in_job = generation_of(seen) == job.generation;
      if (!claimed_in_job && !still_posted(job)) return {0, 0};
      const std::int64_t next = claimed_in_job ? count_of(seen) : job.chunks * slot / threads;
      // Only the owner marks a share with no chunk left: others' looks at it stay reads.
      if (next == end && (claimed_in_job || !owner)) return {0, 0};
      const std::int64_t last = rest ? end : std::min(next + 1, end);
      if (state.compare_exchange_weak(seen, pack(job.generation, last), std::memory_order_relaxed)) {
        return {next, last};
      }
    }
  }

  // Runs the chunks of share k that no thread has claimed, one at a time, adding each to
  // `done` once it has run, or the rest of the job's once one failed.
  void run_share(std::size_t k, const job_view& job, bool owner, std::int64_t& done) {
    for (;;) {
      const auto [chunk, after] = take(k, job, owner);
      if (chunk == after) return;
      const std::int64_t begin = chunk * job.grain;
      try {
        job.call(job.body, begin, std::min(job.count, begin + job.grain));
      } catch (...) {
        {
          std::scoped_lock lock(error_mutex_);
          if (!error_) error_ = std::current_exception();
        }
        for (std::size_t other = 0; other < threads_.size(); ++other) {
          const auto [first, last] = take(other, job, false, /*rest=*/true);
          done += last - first;
        }
      }
      ++done;
    }
  }

  // Runs this thread's share, then whatever chunks of the others' shares no thread has
  // claimed, publishing its progress after each share it ran chunks of.
  void run_chunks(std::size_t slot, const job_view& job) {
    std::atomic<std::uint64_t>& progress = threads_[slot].progress.state;
    std::int64_t done = 0;
    for (std::size_t k = 0; k < threads_.size(); ++k) {
      const std::int64_t before = done;
      run_share((slot + k) % threads_.size(), job, k == 0, done);
      if (k == 0 || done != before) progress.store(pack(job.generation, done), std::memory_order_release);
    }
  }

  // How many chunks of `grain` make [0, count), checked.
  [[gnu::noinline]] static std::int64_t chunk_count(std::int64_t count, std::int64_t grain) {
    if (grain < 1) throw value_error(detail::message("parallel_for: grain must be at least 1, got ", grain));
    if (count <= 0) return 0;
    const std::int64_t chunks = count / grain + (count % grain != 0);
    if (chunks > max_chunks) {
      throw value_error(detail::message("parallel_for: ", count, " elements in chunks of ", grain, " make ", chunks,
                                        " chunks, more than ", max_chunks, ": take a larger grain"));
    }
    return chunks;
  }

  // Posts `job` (its generation is post's to give) for the workers, runs it on this thread
  // with callers_body as the body, waits for every chunk and rethrows the first error.
  // Called with submit_mutex_ held.
  [[gnu::noinline]] void run_posted(const job_view& job_for_workers, void* callers_body) {
    const job_view job = post(job_for_workers);
    const thread_pool* outer = std::exchange(current_pool(), this);
    job_view callers = job;
    callers.body = callers_body;
    // A chunk is counted only once its body has returned (or as given up), and a thread
    // holding an older job claims nothing: once all are counted, no thread will call body
    // or read invoke or the copy.
    run_chunks(0, callers);
    detail::spin_until([&] { return all_done(job); });
    current_pool() = outer;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  void work(std::size_t slot) {
    current_pool() = this;
    for (std::uint32_t seen = 0;;) {
      seen = detail::wait_for_change(job_.generation, seen, job_.asleep, spin_before_sleep);
      if (job_.stopping.load(std::memory_order_relaxed)) return;
      if (seen % 2 != 0) continue; // being written: wait for it to change again
      const std::optional<job_view> job = read_job(seen);
      if (!job) continue;
      // Start the transfer of the closure all at once: each line would otherwise wait for
      // the address that the one before it holds.
      for (std::uintptr_t line = 0; line < prefetched_closure_lines; ++line) {
        __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(job->body) + 64 * line));
      }
      run_chunks(slot, *job);
    }
  }

  struct alignas(line_pair) job_line {
    std::atomic<std::uint32_t> generation{0}; // 2 per job (32 bits: what a futex waits on)
    std::atomic<bool> stopping{false};
    std::atomic<std::int64_t> count{0};
    std::atomic<std::int64_t> grain{1};
    std::atomic<std::int64_t> chunks{0};
    std::atomic<void*> body{nullptr};
    std::atomic<call_type> call{nullptr};
    detail::sleepers asleep; // workers asleep until the next job
  };
  static_assert(sizeof(job_line) <= line_pair && offsetof(job_line, asleep) + sizeof(detail::sleepers) <= 64,
                "a waiting worker takes the whole job in one cache line");

  job_line job_;
  // Read by the workers, written only while the pool is made and destroyed.
  std::vector<thread_state> threads_; // the caller's first
  std::vector<std::thread> workers_;
  // The copy of the job's body that the workers call, given workers_may_copy and a body
  // that fits (xlite's loops capture what they read by value: 200-460 bytes for flat
  // loops; a broadcast's carries its plan, 64 bytes more per memory leaf). A worker
  // that read the body on the caller's stack left those lines shared with its core, and
  // the caller's next frames there (the next call's planning) waited for it to give them
  // up: one core-to-core transfer each, 0.4 us per call of sum(x * y) on 2^16 floats where
  // the two vCPUs were 500 ns apart (docs/architecture.md). Only on request: a copy would
  // lose what a body writes into itself, slice a base class, or change an address it uses.
  alignas(line_pair) std::array<std::byte, 1024> worker_closure_{};
  const char* closure_type_ = nullptr; // the type of the body in worker_closure_, if any
  // Written by the caller in every job: a pair of lines of their own.
  alignas(line_pair) std::mutex submit_mutex_; // one parallel_for at a time per pool
  std::mutex error_mutex_;
  std::exception_ptr error_;
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
