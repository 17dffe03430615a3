#pragma once

// Sharding lazy tensors, as torch_xla.distributed.spmd does (SPMD mode only:
// runtime::use_spmd()). mark_sharding gives a tensor a sharding over a mesh: a value that
// exists is cut into its shards at once, each device keeping its own; a pending one is
// annotated in the trace, and the partitioner lays it out so at the barrier. A user's
// sharding always wins over what the partitioner would choose.

#include <optional>
#include <string>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/ir/sharding.hpp"
#include "xlite/ir/sharding_ops.hpp"
#include "xlite/lazy/step.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/memory.hpp"
#include "xlite/runtime/processes.hpp"
#include "xlite/spmd/mesh.hpp"
#include "xlite/spmd/partition_spec.hpp"
#include "xlite/spmd/sharded_data.hpp"
#include "xlite/spmd/visualize.hpp"

namespace xlite::spmd {

namespace detail {

inline void require_spmd(std::string_view what) {
  if (!runtime::is_spmd()) {
    throw value_error(xlite::detail::message(what, ": SPMD mode is off; call xlite::runtime::use_spmd() (or set "
                                                   "XLITE_USE_SPMD=1) before making tensors"));
  }
}

inline void require_outside_body(std::string_view what) {
  if (lazy::detail::body_depth() > 0) {
    throw value_error(xlite::detail::message(what, ": inside a while_loop or cond body, which runs on whole values; ",
                                             "annotate the loop's operands or results instead"));
  }
}

// The value a tensor holds: one buffer, or shards.
struct held_value {
  runtime::device_data_ptr data;
  sharded_data_ptr shards;
  friend bool operator==(const held_value&, const held_value&) = default;
};

inline held_value held_by(const lazy::detail::tensor_state& t) { return {t.data, t.shards}; }

// Waits for the value and puts it together.
inline runtime::buffer_ptr whole_value(const held_value& v) { return v.shards ? v.shards->assemble() : v.data->wait(); }

// Gives the value `state` holds a new layout, `relayout(whole value)`, or, while the tensor
// is pending, calls annotate() instead. The wait for the value happens outside the
// registry's lock, so a step still running does not hold up the threads that trace; if the
// tensor got another value meanwhile, that one is laid out instead.
template <class Annotate, class Relayout>
void change_layout(lazy::detail::tensor_state& state, Annotate annotate, Relayout relayout) {
  for (;;) {
    held_value before;
    {
      std::scoped_lock lock(lazy::detail::registry().mutex);
      if (state.pending) return annotate();
      before = held_by(state);
    }
    const runtime::buffer_ptr whole = [&] {
      const runtime::allocating_on on(state.device); // shards put together take its memory
      return whole_value(before);
    }();
    std::scoped_lock lock(lazy::detail::registry().mutex);
    if (!state.pending && held_by(state) == before) return relayout(whole);
  }
}

} // namespace detail

// Lays t out as `spec` says over mesh m (xs.mark_sharding). Returns t.
inline const lazy::tensor& mark_sharding(const lazy::tensor& t, const mesh& m, const partition_spec& spec) {
  detail::require_spmd("mark_sharding");
  detail::require_outside_body("mark_sharding");
  const ir::sharding s = to_sharding(m, spec, t.shape());
  auto& state = *t.state();
  detail::change_layout(
      state,
      [&] {
        // A second annotation replaces the first.
        const ir::node_ptr value =
            state.pending->code() == op::mark_sharding ? state.pending->operands()[0] : state.pending;
        state.pending = ir::mark_sharding(value, s);
      },
      [&](const runtime::buffer_ptr& whole) {
        state.shards = sharded_data::split(*whole, s, runtime::global_runtime_device_count());
        state.data = nullptr;
        state.data_node = nullptr;
      });
  return t;
}

// Removes t's sharding (xs.clear_sharding): a pending tensor loses its annotation, and a
// sharded value is put together on one device, where every device reads it whole.
inline const lazy::tensor& clear_sharding(const lazy::tensor& t) {
  detail::require_outside_body("clear_sharding");
  auto& state = *t.state();
  {
    std::scoped_lock lock(lazy::detail::registry().mutex);
    if (!state.pending && !state.shards) return t; // whole already: nothing to wait for
  }
  detail::change_layout(
      state,
      [&] {
        if (state.pending->code() == op::mark_sharding) state.pending = state.pending->operands()[0];
      },
      [&](const runtime::buffer_ptr& whole) {
        if (!state.shards) return;
        state.data = std::make_shared<runtime::device_data>(state.device, whole);
        state.shards = nullptr;
        state.data_node = nullptr;
      });
  return t;
}

// t's sharding: its annotation while it is pending (nullopt when it has none: the barrier's
// partitioner decides), then how its value is laid out, a pending partial value included.
inline std::optional<ir::sharding> sharding_of(const lazy::tensor& t) {
  const auto& state = *t.state();
  std::scoped_lock lock(lazy::detail::registry().mutex);
  if (state.pending) {
    if (state.pending->code() != op::mark_sharding) return std::nullopt;
    return ir::sharding::from_ints(state.pending->attrs().ints);
  }
  return state.shards ? state.shards->sharding() : ir::sharding::replicated();
}

// The table of which device holds which tile of t (xs.visualize_tensor_sharding).
inline std::string visualize(const lazy::tensor& t) {
  const std::optional<ir::sharding> s = sharding_of(t);
  if (!s) {
    throw value_error(xlite::detail::message("visualize: the tensor of shape ", t.shape(),
                                             " has no sharding yet; the partitioner chooses one at the next barrier "
                                             "(mark_step), or mark_sharding gives it one"));
  }
  return visualize(*s, t.shape());
}

// The program every device would run to compute `tensors` at a barrier now, as the
// partitioner makes it (collectives included), before optimisation: what torch_xla's
// _get_xla_tensors_hlo shows. ir::to_text prints it.
inline ir::graph device_program(const std::vector<lazy::tensor>& tensors) {
  detail::require_spmd("device_program");
  std::vector<ir::node_ptr> outputs;
  for (const auto& t : tensors) outputs.push_back(t.node());
  const lazy::detail::spmd_step step = lazy::detail::partition_step(outputs, runtime::global_runtime_device_count());
  return ir::numbered_trace(step.program.outputs, step.program.parameters).to_graph().program;
}

} // namespace xlite::spmd
