#pragma once

// The barrier. mark_step() cuts the trace of every live tensor (in a replica of
// xlite::spawn, of every live tensor on the replica's device), finds the graph's
// executable in the compilation cache (or compiles it once), hands each tensor the device
// value it will hold, and queues the run on the device's worker: it returns before the
// device has finished, so the next step is traced while this one runs. to_host() and
// item() wait for their tensor's value, computing first what only it needs.

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/source_location.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/compilation.hpp"
#include "xlite/runtime/device_data.hpp"
#include "xlite/runtime/executor.hpp"
#include "xlite/runtime/metrics.hpp"
#include "xlite/runtime/profiler.hpp"
#include "xlite/runtime/worker.hpp"

namespace xlite::lazy {

namespace detail {

// Compiles and launches the pending nodes of `states` (all on one device). Called with the
// registry's lock held.
inline void launch(const std::vector<std::shared_ptr<tensor_state>>& states, const debug::step_cause& cause) {
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
    const ir::numbered_trace captured(outputs);
    for (const auto& p : captured.parameters()) {
      auto data = std::dynamic_pointer_cast<const runtime::device_data>(p);
      if (!data) {
        throw value_error("a tensor traced inside a while_loop or cond body was used outside that body; "
                          "return it from the body instead");
      }
      parameters.push_back(std::const_pointer_cast<runtime::device_data>(std::move(data)));
    }
    exe = runtime::find_or_compile(captured, {cause.reason, cause.where, d.ordinal()});
  } catch (...) {
    // The tensors hold the error, and the trace goes on without them.
    for (const auto& r : results) r->fail(std::current_exception());
    throw;
  }
  runtime::device_worker(d).submit([exe, parameters = std::move(parameters), results, d]() noexcept {
    try {
      std::vector<runtime::buffer_ptr> inputs;
      for (const auto& p : parameters) inputs.push_back(p->wait());
      const auto begin = std::chrono::steady_clock::now();
      std::vector<runtime::buffer_ptr> values =
          runtime::execute(*exe, inputs, current_thread_pool(), d, profiler::track::device(d.ordinal()));
      const auto end = std::chrono::steady_clock::now();
      // Recorded before the results are set: a thread that waits for them, then reads the
      // metrics or stops the profiler, sees this run.
      static const metrics::metric execute_time("ExecuteTime");
      execute_time.record(static_cast<double>(std::chrono::nanoseconds(end - begin).count()));
      profiler::record(profiler::track::device(d.ordinal()), "execute", begin, end);
      for (std::size_t i = 0; i < results.size(); ++i) results[i]->set(std::move(values[i]));
    } catch (...) {
      for (const auto& r : results) {
        if (!r->ready()) r->fail(std::current_exception());
      }
    }
  });
}

// Launches the pending work of `states`, one graph per device. A device whose graph fails
// to compile does not keep the others from running; the first error is rethrown after.
inline void launch_by_device(std::vector<std::shared_ptr<tensor_state>> states, const debug::step_cause& cause) {
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
      launch(on_device, cause);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

// When the host began tracing the current step: the last barrier's end.
inline std::chrono::steady_clock::time_point& tracing_began() {
  static std::chrono::steady_clock::time_point when = std::chrono::steady_clock::now();
  return when;
}

} // namespace detail

// The barrier: compiles and runs everything traced so far, asynchronously. `where` is the
// caller's line, for XLITE_DEBUG_LEVEL's analysis.
inline void mark_step(xlite::source_location where = xlite::source_location::current()) {
  {
    auto& registry = detail::registry();
    std::scoped_lock lock(registry.mutex);
    auto& tracing_began = detail::tracing_began(); // first, so it is never after `began`
    const auto began = std::chrono::steady_clock::now();
    profiler::record(profiler::track::host_tracing(), "trace", tracing_began, began);
    // A replica of xlite::spawn cuts its own device's trace; the other replicas' go on.
    const bool replica = runtime::detail::replica_ordinal() >= 0;
    const xlite::device mine;
    std::vector<std::shared_ptr<detail::tensor_state>> pending;
    std::vector<std::weak_ptr<detail::tensor_state>> others;
    for (const auto& weak : registry.live) {
      auto s = weak.lock();
      if (!s || !s->pending) continue;
      if (replica && s->device != mine) {
        others.push_back(weak);
      } else {
        pending.push_back(std::move(s));
      }
    }
    registry.live = std::move(others);
    registry.last_compacted = registry.live.size();
    static std::atomic<std::int64_t>& steps = metrics::counter("MarkStep");
    steps.fetch_add(1, std::memory_order_relaxed);
    if (!pending.empty()) detail::launch_by_device(std::move(pending), {"mark_step", where});
    tracing_began = std::chrono::steady_clock::now();
    profiler::record(profiler::track::host_tracing(), "mark_step", began, tracing_began);
  }
  metrics::write_step_report();
  debug::analyse_step();
}

namespace detail {

// The device value of t, computed if it is still pending.
inline runtime::device_data_ptr sync(const tensor& t, const debug::step_cause& cause) {
  auto& registry = detail::registry();
  std::scoped_lock lock(registry.mutex);
  if (t.state()->pending) launch({t.state()}, cause);
  return t.state()->data;
}

// Waits for t's value and times the transfer (TransferFromDeviceTime); on the CPU the
// device buffer is host memory, so the wait is most of it.
template <class Copy>
void transfer_to_host(const tensor& t, const debug::step_cause& cause, Copy&& copy) {
  const runtime::device_data_ptr data = sync(t, cause);
  const auto begin = std::chrono::steady_clock::now();
  copy(*data->wait());
  record_transfer(transfer::from_device, cause.reason, begin, std::chrono::steady_clock::now());
}

} // namespace detail

template <class T>
xlite::tensor<T> tensor::to_host(xlite::source_location where) const {
  if (dtype_of_v<T> != type()) {
    throw dtype_error(xlite::detail::message("to_host: the tensor is ", name(type()), ", not ", name(dtype_of_v<T>),
                                             "; cast it first"));
  }
  xlite::tensor<T> host(xlite::tensor<T>::uninitialized, shape());
  detail::transfer_to_host(*this, {"to_host", where},
                           [&](const runtime::buffer& value) { std::copy_n(value.as<T>(), size(), host.data()); });
  return host;
}

template <class T>
T tensor::item(xlite::source_location where) const {
  if (size() != 1) {
    throw value_error(xlite::detail::message("item: the tensor has shape ", shape(), "; item() needs one element"));
  }
  T result{};
  detail::transfer_to_host(*this, {"item", where}, [&](const runtime::buffer& value) {
    result = visit_dtype(type(), [&](auto tag) {
      using E = typename decltype(tag)::type;
      return static_cast<T>(static_cast<std::conditional_t<std::is_same_v<E, bool>, bool, E>>(value.as<E>()[0]));
    });
  });
  return result;
}

} // namespace xlite::lazy

namespace xlite {
using lazy::mark_step;
} // namespace xlite
