#pragma once

// Constant folding: an element-wise op whose operands are all constants becomes a constant.
// The pass decides what folds; the arithmetic is the caller's (`evaluate`), because the
// value that replaces an op must be the one a kernel computes, and the kernels are the
// runtime's: the compiler folds with runtime::evaluate_constant, which runs the op's own
// register step on a full SIMD batch. Operands come first, so a chain of ops on constants
// folds in one pass. The constants an op read may be left dead, for eliminate_dead_code.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>

#include "xlite/core/op.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::passes {

// The value of `ins`, an element-wise instruction of g whose operands are constants, or
// nothing to leave it as it is.
using constant_evaluator = std::function<std::optional<ir::literal>(const ir::graph& g, const ir::instruction& ins)>;

// Returns how many instructions became constants.
inline std::size_t fold_constants(ir::graph& g, const constant_evaluator& evaluate) {
  std::size_t count = 0;
  for (ir::instruction& ins : g.instructions) {
    // Constants are rank 0 (ir::constant), so ops of them are too; broadcast_to, not an
    // element-wise op, is what makes a constant any larger shape, and it stays.
    const bool foldable =
        info(ins.code).kind == op_kind::elementwise && !ins.operands.empty() &&
        std::ranges::all_of(ins.operands, [&](ir::value_id v) { return g.instructions[v].code == op::constant; });
    if (!foldable) continue;
    if (const std::optional<ir::literal> value = evaluate(g, ins)) {
      ir::instruction folded{op::constant, ins.type, ins.shape, {}, {}};
      folded.attrs.value = *value;
      ins = std::move(folded);
      ++count;
    }
  }
  return count;
}

} // namespace xlite::passes
