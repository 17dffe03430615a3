#pragma once

// xlite::grad: reverse-mode gradients of a lazy tensor with respect to others. It walks the
// trace that computes the output back to the tensors asked for and records, for each node
// on the way, the vector-Jacobian product of its op (autodiff/vjp.hpp). The gradients are
// lazy tensors like any other: nothing runs until the barrier, where the forward and the
// backward pass compile together into one graph, fused and cached, as PyTorch/XLA's
// training step is.
//
//   auto loss = lazy::cross_entropy(model(x), y);
//   auto grads = xlite::grad(loss, params);          // one lazy tensor per parameter
//   optimizer.step(params, grads);
//   xlite::mark_step();

#include <cstddef>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "xlite/autodiff/vjp.hpp"
#include "xlite/core/error.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite {

namespace autodiff::detail {

// The nodes of the trace behind `root` from which one of `targets` can be reached, each after
// the nodes it reads (a topological order). Iterative: a trace can be 10^5 nodes deep.
inline std::vector<ir::node_ptr> nodes_between(const ir::node_ptr& root,
                                               const std::unordered_set<const ir::node*>& targets) {
  std::unordered_map<const ir::node*, bool> reaches; // visited -> whether a target is below
  std::vector<ir::node_ptr> order;
  std::vector<std::pair<const ir::node_ptr*, std::size_t>> stack{{&root, 0}};
  reaches.emplace(root.get(), targets.contains(root.get()));
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    const auto& operands = (*n)->operands();
    if (next < operands.size()) {
      const ir::node_ptr& operand = operands[next++];
      if (reaches.emplace(operand.get(), targets.contains(operand.get())).second) stack.emplace_back(&operand, 0);
      continue;
    }
    bool& mine = reaches[n->get()];
    for (const auto& operand : operands) mine = mine || reaches[operand.get()];
    if (mine) order.push_back(*n);
    stack.pop_back();
  }
  return order;
}

inline std::string describe(const lazy::tensor& t) {
  return xlite::detail::message(name(t.type()), t.shape());
}

} // namespace autodiff::detail

// The gradients of `output` with respect to each of `inputs`: gradient k has the shape and
// dtype of inputs[k]. `output` must be a floating-point scalar (a loss), unless
// `output_gradient` (output's shape) is given, the vector of the vector-Jacobian product.
// An input that `output` does not depend on gets zeros. The inputs may be any tensors of
// the trace, device values (parameters) or pending results.
inline std::vector<lazy::tensor> grad(const lazy::tensor& output, std::span<const lazy::tensor> inputs,
                                      const std::optional<lazy::tensor>& output_gradient = std::nullopt) {
  using autodiff::detail::describe;
  if (category(output.type()) != dtype_category::floating_point) {
    throw dtype_error(xlite::detail::message("grad: the output is ", describe(output),
                                             "; only a floating-point output has a gradient"));
  }
  ir::node_ptr seed;
  if (output_gradient) {
    if (output_gradient->shape() != output.shape()) {
      throw shape_error(xlite::detail::message("grad: output_gradient ", describe(*output_gradient),
                                               " does not match the output ", describe(output)));
    }
    seed = ir::cast(output_gradient->node(), output.type());
  } else if (output.shape().rank() != 0) {
    throw shape_error(xlite::detail::message("grad: the output ", describe(output),
                                             " is not a scalar; reduce it (sum, mean) or pass output_gradient"));
  } else {
    seed = ir::constant(ir::literal::of(1.0), output.type());
  }

  std::vector<ir::node_ptr> targets;
  std::unordered_set<const ir::node*> target_set;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (category(inputs[k].type()) != dtype_category::floating_point) {
      throw dtype_error(xlite::detail::message("grad: input ", k, " is ", describe(inputs[k]),
                                               "; only floating-point inputs have gradients"));
    }
    lazy::detail::common_device("grad", {&output, &inputs[k]});
    targets.push_back(inputs[k].node());
    target_set.insert(targets.back().get());
  }

  // Reverse topological order: a node's gradient is complete before it is passed on.
  std::unordered_map<const ir::node*, ir::node_ptr> adjoint;
  const ir::node_ptr root = output.node();
  adjoint.emplace(root.get(), seed);
  const auto order = autodiff::detail::nodes_between(root, target_set);
  for (auto n = order.rbegin(); n != order.rend(); ++n) {
    const auto found = adjoint.find(n->get());
    if (found == adjoint.end()) continue;
    const std::vector<ir::node_ptr> operand_gradients = autodiff::vjp(*n, found->second);
    for (std::size_t k = 0; k < operand_gradients.size(); ++k) {
      const ir::node_ptr& g = operand_gradients[k];
      if (!g) continue;
      auto [slot, fresh] = adjoint.try_emplace((*n)->operands()[k].get(), g);
      if (!fresh) slot->second = autodiff::detail::add(slot->second, g);
    }
  }

  std::vector<lazy::tensor> gradients;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto found = adjoint.find(targets[k].get());
    ir::node_ptr g = found != adjoint.end()
                         ? ir::cast(found->second, inputs[k].type())
                         : ir::broadcast_to(ir::constant(ir::literal::of(0.0), inputs[k].type()), inputs[k].shape());
    gradients.push_back(lazy::detail::make(inputs[k].device(), std::move(g)));
  }
  return gradients;
}

inline std::vector<lazy::tensor> grad(const lazy::tensor& output, std::initializer_list<lazy::tensor> inputs,
                                      const std::optional<lazy::tensor>& output_gradient = std::nullopt) {
  return grad(output, std::span(inputs.begin(), inputs.size()), output_gradient);
}

} // namespace xlite
