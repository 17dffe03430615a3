#pragma once

// Control flow as graph ops, not unrolled: while_loop and cond hold their bodies as
// subgraphs, so a loop of any trip count is one node and compiles once.
//
// A body is traced like any code, on placeholders: parameter nodes that stand for the values
// the op will pass in. close_over() turns the traced outputs into self-contained subgraphs:
// the placeholders become parameters 0..n-1, and every value the body reads from outside
// (a weight, a tensor computed before the loop) becomes a further parameter, fed by an extra
// operand of the control op. Those captured values are computed once, before the op runs,
// not at every iteration. Constants and iotas stay inside, where the compiler can see them.
//
// A control op's node stands for all its results together; tuple_element(k) nodes read them.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/ir/node.hpp"

namespace xlite::ir {

// The source of a placeholder: it has no value; only a subgraph's parameter reads it.
class placeholder_source final : public parameter_source {};

inline node_ptr placeholder(dtype type, const shape& s) {
  return parameter(std::make_shared<placeholder_source>(), type, s);
}

struct closed_subgraphs {
  std::vector<std::shared_ptr<const graph>> graphs; // one per list of outputs
  std::vector<node_ptr> captures;                   // the outside values they read, in parameter order after the placeholders
};

// Subgraphs computing each list of `outputs` from `placeholders` and the values captured
// from outside (shared by all the lists, so one operand list feeds every subgraph).
inline closed_subgraphs close_over(std::span<const node_ptr> placeholders,
                                   std::span<const std::vector<node_ptr>> outputs) {
  std::vector<node_ptr> boundary(placeholders.begin(), placeholders.end());
  // Which nodes depend on a placeholder: those are the body.
  std::unordered_map<const node*, bool> depends;
  for (const node_ptr& p : placeholders) depends[p.get()] = true;
  const auto capture_if_outside = [&](const node_ptr& n) {
    const bool stays_inside = depends.at(n.get()) || n->code() == op::constant || n->code() == op::iota;
    if (!stays_inside && std::ranges::find(boundary, n) == boundary.end()) boundary.push_back(n);
  };
  // A post-order walk in trace order, so equal programs capture in equal order (and hash
  // equal): a body node, once its operands are known, captures those outside the body.
  for (const auto& list : outputs) {
    for (const node_ptr& out : list) {
      walk_post_order(
          out.get(), [&](const node* n) { return depends.contains(n); },
          [&](const node* n) {
            const bool inside =
                std::ranges::any_of(n->operands(), [&](const node_ptr& o) { return depends.at(o.get()); });
            depends[n] = inside;
            if (inside) {
              for (const node_ptr& operand : n->operands()) capture_if_outside(operand);
            }
          });
      capture_if_outside(out);
    }
  }
  closed_subgraphs result;
  for (const auto& list : outputs) {
    result.graphs.push_back(std::make_shared<const graph>(capture(list, boundary).program));
  }
  result.captures.assign(boundary.begin() + static_cast<std::ptrdiff_t>(placeholders.size()), boundary.end());
  return result;
}

// The nodes a closed subgraph computes when its parameters are `arguments`: the inverse of
// close_over, for passes that work on a body as a trace again (the gradient of cond).
inline std::vector<node_ptr> inline_subgraph(const graph& g, std::span<const node_ptr> arguments) {
  std::vector<node_ptr> values;
  values.reserve(g.instructions.size());
  for (const instruction& ins : g.instructions) {
    if (ins.code == op::parameter) {
      values.push_back(arguments[static_cast<std::size_t>(ins.attrs.ints[0])]);
      continue;
    }
    std::vector<node_ptr> operands;
    operands.reserve(ins.operands.size());
    for (const value_id v : ins.operands) operands.push_back(values[v]);
    values.push_back(make_node(ins.code, ins.type, ins.shape, std::move(operands), ins.attrs));
  }
  std::vector<node_ptr> outputs;
  for (const value_id v : g.outputs) outputs.push_back(values[v]);
  return outputs;
}

namespace detail {

// tuple_element nodes for each result of control node `op_node`, typed like `like`.
inline std::vector<node_ptr> results_of(const node_ptr& op_node, std::span<const node_ptr> like) {
  std::vector<node_ptr> results;
  for (std::size_t k = 0; k < like.size(); ++k) {
    attributes attrs;
    attrs.ints = {static_cast<std::int64_t>(k)};
    results.push_back(make_node(op::tuple_element, like[k]->type(), like[k]->shape(), {op_node}, std::move(attrs)));
  }
  return results;
}

inline void check_same_signature(std::string_view what, std::span<const node_ptr> expected,
                                 std::span<const node_ptr> got, std::string_view expected_name,
                                 std::string_view got_name) {
  if (got.size() != expected.size()) {
    throw value_error(xlite::detail::message(what, ": ", got_name, " gives ", got.size(), " values, ", expected_name,
                                             " has ", expected.size()));
  }
  for (std::size_t k = 0; k < got.size(); ++k) {
    if (got[k]->type() != expected[k]->type() || got[k]->shape() != expected[k]->shape()) {
      throw shape_error(xlite::detail::message(what, ": value ", k, " of ", got_name, " is ", name(got[k]->type()),
                                               got[k]->shape(), ", but ", expected_name, " has ",
                                               name(expected[k]->type()), expected[k]->shape()));
    }
  }
}

inline void check_predicate(std::string_view what, const node_ptr& p) {
  if (p->type() != dtype::boolean || p->shape().numel() != 1) {
    throw value_error(xlite::detail::message(what, ": the predicate must be one bool, got ", name(p->type()),
                                             p->shape()));
  }
}

} // namespace detail

// while cond(state): state = body(state), from `init`. `placeholders` stand for the state
// in the traced `cond_output` (one bool) and `body_output` (the next state).
inline std::vector<node_ptr> while_loop(std::span<const node_ptr> init, std::span<const node_ptr> placeholders,
                                        const node_ptr& cond_output, std::span<const node_ptr> body_output) {
  detail::check_predicate("while_loop", cond_output);
  detail::check_same_signature("while_loop", init, body_output, "the initial state", "the body");
  const std::vector<node_ptr> lists[] = {{reshape(cond_output, shape{})},
                                         std::vector<node_ptr>(body_output.begin(), body_output.end())};
  closed_subgraphs closed = close_over(placeholders, lists);
  std::vector<node_ptr> operands(init.begin(), init.end());
  operands.insert(operands.end(), closed.captures.begin(), closed.captures.end());
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(init.size())};
  attrs.subgraphs = std::move(closed.graphs);
  return detail::results_of(make_node(op::while_loop, dtype::boolean, shape{}, std::move(operands), std::move(attrs)),
                            init);
}

// pred ? on_true(operands) : on_false(operands), of which only the chosen branch runs.
// `placeholders` stand for the operands in both traced branches.
inline std::vector<node_ptr> cond(const node_ptr& predicate, std::span<const node_ptr> operands,
                                  std::span<const node_ptr> placeholders, std::span<const node_ptr> true_output,
                                  std::span<const node_ptr> false_output) {
  detail::check_predicate("cond", predicate);
  detail::check_same_signature("cond", true_output, false_output, "on_true", "on_false");
  const std::vector<node_ptr> lists[] = {std::vector<node_ptr>(true_output.begin(), true_output.end()),
                                         std::vector<node_ptr>(false_output.begin(), false_output.end())};
  closed_subgraphs closed = close_over(placeholders, lists);
  std::vector<node_ptr> all{reshape(predicate, shape{})};
  all.insert(all.end(), operands.begin(), operands.end());
  all.insert(all.end(), closed.captures.begin(), closed.captures.end());
  attributes attrs;
  attrs.subgraphs = std::move(closed.graphs);
  return detail::results_of(make_node(op::cond, dtype::boolean, shape{}, std::move(all), std::move(attrs)),
                            true_output);
}

} // namespace xlite::ir
