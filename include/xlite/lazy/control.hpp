#pragma once

// Control flow captured as graph ops (jax.lax.while_loop and jax.lax.cond; torch_xla's
// while_loop and cond): the body is traced once, on placeholder tensors, and becomes a
// subgraph of one node, so a loop whose trip count depends on data runs on the device
// without a host round trip per iteration, and compiles once whatever the count.
//
//   auto [i, total] = while_loop([](const auto& s) { return s[0] < 10; },
//                                [](const auto& s) { return std::vector{s[0] + 1, s[1] * 2.0f}; },
//                                {zero, x});
//
// A body may read any tensor from outside (weights, values computed before the loop): they
// become operands of the loop, computed once. A tensor made inside a body belongs to it:
// using it outside is an error; return it instead.

#include <concepts>
#include <span>
#include <utility>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/ir/control.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite::lazy {

namespace detail {

inline const xlite::device& device_of(std::string_view what, std::span<const tensor> values) {
  if (values.empty()) throw value_error(xlite::detail::message(what, ": needs at least one tensor"));
  for (const tensor& t : values) {
    if (t.device() != values.front().device()) {
      throw value_error(xlite::detail::message(what, ": tensors on different devices, ", values.front().device(),
                                               " and ", t.device()));
    }
  }
  return values.front().device();
}

// Placeholder tensors standing for `values` in a body, and their nodes. Made inside a
// body_trace_scope, so no barrier sees them.
struct placeholders {
  std::vector<tensor> tensors;
  std::vector<ir::node_ptr> nodes;

  placeholders(const xlite::device& d, std::span<const tensor> values) {
    for (const tensor& v : values) {
      nodes.push_back(ir::placeholder(v.type(), v.shape()));
      tensors.emplace_back(d, nodes.back());
    }
  }
};

inline std::vector<ir::node_ptr> nodes_of(std::span<const tensor> values) {
  std::vector<ir::node_ptr> nodes;
  for (const tensor& t : values) nodes.push_back(t.node());
  return nodes;
}

inline std::vector<tensor> tensors_of(const xlite::device& d, std::vector<ir::node_ptr> nodes) {
  std::vector<tensor> result;
  for (ir::node_ptr& n : nodes) result.emplace_back(d, std::move(n));
  return result;
}

} // namespace detail

// while cond(state): state = body(state); returns the final state. cond returns one bool
// tensor; body returns the next state, of the same dtypes and shapes as `init`.
template <class Cond, class Body>
  requires std::invocable<Cond&, const std::vector<tensor>&> && std::invocable<Body&, const std::vector<tensor>&>
std::vector<tensor> while_loop(Cond&& cond, Body&& body, const std::vector<tensor>& init) {
  const xlite::device& d = detail::device_of("while_loop", init);
  std::vector<ir::node_ptr> placeholders, body_output;
  ir::node_ptr cond_output;
  {
    const detail::body_trace_scope scope;
    const detail::placeholders state(d, init);
    placeholders = state.nodes;
    cond_output = tensor(cond(state.tensors)).node();
    body_output = detail::nodes_of(body(state.tensors));
  }
  return detail::tensors_of(d, ir::while_loop(detail::nodes_of(init), placeholders, cond_output, body_output));
}

// predicate ? on_true(operands) : on_false(operands), where only the chosen branch runs.
// Both branches return tensors of the same dtypes and shapes.
template <class OnTrue, class OnFalse>
  requires std::invocable<OnTrue&, const std::vector<tensor>&> && std::invocable<OnFalse&, const std::vector<tensor>&>
std::vector<tensor> cond(const tensor& predicate, OnTrue&& on_true, OnFalse&& on_false,
                         const std::vector<tensor>& operands) {
  std::vector<tensor> all{predicate};
  all.insert(all.end(), operands.begin(), operands.end());
  const xlite::device& d = detail::device_of("cond", all);
  std::vector<ir::node_ptr> placeholders, true_output, false_output;
  {
    const detail::body_trace_scope scope;
    const detail::placeholders given(d, operands);
    placeholders = given.nodes;
    true_output = detail::nodes_of(on_true(given.tensors));
    false_output = detail::nodes_of(on_false(given.tensors));
  }
  return detail::tensors_of(
      d, ir::cond(predicate.node(), detail::nodes_of(operands), placeholders, true_output, false_output));
}

} // namespace xlite::lazy
