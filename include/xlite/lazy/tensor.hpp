#pragma once

// xlite::lazy::tensor: a handle to a value on a device that may not be computed yet. An op
// on lazy tensors computes nothing: it records a node in the trace (ir/node.hpp) and
// returns a tensor holding it. A barrier (mark_step(), lazy/step.hpp) compiles the trace
// of all live tensors and runs it on the device; to_host() and item() run just what the
// one tensor needs. Copies of a handle share the value, as PyTorch tensors do.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/core/source_location.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/node.hpp"
#include "xlite/ir/sharding_ops.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/device_data.hpp"
#include "xlite/runtime/metrics.hpp"
#include "xlite/runtime/profiler.hpp"
#include "xlite/spmd/sharded_data.hpp"

namespace xlite::lazy {

namespace detail {

// What a handle points to: `pending`, the node that will compute the value, until a
// barrier hands the tensor its value: `data` on the device (perhaps still being computed),
// or in SPMD mode its `shards` when it is sharded. They change only under the registry's
// lock.
struct tensor_state {
  xlite::device device;
  dtype type;
  xlite::shape shape;
  ir::node_ptr pending;
  runtime::device_data_ptr data;
  spmd::sharded_data_ptr shards;
  ir::node_ptr data_node;      // the parameter node that reads the value, made once
  bool traced_in_body = false; // made while tracing a while_loop or cond body: belongs to it
};

// The live tensors with pending nodes: what mark_step() computes.
struct trace_registry {
  void add(const std::shared_ptr<tensor_state>& state) {
    std::scoped_lock lock(mutex);
    if (live.size() >= 2 * last_compacted + 64) {
      std::erase_if(live, [](const std::weak_ptr<tensor_state>& w) { return w.expired(); });
      last_compacted = live.size();
    }
    live.push_back(state);
  }

  std::mutex mutex;
  std::vector<std::weak_ptr<tensor_state>> live;
  std::size_t last_compacted = 0;
  // When the host began tracing the current step: the last barrier's end, or before the
  // first step, when the first lazy tensor was made.
  std::chrono::steady_clock::time_point tracing_began = std::chrono::steady_clock::now();
};

inline trace_registry& registry() {
  static trace_registry r;
  return r;
}

// How many control-flow bodies this thread is tracing. Tensors made in a body are parts of
// its subgraph, not of the step: the barrier must not see them.
inline int& body_depth() {
  thread_local int depth = 0;
  return depth;
}

// A transfer between host and device: counted (TransferToDevice, TransferFromDevice),
// timed (...Time) and drawn on the profile's transfers track. The counters and metrics are
// looked up once: a training loop transfers every step.
enum class transfer { to_device, from_device };

inline void record_transfer(transfer direction, std::string_view what, std::chrono::steady_clock::time_point begin,
                            std::chrono::steady_clock::time_point end) {
  struct recorders {
    std::atomic<std::int64_t>& count;
    metrics::metric time;
  };
  static recorders to_device{metrics::counter("TransferToDevice"), metrics::metric("TransferToDeviceTime")};
  static recorders from_device{metrics::counter("TransferFromDevice"), metrics::metric("TransferFromDeviceTime")};
  const recorders& r = direction == transfer::to_device ? to_device : from_device;
  r.count.fetch_add(1, std::memory_order_relaxed);
  r.time.record(static_cast<double>(std::chrono::nanoseconds(end - begin).count()));
  profiler::record(profiler::track::transfers(), what, begin, end);
}

struct body_trace_scope {
  body_trace_scope() { ++body_depth(); }
  ~body_trace_scope() { --body_depth(); }
  body_trace_scope(const body_trace_scope&) = delete;
  body_trace_scope& operator=(const body_trace_scope&) = delete;
};

// A static expression (expr/) with lazy tensors among its leaves: lazy/expression.hpp.
template <class E>
concept traceable_expression = expr::expression<E> && expr::external_leaf_count_v<E> >
0;

} // namespace detail

class tensor {
public:
  // A tensor over a value on a device.
  tensor(const xlite::device& d, runtime::device_data_ptr data)
      : state_(std::make_shared<detail::tensor_state>(
            detail::tensor_state{d, data->type(), data->shape(), nullptr, std::move(data), nullptr, nullptr})) {}

  // A tensor computed by `node` on device d, recorded for the next barrier.
  tensor(const xlite::device& d, ir::node_ptr node)
      : state_(std::make_shared<detail::tensor_state>(
            detail::tensor_state{d, node->type(), node->shape(), std::move(node), nullptr, nullptr, nullptr})) {
    if (detail::body_depth() == 0) {
      detail::registry().add(state_);
    } else {
      state_->traced_in_body = true;
    }
  }

  // A static expression over lazy tensors (lazy::leaf), traced: defined in
  // lazy/expression.hpp, which must be included where it is used (xlite/lazy.hpp does).
  template <class E>
  requires detail::traceable_expression<E> tensor(const E& e);

  // Copies host data to device d (TransferToDevice).
  template <class T>
  static tensor from(const xlite::tensor<T>& host, const xlite::device& d = xlite::device()) {
    return from_elements(host.data(), host.shape(), d);
  }

  // From any contiguous xtensor container (or anything with data(), size() and shape()).
  template <class C>
  requires requires(const C& c) {
    c.data();
    c.shape();
    requires element_type<std::remove_cvref_t<decltype(*c.data())>>;
  }
  static tensor from(const C& container, const xlite::device& d = xlite::device()) {
    return from_elements(container.data(), xlite::shape(container.shape()), d);
  }

  dtype type() const noexcept { return state_->type; }
  const xlite::shape& shape() const noexcept { return state_->shape; }
  std::int64_t size() const noexcept { return state_->shape.numel(); }
  const xlite::device& device() const noexcept { return state_->device; }

  // The node that computes this tensor in a trace: the pending node, or a parameter that
  // reads the device value (marked with its sharding when it is sharded, so the sharding is
  // part of the graph).
  ir::node_ptr node() const {
    if (state_->traced_in_body && detail::body_depth() == 0) {
      throw value_error("a tensor traced inside a while_loop or cond body is used outside that body; "
                        "return it from the body instead");
    }
    std::scoped_lock lock(detail::registry().mutex);
    if (state_->pending) return state_->pending;
    if (!state_->data_node) {
      if (const auto& shards = state_->shards) {
        state_->data_node = ir::mark_sharding(ir::parameter(shards, state_->type, state_->shape), shards->sharding());
      } else {
        state_->data_node = ir::parameter(state_->data, state_->type, state_->shape);
      }
    }
    return state_->data_node;
  }

  // Whether a barrier is still needed to compute this tensor.
  bool has_pending_trace() const {
    std::scoped_lock lock(detail::registry().mutex);
    return state_->pending != nullptr;
  }

  // Computes what this tensor needs (only that), waits, and copies the value to the host
  // (TransferFromDevice). T must be the tensor's dtype.
  template <class T>
  xlite::tensor<T> to_host(xlite::source_location where = xlite::source_location::current()) const;

  // The value of a one-element tensor, converted to T.
  template <class T>
  T item(xlite::source_location where = xlite::source_location::current()) const;

  // For the barrier: the state behind the handle.
  const std::shared_ptr<detail::tensor_state>& state() const noexcept { return state_; }

private:
  template <class T>
  static tensor from_elements(const T* elements, const xlite::shape& s, const xlite::device& d) {
    const auto begin = std::chrono::steady_clock::now();
    const runtime::allocating_on on(d);
    auto value = runtime::make_buffer(dtype_of_v<T>, s);
    std::copy_n(elements, s.numel(), value->template as<T>());
    detail::record_transfer(detail::transfer::to_device, "from", begin, std::chrono::steady_clock::now());
    return tensor(d, std::make_shared<runtime::device_data>(d, std::move(value)));
  }

  std::shared_ptr<detail::tensor_state> state_;
};

} // namespace xlite::lazy
