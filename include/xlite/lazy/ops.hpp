#pragma once

// The ops on lazy tensors: the static layer's op set (core/op.hpp) and the layout ops, each
// recording one node. Scalars follow PyTorch/XLA: 0 and 1 become constants of the graph,
// any other value a graph parameter, so a step whose learning rate changes every time is
// still one graph; XLITE_NO_SPECIAL_SCALARS=1 makes 0 and 1 parameters too.
//
// Errors (shapes that do not broadcast, an axis out of range) are thrown here, when the
// op is traced, and name the op and the shapes.

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/env.hpp"
#include "xlite/core/op.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/device_data.hpp"

namespace xlite::lazy {

template <class S>
concept scalar = std::is_arithmetic_v<S>;

namespace detail {

inline bool special_scalars_enabled() {
  static const bool enabled = env_integer("XLITE_NO_SPECIAL_SCALARS", 0, 1).value_or(0) == 0;
  return enabled;
}

template <scalar S>
ir::literal literal_of(S value) {
  return std::is_floating_point_v<S> ? ir::literal::of(static_cast<double>(value))
                                     : ir::literal::of(static_cast<std::int64_t>(value));
}

// A scalar as a graph parameter of dtype `type` on device d: a new value, same graph.
template <scalar S>
ir::node_ptr scalar_parameter(S value, dtype type, const xlite::device& d) {
  const runtime::allocating_on on(d);
  auto data = runtime::make_buffer(type, shape{});
  visit_dtype(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    data->as<T>()[0] = static_cast<T>(value);
  });
  return ir::parameter(std::make_shared<runtime::device_data>(d, std::move(data)), type, shape{});
}

// A scalar as a node of dtype `type` on device d: 0 and 1 are constants, others parameters.
template <scalar S>
ir::node_ptr scalar_node(S value, dtype type, const xlite::device& d) {
  const bool special = (value == S(0) && !std::signbit(static_cast<double>(value))) || value == S(1);
  if (special && special_scalars_enabled()) return ir::constant(literal_of(value), type);
  return scalar_parameter(value, type, d);
}

template <scalar S>
ir::node_ptr scalar_for(const tensor& t, S value) {
  return scalar_node(value, promote_with_scalar(t.type(), scalar_category_v<S>), t.device());
}

inline const xlite::device& common_device(std::string_view op_name, std::initializer_list<const tensor*> operands) {
  const xlite::device& d = (*operands.begin())->device();
  for (const tensor* t : operands) {
    if (t->device() != d) {
      throw value_error(xlite::detail::message(op_name, ": operands on different devices, ", d, " and ", t->device(),
                                               "; move one first"));
    }
  }
  return d;
}

inline tensor make(const xlite::device& d, ir::node_ptr n) { return tensor(d, std::move(n)); }

} // namespace detail

// ---- element-wise -------------------------------------------------------------------------------

namespace detail {

// Operands by pointer: copying a handle costs an atomic increment and decrement once the
// process has a second thread, a tenth of tracing an op.
inline tensor elementwise_of(op o, std::span<const tensor* const> operands) {
  if (operands.empty()) throw value_error(xlite::detail::message(name(o), ": no operands"));
  std::vector<ir::node_ptr> nodes;
  nodes.reserve(operands.size());
  const xlite::device& d = operands[0]->device();
  for (const tensor* t : operands) {
    if (t->device() != d) common_device(name(o), {operands[0], t});
    nodes.push_back(t->node());
  }
  return make(d, ir::elementwise(o, std::move(nodes)));
}

} // namespace detail

inline tensor elementwise(op o, std::initializer_list<tensor> operands) {
  std::vector<const tensor*> pointers;
  for (const tensor& t : operands) pointers.push_back(&t);
  return detail::elementwise_of(o, pointers);
}

#define XLITE_LAZY_BINARY(function, code)                                                                              \
  inline tensor function(const tensor& a, const tensor& b) {                                                           \
    const tensor* operands[] = {&a, &b};                                                                               \
    return detail::elementwise_of(op::code, operands);                                                                 \
  }                                                                                                                    \
  template <scalar S>                                                                                                  \
  tensor function(const tensor& a, S b) {                                                                              \
    return detail::make(a.device(), ir::elementwise(op::code, {a.node(), detail::scalar_for(a, b)}));                 \
  }                                                                                                                    \
  template <scalar S>                                                                                                  \
  tensor function(S a, const tensor& b) {                                                                              \
    return detail::make(b.device(), ir::elementwise(op::code, {detail::scalar_for(b, a), b.node()}));                 \
  }

XLITE_LAZY_BINARY(operator+, add)
XLITE_LAZY_BINARY(operator-, sub)
XLITE_LAZY_BINARY(operator*, mul)
XLITE_LAZY_BINARY(operator/, div)
XLITE_LAZY_BINARY(operator==, equal)
XLITE_LAZY_BINARY(operator!=, not_equal)
XLITE_LAZY_BINARY(operator<, less)
XLITE_LAZY_BINARY(operator<=, less_equal)
XLITE_LAZY_BINARY(operator>, greater)
XLITE_LAZY_BINARY(operator>=, greater_equal)
XLITE_LAZY_BINARY(operator&&, logical_and)
XLITE_LAZY_BINARY(operator||, logical_or)
XLITE_LAZY_BINARY(minimum, minimum)
XLITE_LAZY_BINARY(maximum, maximum)
XLITE_LAZY_BINARY(min, minimum)
XLITE_LAZY_BINARY(max, maximum)
XLITE_LAZY_BINARY(pow, pow)
#undef XLITE_LAZY_BINARY

#define XLITE_LAZY_UNARY(function, code)                                                                               \
  inline tensor function(const tensor& x) {                                                                            \
    const tensor* operands[] = {&x};                                                                                   \
    return detail::elementwise_of(op::code, operands);                                                                 \
  }

XLITE_LAZY_UNARY(operator-, neg)
XLITE_LAZY_UNARY(operator!, logical_not)
XLITE_LAZY_UNARY(abs, abs)
XLITE_LAZY_UNARY(exp, exp)
XLITE_LAZY_UNARY(log, log)
XLITE_LAZY_UNARY(log1p, log1p)
XLITE_LAZY_UNARY(sqrt, sqrt)
XLITE_LAZY_UNARY(rsqrt, rsqrt)
XLITE_LAZY_UNARY(tanh, tanh)
XLITE_LAZY_UNARY(sigmoid, sigmoid)
XLITE_LAZY_UNARY(relu, relu)
XLITE_LAZY_UNARY(gelu, gelu)
XLITE_LAZY_UNARY(sin, sin)
XLITE_LAZY_UNARY(cos, cos)
XLITE_LAZY_UNARY(floor, floor)
XLITE_LAZY_UNARY(ceil, ceil)
XLITE_LAZY_UNARY(round, round)
#undef XLITE_LAZY_UNARY

inline tensor where(const tensor& condition, const tensor& a, const tensor& b) {
  const tensor* operands[] = {&condition, &a, &b};
  return detail::elementwise_of(op::where, operands);
}
inline tensor fma(const tensor& a, const tensor& b, const tensor& c) {
  const tensor* operands[] = {&a, &b, &c};
  return detail::elementwise_of(op::fma, operands);
}
inline tensor clamp(const tensor& x, const tensor& lo, const tensor& hi) {
  const tensor* operands[] = {&x, &lo, &hi};
  return detail::elementwise_of(op::clamp, operands);
}
template <scalar S>
tensor clamp(const tensor& x, S lo, S hi) {
  return detail::make(x.device(),
                      ir::elementwise(op::clamp, {x.node(), detail::scalar_for(x, lo), detail::scalar_for(x, hi)}));
}

inline tensor cast(const tensor& x, dtype to) { return detail::make(x.device(), ir::cast(x.node(), to)); }
template <element_type T>
tensor cast(const tensor& x) {
  return cast(x, dtype_of_v<T>);
}

// ---- reductions ---------------------------------------------------------------------------------

#define XLITE_LAZY_REDUCTION(function, code)                                                                           \
  inline tensor function(const tensor& x, std::span<const std::int64_t> axes = {}, bool keepdims = false) {            \
    return detail::make(x.device(), ir::reduce(op::code, x.node(), axes, keepdims));                                   \
  }                                                                                                                    \
  inline tensor function(const tensor& x, std::initializer_list<std::int64_t> axes, bool keepdims = false) {           \
    return function(x, std::span(axes.begin(), axes.size()), keepdims);                                                \
  }

XLITE_LAZY_REDUCTION(sum, sum)
XLITE_LAZY_REDUCTION(mean, mean)
XLITE_LAZY_REDUCTION(amax, max)
XLITE_LAZY_REDUCTION(amin, min)
XLITE_LAZY_REDUCTION(prod, prod)
#undef XLITE_LAZY_REDUCTION

// The index of the first maximum along `axis`, or in the flattened tensor.
inline tensor argmax(const tensor& x, std::int64_t axis, bool keepdims = false) {
  const std::int64_t axes[] = {axis};
  return detail::make(x.device(), ir::reduce(op::argmax, x.node(), axes, keepdims));
}
inline tensor argmax(const tensor& x) {
  return detail::make(x.device(), ir::reduce(op::argmax, ir::reshape(x.node(), shape{x.size()}), {}, false));
}

// ---- layout -------------------------------------------------------------------------------------

// One dimension may be -1: it takes what the others leave (torch.reshape).
inline tensor reshape(const tensor& x, std::initializer_list<std::int64_t> dims) {
  std::vector<std::int64_t> to(dims);
  std::int64_t known = 1;
  std::size_t inferred = to.size();
  for (std::size_t a = 0; a < to.size(); ++a) {
    if (to[a] == -1 && inferred == to.size()) {
      inferred = a;
    } else {
      known *= to[a];
    }
  }
  if (inferred < to.size()) {
    if (known == 0 || x.size() % known != 0) {
      throw shape_error(xlite::detail::message("reshape: cannot reshape ", x.shape(), " (", x.size(),
                                               " elements) to a shape with ", known, " elements per -1"));
    }
    to[inferred] = x.size() / known;
  }
  return detail::make(x.device(), ir::reshape(x.node(), shape(to)));
}
inline tensor reshape(const tensor& x, const shape& to) { return detail::make(x.device(), ir::reshape(x.node(), to)); }

inline tensor permute(const tensor& x, std::initializer_list<std::int64_t> perm) {
  return detail::make(x.device(), ir::permute(x.node(), std::span(perm.begin(), perm.size())));
}

// Swaps two axes (torch.transpose); transpose(x) swaps the last two.
inline tensor transpose(const tensor& x, std::int64_t axis0 = -2, std::int64_t axis1 = -1) {
  const std::size_t rank = x.shape().rank();
  std::vector<std::int64_t> perm(rank);
  for (std::size_t a = 0; a < rank; ++a) perm[a] = static_cast<std::int64_t>(a);
  std::swap(perm[normalize_axis(axis0, rank, "transpose")], perm[normalize_axis(axis1, rank, "transpose")]);
  return detail::make(x.device(), ir::permute(x.node(), perm));
}

inline tensor broadcast_to(const tensor& x, const shape& to) {
  return detail::make(x.device(), ir::broadcast_to(x.node(), to));
}

// x[start:stop:step] along `axis`, with Python's rules for negative and out-of-range
// bounds (step must be positive).
inline tensor slice(const tensor& x, std::int64_t axis, std::int64_t start, std::int64_t stop, std::int64_t step = 1) {
  const shape& s = x.shape();
  const std::size_t a = normalize_axis(axis, s.rank(), "slice");
  if (step < 1) throw value_error(xlite::detail::message("slice: step must be positive, got ", step));
  const auto clip = [&](std::int64_t i) { return std::clamp(i < 0 ? i + s[a] : i, std::int64_t{0}, s[a]); };
  std::vector<ir::slice_range> ranges;
  for (std::size_t d = 0; d < s.rank(); ++d) ranges.push_back({0, s[d], 1});
  ranges[a] = {clip(start), std::max(clip(start), clip(stop)), step};
  return detail::make(x.device(), ir::slice(x.node(), ranges));
}

inline tensor concat(std::initializer_list<tensor> parts, std::int64_t axis = 0) {
  if (parts.size() == 0) throw value_error("concat: needs at least one tensor");
  std::vector<ir::node_ptr> nodes;
  for (const tensor& t : parts) {
    detail::common_device("concat", {&*parts.begin(), &t});
    nodes.push_back(t.node());
  }
  return detail::make(parts.begin()->device(), ir::concat(std::move(nodes), axis));
}

// x surrounded by `fill`: widths[a] = {elements before, elements after} along axis a
// (numpy.pad's pad_width with constant mode).
template <scalar S = int>
tensor pad(const tensor& x, std::span<const ir::padding> widths, S fill = 0) {
  return detail::make(x.device(), ir::pad(x.node(), widths, detail::literal_of(fill)));
}
template <scalar S = int>
tensor pad(const tensor& x, std::initializer_list<ir::padding> widths, S fill = 0) {
  return pad(x, std::span(widths.begin(), widths.size()), fill);
}

// torch.gather: result[i][j] = x[index[i][j]][j] for axis 0, and so on.
inline tensor gather(const tensor& x, std::int64_t axis, const tensor& index) {
  return detail::make(detail::common_device("gather", {&x, &index}), ir::gather(x.node(), axis, index.node()));
}

// torch.index_select: the slices of x at the positions of the 1-D `index` along `axis`.
inline tensor index_select(const tensor& x, std::int64_t axis, const tensor& index) {
  return detail::make(detail::common_device("index_select", {&x, &index}),
                      ir::index_select(x.node(), axis, index.node()));
}

// torch.scatter_add: input, with each src[p] for p over index's shape added at p with p[dim]
// replaced by index[p]. index fits src on every axis, and input on every axis but dim.
inline tensor scatter_add(const tensor& input, std::int64_t dim, const tensor& index, const tensor& src) {
  const xlite::device& d = detail::common_device("scatter_add", {&input, &index, &src});
  if (src.type() != input.type()) {
    throw dtype_error(xlite::detail::message("scatter_add: src is ", name(src.type()), ", input ", name(input.type())));
  }
  const shape &at = index.shape(), &given = src.shape();
  bool fits = at.rank() == given.rank();
  std::vector<ir::slice_range> part;
  for (std::size_t a = 0; fits && a < at.rank(); ++a) {
    fits = at[a] <= given[a];
    part.push_back({0, at[a], 1});
  }
  if (!fits) {
    throw shape_error(xlite::detail::message("scatter_add: index of shape ", at, " does not fit src of shape ", given));
  }
  const ir::node_ptr added = ir::scatter_add(ir::slice(src.node(), part), dim, index.node(), input.shape());
  return input + detail::make(d, added);
}

// torch.index_add: input, with slice k of source along dim added at position index[k]
// (1-D), so that positions named twice add up.
inline tensor index_add(const tensor& input, std::int64_t dim, const tensor& index, const tensor& source) {
  const xlite::device& d = detail::common_device("index_add", {&input, &index, &source});
  if (source.type() != input.type()) {
    throw dtype_error(
        xlite::detail::message("index_add: source is ", name(source.type()), ", input ", name(input.type())));
  }
  const std::size_t a = normalize_axis(dim, input.shape().rank(), "index_add");
  const ir::node_ptr added = ir::index_add(source.node(), dim, index.node(), input.shape()[a]);
  if (added->shape() != input.shape()) {
    throw shape_error(xlite::detail::message("index_add: source of shape ", source.shape(),
                                             " does not match input of shape ", input.shape(), " on axes other than ",
                                             a));
  }
  return input + detail::make(d, added);
}

inline tensor matmul(const tensor& a, const tensor& b) {
  return detail::make(detail::common_device("matmul", {&a, &b}), ir::matmul(a.node(), b.node()));
}

// ---- composites: written with the ops above, so later passes (autodiff, AMP) see them --------

// softmax along `axis`, computed as exp(x - max) / sum(exp(x - max)) for range safety.
inline tensor softmax(const tensor& x, std::int64_t axis = -1) {
  const tensor shifted = x - amax(x, {axis}, true);
  const tensor e = exp(shifted);
  return e / sum(e, {axis}, true);
}

inline tensor log_softmax(const tensor& x, std::int64_t axis = -1) {
  const tensor shifted = x - amax(x, {axis}, true);
  return shifted - log(sum(exp(shifted), {axis}, true));
}

// torch.nn.functional.one_hot: a new last axis of `classes` elements, 1 at each index and 0
// elsewhere (an index outside [0, classes) gives a row of zeros). Computed as
// index == iota, so it fuses into its users.
inline tensor one_hot(const tensor& index, std::int64_t classes, dtype type = dtype::i64) {
  if (category(index.type()) != dtype_category::integral) {
    throw dtype_error(xlite::detail::message("one_hot: indices must be integers, got ", name(index.type())));
  }
  if (classes < 1) throw value_error(xlite::detail::message("one_hot: classes must be positive, got ", classes));
  std::vector<std::int64_t> dims(index.shape().begin(), index.shape().end());
  dims.push_back(1);
  const tensor column = reshape(index, shape(dims));
  const tensor classes_row = detail::make(index.device(), ir::iota(index.type(), shape{classes}, 0));
  return cast(column == classes_row, type);
}

} // namespace xlite::lazy
