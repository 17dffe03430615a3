#pragma once

// What differs between two graphs, in words: the recompilation diagnosis says WHY a place
// in the program compiled again ("input 0: f32[32,784] -> f32[17,784]"), where PyTorch/XLA
// only says that it did.

#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "xlite/ir/graph.hpp"
#include "xlite/ir/print.hpp"

namespace xlite::ir {

// The graph's parameter instructions, by position: the graph's inputs in calling order.
inline std::vector<const instruction*> parameters_by_position(const graph& g) {
  std::vector<const instruction*> result(g.parameter_count, nullptr);
  for (const instruction& ins : g.instructions) {
    if (ins.code == op::parameter) result[static_cast<std::size_t>(ins.attrs.ints[0])] = &ins;
  }
  return result;
}

// nullopt when the graphs are equal. Otherwise one line per difference found: the inputs
// whose dtype or shape changed (the usual cause: a batch of another size), or else the first
// instruction that differs, or the outputs.
inline std::optional<std::string> describe_difference(const graph& before, const graph& after) {
  if (before == after) return std::nullopt;
  std::ostringstream out;
  const auto inputs_before = parameters_by_position(before);
  const auto inputs_after = parameters_by_position(after);
  if (inputs_before.size() != inputs_after.size()) {
    out << "the graph has " << inputs_after.size() << " inputs, before " << inputs_before.size() << '\n';
  }
  bool inputs_changed = false;
  for (std::size_t k = 0; k < std::min(inputs_before.size(), inputs_after.size()); ++k) {
    const std::string was = type_text(*inputs_before[k]);
    const std::string now = type_text(*inputs_after[k]);
    if (was != now) {
      out << "input " << k << ": " << was << " -> " << now << '\n';
      inputs_changed = true;
    }
  }
  if (inputs_changed) return out.str();
  const std::size_t common = std::min(before.instructions.size(), after.instructions.size());
  for (std::size_t i = 0; i < common; ++i) {
    if (before.instructions[i] == after.instructions[i]) continue;
    out << "instruction %" << i << " was `";
    print(out, before.instructions[i], static_cast<value_id>(i));
    out << "`, now `";
    print(out, after.instructions[i], static_cast<value_id>(i));
    out << "`\n";
    return out.str();
  }
  if (before.instructions.size() != after.instructions.size()) {
    out << "the graph has " << after.instructions.size() << " instructions, before " << before.instructions.size()
        << '\n';
  } else {
    const auto values = [&](const graph& g) {
      for (const value_id v : g.outputs) out << " %" << v;
    };
    out << "the outputs are";
    values(after);
    out << ", before";
    values(before);
    out << '\n';
  }
  return out.str();
}

} // namespace xlite::ir
