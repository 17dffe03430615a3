#pragma once

// The value of a lazy tensor on a device: a buffer that exists now (data transferred from
// the host) or will exist when the device's worker has run the step that computes it. A
// graph parameter holds one, so tracing the next step needs only the handle, not the value.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <utility>

#include "xlite/core/dtype.hpp"
#include "xlite/core/spin_wait.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/node.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/device.hpp"

namespace xlite::runtime {

class device_data : public ir::parameter_source {
public:
  // A value still being computed: set() or fail() completes it.
  device_data(xlite::device d, dtype type, const xlite::shape& s) : device_(d), type_(type), shape_(s) {}

  // A value that exists.
  device_data(xlite::device d, buffer_ptr ready) : device_data(d, ready->type(), ready->shape()) {
    set(std::move(ready));
  }

  const xlite::device& device() const noexcept { return device_; }
  dtype type() const noexcept { return type_; }
  const xlite::shape& shape() const noexcept { return shape_; }
  bool ready() const noexcept { return state_.load(std::memory_order_acquire) != pending; }

  void set(buffer_ptr value) {
    buffer_ = std::move(value);
    complete(done);
  }
  void fail(std::exception_ptr error) {
    error_ = std::move(error);
    complete(failed);
  }

  // Blocks until the value exists; rethrows the error of the step that failed to make it.
  const buffer_ptr& wait() const {
    // A small step finishes within microseconds: spin before sleeping (see worker.hpp).
    xlite::detail::wait_for_change(state_, pending, asleep_, std::chrono::microseconds{100});
    if (state_.load(std::memory_order_acquire) == failed) std::rethrow_exception(error_);
    return buffer_;
  }

private:
  static constexpr std::uint8_t pending = 0, done = 1, failed = 2;

  void complete(std::uint8_t state) {
    state_.store(state, std::memory_order_release);
    asleep_.wake_all();
  }

  xlite::device device_;
  dtype type_;
  xlite::shape shape_;
  buffer_ptr buffer_;
  std::exception_ptr error_;
  mutable std::atomic<std::uint8_t> state_{pending};
  mutable xlite::detail::sleepers asleep_; // threads in wait() until state_ is set
};

using device_data_ptr = std::shared_ptr<device_data>;

} // namespace xlite::runtime
