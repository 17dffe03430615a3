#pragma once

// Each device runs its steps on a worker thread of its own, in the order they were
// submitted, so the thread that traces can go on with the next step while the device runs
// this one (PyTorch/XLA's asynchronous execution). wait_device_ops() waits for all of them.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "xlite/runtime/device.hpp"

namespace xlite::runtime {

class worker {
public:
  worker() : thread_([this] { run(); }) {}
  ~worker() {
    {
      std::scoped_lock lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  // Tasks must not throw: a step reports its errors through its outputs' device_data.
  void submit(std::function<void()> task) {
    {
      std::scoped_lock lock(mutex_);
      tasks_.push_back(std::move(task));
      ++unfinished_;
    }
    wake_.notify_all();
  }

  // Returns when every task submitted before the call has run.
  void wait_idle() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return unfinished_ == 0; });
  }

private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return; // stopping, and nothing left to run
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
      if (--unfinished_ == 0) idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> tasks_;
  std::int64_t unfinished_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

// The worker of each device, made on first use.
inline worker& device_worker(const device& d) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<worker>> workers(static_cast<std::size_t>(device_count()));
  std::scoped_lock lock(mutex);
  auto& w = workers[static_cast<std::size_t>(d.ordinal())];
  if (!w) w = std::make_unique<worker>();
  return *w;
}

} // namespace xlite::runtime

namespace xlite {

// Blocks until every device has finished the steps submitted so far.
inline void wait_device_ops() {
  for (const device& d : devices()) runtime::device_worker(d).wait_idle();
}

} // namespace xlite
