#pragma once

// Common-subexpression elimination: an instruction equal to an earlier one (same op, dtype,
// shape, attributes and operands, after the operands themselves were merged) reads the
// earlier one's value instead. Parameters differ by position, so they never merge. Leaves
// the duplicates dead for eliminate_dead_code.

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "xlite/ir/graph.hpp"

namespace xlite::passes {

// Returns how many instructions now read an earlier equal one.
inline std::size_t eliminate_common_subexpressions(ir::graph& g) {
  std::vector<ir::value_id> replacement(g.instructions.size());
  std::iota(replacement.begin(), replacement.end(), 0);
  std::unordered_multimap<std::uint64_t, ir::value_id> seen;
  std::size_t merged = 0;
  for (std::size_t i = 0; i < g.instructions.size(); ++i) {
    ir::instruction& ins = g.instructions[i];
    for (ir::value_id& operand : ins.operands) operand = replacement[operand];
    const std::uint64_t key = ir::structural_hash(ir::graph{{ins}, {}, 0});
    bool found = false;
    for (auto [it, end] = seen.equal_range(key); it != end && !found; ++it) {
      if (g.instructions[it->second] == ins) {
        replacement[i] = it->second;
        found = true;
      }
    }
    if (found) {
      ++merged;
    } else {
      seen.emplace(key, static_cast<ir::value_id>(i));
    }
  }
  for (ir::value_id& out : g.outputs) out = replacement[out];
  return merged;
}

} // namespace xlite::passes
