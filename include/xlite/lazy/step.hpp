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
#include <span>
#include <vector>

#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/source_location.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/collectives.hpp"
#include "xlite/runtime/compilation.hpp"
#include "xlite/runtime/device_data.hpp"
#include "xlite/runtime/executor.hpp"
#include "xlite/runtime/matrix_unit.hpp"
#include "xlite/runtime/metrics.hpp"
#include "xlite/runtime/processes.hpp"
#include "xlite/runtime/profiler.hpp"
#include "xlite/runtime/worker.hpp"
#include "xlite/spmd/partitioner.hpp"
#include "xlite/spmd/sharded_data.hpp"

namespace xlite::lazy {

namespace detail {

// Runs exe on device d, timed (ExecuteTime), drawn on the device's profile track and, on a
// tpu device, with its matrix unit `unit` (the one installed when the step was launched),
// which then prices the step. It records before the caller sets the results: a thread that
// waits for them, then reads the metrics or stops the profiler, sees this run.
inline std::vector<runtime::buffer_ptr> execute_on(const compile::executable& exe,
                                                   std::span<const runtime::buffer_ptr> inputs, const xlite::device& d,
                                                   const runtime::matrix_unit* unit = nullptr) {
  const auto begin = std::chrono::steady_clock::now();
  std::vector<runtime::buffer_ptr> values =
      runtime::execute(exe, inputs, current_thread_pool(), d, profiler::track::device(d.ordinal()), unit);
  const auto end = std::chrono::steady_clock::now();
  static const metrics::metric execute_time("ExecuteTime");
  execute_time.record(static_cast<double>(std::chrono::nanoseconds(end - begin).count()));
  profiler::record(profiler::track::device(d.ordinal()), "execute", begin, end);
  if (unit) unit->account_step(exe, d);
  return values;
}

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
    exe = runtime::find_or_compile(captured, {cause.reason, cause.where, d});
  } catch (...) {
    // The tensors hold the error, and the trace goes on without them.
    for (const auto& r : results) r->fail(std::current_exception());
    throw;
  }
  // A tpu device's core as it is now: a later tpu::configure is for later steps.
  std::shared_ptr<const runtime::matrix_unit> unit = runtime::matrix_unit_of(d);
  runtime::device_worker(d).submit([exe, parameters = std::move(parameters), results, d, unit]() noexcept {
    try {
      std::vector<runtime::buffer_ptr> inputs;
      for (const auto& p : parameters) inputs.push_back(p->wait());
      std::vector<runtime::buffer_ptr> values = execute_on(*exe, inputs, d, unit.get());
      for (std::size_t i = 0; i < results.size(); ++i) results[i]->set(std::move(values[i]));
    } catch (...) {
      for (const auto& r : results) {
        if (!r->ready()) r->fail(std::current_exception());
      }
    }
  });
}

// A barrier's global graph in SPMD mode, partitioned: the values its parameters read, and
// the program every device runs on its shards of them.
struct spmd_step {
  std::vector<std::shared_ptr<const ir::parameter_source>> parameters;
  spmd::partitioned_program program;
};

inline spmd_step partition_step(std::span<const ir::node_ptr> outputs, std::int64_t devices) {
  ir::captured_graph global = ir::capture(outputs);
  std::vector<ir::sharding> layouts;
  for (const auto& p : global.parameters) {
    if (const auto sharded = std::dynamic_pointer_cast<const spmd::sharded_data>(p)) {
      layouts.push_back(sharded->sharding());
    } else if (std::dynamic_pointer_cast<const runtime::device_data>(p)) {
      layouts.push_back(ir::sharding::replicated()); // one buffer every device reads
    } else {
      throw value_error("a tensor traced inside a while_loop or cond body was used outside that body; "
                        "return it from the body instead");
    }
  }
  spmd::partitioned_program program = spmd::partition(global.program, layouts, devices);
  return {std::move(global.parameters), std::move(program)};
}

// SPMD mode: partitions the graph of `states` into the program every device runs on its
// shards (spmd/partitioner.hpp), compiles it once, and runs it on every device's worker.
// Each tensor gets its shards, laid out as the partitioner left them. Across processes each
// process partitions the same graph over all devices and runs its own devices.
inline void launch_spmd(const std::vector<std::shared_ptr<tensor_state>>& states, const debug::step_cause& cause) {
  const std::int64_t devices = runtime::global_runtime_device_count();
  // A failed step aborted the collectives, so that its peers stopped waiting for it; once
  // every device is done with that step, the next one's collectives start afresh.
  if (runtime::collectives().failure()) {
    wait_device_ops();
    runtime::collectives().reset();
  }
  std::vector<ir::node_ptr> outputs;
  for (const auto& s : states) outputs.push_back(s->pending);
  std::vector<spmd::sharded_data_ptr> results;
  std::vector<std::shared_ptr<const ir::parameter_source>> parameters;
  compile::executable_ptr exe;
  try {
    if (states.front()->device.kind() != device_kind::cpu) {
      throw config_error(xlite::detail::message("mark_step: SPMD mode runs on the cpu devices; ",
                                                states.front()->device, "'s tensors cannot be partitioned"));
    }
    spmd_step step = partition_step(outputs, devices);
    exe = runtime::find_or_compile(ir::numbered_trace(step.program.outputs, step.program.parameters),
                                   {cause.reason, cause.where, states.front()->device});
    for (std::size_t k = 0; k < states.size(); ++k) {
      results.push_back(
          spmd::sharded_data::pending(states[k]->type, states[k]->shape, step.program.output_shardings[k], devices));
    }
    parameters = std::move(step.parameters);
  } catch (...) {
    // The tensors hold the error, and the trace goes on without them.
    for (const auto& s : states) {
      s->data = std::make_shared<runtime::device_data>(s->device, s->type, s->shape);
      s->data->fail(std::current_exception());
      s->pending = nullptr;
    }
    throw;
  }
  for (std::size_t k = 0; k < states.size(); ++k) {
    states[k]->shards = results[k];
    states[k]->data = nullptr;
    states[k]->data_node = nullptr;
    states[k]->pending = nullptr;
  }
  for (std::int64_t k = 0; k < device_count(); ++k) { // this process's devices; the others run theirs
    const xlite::device on("cpu:" + std::to_string(k));
    runtime::device_worker(on).submit([exe, parameters, results, on]() noexcept {
      const std::int64_t d = runtime::global_device(on);
      try {
        std::vector<runtime::buffer_ptr> inputs;
        for (const auto& p : parameters) {
          const auto sharded = std::dynamic_pointer_cast<const spmd::sharded_data>(p);
          inputs.push_back(sharded ? sharded->shard(d)->wait()
                                   : std::static_pointer_cast<const runtime::device_data>(p)->wait());
        }
        std::vector<runtime::buffer_ptr> values = execute_on(*exe, inputs, on);
        for (std::size_t i = 0; i < results.size(); ++i) results[i]->shard(d)->set(std::move(values[i]));
      } catch (...) {
        // The other devices may wait in a collective for this one: fail them too.
        runtime::collectives().abort(
            xlite::detail::message("device ", d, " failed: ", xlite::detail::current_exception_message()));
        for (const auto& r : results) {
          if (!r->shard(d)->ready()) r->shard(d)->fail(std::current_exception());
        }
      }
    });
  }
}

// One graph for `states`: partitioned over all devices in SPMD mode, else on their device.
inline void launch_graph(const std::vector<std::shared_ptr<tensor_state>>& states, const debug::step_cause& cause) {
  if (runtime::is_spmd()) {
    launch_spmd(states, cause);
  } else {
    launch(states, cause);
  }
}

// Launches the pending work of `states`, one graph per device. A device whose graph fails
// to compile does not keep the others from running; the first error is rethrown after.
inline void launch_by_device(std::vector<std::shared_ptr<tensor_state>> states, const debug::step_cause& cause) {
  if (runtime::is_spmd()) return launch_spmd(states, cause); // one virtual device
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

} // namespace detail

// The barrier: compiles and runs everything traced so far, asynchronously. `where` is the
// caller's line, for XLITE_DEBUG_LEVEL's analysis.
inline void mark_step(xlite::source_location where = xlite::source_location::current()) {
  {
    auto& registry = detail::registry();
    std::scoped_lock lock(registry.mutex);
    const auto began = std::chrono::steady_clock::now();
    profiler::record(profiler::track::host_tracing(), "trace", registry.tracing_began, began);
    // A replica of xlite::spawn cuts its own device's trace; the other replicas' go on.
    const bool replica = runtime::detail::replica_ordinal() >= 0;
    const xlite::device mine;
    std::vector<std::shared_ptr<detail::tensor_state>> pending;
    std::vector<std::weak_ptr<detail::tensor_state>> others;
    for (const auto& weak : registry.live) {
      auto s = weak.lock();
      if (!s || !s->pending) continue;
      if (replica && s->device.ordinal() != mine.ordinal()) { // tpu:k's tensors are replica k's too
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
    registry.tracing_began = std::chrono::steady_clock::now();
    profiler::record(profiler::track::host_tracing(), "mark_step", began, registry.tracing_began);
  }
  metrics::write_step_report();
  debug::analyse_step();
}

namespace detail {

// Waits for t's value (computed first if it is still pending) and times the transfer
// (TransferFromDeviceTime); on the CPU the device buffer is host memory, so the wait is
// most of it. A sharded value is put together from its shards.
template <class Copy>
void transfer_to_host(const tensor& t, const debug::step_cause& cause, Copy&& copy) {
  runtime::device_data_ptr data;
  spmd::sharded_data_ptr shards;
  {
    std::scoped_lock lock(registry().mutex);
    if (t.state()->pending) launch_graph({t.state()}, cause);
    data = t.state()->data;
    shards = t.state()->shards;
  }
  const auto begin = std::chrono::steady_clock::now();
  copy(shards ? *shards->assemble() : *data->wait());
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
