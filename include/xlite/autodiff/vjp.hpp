#pragma once

// The vector-Jacobian product of each op: given a node y = op(x0, x1, ...) and the gradient
// g of a scalar loss with respect to y, the gradients with respect to each operand. Written
// with the IR's own builders, so a gradient is a graph like any other: it fuses, caches and
// runs on the device with the forward pass it belongs to.
//
// Conventions (PyTorch's where it has one, JAX's otherwise; docs/autodiff.md lists them):
//   - integer and bool operands get no gradient (index operands, conditions, comparisons);
//   - floor, ceil, round, argmax and the random generators have zero gradient;
//   - relu'(0) = 0, abs'(0) = 0; clamp passes the gradient where lo <= x <= hi;
//   - minimum/maximum split the gradient equally between equal operands (torch.maximum);
//   - amax/amin split it equally between all elements equal to the result (JAX);
//   - max pooling's window maximum takes all of it, the first one in the window on a tie
//     (PyTorch's and XLA's select-and-scatter);
//   - prod is exact with zeros (no division by a zero element).

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/collective.hpp"
#include "xlite/ir/sharding_ops.hpp"
#include "xlite/ir/window.hpp"

namespace xlite::autodiff {

namespace detail {

using ir::node_ptr;

inline bool differentiable(dtype t) { return category(t) == dtype_category::floating_point; }

inline node_ptr scalar(double value, dtype type) { return ir::constant(ir::literal::of(value), type); }

inline node_ptr binary(op o, node_ptr a, node_ptr b) { return ir::elementwise(o, {std::move(a), std::move(b)}); }
inline node_ptr unary(op o, node_ptr a) { return ir::elementwise(o, {std::move(a)}); }
inline node_ptr add(node_ptr a, node_ptr b) { return binary(op::add, std::move(a), std::move(b)); }
inline node_ptr sub(node_ptr a, node_ptr b) { return binary(op::sub, std::move(a), std::move(b)); }
inline node_ptr mul(node_ptr a, node_ptr b) { return binary(op::mul, std::move(a), std::move(b)); }
inline node_ptr div(node_ptr a, node_ptr b) { return binary(op::div, std::move(a), std::move(b)); }
inline node_ptr select(node_ptr condition, node_ptr a, node_ptr b) {
  return ir::elementwise(op::where, {std::move(condition), std::move(a), std::move(b)});
}
inline node_ptr zeros_like(const node_ptr& x) {
  return ir::broadcast_to(scalar(0, x->type()), x->shape());
}

// g summed down to `target`: the gradient of an operand that was broadcast to g's shape.
inline node_ptr unbroadcast(const node_ptr& g, const shape& target) {
  const shape& from = g->shape();
  if (from == target) return g;
  const std::size_t extra = from.rank() - target.rank();
  std::vector<std::int64_t> axes;
  for (std::size_t a = 0; a < from.rank(); ++a) {
    if (a < extra || (target[a - extra] == 1 && from[a] != 1)) axes.push_back(static_cast<std::int64_t>(a));
  }
  node_ptr summed = axes.empty() ? g : ir::reduce(op::sum, g, axes, true);
  return ir::reshape(summed, target);
}

// The reduction's result (or its gradient) put back to the operand's rank: the reduced
// axes as 1s when the node dropped them.
inline node_ptr with_reduced_axes_kept(const node_ptr& reduced, const ir::node& reduction) {
  if (reduction.attrs().flag) return reduced;
  std::vector<std::int64_t> dims(reduction.operands()[0]->shape().begin(), reduction.operands()[0]->shape().end());
  for (const std::int64_t a : reduction.attrs().ints) dims[static_cast<std::size_t>(a)] = 1;
  return ir::reshape(reduced, shape(dims));
}

inline node_ptr inverse_permute(const node_ptr& g, std::span<const std::int64_t> perm) {
  std::vector<std::int64_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
  return ir::permute(g, inverse);
}

// The gradient of x[start:stop:step, ...]: g put back at the positions it was read from,
// zeros elsewhere. A step s spreads g's elements s apart (a new axis of length s padded
// with zeros after each element, then merged), then padding restores the axis.
inline node_ptr unslice(node_ptr g, const shape& operand, std::span<const std::int64_t> ranges) {
  std::vector<ir::padding> widths;
  for (std::size_t a = 0; a < operand.rank(); ++a) {
    const std::int64_t start = ranges[3 * a], stop = ranges[3 * a + 1], step = ranges[3 * a + 2];
    if (step > 1) {
      const shape& s = g->shape();
      std::vector<std::int64_t> split(s.begin(), s.end());
      split.insert(split.begin() + static_cast<std::ptrdiff_t>(a) + 1, 1);
      std::vector<ir::padding> spread(split.size());
      spread[a + 1] = {0, step - 1};
      g = ir::pad(ir::reshape(g, shape(split)), spread, ir::literal::of(0.0));
      std::vector<std::int64_t> merged(s.begin(), s.end());
      merged[a] *= step;
      g = ir::reshape(g, shape(merged));
      std::vector<ir::slice_range> keep;
      for (std::size_t d = 0; d < merged.size(); ++d) keep.push_back({0, merged[d], 1});
      keep[a].stop = stop - start; // the zeros after the last element may reach past stop
      g = ir::slice(g, keep);
    }
    widths.push_back({start, operand[a] - stop});
  }
  return ir::pad(g, widths, ir::literal::of(0.0));
}

inline std::vector<node_ptr> elementwise_vjp(const ir::node& y, const node_ptr& self, const node_ptr& g) {
  const auto& x = y.operands();
  const dtype t = y.type();
  const auto c = [t](double v) { return scalar(v, t); };
  switch (y.code()) {
  case op::add: return {g, g};
  case op::sub: return {g, unary(op::neg, g)};
  case op::mul: return {mul(g, x[1]), mul(g, x[0])};
  case op::div: return {div(g, x[1]), unary(op::neg, div(mul(g, self), x[1]))};
  case op::neg: return {unary(op::neg, g)};
  case op::where: return {nullptr, select(x[0], g, c(0)), select(x[0], c(0), g)};
  case op::fma: return {mul(g, x[1]), mul(g, x[0]), g};
  case op::minimum:
  case op::maximum: {
    const op wins = y.code() == op::maximum ? op::greater : op::less;
    const node_ptr tie = binary(op::equal, x[0], x[1]);
    const node_ptr half = mul(g, c(0.5));
    return {select(binary(wins, x[0], x[1]), g, select(tie, half, c(0))),
            select(binary(wins, x[1], x[0]), g, select(tie, half, c(0)))};
  }
  case op::clamp: {
    const node_ptr below = binary(op::less, x[0], x[1]), above = binary(op::greater, x[0], x[2]);
    return {select(binary(op::logical_or, below, above), c(0), g), select(below, g, c(0)), select(above, g, c(0))};
  }
  case op::pow: {
    // torch's conventions: d/da is 0 where b == 0, d/db is 0 where a == 0 and b >= 0.
    const node_ptr da = select(binary(op::equal, x[1], c(0)), c(0),
                               mul(x[1], binary(op::pow, x[0], sub(x[1], c(1)))));
    const node_ptr db_undefined =
        binary(op::logical_and, binary(op::equal, x[0], c(0)), binary(op::greater_equal, x[1], c(0)));
    const node_ptr db = select(db_undefined, c(0), mul(self, unary(op::log, x[0])));
    return {mul(g, da), mul(g, db)};
  }
  case op::abs: {
    const node_ptr sign = select(binary(op::greater, x[0], c(0)), c(1), select(binary(op::less, x[0], c(0)), c(-1), c(0)));
    return {mul(g, sign)};
  }
  case op::exp: return {mul(g, self)};
  case op::log: return {div(g, x[0])};
  case op::log1p: return {div(g, add(x[0], c(1)))};
  case op::sqrt: return {div(mul(g, c(0.5)), self)};
  case op::rsqrt: return {mul(g, mul(c(-0.5), div(self, x[0])))};
  case op::tanh: return {mul(g, sub(c(1), mul(self, self)))};
  case op::sigmoid: return {mul(g, mul(self, sub(c(1), self)))};
  case op::relu: return {select(binary(op::greater, self, c(0)), g, c(0))};
  case op::gelu: {
    // gelu(x) = x * Phi(x), so gelu'(x) = Phi(x) + x * phi(x); Phi(x) = gelu(x) / x (0.5 at
    // 0) saves an erf op, and phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
    const node_ptr cdf = select(binary(op::equal, x[0], c(0)), c(0.5), div(self, x[0]));
    const node_ptr pdf = mul(unary(op::exp, mul(mul(x[0], x[0]), c(-0.5))), c(0.3989422804014327));
    return {mul(g, add(cdf, mul(x[0], pdf)))};
  }
  case op::sin: return {mul(g, unary(op::cos, x[0]))};
  case op::cos: return {unary(op::neg, mul(g, unary(op::sin, x[0])))};
  case op::floor:
  case op::ceil:
  case op::round: return {zeros_like(x[0])};
  case op::cast: return {differentiable(x[0]->type()) ? ir::cast(g, x[0]->type()) : nullptr};
  default: return std::vector<node_ptr>(x.size()); // comparisons and logical ops
  }
}

inline std::vector<node_ptr> reduction_vjp(const ir::node& y, const node_ptr& self, const node_ptr& g) {
  const node_ptr& x = y.operands()[0];
  const dtype t = y.type();
  const node_ptr spread = ir::broadcast_to(with_reduced_axes_kept(g, y), x->shape());
  switch (y.code()) {
  case op::sum: return {spread};
  case op::mean: {
    std::int64_t count = 1;
    for (const std::int64_t a : y.attrs().ints) count *= x->shape()[static_cast<std::size_t>(a)];
    return {div(spread, scalar(static_cast<double>(count), t))};
  }
  case op::max:
  case op::min: {
    const node_ptr chosen = binary(op::equal, x, with_reduced_axes_kept(self, y));
    const node_ptr ties = ir::reduce(op::sum, ir::cast(chosen, t), y.attrs().ints, true);
    return {select(chosen, div(spread, ties), scalar(0, t))};
  }
  case op::prod: {
    // d prod / d x_i = the product of the others: prod / x_i without zeros; with one zero,
    // the product of the nonzeros at the zero and 0 elsewhere; with two or more, 0.
    const node_ptr zero = scalar(0, t), one = scalar(1, t);
    const node_ptr is_zero = binary(op::equal, x, zero);
    const node_ptr zeros = ir::reduce(op::sum, ir::cast(is_zero, t), y.attrs().ints, true);
    const node_ptr nonzero_product = ir::reduce(op::prod, select(is_zero, one, x), y.attrs().ints, true);
    const node_ptr others = select(binary(op::equal, zeros, zero), div(with_reduced_axes_kept(self, y), x),
                                   select(binary(op::logical_and, is_zero, binary(op::equal, zeros, one)),
                                          nonzero_product, zero));
    return {mul(spread, others)};
  }
  default: return {nullptr}; // argmax
  }
}

inline std::vector<node_ptr> layout_vjp(const ir::node& y, const node_ptr& g) {
  const auto& x = y.operands();
  const auto& ints = y.attrs().ints;
  switch (y.code()) {
  case op::reshape: return {ir::reshape(g, x[0]->shape())};
  case op::permute: return {inverse_permute(g, ints)};
  case op::broadcast_to: return {unbroadcast(g, x[0]->shape())};
  case op::slice: return {unslice(g, x[0]->shape(), ints)};
  case op::pad: {
    std::vector<ir::slice_range> inner;
    for (std::size_t a = 0; a < x[0]->shape().rank(); ++a) inner.push_back({ints[2 * a], ints[2 * a] + x[0]->shape()[a], 1});
    return {ir::slice(g, inner)};
  }
  case op::concat: {
    const auto axis = static_cast<std::size_t>(ints[0]);
    std::vector<node_ptr> parts;
    std::int64_t offset = 0;
    for (const node_ptr& part : x) {
      std::vector<ir::slice_range> ranges;
      for (std::size_t a = 0; a < g->shape().rank(); ++a) ranges.push_back({0, g->shape()[a], 1});
      ranges[axis] = {offset, offset + part->shape()[axis], 1};
      offset += part->shape()[axis];
      parts.push_back(ir::slice(g, ranges));
    }
    return parts;
  }
  // gather and index_select are adjoint to scatter_add and index_add, in pairs.
  case op::gather: return {ir::scatter_add(g, ints[0], x[1], x[0]->shape()), nullptr};
  case op::index_select: return {ir::index_add(g, ints[0], x[1], x[0]->shape()[static_cast<std::size_t>(ints[0])]), nullptr};
  case op::scatter_add: return {ir::gather(g, ints[0], x[1]), nullptr};
  case op::index_add: return {ir::index_select(g, ints[0], x[1]), nullptr};
  // The gradient of an annotated value is laid out as the value is (FSDP's sharded gradients).
  // (A partial value's gradient is whole: it cannot be made partial.)
  case op::mark_sharding: {
    const ir::sharding s = ir::sharding::from_ints(ints);
    return {s.is_partial() ? g : ir::mark_sharding(g, s)};
  }
  default: throw value_error(xlite::detail::message("grad: no gradient rule for ", name(y.code())));
  }
}

// The window ops are linear in their data operand and pair up as adjoints; x of the max ops
// only chooses positions (piecewise constant) and gets no gradient.
inline std::vector<node_ptr> window_vjp(const ir::node& y, const node_ptr& g) {
  const auto& x = y.operands();
  const ir::window2d w = ir::window2d::from(y.attrs().ints);
  switch (y.code()) {
  case op::unfold: return {ir::fold(g, w, x[0]->shape()[2], x[0]->shape()[3])};
  case op::fold: return {ir::unfold(g, w)};
  case op::select_window_max: return {nullptr, ir::scatter_window_max(x[0], g, w)};
  case op::scatter_window_max: return {nullptr, ir::select_window_max(x[0], g, w)};
  default: throw value_error(xlite::detail::message("grad: no gradient rule for ", name(y.code())));
  }
}

// y = op(a) op(b), op a transpose where y's flag says. Each gradient is one product of g and
// the other operand, with transpose flags, so no transposed copy is stored: for a stored
// transposed, its gradient is the transposed product.
inline std::vector<node_ptr> matmul_vjp(const ir::node& y, const node_ptr& g) {
  const node_ptr &a = y.operands()[0], &b = y.operands()[1];
  const bool ta = y.attrs().ints[0] != 0, tb = y.attrs().ints[1] != 0;
  const node_ptr da = ta ? ir::matmul(b, g, tb, true) : ir::matmul(g, b, false, !tb);
  const node_ptr db = tb ? ir::matmul(g, a, true, ta) : ir::matmul(a, g, !ta, false);
  return {unbroadcast(da, a->shape()), unbroadcast(db, b->shape())};
}

// The gradient of a collective is the collective that moves the gradient back (the adjoint
// of a linear map): a summing all_reduce is its own, all_gather and a summing
// reduce_scatter are each other's, all_to_all swaps its dimensions, collective_permute
// reverses its pairs. Products, minima and maxima across devices have no gradient here.
inline std::vector<ir::node_ptr> collective_vjp(const ir::node& y, const ir::node_ptr& g) {
  const std::span<const std::int64_t> ints = y.attrs().ints;
  const std::int64_t site = ir::derived_collective_site(y.attrs().value.integer, "(gradient)");
  const auto summing = [&](std::size_t at) {
    if (static_cast<ir::reduce_type>(ints[at]) != ir::reduce_type::sum) {
      throw value_error(xlite::detail::message("vjp: ", name(y.code()), " with ",
                                               name(static_cast<ir::reduce_type>(ints[at])),
                                               " has no gradient; only sum is differentiated"));
    }
  };
  switch (y.code()) {
  case op::all_reduce:
    summing(0);
    return {ir::all_reduce(g, ir::reduce_type::sum, y.attrs().value.real, ir::groups_of(ints, 1), site)};
  case op::all_gather:
    return {ir::reduce_scatter(g, ir::reduce_type::sum, 1.0, ints[0], ir::groups_of(ints, 1), site)};
  case op::reduce_scatter: {
    summing(0);
    const ir::node_ptr gathered = ir::all_gather(g, ints[1], ir::groups_of(ints, 2), site);
    const double scale = y.attrs().value.real;
    if (scale == 1.0) return {gathered};
    return {ir::elementwise(op::mul, {gathered, scalar(scale, g->type())})};
  }
  case op::all_to_all:
    return {ir::all_to_all(g, ints[1], ints[0], ints[2], ir::groups_of(ints, 3), site)};
  case op::local_shard:
    throw value_error("vjp: local_shard is made by the SPMD partitioner, after differentiation");
  default: {
    ir::permute_pairs reversed;
    for (const auto& [source, target] : ir::pairs_of(ints)) reversed.emplace_back(target, source);
    return {ir::collective_permute(g, reversed, site)};
  }
  }
}

} // namespace detail

// The gradients of y's operands, given the gradient g of y (y's shape and dtype); `self` is
// y's own node. Null where an operand gets no gradient (integer operands, conditions).
inline std::vector<ir::node_ptr> vjp(const ir::node_ptr& self, const ir::node_ptr& g) {
  const ir::node& y = *self;
  switch (info(y.code()).kind) {
  case op_kind::elementwise: {
    std::vector<ir::node_ptr> gradients = detail::elementwise_vjp(y, self, g);
    for (std::size_t k = 0; k < gradients.size(); ++k) {
      if (gradients[k]) gradients[k] = detail::unbroadcast(gradients[k], y.operands()[k]->shape());
    }
    return gradients;
  }
  case op_kind::reduction: return detail::reduction_vjp(y, self, g);
  case op_kind::layout: return detail::layout_vjp(y, g);
  case op_kind::contraction: return detail::matmul_vjp(y, g);
  case op_kind::window: return detail::window_vjp(y, g);
  case op_kind::random: return {nullptr};
  case op_kind::source: return {};
  case op_kind::collective:
    return detail::collective_vjp(y, g);
  case op_kind::control: break;
  }
  // A control op stands for several results; its gradient is a backward pass over its body.
  throw value_error(xlite::detail::message("vjp: ", name(y.code()),
                                           " has no single-result gradient; autodiff::backprop differentiates it"));
}

} // namespace xlite::autodiff
