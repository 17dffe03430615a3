#pragma once

// Each device runs its steps on a worker thread of its own, in the order they were
// submitted, so the thread that traces can go on with the next step while the device runs
// this one (PyTorch/XLA's asynchronous execution). wait_device_ops() waits for all of them.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "xlite/core/spin_wait.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/memory.hpp"

namespace xlite::runtime {

class worker {
public:
  // The buffers the worker's steps make take device d's memory.
  explicit worker(const xlite::device& d)
      : thread_([this, d] {
          detail::memory_owner() = d.ordinal();
          run();
        }) {}
  ~worker() {
    stopping_.store(true, std::memory_order_relaxed);
    submit([] {}); // wakes the worker, which stops once the queue is empty
    thread_.join();
  }
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  // Tasks must not throw: a step reports its errors through its outputs' device_data.
  void submit(std::function<void()> task) {
    {
      std::scoped_lock lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    unfinished_.fetch_add(1, std::memory_order_release);
    asleep_.wake_all();
  }

  // Returns when every task submitted before the call has run.
  void wait_idle() {
    for (auto now = unfinished_.load(std::memory_order_acquire); now != 0;) {
      now = xlite::detail::wait_for_change(unfinished_, now, asleep_, spin_before_sleep);
    }
  }

private:
  // Waking a sleeping thread costs tens of microseconds on a virtual machine, more than a
  // step of a small graph, and the next step or the caller's wait often comes within
  // microseconds: both sides spin this long before they sleep.
  static constexpr std::chrono::microseconds spin_before_sleep{100};
  // An idle worker naps this long before it sleeps (see wait_for_change): steps of a
  // training loop come every few milliseconds, and each should start at once.
  static constexpr std::chrono::microseconds nap_before_sleep{20'000};

  // unfinished_ counts queued and running tasks; only this thread runs them, so when it is
  // not running one, a non-zero count means the queue has a task.
  void run() {
    for (;;) {
      if (unfinished_.load(std::memory_order_acquire) == 0) {
        if (stopping_.load(std::memory_order_relaxed)) return;
        xlite::detail::wait_for_change(unfinished_, std::int64_t{0}, asleep_, spin_before_sleep, nap_before_sleep);
        continue;
      }
      std::function<void()> task;
      {
        std::scoped_lock lock(mutex_);
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
      task = nullptr; // what it holds (a step's inputs) is freed before the task counts as done
      if (unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1) asleep_.wake_all();
    }
  }

  std::mutex mutex_; // guards tasks_
  std::deque<std::function<void()>> tasks_;
  std::atomic<std::int64_t> unfinished_{0};
  xlite::detail::sleepers asleep_; // the worker, or threads in wait_idle, until unfinished_ changes
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// The worker of each device, made on first use.
inline worker& device_worker(const device& d) {
  static std::mutex mutex;
  // Statics die in the reverse order of their making: the pool the steps run on is made
  // first, so that at exit the workers, and a step still running on one, are gone before it.
  static std::vector<std::unique_ptr<worker>> workers = [] {
    default_thread_pool();
    return std::vector<std::unique_ptr<worker>>(static_cast<std::size_t>(device_count()));
  }();
  std::scoped_lock lock(mutex);
  auto& w = workers[static_cast<std::size_t>(d.ordinal())];
  if (!w) w = std::make_unique<worker>(d);
  return *w;
}

} // namespace xlite::runtime

namespace xlite {

// Blocks until every device has finished the steps submitted so far.
inline void wait_device_ops() {
  for (const device& d : devices()) runtime::device_worker(d).wait_idle();
}

} // namespace xlite
