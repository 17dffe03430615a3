#pragma once

// Reverse accumulation over a trace: given the gradients of some nodes (the seeds), the
// gradients of the nodes asked for, as new nodes. Each op contributes its vector-Jacobian
// product (autodiff/vjp.hpp); the control ops, which stand for several results and hold
// their bodies as subgraphs, are differentiated here, since their gradient is itself a
// backward pass over a body.
//
//   - cond: the gradient is a cond on the same predicate whose branches are the backward
//     passes of the forward branches. Each backward branch recomputes its forward branch
//     from the operands (rematerialisation), so the forward cond keeps no residuals and
//     only the taken branch's work is done, twice.
//   - while_loop: not reverse-differentiable, as in JAX: the trip count is known only when
//     the loop runs, and reversing it needs every iteration's state.

#include <cstddef>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "xlite/autodiff/vjp.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/control.hpp"

namespace xlite::autodiff {

namespace detail {

// The nodes of the trace behind `roots` from which one of `targets` can be reached, each after
// the nodes it reads (a topological order). Iterative: a trace can be 10^5 nodes deep.
inline std::vector<ir::node_ptr> nodes_between(std::span<const ir::node_ptr> roots,
                                               const std::unordered_set<const ir::node*>& targets) {
  std::unordered_map<const ir::node*, bool> reaches; // visited -> whether a target is below
  std::vector<ir::node_ptr> order;
  for (const ir::node_ptr& root : roots) {
    if (!reaches.emplace(root.get(), targets.contains(root.get())).second) continue;
    std::vector<std::pair<const ir::node_ptr*, std::size_t>> stack{{&root, 0}};
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
  }
  return order;
}

} // namespace detail

// The gradients of `targets` given `seeds[k]`, the gradient of `roots[k]` (its shape and
// dtype): one node per target, null where no root depends on it.
inline std::vector<ir::node_ptr> backprop(std::span<const ir::node_ptr> roots, std::span<const ir::node_ptr> seeds,
                                          std::span<const ir::node_ptr> targets);

namespace detail {

// The gradients of a cond's operands (null for the predicate and for integer operands), given
// the gradients of its results (null for a result no path to the loss reads).
inline std::vector<ir::node_ptr> cond_vjp(const ir::node& c, std::span<const ir::node_ptr> result_gradients) {
  const std::span<const ir::node_ptr> inputs = std::span(c.operands()).subspan(1); // operands, then captures
  std::vector<ir::node_ptr> outer_operands(inputs.begin(), inputs.end());
  std::vector<ir::node_ptr> placeholders;
  for (const ir::node_ptr& x : inputs) placeholders.push_back(ir::placeholder(x->type(), x->shape()));
  std::vector<std::size_t> seeded; // the results whose gradients the backward branches take
  for (std::size_t j = 0; j < result_gradients.size(); ++j) {
    if (!result_gradients[j]) continue;
    seeded.push_back(j);
    outer_operands.push_back(result_gradients[j]);
    placeholders.push_back(ir::placeholder(result_gradients[j]->type(), result_gradients[j]->shape()));
  }
  std::vector<ir::node_ptr> wanted; // the differentiable inputs' placeholders
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (differentiable(inputs[i]->type())) wanted.push_back(placeholders[i]);
  }
  std::vector<ir::node_ptr> gradients(c.operands().size());
  if (wanted.empty() || seeded.empty()) return gradients;

  const auto backward_branch = [&](const ir::graph& forward) {
    const std::vector<ir::node_ptr> results =
        ir::inline_subgraph(forward, std::span(placeholders).first(inputs.size()));
    std::vector<ir::node_ptr> roots;
    for (const std::size_t j : seeded) roots.push_back(results[j]);
    std::vector<ir::node_ptr> branch = backprop(roots, std::span(placeholders).subspan(inputs.size()), wanted);
    for (std::size_t k = 0; k < branch.size(); ++k) {
      branch[k] = branch[k] ? ir::cast(branch[k], wanted[k]->type()) : zeros_like(wanted[k]);
    }
    return branch;
  };
  const std::vector<ir::node_ptr> on_true = backward_branch(*c.attrs().subgraphs[0]);
  const std::vector<ir::node_ptr> on_false = backward_branch(*c.attrs().subgraphs[1]);
  const std::vector<ir::node_ptr> result = ir::cond(c.operands()[0], outer_operands, placeholders, on_true, on_false);
  for (std::size_t i = 0, k = 0; i < inputs.size(); ++i) {
    if (differentiable(inputs[i]->type())) gradients[1 + i] = result[k++];
  }
  return gradients;
}

} // namespace detail

inline std::vector<ir::node_ptr> backprop(std::span<const ir::node_ptr> roots, std::span<const ir::node_ptr> seeds,
                                          std::span<const ir::node_ptr> targets) {
  std::unordered_set<const ir::node*> target_set;
  for (const ir::node_ptr& t : targets) target_set.insert(t.get());
  // A node's gradient; a control op's, one per result, gathered from its tuple_element nodes.
  std::unordered_map<const ir::node*, ir::node_ptr> adjoint;
  std::unordered_map<const ir::node*, std::vector<ir::node_ptr>> result_adjoints;
  const auto accumulate = [](ir::node_ptr& slot, const ir::node_ptr& g) { slot = slot ? detail::add(slot, g) : g; };
  for (std::size_t k = 0; k < roots.size(); ++k) accumulate(adjoint[roots[k].get()], seeds[k]);

  // Reverse topological order: a node's gradient is complete before it is passed on.
  const std::vector<ir::node_ptr> order = detail::nodes_between(roots, target_set);
  for (auto n = order.rbegin(); n != order.rend(); ++n) {
    const ir::node& y = **n;
    std::vector<ir::node_ptr> operand_gradients;
    if (y.code() == op::tuple_element) {
      const auto found = adjoint.find(&y);
      if (found == adjoint.end()) continue;
      std::vector<ir::node_ptr>& results = result_adjoints[y.operands()[0].get()];
      const auto k = static_cast<std::size_t>(y.attrs().ints[0]);
      if (results.size() <= k) results.resize(k + 1);
      accumulate(results[k], found->second);
      continue;
    }
    if (y.code() == op::cond || y.code() == op::while_loop) {
      const auto found = result_adjoints.find(&y);
      if (found == result_adjoints.end()) continue;
      if (y.code() == op::while_loop) {
        throw value_error("grad: while_loop is not differentiable in reverse mode (its trip count is known only "
                          "when it runs, as in JAX); compute the gradient inside its body, or unroll it");
      }
      found->second.resize(y.attrs().subgraphs[0]->outputs.size());
      operand_gradients = detail::cond_vjp(y, found->second);
    } else {
      const auto found = adjoint.find(&y);
      if (found == adjoint.end()) continue;
      operand_gradients = vjp(*n, found->second);
    }
    for (std::size_t k = 0; k < operand_gradients.size(); ++k) {
      if (operand_gradients[k]) accumulate(adjoint[y.operands()[k].get()], operand_gradients[k]);
    }
  }

  std::vector<ir::node_ptr> gradients;
  for (const ir::node_ptr& t : targets) {
    const auto found = adjoint.find(t.get());
    gradients.push_back(found != adjoint.end() ? found->second : nullptr);
  }
  return gradients;
}

} // namespace xlite::autodiff
