#pragma once

// Buffer planning: which memory each kernel's result goes to. A value's buffer is free once
// the last kernel reading it has run, and a later result of the same byte size takes it
// over; an element-wise kernel writes its (first) result in place over an input of its own
// dtype and shape that dies with it (each chunk is read before the same chunk is written),
// and a reshape of a value that dies with it takes the value's memory as it is, with no
// copy. The graph's outputs get buffers of their own, since they outlive the run;
// parameters are the caller's and are never written.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/op.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/passes/fusion.hpp"

namespace xlite::passes {

struct buffer_plan {
  static constexpr std::size_t no_slot = static_cast<std::size_t>(-1);
  std::vector<std::size_t> slot_of;      // by value id: a kernel root's slot, no_slot otherwise
  std::vector<std::int64_t> slot_bytes;  // by slot
  std::vector<bool> slot_is_output;      // outputs' slots are handed to the caller
  std::size_t in_place_count = 0;        // results written over a dying input (or reshaped in place)
};

inline std::int64_t byte_size(const ir::instruction& ins) {
  return ins.shape.numel() * static_cast<std::int64_t>(size_of(ins.type));
}

inline buffer_plan plan_buffers(const ir::graph& g, const fusion_plan& fusion) {
  const std::size_t count = g.instructions.size();
  buffer_plan plan;
  plan.slot_of.assign(count, buffer_plan::no_slot);
  std::vector<bool> is_output(count, false);
  for (const ir::value_id out : g.outputs) is_output[out] = true;
  // The last kernel that reads each value.
  std::vector<std::size_t> last_use(count, 0);
  for (std::size_t k = 0; k < fusion.kernels.size(); ++k) {
    for (const ir::value_id input : fusion.kernels[k].inputs) last_use[input] = k;
  }
  const auto reusable = [&](ir::value_id v) {
    return plan.slot_of[v] != buffer_plan::no_slot && !is_output[v] && g.instructions[v].code != op::parameter;
  };
  std::multimap<std::int64_t, std::size_t> free_slots; // bytes -> slot
  std::vector<ir::value_id> dying;                      // values whose slots free after this kernel
  for (std::size_t k = 0; k < fusion.kernels.size(); ++k) {
    const kernel_group& kernel = fusion.kernels[k];
    const ir::instruction& root = g.instructions[kernel.root];
    const std::int64_t bytes = byte_size(root);
    ir::value_id taken_over = kernel.root;
    // An epilogue runs while its matmul still reads the operands: it may write over the
    // product (region by region, after the GEMM), never over them (b + matmul(w, b)).
    const auto read_by_running_matmul = [&](ir::value_id v) {
      if (!kernel.matmul_epilogue) return false;
      const auto& matmul_operands = g.instructions[fusion.kernels[k - 1].root].operands;
      return std::ranges::find(matmul_operands, v) != matmul_operands.end();
    };
    if (kernel.elementwise && !is_output[kernel.root]) {
      for (const ir::value_id input : kernel.inputs) {
        if (reusable(input) && last_use[input] == k && plan.slot_bytes[plan.slot_of[input]] == bytes &&
            g.instructions[input].type == root.type && g.instructions[input].shape == root.shape &&
            !read_by_running_matmul(input)) {
          taken_over = input;
          break;
        }
      }
    } else if (root.code == op::reshape && !is_output[kernel.root]) {
      // A reshape of a value that dies with it is that value's memory under a new shape:
      // nothing is copied.
      const ir::value_id input = root.operands[0];
      if (reusable(input) && last_use[input] == k && !read_by_running_matmul(input)) taken_over = input;
    }
    const auto take_slot = [&](ir::value_id result) {
      const std::int64_t size = byte_size(g.instructions[result]);
      if (const auto it = free_slots.find(size); it != free_slots.end() && !is_output[result]) {
        plan.slot_of[result] = it->second;
        free_slots.erase(it);
      } else {
        plan.slot_of[result] = plan.slot_bytes.size();
        plan.slot_bytes.push_back(size);
        plan.slot_is_output.push_back(is_output[result]);
      }
    };
    if (taken_over != kernel.root) {
      plan.slot_of[kernel.root] = plan.slot_of[taken_over];
      ++plan.in_place_count;
    } else {
      take_slot(kernel.root);
    }
    for (const ir::value_id result : kernel.extra_results) take_slot(result);
    for (const ir::value_id input : kernel.inputs) {
      if (input != taken_over && reusable(input) && last_use[input] == k) dying.push_back(input);
    }
    // A matmul's operands are read until its epilogue is done: its epilogue's result must
    // not take their memory.
    const bool epilogue_next = k + 1 < fusion.kernels.size() && fusion.kernels[k + 1].matmul_epilogue;
    if (!epilogue_next) {
      for (const ir::value_id input : dying) free_slots.emplace(plan.slot_bytes[plan.slot_of[input]], plan.slot_of[input]);
      dying.clear();
    }
  }
  return plan;
}

} // namespace xlite::passes
