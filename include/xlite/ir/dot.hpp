#pragma once

// A graph in Graphviz's dot language (XLITE_SAVE_TENSORS_FMT=dot, debug::ir_dot): one box
// per instruction labelled as the text printer labels it, an edge from each operand to its
// user, outputs drawn bold. A control op's subgraphs are clusters beside it.

#include <cstddef>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "xlite/ir/graph.hpp"
#include "xlite/ir/print.hpp"

namespace xlite::ir {

namespace detail {

inline std::string dot_escaped(const std::string& text) {
  std::string result;
  for (const char c : text) {
    if (c == '"' || c == '\\') result += '\\';
    result += c;
  }
  return result;
}

// Nodes are named <prefix><id>, so a subgraph's do not clash with its parent's.
inline void print_dot_body(std::ostream& out, const graph& g, const std::string& prefix, const std::string& indent) {
  std::vector<bool> is_output(g.instructions.size(), false);
  for (const value_id v : g.outputs) is_output[v] = true;
  for (std::size_t id = 0; id < g.instructions.size(); ++id) {
    const instruction& ins = g.instructions[id];
    std::ostringstream label;
    print(label, ins, static_cast<value_id>(id));
    out << indent << prefix << id << " [label=\"" << dot_escaped(label.str()) << '"'
        << (ins.code == op::parameter ? ", shape=ellipse" : "") << (is_output[id] ? ", style=bold" : "") << "];\n";
    for (const value_id operand : ins.operands) out << indent << prefix << operand << " -> " << prefix << id << ";\n";
    for (std::size_t k = 0; k < ins.attrs.subgraphs.size(); ++k) {
      const std::string sub = prefix + std::to_string(id) + "_" + std::to_string(k) + "_";
      out << indent << "subgraph cluster_" << sub << " {\n"
          << indent << "  label=\"%" << id << (k == 0 ? (ins.code == op::while_loop ? " cond" : " on_true")
                                                      : (ins.code == op::while_loop ? " body" : " on_false"))
          << "\";\n";
      print_dot_body(out, *ins.attrs.subgraphs[k], sub, indent + "  ");
      out << indent << "}\n";
    }
  }
}

} // namespace detail

inline std::string to_dot(const graph& g) {
  std::ostringstream out;
  out << "digraph xlite {\n  node [shape=box, fontname=monospace];\n";
  detail::print_dot_body(out, g, "n", "  ");
  out << "}\n";
  return out.str();
}

} // namespace xlite::ir
