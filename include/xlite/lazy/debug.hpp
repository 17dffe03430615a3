#pragma once

// The graph that would compute some tensors, as text, Graphviz dot or MLIR, without running
// it: PyTorch/XLA's _get_xla_tensors_text / _get_xla_tensors_dot. Tensors already computed
// appear as parameters.

#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "xlite/ir/dot.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/ir/mlir.hpp"
#include "xlite/ir/print.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite::debug {

namespace detail {
inline ir::captured_graph pending_graph(std::span<const lazy::tensor> tensors) {
  std::vector<ir::node_ptr> outputs;
  for (const lazy::tensor& t : tensors) outputs.push_back(t.node());
  return ir::capture(outputs);
}
} // namespace detail

// With XLITE_IR_DEBUG=1 each instruction says which line of the program made it.
inline std::string ir_text(std::span<const lazy::tensor> tensors) {
  const ir::captured_graph captured = detail::pending_graph(tensors);
  return ir::to_text(captured.program, captured.origins);
}
inline std::string ir_text(std::initializer_list<lazy::tensor> tensors) { return ir_text(std::span<const lazy::tensor>(tensors.begin(), tensors.size())); }

inline std::string ir_dot(std::span<const lazy::tensor> tensors) {
  return ir::to_dot(detail::pending_graph(tensors).program);
}
inline std::string ir_dot(std::initializer_list<lazy::tensor> tensors) { return ir_dot(std::span<const lazy::tensor>(tensors.begin(), tensors.size())); }

// The graph as an MLIR module in upstream dialects (func, linalg, arith, math, tensor) for
// other compilers: a function `main` of the tensors already computed (its arguments, in the
// order ir_text numbers them as parameters) returning `tensors` (ir/mlir.hpp, docs/io.md).
inline std::string mlir_text(std::span<const lazy::tensor> tensors) {
  return ir::to_mlir(detail::pending_graph(tensors).program);
}
inline std::string mlir_text(std::initializer_list<lazy::tensor> tensors) {
  return mlir_text(std::span<const lazy::tensor>(tensors.begin(), tensors.size()));
}

} // namespace xlite::debug
