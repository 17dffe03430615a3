#pragma once

// The CPU executor: runs an executable's kernels in order on the parameters' buffers and
// returns the outputs' buffers. Intermediate buffers follow the plan (passes/buffer_plan.hpp)
// and live for one run.

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/elementwise.hpp"
#include "xlite/runtime/layout.hpp"
#include "xlite/runtime/matmul.hpp"
#include "xlite/runtime/reduce.hpp"

namespace xlite::runtime {

inline std::vector<buffer_ptr> execute(const compile::executable& exe, std::span<const buffer_ptr> parameters,
                                       thread_pool& pool) {
  const ir::graph& g = exe.program;
  if (parameters.size() != g.parameter_count) {
    throw value_error(xlite::detail::message("execute: the executable takes ", g.parameter_count,
                                             " parameters, got ", parameters.size()));
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
  std::vector<const buffer*> inputs;
  for (const compile::kernel& k : exe.kernels) {
    const ir::instruction& root = g.instructions[k.group.root];
    buffer_ptr& slot = slots[exe.buffers.slot_of[k.group.root]];
    if (!slot) {
      slot = make_buffer(root.type, root.shape);
    } else {
      slot->reinterpret(root.type, root.shape);
    }
    inputs.clear();
    for (const ir::value_id v : k.group.inputs) inputs.push_back(value[v].get());
    if (k.group.elementwise) {
      run_elementwise(k, inputs, *slot, pool);
    } else if (info(root.code).kind == op_kind::reduction) {
      const ir::instruction& operand = g.instructions[root.operands[0]];
      run_reduction(k, root, inputs, operand.shape, operand.type, *slot, pool);
    } else if (root.code == op::matmul) {
      run_matmul(*value[root.operands[0]], *value[root.operands[1]], *slot);
    } else {
      // Layout ops read their operands in instruction order (concat's parts), which
      // group.inputs may have merged where a part repeats.
      inputs.clear();
      for (const ir::value_id v : root.operands) inputs.push_back(value[v].get());
      run_layout(root, inputs, *slot, pool);
    }
    value[k.group.root] = slot;
  }
  std::vector<buffer_ptr> outputs;
  outputs.reserve(g.outputs.size());
  for (const ir::value_id v : g.outputs) outputs.push_back(value[v]);
  return outputs;
}

} // namespace xlite::runtime
