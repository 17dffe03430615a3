#pragma once

// The executor: runs an executable's kernels in order on the parameters' buffers and
// returns the outputs' buffers; on a tpu device its matmuls run on the matrix unit.
// Intermediate buffers follow the plan (passes/buffer_plan.hpp) and live for one run.
// Control ops run their compiled subgraphs through the executor again: a while_loop runs
// its cond and body until cond is false, a cond one branch.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/core/separate_compilation.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/matrix_unit.hpp"
#include "xlite/runtime/metrics.hpp"
#include "xlite/runtime/profiler.hpp"

// The kernels only where execute() is defined: in every file of a header-only program, in
// one under separate compilation. The other files launch steps and need not parse them.
#if XLITE_BACKEND_DEFINITIONS
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/runtime/block_copy.hpp"
#include "xlite/runtime/collectives.hpp"
#include "xlite/runtime/elementwise.hpp"
#include "xlite/runtime/layout.hpp"
#include "xlite/runtime/matmul.hpp"
#include "xlite/runtime/reduce.hpp"
#include "xlite/runtime/scatter.hpp"
#include "xlite/runtime/window.hpp"
#endif

namespace xlite::runtime {

XLITE_BACKEND_FUNCTION std::vector<buffer_ptr> execute(const compile::executable& exe,
                                                       std::span<const buffer_ptr> parameters, thread_pool& pool,
                                                       const xlite::device& on = xlite::device(),
                                                       std::optional<profiler::track> kernels_track = {},
                                                       const matrix_unit* unit = nullptr);

// The counter of the bytes `device` sends in collectives: "CollectiveBytes(cpu:k)".
inline std::atomic<std::int64_t>& collective_bytes_counter(const xlite::device& device) {
  return metrics::counter("CollectiveBytes(cpu:" + std::to_string(device.ordinal()) + ")");
}

#if XLITE_BACKEND_DEFINITIONS
namespace detail {

// The results of control op `root` (kernel k) on its operands' buffers.
inline std::vector<buffer_ptr> run_control(const compile::kernel& k, const ir::instruction& root,
                                           std::span<const buffer_ptr> operands, thread_pool& pool,
                                           const xlite::device& on, const matrix_unit* unit) {
  const auto is_true = [](const buffer_ptr& b) { return b->as<std::uint8_t>()[0] != 0; };
  std::vector<buffer_ptr> results;
  if (root.code == op::cond) {
    results = execute(*k.subprograms[is_true(operands[0]) ? 0 : 1], operands.subspan(1), pool, on, {}, unit);
  } else {
    // The state is the first `ints[0]` operands; the captured values after it stay.
    std::vector<buffer_ptr> state(operands.begin(), operands.end());
    const auto loop_variables = static_cast<std::size_t>(root.attrs.ints[0]);
    while (is_true(execute(*k.subprograms[0], state, pool, on, {}, unit)[0])) {
      std::vector<buffer_ptr> next = execute(*k.subprograms[1], state, pool, on, {}, unit);
      std::move(next.begin(), next.end(), state.begin());
    }
    state.resize(loop_variables);
    results = std::move(state);
  }
  // A result may be an operand passed through (a loop that never ran): copy it, so the
  // plan may reuse the operand's buffer when it dies.
  for (buffer_ptr& r : results) {
    if (std::ranges::find(operands, r) != operands.end()) {
      auto copy = make_buffer(r->type(), r->shape());
      std::memcpy(copy->data(), r->data(), static_cast<std::size_t>(r->byte_size()));
      r = std::move(copy);
    }
  }
  return results;
}

// Draws one kernel's run on a profile track, when given one.
class kernel_timer {
public:
  kernel_timer(const profiler::track* where, const compile::kernel& k, const ir::instruction& root)
      : where_(where), kernel_(k), root_(root) {
    if (where_) begin_ = std::chrono::steady_clock::now();
  }
  ~kernel_timer() {
    if (!where_) return;
    std::ostringstream label;
    label << (kernel_.group.elementwise ? "fused " : "") << name(root_.code) << ' ' << name(root_.type) << root_.shape;
    if (const std::size_t extra = kernel_.group.extra_results.size()) label << " and " << extra << " more";
    profiler::record(*where_, label.str(), begin_, std::chrono::steady_clock::now(),
                     {{"instructions", std::to_string(kernel_.group.members.size())}});
  }
  kernel_timer(const kernel_timer&) = delete;
  kernel_timer& operator=(const kernel_timer&) = delete;

private:
  const profiler::track* where_;
  const compile::kernel& kernel_;
  const ir::instruction& root_;
  std::chrono::steady_clock::time_point begin_;
};

} // namespace detail

namespace detail {

// The bytes device `me` sends in collective `root` (operand x, its result) with the ring
// algorithms NCCL and XLA's cost model assume, for a group of n: all_reduce 2 (n - 1) / n
// of the buffer, all_gather and all_to_all (n - 1) / n of the whole, reduce_scatter
// (n - 1) / n of the input, collective_permute the buffer when `me` is a source.
inline std::int64_t collective_traffic(const ir::instruction& root, const buffer& x, const buffer& result,
                                       std::int64_t me) {
  const std::span<const std::int64_t> ints = root.attrs.ints;
  const auto ring = [](std::int64_t bytes, std::int64_t n, std::int64_t passes = 1) {
    return passes * bytes * (n - 1) / n;
  };
  switch (root.code) {
  case op::all_reduce:
    return ring(x.byte_size(), ir::group_size(ints, 1), 2);
  case op::all_gather:
    return ring(result.byte_size(), ir::group_size(ints, 1));
  case op::reduce_scatter:
    return ring(x.byte_size(), ir::group_size(ints, 2));
  case op::all_to_all:
    return ring(x.byte_size(), ir::group_size(ints, 3));
  default: {
    const ir::permute_pairs pairs = ir::pairs_of(ints);
    const bool sends = std::ranges::any_of(pairs, [&](const auto& p) { return p.first == me && p.second != me; });
    return sends ? x.byte_size() : 0;
  }
  }
}

} // namespace detail

// The result of collective `root` (or local_shard, which moves nothing) on device `on`,
// where operand x is this device's value. The bytes it sends count in
// collective_bytes_counter(on).
inline buffer_ptr run_collective(const ir::instruction& root, const buffer_ptr& x, const xlite::device& on) {
  const std::span<const std::int64_t> ints = root.attrs.ints;
  const std::int64_t me = global_device(on);
  if (root.code == op::local_shard) return take_shard(*x, ir::sharding::from_ints(ints), me);
  const std::string site = ir::collective_site_name(root.attrs.value.integer);
  device_collectives& c = collectives();
  const auto reduction = static_cast<ir::reduce_type>(ints.empty() ? 0 : ints[0]); // all_reduce's, reduce_scatter's
  buffer_ptr result;
  switch (root.code) {
  case op::all_reduce:
    result = c.all_reduce(me, x, reduction, root.attrs.value.real, ir::groups_of(ints, 1), site);
    break;
  case op::all_gather:
    result = c.all_gather(me, x, static_cast<std::size_t>(ints[0]), ir::groups_of(ints, 1), site);
    break;
  case op::reduce_scatter:
    result = c.reduce_scatter(me, x, reduction, root.attrs.value.real, static_cast<std::size_t>(ints[1]),
                              ir::groups_of(ints, 2), site);
    break;
  case op::all_to_all:
    result = c.all_to_all(me, x, static_cast<std::size_t>(ints[0]), static_cast<std::size_t>(ints[1]), ints[2],
                          ir::groups_of(ints, 3), site);
    break;
  default:
    result = c.collective_permute(me, x, ir::pairs_of(ints), site);
  }
  collective_bytes_counter(on).fetch_add(detail::collective_traffic(root, *x, *result, me), std::memory_order_relaxed);
  return result;
}

// `on` is the device the program runs on: the collectives' member. With a profile being
// recorded, each kernel is drawn on `kernels_track` (the device's track), named by its root
// op and result: where a step's time goes. `unit`, a tpu device's matrix unit as the step
// was launched with, runs the matmuls; without one they run on the CPU's kernels.
XLITE_BACKEND_FUNCTION std::vector<buffer_ptr>
execute(const compile::executable& exe, std::span<const buffer_ptr> parameters, thread_pool& pool,
        const xlite::device& on, std::optional<profiler::track> kernels_track, const matrix_unit* unit) {
  const ir::graph& g = exe.program;
  if (parameters.size() != g.parameter_count) {
    throw value_error(xlite::detail::message("execute: the executable takes ", g.parameter_count, " parameters, got ",
                                             parameters.size()));
  }
  std::vector<buffer_ptr> value(g.instructions.size());
  for (std::size_t i = 0; i < g.instructions.size(); ++i) {
    const ir::instruction& ins = g.instructions[i];
    if (ins.code != op::parameter) continue;
    const buffer_ptr& p = parameters[static_cast<std::size_t>(ins.attrs.ints[0])];
    if (p->type() != ins.type || p->shape() != ins.shape) {
      throw value_error(xlite::detail::message("execute: parameter ", ins.attrs.ints[0], " should be ", name(ins.type),
                                               ins.shape, ", got ", name(p->type()), p->shape()));
    }
    value[i] = p;
  }
  std::vector<buffer_ptr> slots(exe.buffers.slot_bytes.size());
  const auto slot_for = [&](ir::value_id result) -> buffer_ptr& {
    const ir::instruction& ins = g.instructions[result];
    buffer_ptr& slot = slots[exe.buffers.slot_of[result]];
    if (!slot) {
      slot = make_buffer(ins.type, ins.shape);
    } else {
      slot->reinterpret(ins.type, ins.shape);
    }
    return slot;
  };
  std::vector<buffer*> outs; // an element-wise kernel's results
  // The kernel's inputs, into a vector reused from kernel to kernel (this is the dispatch
  // path of every step); an epilogue, which runs during its matmul, has one of its own.
  std::vector<const buffer*> inputs, epilogue_inputs;
  const auto inputs_of = [&](const compile::kernel& k, std::vector<const buffer*>& into) -> auto& {
    into.clear();
    for (const ir::value_id v : k.group.inputs) into.push_back(value[v].get());
    return into;
  };
  std::vector<std::vector<buffer_ptr>> control_results(g.instructions.size());
  const bool profiling = kernels_track && profiler::active();
  for (std::size_t i = 0; i < exe.kernels.size(); ++i) {
    const compile::kernel& k = exe.kernels[i];
    const ir::instruction& root = g.instructions[k.group.root];
    const detail::kernel_timer timing(profiling ? &*kernels_track : nullptr, k, root);
    // Control results are buffers of the subprograms' runs, not of this plan's slots.
    if (root.code == op::tuple_element) {
      value[k.group.root] = control_results[root.operands[0]][static_cast<std::size_t>(root.attrs.ints[0])];
      continue;
    }
    if (info(root.code).kind == op_kind::control) {
      std::vector<buffer_ptr> operands;
      for (const ir::value_id v : root.operands) operands.push_back(value[v]);
      control_results[k.group.root] = detail::run_control(k, root, operands, pool, on, unit);
      continue;
    }
    if (info(root.code).kind == op_kind::collective) { // a buffer of its own, not a slot of the plan
      value[k.group.root] = run_collective(root, value[root.operands[0]], on);
      continue;
    }
    buffer_ptr& slot = slot_for(k.group.root);
    if (k.group.elementwise) {
      outs.assign({slot.get()});
      for (const ir::value_id r : k.group.extra_results) {
        buffer_ptr& extra = slot_for(r);
        outs.push_back(extra.get());
        value[r] = extra;
      }
      run_elementwise(k, inputs_of(k, inputs), outs, pool);
    } else if (info(root.code).kind == op_kind::reduction) {
      const ir::instruction& operand = g.instructions[root.operands[0]];
      run_reduction(k, root, inputs_of(k, inputs), operand.shape, operand.type, *slot, pool);
    } else if (root.code == op::matmul) {
      const buffer &a = *value[root.operands[0]], &b = *value[root.operands[1]];
      const matmul_transposes transposed{root.attrs.ints[0] != 0, root.attrs.ints[1] != 0};
      if (i + 1 < exe.kernels.size() && exe.kernels[i + 1].group.matmul_epilogue) {
        value[k.group.root] = slot; // the epilogue reads the product
        const compile::kernel& epilogue = exe.kernels[++i];
        buffer_ptr& result = slot_for(epilogue.group.root);
        inputs_of(epilogue, epilogue_inputs);
        run_matmul(
            a, b, *slot, transposed,
            [&](std::int64_t begin, std::int64_t count) {
              run_elementwise_range(epilogue, epilogue_inputs, *result, begin, begin + count);
            },
            unit);
        value[epilogue.group.root] = result;
      } else {
        run_matmul(a, b, *slot, transposed, {}, unit);
      }
    } else {
      // Layout and window ops read their operands in instruction order (concat's parts,
      // max pooling's x twice), which group.inputs may have merged where one repeats.
      inputs.clear();
      for (const ir::value_id v : root.operands) inputs.push_back(value[v].get());
      if (info(root.code).kind == op_kind::window) {
        run_window(root, inputs, *slot, pool);
      } else if (root.code == op::scatter_add || root.code == op::index_add) {
        run_scatter(root, inputs, *slot, pool);
      } else {
        run_layout(root, inputs, *slot, pool);
      }
    }
    value[k.group.root] = slot;
  }
  std::vector<buffer_ptr> outputs;
  outputs.reserve(g.outputs.size());
  for (const ir::value_id v : g.outputs) outputs.push_back(value[v]);
  return outputs;
}
#endif

} // namespace xlite::runtime
