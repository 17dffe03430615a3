#pragma once

// The compiler driver: graph in, executable out. Runs the passes in order (autocast for
// the mixed-precision policy, constant folding, simplify, CSE, DCE, then fusion and buffer planning) and lowers each
// fused kernel (element-wise, or a reduction with the ops that feed it) to its register program.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "xlite/amp/autocast.hpp"
#include "xlite/compile/executable.hpp"
#include "xlite/compile/native_source.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/separate_compilation.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/passes/buffer_plan.hpp"
#include "xlite/passes/cse.hpp"
#include "xlite/passes/dce.hpp"
#include "xlite/passes/fold.hpp"
#include "xlite/passes/fusion.hpp"
#include "xlite/passes/simplify.hpp"

namespace xlite::compile {

// Bump whenever compile_graph's output changes for some graph (a pass, the lowering, the
// executable's meaning): it is part of the cache key, so entries an older compiler wrote
// to a persistent cache are not run by a newer one. tests/lazy/serialize.cpp holds a
// digest of a compiled sample that fails when the output changes and the revision did not.
inline constexpr std::uint32_t compiler_revision = 6;

namespace detail {

// An iota in a kernel may be smaller than the kernel's index space, broadcast into it
// (NumPy's right-aligned rule): it counts along the index space's matching axis, and along
// an axis of length 1 it is 0.
inline void lower_iota_axis(const ir::instruction& iota, const shape& index_space, register_step& step) {
  const auto axis = static_cast<std::size_t>(iota.attrs.ints[0]);
  if (iota.shape[axis] == 1) {
    step.code = op::constant;
    step.attrs.value = ir::literal::of(std::int64_t{0});
    return;
  }
  step.attrs.ints = {static_cast<std::int64_t>(axis + index_space.rank() - iota.shape.rank())};
}

// The values of a kernel's program that are the same in every chunk and get a register of
// their own: one-element inputs, constants, and element-wise ops of such values, the first
// max_invariants of them in program order (each keeps a register for the whole program).
inline constexpr std::size_t max_invariants = 64;
inline std::vector<bool> chunk_invariants(const ir::graph& g, std::span<const ir::value_id> members) {
  std::vector<bool> invariant(g.instructions.size(), false), member(g.instructions.size(), false);
  for (const ir::value_id v : members) member[v] = true;
  std::size_t count = 0;
  const auto keep = [&](ir::value_id v) {
    if (!invariant[v] && count < max_invariants) {
      invariant[v] = true;
      ++count;
    }
  };
  for (const ir::value_id v : members) {
    const ir::instruction& ins = g.instructions[v];
    for (const ir::value_id o : ins.operands) {
      if (!member[o] && g.instructions[o].shape.numel() == 1) keep(o); // a load, broadcast
    }
    const bool per_element = info(ins.code).kind == op_kind::elementwise || ins.code == op::broadcast_to;
    if (ins.code == op::constant ||
        (per_element && std::ranges::all_of(ins.operands, [&](ir::value_id o) { return invariant[o]; }))) {
      keep(v);
    }
  }
  return invariant;
}

// Lowers `members` of k's group (in order) to k's register program, whose results are the
// values `results`. Registers are reused once their last reader in the program has run; a
// result's register is never reused, since it is stored after the whole program, nor is an
// invariant's (chunk_invariants), which later chunks read without computing it again.
inline void lower_program(const ir::graph& g, kernel& k, std::span<const ir::value_id> members,
                          std::span<const ir::value_id> results) {
  const auto& group = k.group;
  std::vector<std::int64_t> register_of(g.instructions.size(), -1);
  std::vector<std::size_t> last_read(g.instructions.size(), 0);
  const std::vector<bool> invariant = chunk_invariants(g, members);
  for (std::size_t s = 0; s < members.size(); ++s) {
    for (const ir::value_id operand : g.instructions[members[s]].operands) {
      last_read[operand] = invariant[operand] ? members.size() : s;
    }
  }
  for (const ir::value_id r : results) last_read[r] = members.size();
  std::vector<register_id> free_registers;
  // An invariant gets a register of its own: one a value computed in every chunk had used
  // before would hold that value again when later chunks skip the invariant's step.
  const auto allocate = [&](bool invariant_value) {
    if (!free_registers.empty() && !invariant_value) {
      const register_id r = free_registers.back();
      free_registers.pop_back();
      return r;
    }
    if (k.register_count == std::numeric_limits<register_id>::max()) {
      throw value_error(xlite::detail::message("compile: a fused kernel of ", members.size(),
                                               " instructions needs more registers than a program can name"));
    }
    return static_cast<register_id>(k.register_count++);
  };
  // Inputs are loaded where first read, so few registers hold loaded values at once.
  for (std::size_t s = 0; s < members.size(); ++s) {
    const ir::value_id v = members[s];
    const ir::instruction& ins = g.instructions[v];
    register_step step;
    step.code = ins.code;
    step.type = ins.type;
    step.attrs = ins.attrs;
    step.invariant = invariant[v];
    if (ins.code == op::iota) lower_iota_axis(ins, g.instructions[results[0]].shape, step);
    if (!ins.operands.empty()) step.operand_type = g.instructions[ins.operands.back()].type;
    for (const ir::value_id operand : ins.operands) {
      if (register_of[operand] < 0) {
        register_step load;
        load.what = register_step::kind::load;
        load.type = g.instructions[operand].type;
        load.input = static_cast<std::uint16_t>(std::ranges::find(group.inputs, operand) - group.inputs.begin());
        load.invariant = invariant[operand];
        load.result = allocate(load.invariant);
        register_of[operand] = load.result;
        k.program.push_back(std::move(load));
      }
      step.operands.push_back(static_cast<register_id>(register_of[operand]));
    }
    // Free the operands this step reads last. One whose lanes are at least as wide as the
    // result's is freed before the result's register is chosen: the step may write over it,
    // as each lane is read before the bytes of any later lane are written. A narrower one (a
    // bool cast to float) would be overwritten ahead of its reading, so it is freed after.
    const std::size_t result_lane = size_of(compute_dtype(ins.type));
    const auto free_last_reads = [&](bool wide_enough) {
      for (const ir::value_id operand : ins.operands) {
        const bool wide = size_of(compute_dtype(g.instructions[operand].type)) >= result_lane;
        if (last_read[operand] == s && register_of[operand] >= 0 && wide == wide_enough) {
          free_registers.push_back(static_cast<register_id>(register_of[operand]));
          register_of[operand] = -2; // freed; never read again
        }
      }
    };
    free_last_reads(true);
    step.result = allocate(step.invariant);
    free_last_reads(false);
    register_of[v] = step.result;
    k.program.push_back(std::move(step));
  }
  for (const ir::value_id r : results) k.result_registers.push_back(static_cast<register_id>(register_of[r]));
}

} // namespace detail

// `precision` applies to g's own instructions; control-flow bodies compile as traced.
// Constants fold only with an evaluator (the runtime passes runtime::evaluate_constant).
XLITE_BACKEND_FUNCTION executable_ptr compile_graph(ir::graph g, amp::policy precision = {},
                                                    const passes::constant_evaluator& evaluate = {});

#if XLITE_BACKEND_DEFINITIONS
XLITE_BACKEND_FUNCTION executable_ptr compile_graph(ir::graph g, amp::policy precision,
                                                    const passes::constant_evaluator& evaluate) {
  auto result = std::make_shared<executable>();
  result->hash = ir::structural_hash(g);
  std::ostringstream log;
  if (precision.mode != amp::mode::fp32) {
    const std::size_t before = g.instructions.size();
    g = amp::apply(g, precision);
    log << "autocast " << amp::name(precision.mode) << ": " << g.instructions.size() - before << " casts\n";
  }
  if (evaluate) log << "fold: " << passes::fold_constants(g, evaluate) << " folded\n";
  log << "simplify: " << passes::simplify(g) << " rewritten\n";
  log << "cse: " << passes::eliminate_common_subexpressions(g) << " merged\n";
  log << "dce: " << passes::eliminate_dead_code(g) << " removed\n";
  const passes::fusion_plan fusion = passes::fuse_elementwise(g);
  result->buffers = passes::plan_buffers(g, fusion);
  log << "fusion: " << g.instructions.size() << " instructions in " << fusion.kernels.size() << " kernels\n";
  log << "buffers: " << result->buffers.slot_bytes.size() << " slots, " << result->buffers.in_place_count
      << " in place\n";
  for (const passes::kernel_group& group : fusion.kernels) {
    kernel k;
    k.group = group;
    if (group.elementwise) {
      std::vector<ir::value_id> results{group.root};
      results.insert(results.end(), group.extra_results.begin(), group.extra_results.end());
      detail::lower_program(g, k, group.members, results);
    } else if (group.members.size() > 1) { // a reduction with its operand fused in
      const std::span<const ir::value_id> producers(group.members.data(), group.members.size() - 1);
      detail::lower_program(g, k, producers, std::span(&g.instructions[group.root].operands[0], 1));
    }
    attach_native_source(g, k);
    for (const auto& sub : g.instructions[group.root].attrs.subgraphs)
      k.subprograms.push_back(compile_graph(*sub, {}, evaluate));
    result->kernels.push_back(std::move(k));
  }
  result->program = std::move(g);
  result->pass_log = log.str();
  return result;
}
#endif

} // namespace xlite::compile
