#pragma once

// Algebraic simplification: rules that keep IEEE semantics exactly (the static layer's
// rules, expr/graph.hpp): x * 1, 1 * x, x / 1, x + 0, 0 + x, x - 0 -> x; -(-x) -> x;
// where(c, a, a) -> a; a cast to the operand's own dtype -> the operand; a reshape or
// broadcast_to to the operand's own shape -> the operand. No x * 0 -> 0 (NaN * 0 is NaN)
// and no x + (-0) -> x (0 + -0 is +0) for floating point. A rule applies only where
// dropping the op changes neither the dtype nor the shape of the value. Leaves the
// simplified instructions dead for eliminate_dead_code.

#include <cmath>
#include <cstddef>
#include <numeric>
#include <optional>
#include <vector>

#include "xlite/core/op.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::passes {

namespace detail {

// The value of a constant instruction (rank 0, as ir::constant makes them), if v is one.
inline std::optional<double> constant_value(const ir::graph& g, ir::value_id v) {
  const ir::instruction& ins = g.instructions[v];
  if (ins.code != op::constant) return std::nullopt;
  return is_floating_point(ins.type) ? ins.attrs.value.real : static_cast<double>(ins.attrs.value.integer);
}

inline bool is_constant(const ir::graph& g, ir::value_id v, double value) {
  const auto c = constant_value(g, v);
  // 0 means +0: x + (-0.0) is x, but x + (+0.0) turns -0.0 into +0.0, so only -0 would be
  // an identity; the special scalars a trace makes are +0 and 1.
  return c && *c == value && !std::signbit(*c);
}

// What value instruction i can be replaced by, if a rule applies.
inline std::optional<ir::value_id> simplified(const ir::graph& g, std::size_t i) {
  const ir::instruction& ins = g.instructions[i];
  const auto same_value = [&](ir::value_id operand) -> std::optional<ir::value_id> {
    const ir::instruction& o = g.instructions[operand];
    if (o.type == ins.type && o.shape == ins.shape) return operand;
    return std::nullopt;
  };
  const auto& in = ins.operands;
  switch (ins.code) {
  case op::mul:
    if (is_constant(g, in[1], 1)) return same_value(in[0]);
    if (is_constant(g, in[0], 1)) return same_value(in[1]);
    break;
  case op::div:
    if (is_constant(g, in[1], 1)) return same_value(in[0]);
    break;
  case op::add:
    // x + 0 is x except for x = -0.0 in floating point, where it gives +0.0.
    if (!is_floating_point(ins.type) && is_constant(g, in[1], 0)) return same_value(in[0]);
    if (!is_floating_point(ins.type) && is_constant(g, in[0], 0)) return same_value(in[1]);
    break;
  case op::sub:
    // x - (+0) is x for every x, -0.0 included.
    if (is_constant(g, in[1], 0)) return same_value(in[0]);
    break;
  case op::neg:
    if (g.instructions[in[0]].code == op::neg) return same_value(g.instructions[in[0]].operands[0]);
    break;
  case op::where:
    if (in[1] == in[2]) return same_value(in[1]);
    break;
  case op::cast:
  case op::reshape:
  case op::broadcast_to:
    return same_value(in[0]);
  default:
    break;
  }
  return std::nullopt;
}

} // namespace detail

// Returns how many instructions were simplified away.
inline std::size_t simplify(ir::graph& g) {
  std::vector<ir::value_id> replacement(g.instructions.size());
  std::iota(replacement.begin(), replacement.end(), 0);
  std::size_t count = 0;
  for (std::size_t i = 0; i < g.instructions.size(); ++i) {
    for (ir::value_id& operand : g.instructions[i].operands) operand = replacement[operand];
    if (const auto to = detail::simplified(g, i)) {
      replacement[i] = *to;
      ++count;
    }
  }
  for (ir::value_id& out : g.outputs) out = replacement[out];
  return count;
}

} // namespace xlite::passes
