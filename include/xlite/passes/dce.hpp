#pragma once

// Dead-code elimination: drops the instructions no output depends on. Parameters stay,
// whether used or not, so that positions keep matching the buffers the caller passes.

#include <cstddef>
#include <vector>

#include "xlite/core/op.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::passes {

// Returns how many instructions were removed.
inline std::size_t eliminate_dead_code(ir::graph& g) {
  const std::size_t count = g.instructions.size();
  std::vector<bool> live(count, false);
  for (const ir::value_id out : g.outputs) live[out] = true;
  for (std::size_t i = count; i-- > 0;) {
    if (g.instructions[i].code == op::parameter) live[i] = true;
    if (!live[i]) continue;
    for (const ir::value_id operand : g.instructions[i].operands) live[operand] = true;
  }
  std::vector<ir::value_id> new_id(count);
  std::vector<ir::instruction> kept;
  kept.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (!live[i]) continue;
    new_id[i] = static_cast<ir::value_id>(kept.size());
    kept.push_back(std::move(g.instructions[i]));
    for (ir::value_id& operand : kept.back().operands) operand = new_id[operand];
  }
  for (ir::value_id& out : g.outputs) out = new_id[out];
  const std::size_t removed = count - kept.size();
  g.instructions = std::move(kept);
  return removed;
}

} // namespace xlite::passes
