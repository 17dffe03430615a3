#pragma once

// A graph as text, one instruction per line, in the style of XLA's HLO text:
//
//   %0 = f32[2,3] parameter(0)
//   %1 = f32[] constant(2.5)
//   %2 = f32[2,3] mul(%0, %1)
//   %3 = f32[2] sum(%2), axes={1}
//   outputs: %3
//
// Given the origins a capture recorded (XLITE_IR_DEBUG), each line of the graph's own
// instructions (not of a control op's bodies) ends with the line of the program that made
// it: `, location=/src/train.cpp:42 (step(xlite::lazy::tensor const&))`.

#include <memory>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "xlite/core/call_stack.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/source_lookup.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/ir/window.hpp"

namespace xlite::ir {

// "float32[32,13]": an instruction's dtype and shape.
inline std::string type_text(const instruction& ins) {
  std::ostringstream out;
  out << name(ins.type) << '[';
  for (std::size_t a = 0; a < ins.shape.rank(); ++a) out << (a ? "," : "") << ins.shape[a];
  out << ']';
  return out.str();
}

inline void print(std::ostream& out, const instruction& ins, value_id id) {
  out << '%' << id << " = " << (ins.code == op::while_loop || ins.code == op::cond ? "tuple" : type_text(ins));
  out << ' ' << name(ins.code) << '(';
  if (ins.code == op::parameter) out << ins.attrs.ints[0];
  const auto print_value = [&] {
    if (is_floating_point(ins.type)) {
      out << ins.attrs.value.real;
    } else {
      out << ins.attrs.value.integer;
    }
  };
  if (ins.code == op::constant) print_value();
  for (std::size_t k = 0; k < ins.operands.size(); ++k) out << (k ? ", %" : "%") << ins.operands[k];
  out << ')';
  if (ins.code == op::tuple_element) out << ", index=" << ins.attrs.ints[0];
  if (ins.code == op::while_loop) out << ", state=" << ins.attrs.ints[0];
  const bool has_axes = info(ins.code).kind == op_kind::reduction || ins.code == op::permute ||
                        ins.code == op::concat || ins.code == op::iota || takes_index(ins.code);
  if (has_axes) {
    out << (ins.code == op::permute ? ", perm={" : ", axes={");
    for (std::size_t k = 0; k < ins.attrs.ints.size(); ++k) out << (k ? "," : "") << ins.attrs.ints[k];
    out << '}';
    if (info(ins.code).kind == op_kind::reduction && ins.attrs.flag) out << ", keepdims";
  }
  if (ins.code == op::slice) {
    out << ", slice={";
    for (std::size_t k = 0; k < ins.attrs.ints.size(); k += 3) {
      out << (k ? "," : "") << '[' << ins.attrs.ints[k] << ':' << ins.attrs.ints[k + 1] << ':' << ins.attrs.ints[k + 2]
          << ']';
    }
    out << '}';
  }
  if (ins.code == op::matmul) {
    if (ins.attrs.ints[0] != 0) out << ", transpose_a";
    if (ins.attrs.ints[1] != 0) out << ", transpose_b";
  }
  if (info(ins.code).kind == op_kind::window) out << ", " << window2d::from(ins.attrs.ints);
  if (ins.code == op::pad) {
    out << ", pad={";
    for (std::size_t k = 0; k < ins.attrs.ints.size(); k += 2) {
      out << (k ? "," : "") << '[' << ins.attrs.ints[k] << ':' << ins.attrs.ints[k + 1] << ']';
    }
    out << "}, fill=";
    print_value();
  }
}

namespace detail {

// A control op's subgraphs follow it, indented, each under its role. `locations`, if not
// empty, has one entry per instruction of g.
inline void print_graph(std::ostream& out, const graph& g, const std::string& indent,
                        std::span<const std::string> locations = {}) {
  for (std::size_t id = 0; id < g.instructions.size(); ++id) {
    const instruction& ins = g.instructions[id];
    out << indent;
    print(out, ins, static_cast<value_id>(id));
    if (!locations.empty()) out << ", location=" << locations[id];
    out << '\n';
    for (std::size_t k = 0; k < ins.attrs.subgraphs.size(); ++k) {
      static constexpr const char* while_roles[] = {"cond", "body"};
      static constexpr const char* cond_roles[] = {"on_true", "on_false"};
      out << indent << "  " << (ins.code == op::while_loop ? while_roles[k] : cond_roles[k]) << " {\n";
      print_graph(out, *ins.attrs.subgraphs[k], indent + "    ");
      out << indent << "  }\n";
    }
  }
  out << indent << "outputs:";
  for (const value_id v : g.outputs) out << " %" << v;
  out << '\n';
}

} // namespace detail

inline std::ostream& operator<<(std::ostream& out, const graph& g) {
  detail::print_graph(out, g, "");
  return out;
}

// `origins`: by value id, as ir::capture records them; empty for none.
inline std::string to_text(const graph& g, std::span<const std::shared_ptr<const call_stack>> origins = {}) {
  std::ostringstream out;
  if (origins.size() == g.instructions.size() && !origins.empty()) {
    std::vector<const call_stack*> stacks;
    for (const auto& o : origins) stacks.push_back(o.get());
    detail::print_graph(out, g, "", user_locations(stacks));
  } else {
    out << g;
  }
  return out.str();
}

} // namespace xlite::ir
