#pragma once

// Making IR nodes. Each function checks its operands, infers the result's shape and dtype
// (PyTorch's promotion rules, NumPy's broadcasting), and throws an xlite::error naming the
// op and the shapes when they do not fit, so a mistake is reported where it was traced.
//
// Element-wise nodes are made with operands of one compute dtype: where PyTorch promotes
// (int32 + float32, exp of an integer, a comparison of mixed types), a cast node is
// inserted. Every later stage relies on it: an element-wise node computes in one dtype.

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/node.hpp"

namespace xlite::ir {

inline node_ptr make_node(op code, dtype type, const shape& s, std::vector<node_ptr> operands, attributes attrs = {},
                          std::shared_ptr<const parameter_source> source = nullptr) {
  return std::make_shared<const node>(code, type, s, std::move(operands), std::move(attrs), std::move(source));
}

// ---- sources --------------------------------------------------------------------------------

// A parameter reads `source`, which must exist: capture tells parameters apart by it.
inline node_ptr parameter(std::shared_ptr<const parameter_source> source, dtype type, const shape& s) {
  if (!source) throw value_error("parameter: a parameter node needs a source");
  return make_node(op::parameter, type, s, {}, {}, std::move(source));
}

// A rank-0 constant; broadcast_to makes it any shape.
inline node_ptr constant(literal value, dtype type) {
  attributes attrs;
  attrs.value = value;
  return make_node(op::constant, type, shape{}, {}, std::move(attrs));
}

// Each element is its index along `axis`.
inline node_ptr iota(dtype type, const shape& s, std::int64_t axis) {
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(normalize_axis(axis, s.rank(), "iota"))};
  return make_node(op::iota, type, s, {}, std::move(attrs));
}

// ---- element-wise -----------------------------------------------------------------------------

// x as `type`: x itself when it already is.
inline node_ptr cast(const node_ptr& x, dtype type) {
  if (x->type() == type) return x;
  return make_node(op::cast, type, x->shape(), {x});
}

namespace detail {

inline const char* kind_word(dtype t) {
  switch (category(t)) {
  case dtype_category::boolean:
    return "bool";
  case dtype_category::integral:
    return "integral";
  case dtype_category::floating_point:
    break;
  }
  return "floating-point";
}

// The dtype an element-wise op computes in, and its result dtype.
struct elementwise_types {
  dtype compute;
  dtype result;
};

inline elementwise_types elementwise_dtypes(op o, std::span<const node_ptr> operands) {
  std::array<dtype, 3> types{};
  for (std::size_t k = 0; k < operands.size(); ++k) types[k] = operands[k]->type();
  const std::span<const dtype> given(types.data(), operands.size());
  switch (o) {
  case op::logical_and:
  case op::logical_or:
  case op::logical_not:
    return {dtype::boolean, dtype::boolean};
  case op::equal:
  case op::not_equal:
  case op::less:
  case op::less_equal:
  case op::greater:
  case op::greater_equal: {
    dtype common = given[0];
    for (const dtype t : given.subspan(1)) common = promote_types(common, t);
    return {common, dtype::boolean};
  }
  default: {
    const dtype result = result_dtype(o, given);
    const bool arithmetic = o != op::where && o != op::cast;
    if (arithmetic && result == dtype::boolean) {
      throw dtype_error(xlite::detail::message(name(o), ": arithmetic on bool operands; write where(mask, a, b), ",
                                               "or cast the mask to a number first"));
    }
    return {result, result};
  }
  }
}

} // namespace detail

// An element-wise op (not cast: see cast()) over broadcast operands.
inline node_ptr elementwise(op o, std::vector<node_ptr> operands) {
  if (info(o).kind != op_kind::elementwise || o == op::cast) {
    throw value_error(xlite::detail::message("elementwise: ", name(o), " is not an element-wise op"));
  }
  if (operands.size() != info(o).arity) {
    throw value_error(
        xlite::detail::message(name(o), ": takes ", info(o).arity, " operands, got ", operands.size()));
  }
  std::array<const shape*, max_elementwise_arity> shapes{};
  for (std::size_t k = 0; k < operands.size(); ++k) shapes[k] = &operands[k]->shape();
  const shape result_shape = broadcast_shapes(std::span(shapes.data(), operands.size()), name(o));
  const auto [compute, result] = detail::elementwise_dtypes(o, operands);
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const dtype wanted = o == op::where && k == 0 ? dtype::boolean : compute;
    if (operands[k]->type() != wanted) operands[k] = cast(operands[k], wanted); // else no refcount traffic
  }
  return make_node(o, result, result_shape, std::move(operands));
}

// ---- reductions -------------------------------------------------------------------------------

// Reduces x over `axes` (every axis when empty), as torch.sum(x, dim, keepdim) does.
inline node_ptr reduce(op o, const node_ptr& x, std::span<const std::int64_t> axes, bool keepdims) {
  if (info(o).kind != op_kind::reduction) {
    throw value_error(xlite::detail::message("reduce: ", name(o), " is not a reduction"));
  }
  const shape& in = x->shape();
  std::array<bool, max_rank> reduced{};
  if (axes.empty()) {
    std::fill_n(reduced.begin(), in.rank(), true);
  } else {
    for (const std::int64_t axis : axes) {
      const std::size_t a = normalize_axis(axis, in.rank(), name(o));
      if (reduced[a]) {
        throw index_error(xlite::detail::message(name(o), ": axis ", axis, " is given twice for shape ", in));
      }
      reduced[a] = true;
    }
  }
  attributes attrs;
  attrs.flag = keepdims;
  std::vector<std::int64_t> out_dims;
  for (std::size_t a = 0; a < in.rank(); ++a) {
    if (reduced[a]) {
      attrs.ints.push_back(static_cast<std::int64_t>(a));
      if ((o == op::max || o == op::min || o == op::argmax) && in[a] == 0) {
        throw shape_error(xlite::detail::message(name(o), ": axis ", a, " of shape ", in,
                                                 " is empty, and an empty reduction has no identity"));
      }
    }
    if (!reduced[a]) {
      out_dims.push_back(in[a]);
    } else if (keepdims) {
      out_dims.push_back(1);
    }
  }
  const dtype operand_type = x->type();
  if (operand_type == dtype::boolean && (o == op::max || o == op::min || o == op::argmax)) {
    throw dtype_error(xlite::detail::message(name(o), ": a bool operand; cast it to a number first"));
  }
  const dtype result = result_dtype(o, std::span(&operand_type, 1));
  // Sums accumulate in their result dtype (int64 for integers, as torch.sum); argmax
  // compares the operand's own values.
  node_ptr operand = o == op::argmax ? x : cast(x, result);
  return make_node(o, result, shape(out_dims), {std::move(operand)}, std::move(attrs));
}

// ---- layout -----------------------------------------------------------------------------------

inline node_ptr reshape(const node_ptr& x, const shape& to) {
  if (to.numel() != x->shape().numel()) {
    throw shape_error(xlite::detail::message("reshape: cannot reshape ", x->shape(), " (", x->shape().numel(),
                                             " elements) to ", to, " (", to.numel(), " elements)"));
  }
  if (to == x->shape()) return x;
  return make_node(op::reshape, x->type(), to, {x});
}

// Axis `i` of the result is axis perm[i] of x (torch.permute).
inline node_ptr permute(const node_ptr& x, std::span<const std::int64_t> perm) {
  const shape& in = x->shape();
  if (perm.size() != in.rank()) {
    throw index_error(xlite::detail::message("permute: ", perm.size(), " axes given for shape ", in, " of rank ",
                                             in.rank()));
  }
  std::array<bool, max_rank> seen{};
  attributes attrs;
  std::vector<std::int64_t> dims;
  for (const std::int64_t axis : perm) {
    const std::size_t a = normalize_axis(axis, in.rank(), "permute");
    if (seen[a]) throw index_error(xlite::detail::message("permute: axis ", axis, " is given twice for shape ", in));
    seen[a] = true;
    attrs.ints.push_back(static_cast<std::int64_t>(a));
    dims.push_back(in[a]);
  }
  std::vector<std::int64_t> identity(in.rank());
  std::iota(identity.begin(), identity.end(), 0);
  if (attrs.ints == identity) return x;
  return make_node(op::permute, x->type(), shape(dims), {x}, std::move(attrs));
}

inline node_ptr broadcast_to(const node_ptr& x, const shape& to) {
  if (broadcast_shapes(x->shape(), to, "broadcast_to") != to) {
    throw shape_error(xlite::detail::message("broadcast_to: shape ", x->shape(), " cannot be broadcast to ", to));
  }
  if (to == x->shape()) return x;
  return make_node(op::broadcast_to, x->type(), to, {x});
}

// One [start, stop) range with a positive step per axis, already within the dimension.
struct slice_range {
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t step = 1;
};

inline node_ptr slice(const node_ptr& x, std::span<const slice_range> ranges) {
  const shape& in = x->shape();
  if (ranges.size() != in.rank()) {
    throw index_error(xlite::detail::message("slice: ", ranges.size(), " ranges given for shape ", in));
  }
  attributes attrs;
  std::vector<std::int64_t> dims;
  for (std::size_t a = 0; a < in.rank(); ++a) {
    const auto [start, stop, step] = ranges[a];
    if (step < 1 || start < 0 || stop < start || stop > in[a]) {
      throw index_error(xlite::detail::message("slice: range [", start, ", ", stop, ") step ", step, " on axis ", a,
                                               " of shape ", in, " is not within the axis with a positive step"));
    }
    attrs.ints.insert(attrs.ints.end(), {start, stop, step});
    dims.push_back((stop - start + step - 1) / step);
  }
  if (shape(dims) == in) return x;
  return make_node(op::slice, x->type(), shape(dims), {x}, std::move(attrs));
}

inline node_ptr concat(std::vector<node_ptr> parts, std::int64_t axis) {
  if (parts.empty()) throw value_error("concat: needs at least one tensor");
  const shape& first = parts[0]->shape();
  const std::size_t a = normalize_axis(axis, first.rank(), "concat");
  std::vector<std::int64_t> dims(first.begin(), first.end());
  dtype type = parts[0]->type();
  for (std::size_t k = 1; k < parts.size(); ++k) {
    const shape& s = parts[k]->shape();
    bool fits = s.rank() == first.rank();
    for (std::size_t d = 0; fits && d < s.rank(); ++d) fits = d == a || s[d] == first[d];
    if (!fits) {
      throw shape_error(xlite::detail::message("concat: shapes ", first, " and ", s, " (tensor ", k,
                                               ") differ in an axis other than the concatenated axis ", a));
    }
    dims[a] += s[a];
    type = promote_types(type, parts[k]->type());
  }
  if (parts.size() == 1) return parts[0];
  for (auto& part : parts) part = cast(part, type);
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(a)};
  return make_node(op::concat, type, shape(dims), std::move(parts), std::move(attrs));
}

// Low and high padding of one axis: elements added before and after it.
struct padding {
  std::int64_t low = 0;
  std::int64_t high = 0;
};

// x surrounded by `fill` (numpy.pad with constant mode; torch.nn.functional.pad with the
// amounts given per axis in order, first axis first).
inline node_ptr pad(const node_ptr& x, std::span<const padding> widths, literal fill) {
  const shape& in = x->shape();
  if (widths.size() != in.rank()) {
    throw index_error(xlite::detail::message("pad: ", widths.size(), " paddings given for shape ", in));
  }
  attributes attrs;
  attrs.value = fill;
  std::vector<std::int64_t> dims;
  for (std::size_t a = 0; a < in.rank(); ++a) {
    if (widths[a].low < 0 || widths[a].high < 0) {
      throw value_error(xlite::detail::message("pad: padding (", widths[a].low, ", ", widths[a].high, ") of axis ", a,
                                               " of shape ", in, " is negative; slice to crop"));
    }
    attrs.ints.insert(attrs.ints.end(), {widths[a].low, widths[a].high});
    dims.push_back(in[a] + widths[a].low + widths[a].high);
  }
  if (shape(dims) == in) return x;
  return make_node(op::pad, x->type(), shape(dims), {x}, std::move(attrs));
}

namespace detail {

// The index operand of gather and index_select, as int64.
inline node_ptr index_operand(op o, const node_ptr& index) {
  if (category(index->type()) != dtype_category::integral) {
    throw dtype_error(xlite::detail::message(name(o), ": indices must be integers, got ", name(index->type())));
  }
  return cast(index, dtype::i64);
}

// The elements an op sums must be numbers: a sum of bools has no bool result.
inline void require_numbers(op o, const node_ptr& x) {
  if (x->type() == dtype::boolean) throw dtype_error(xlite::detail::message(name(o), ": cannot sum bool elements"));
}

} // namespace detail

// torch.gather: result[p] = x[p with p[axis] replaced by index[p]]. index has x's rank and,
// on every other axis, no more elements than x. An index outside [0, x's axis length) is an
// index_error when the graph runs.
inline node_ptr gather(const node_ptr& x, std::int64_t axis, const node_ptr& index) {
  const shape &in = x->shape(), &at = index->shape();
  const std::size_t a = normalize_axis(axis, in.rank(), "gather");
  bool fits = at.rank() == in.rank();
  for (std::size_t d = 0; fits && d < in.rank(); ++d) fits = d == a || at[d] <= in[d];
  if (!fits) {
    throw shape_error(xlite::detail::message("gather: index of shape ", at, " does not fit input of shape ", in,
                                             " on axes other than ", a));
  }
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(a)};
  return make_node(op::gather, x->type(), at, {x, detail::index_operand(op::gather, index)}, std::move(attrs));
}

// torch.index_select: the slices of x at positions index[0], index[1], ... along axis, for a
// 1-D index. An index out of range is an index_error when the graph runs.
inline node_ptr index_select(const node_ptr& x, std::int64_t axis, const node_ptr& index) {
  const shape& in = x->shape();
  const std::size_t a = normalize_axis(axis, in.rank(), "index_select");
  if (index->shape().rank() != 1) {
    throw shape_error(xlite::detail::message("index_select: index of shape ", index->shape(), " is not 1-D"));
  }
  std::vector<std::int64_t> dims(in.begin(), in.end());
  dims[a] = index->shape()[0];
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(a)};
  return make_node(op::index_select, x->type(), shape(dims), {x, detail::index_operand(op::index_select, index)},
                   std::move(attrs));
}

// gather's adjoint (XLA's scatter with add, torch's scatter_add into zeros): zeros of
// `result_shape`, and each src[p] added at p with p[axis] replaced by index[p]. index has
// src's shape, which fits result_shape on every other axis. Elements that land on one place
// add up in the order of p; an index out of range is an index_error when the graph runs.
inline node_ptr scatter_add(const node_ptr& src, std::int64_t axis, const node_ptr& index, const shape& result_shape) {
  detail::require_numbers(op::scatter_add, src);
  const shape& at = src->shape();
  const std::size_t a = normalize_axis(axis, at.rank(), "scatter_add");
  bool fits = index->shape() == at && result_shape.rank() == at.rank();
  for (std::size_t d = 0; fits && d < at.rank(); ++d) fits = d == a || at[d] <= result_shape[d];
  if (!fits) {
    throw shape_error(xlite::detail::message("scatter_add: src of shape ", at, " and index of shape ", index->shape(),
                                             " do not fit a result of shape ", result_shape, " on axes other than ",
                                             a));
  }
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(a)};
  return make_node(op::scatter_add, src->type(), result_shape, {src, detail::index_operand(op::scatter_add, index)},
                   std::move(attrs));
}

// index_select's adjoint (torch's index_add into zeros): zeros with `size` positions along
// axis, and slice k of src added at position index[k], for a 1-D index as long as src's axis.
inline node_ptr index_add(const node_ptr& src, std::int64_t axis, const node_ptr& index, std::int64_t size) {
  detail::require_numbers(op::index_add, src);
  const shape& at = src->shape();
  const std::size_t a = normalize_axis(axis, at.rank(), "index_add");
  if (index->shape().rank() != 1 || index->shape()[0] != at[a] || size < 0) {
    throw shape_error(xlite::detail::message("index_add: index of shape ", index->shape(), " for src of shape ", at,
                                             " along axis ", a, " into ", size, " positions"));
  }
  std::vector<std::int64_t> dims(at.begin(), at.end());
  dims[a] = size;
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(a)};
  return make_node(op::index_add, src->type(), shape(dims), {src, detail::index_operand(op::index_add, index)},
                   std::move(attrs));
}

// ---- random numbers -----------------------------------------------------------------------------

// Draws of shape s and floating-point `type` (random_uniform: in [0, 1); random_normal:
// mean 0, standard deviation 1), keyed by the rank-0 int64 `key`. Element i is a function of
// the key and i alone, so a draw is the same for any thread count and chunking.
inline node_ptr random(op code, const node_ptr& key, dtype type, const shape& s) {
  if (info(code).kind != op_kind::random) {
    throw value_error(xlite::detail::message("random: ", name(code), " is not a random op"));
  }
  if (!is_floating_point(type)) {
    throw dtype_error(xlite::detail::message(name(code), ": draws are floating point, not ", name(type)));
  }
  if (key->type() != dtype::i64 || key->shape().rank() != 0) {
    throw value_error(xlite::detail::message(name(code), ": the key must be a rank-0 int64, got ", name(key->type()),
                                             key->shape()));
  }
  return make_node(code, type, s, {key});
}

// ---- matmul -----------------------------------------------------------------------------------

namespace detail {

// Whether x is a permute that swaps its last two axes and keeps the others: a matrix transpose.
inline bool is_matrix_transpose(const node_ptr& x) {
  if (x->code() != op::permute) return false;
  const auto& perm = x->attrs().ints;
  const std::size_t r = perm.size();
  for (std::size_t a = 0; a + 2 < r; ++a) {
    if (perm[a] != static_cast<std::int64_t>(a)) return false;
  }
  return r >= 2 && perm[r - 2] == static_cast<std::int64_t>(r - 1) && perm[r - 1] == static_cast<std::int64_t>(r - 2);
}

} // namespace detail

// op(a) (..., m, k) times op(b) (..., k, n), batch dimensions broadcast (torch.matmul for
// rank >= 2), where op transposes the last two axes of an operand whose flag is set
// (attrs.ints = {transpose_a, transpose_b}). An operand that is itself such a transpose (a
// permute node) is read in place instead, its flag flipped: the GEMM reads the memory
// transposed, and no transposed copy is made.
inline node_ptr matmul(node_ptr a, node_ptr b, bool transpose_a = false, bool transpose_b = false) {
  if (detail::is_matrix_transpose(a)) {
    a = a->operands()[0];
    transpose_a = !transpose_a;
  }
  if (detail::is_matrix_transpose(b)) {
    b = b->operands()[0];
    transpose_b = !transpose_b;
  }
  const shape &sa = a->shape(), &sb = b->shape();
  const auto rows = [](const shape& s, bool transposed) { return s[s.rank() - (transposed ? 1 : 2)]; };
  const auto cols = [](const shape& s, bool transposed) { return s[s.rank() - (transposed ? 2 : 1)]; };
  if (sa.rank() < 2 || sb.rank() < 2 || cols(sa, transpose_a) != rows(sb, transpose_b)) {
    throw shape_error(xlite::detail::message("matmul: shapes ", sa, transpose_a ? " (transposed)" : "", " and ", sb,
                                             transpose_b ? " (transposed)" : "",
                                             " do not multiply: need (..., m, k) and (..., k, n)"));
  }
  const shape batch = broadcast_shapes(shape(sa.dims().first(sa.rank() - 2)), shape(sb.dims().first(sb.rank() - 2)),
                                       "matmul");
  std::vector<std::int64_t> dims(batch.begin(), batch.end());
  dims.push_back(rows(sa, transpose_a));
  dims.push_back(cols(sb, transpose_b));
  const dtype type = promote_types(a->type(), b->type());
  if (type == dtype::boolean) throw dtype_error("matmul: bool operands; cast them to a number first");
  attributes attrs;
  attrs.ints = {transpose_a ? 1 : 0, transpose_b ? 1 : 0};
  return make_node(op::matmul, type, shape(dims), {cast(a, type), cast(b, type)}, std::move(attrs));
}

} // namespace xlite::ir
