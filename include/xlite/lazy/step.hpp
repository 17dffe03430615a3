#pragma once

// The barrier. mark_step() cuts the trace of every live tensor, finds the graph's
// executable in the compilation cache (or compiles it once), hands each tensor the device
// value it will hold, and queues the run on the device's worker: it returns before the
// device has finished, so the next step is traced while this one runs. to_host() and
// item() wait for their tensor's value, computing first what only it needs.

#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "xlite/compile/cache.hpp"
#include "xlite/compile/compiler.hpp"
#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/counters.hpp"
#include "xlite/runtime/device_data.hpp"
#include "xlite/runtime/executor.hpp"
#include "xlite/runtime/worker.hpp"

namespace xlite::lazy {

namespace detail {

// Compiles and launches the pending nodes of `states` (all on one device). Called with the
// registry's lock held.
inline void launch(const std::vector<std::shared_ptr<tensor_state>>& states) {
  const xlite::device d = states.front()->device;
  std::vector<ir::node_ptr> outputs;
  for (const auto& s : states) outputs.push_back(s->pending);
  std::vector<runtime::device_data_ptr> results;
  for (const auto& s : states) {
    results.push_back(std::make_shared<runtime::device_data>(d, s->type, s->shape));
    s->data = results.back();
    s->data_node = nullptr;
    s->pending = nullptr;
  }
  compile::executable_ptr exe;
  std::vector<runtime::device_data_ptr> parameters;
  try {
    ir::captured_graph captured = ir::capture(outputs);
    for (const auto& p : captured.parameters) {
      auto data = std::dynamic_pointer_cast<const runtime::device_data>(p);
      if (!data) {
        throw value_error("a tensor traced inside a while_loop or cond body was used outside that body; "
                          "return it from the body instead");
      }
      parameters.push_back(std::const_pointer_cast<runtime::device_data>(std::move(data)));
    }
    const std::uint64_t hash = ir::structural_hash(captured.program);
    exe = compile::default_cache().find(hash);
    if (exe) {
      metrics::increment("CachedCompile");
    } else {
      exe = compile::compile_graph(std::move(captured.program));
      compile::default_cache().insert(hash, exe);
      metrics::increment("UncachedCompile");
    }
  } catch (...) {
    // The tensors hold the error, and the trace goes on without them.
    for (const auto& r : results) r->fail(std::current_exception());
    throw;
  }
  runtime::device_worker(d).submit([exe, parameters = std::move(parameters), results]() noexcept {
    try {
      std::vector<runtime::buffer_ptr> inputs;
      for (const auto& p : parameters) inputs.push_back(p->wait());
      std::vector<runtime::buffer_ptr> values = runtime::execute(*exe, inputs, current_thread_pool());
      for (std::size_t i = 0; i < results.size(); ++i) results[i]->set(std::move(values[i]));
      metrics::increment("ExecuteCount");
    } catch (...) {
      for (const auto& r : results) {
        if (!r->ready()) r->fail(std::current_exception());
      }
    }
  });
}

// Launches the pending work of `states`, one graph per device. A device whose graph fails
// to compile does not keep the others from running; the first error is rethrown after.
inline void launch_by_device(std::vector<std::shared_ptr<tensor_state>> states) {
  std::exception_ptr first_error;
  while (!states.empty()) {
    const xlite::device d = states.front()->device;
    std::vector<std::shared_ptr<tensor_state>> on_device;
    std::erase_if(states, [&](const auto& s) {
      if (s->device != d) return false;
      on_device.push_back(s);
      return true;
    });
    try {
      launch(on_device);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

} // namespace detail

// The barrier: compiles and runs everything traced so far, asynchronously.
inline void mark_step() {
  auto& registry = detail::registry();
  std::scoped_lock lock(registry.mutex);
  std::vector<std::shared_ptr<detail::tensor_state>> pending;
  for (const auto& weak : registry.live) {
    if (auto s = weak.lock(); s && s->pending) pending.push_back(std::move(s));
  }
  registry.live.clear();
  registry.last_compacted = 0;
  metrics::increment("MarkStep");
  if (!pending.empty()) detail::launch_by_device(std::move(pending));
}

namespace detail {

// The device value of t, computed if it is still pending.
inline runtime::device_data_ptr sync(const tensor& t) {
  auto& registry = detail::registry();
  std::scoped_lock lock(registry.mutex);
  if (t.state()->pending) launch({t.state()});
  return t.state()->data;
}

} // namespace detail

template <class T>
xlite::tensor<T> tensor::to_host() const {
  if (dtype_of_v<T> != type()) {
    throw dtype_error(xlite::detail::message("to_host: the tensor is ", name(type()), ", not ", name(dtype_of_v<T>),
                                             "; cast it first"));
  }
  const runtime::buffer_ptr& value = detail::sync(*this)->wait();
  xlite::tensor<T> host(xlite::tensor<T>::uninitialized, shape());
  std::copy_n(value->as<T>(), size(), host.data());
  metrics::increment("TransferFromDevice");
  return host;
}

template <class T>
T tensor::item() const {
  if (size() != 1) {
    throw value_error(xlite::detail::message("item: the tensor has shape ", shape(), "; item() needs one element"));
  }
  const runtime::buffer_ptr& value = detail::sync(*this)->wait();
  metrics::increment("TransferFromDevice");
  return visit_dtype(type(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    return static_cast<T>(static_cast<std::conditional_t<std::is_same_v<E, bool>, bool, E>>(value->as<E>()[0]));
  });
}

} // namespace xlite::lazy

namespace xlite {
using lazy::mark_step;
} // namespace xlite
