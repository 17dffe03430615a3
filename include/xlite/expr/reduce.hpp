#pragma once

// Reductions over chosen axes with the element-wise input fused into the reduction loop:
// sum(x * y, {1}) reads x and y once and never builds x * y.
//
//   sum(e)                 all axes, a rank-0 result
//   sum(e, {0, -1})        those axes, removed
//   sum(e, {1}, keepdims)  that axis kept with length 1
//
// Also mean, prod, max, min, and argmax (one axis, or the flattened tensor). max(x, 0) with
// a number is the element-wise maximum; the reduction always takes braces: max(x, {0}).
//
// Order of accumulation, fixed so that results are bitwise the same for any thread count:
// the reduced elements of each output are split into blocks of `reduction_block` elements
// in row-major order; within a block, SIMD lanes accumulate every lanes-th element in four
// interleaved batches, combined pairwise then lane by lane left to right, then the scalar
// tail; blocks combine left to right. (The order depends on the batch width, so two ISA
// paths may differ in the last bits of a floating-point sum; each is reproducible.)
// When the innermost input dimension is kept, each output element instead accumulates its
// reduced elements one at a time in row-major order, SIMD across outputs.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/expr/deferred.hpp"
#include "xlite/expr/evaluate.hpp"
#include "xlite/expr/functions.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/kernels/reduce.hpp"

namespace xlite {

// The axes a reduction runs over: {} or no argument for all of them, or a list such as
// {0, -1} (negative axes count from the end).
class axes {
public:
  axes() = default;
  axes(std::initializer_list<std::int64_t> list) : all_(false), count_(list.size()) {
    if (list.size() > max_rank) {
      throw index_error(detail::message("axes: ", list.size(), " axes given, a tensor has at most ", max_rank));
    }
    std::copy(list.begin(), list.end(), list_.begin());
  }
  bool all() const noexcept { return all_ || count_ == 0; }
  std::span<const std::int64_t> list() const noexcept { return {list_.data(), count_}; }

private:
  bool all_ = true;
  std::size_t count_ = 0;
  std::array<std::int64_t, max_rank> list_{};
};

struct keepdims_t {
  explicit keepdims_t() = default;
};
// Keep the reduced axes with length 1: sum(x, {1}, xlite::keepdims).
inline constexpr keepdims_t keepdims{};

} // namespace xlite

namespace xlite::expr {

// Blocks of this many reduced elements are reduced independently (and in parallel), then
// combined in order.
inline constexpr std::int64_t reduction_block = 1 << 14;

template <op O, class V>
struct reduction_result {
  static_assert(O != op::mean || std::is_floating_point_v<V>,
                "xlite: mean of an integral or bool expression: write mean(xlite::cast<float>(x))");
  static_assert(!std::is_same_v<V, bool> || O == op::sum || O == op::prod,
                "xlite: max/min/mean of a bool expression: cast it first, e.g. xlite::cast<std::int32_t>(mask)");
  static_assert(dtype_of_v<V> != dtype::bf16 || O == op::max || O == op::min,
                "xlite: sum, prod and mean of a bfloat16 expression would compute in bfloat16: sum in float, "
                "e.g. xlite::sum(xlite::cast<float>(x))");
  // sum and prod widen integers to int64, as torch.sum does; the rest keep the type.
  using type = std::conditional_t<(O == op::sum || O == op::prod) && !std::is_floating_point_v<V>, std::int64_t, V>;
};

// The layout of a reduction: dimensions in three groups (kept before the last reduced
// dimension, reduced, kept after it), each merged where the operands allow.
template <std::size_t Leaves>
struct reduction_plan {
  loop_plan<Leaves> loop;
  xlite::shape out;
  std::int64_t outputs_outer = 1; // P: positions of group 0
  std::int64_t reduced = 1;       // Q: positions of group 1 (may be 0)
  std::int64_t outputs_inner = 1; // I: positions of group 2
  std::pair<std::size_t, std::size_t> outer_dims, reduced_dims, inner_dims;
};

template <class E>
reduction_plan<memory_leaf_count_v<E>> plan_reduction(const E& e, const axes& which, bool keep, op o) {
  const xlite::shape& in = e.shape;
  const std::size_t rank = in.rank();
  std::array<bool, max_rank> is_reduced{};
  if (which.all()) {
    std::fill_n(is_reduced.begin(), rank, true);
  } else {
    for (const std::int64_t axis : which.list()) {
      const std::size_t a = normalize_axis(axis, rank, name(o));
      if (is_reduced[a]) {
        throw index_error(detail::message(name(o), ": axis ", axis, " is given twice (shape ", in, ")"));
      }
      is_reduced[a] = true;
    }
  }
  // Kept axes after the last reduced one longer than 1 (all of them, when there is none)
  // go to group 2, reduced SIMD across outputs; the rest to group 0. Reduced axes of length
  // 1 join group 1 so that it has a place in the plan even when no other axis is reduced.
  // o == argmax keeps everything in groups 0 and 1: its scalar loop walks the reduced axis.
  std::size_t last_long_reduced = rank;
  for (std::size_t d = 0; d < rank; ++d) {
    if (is_reduced[d] && in[d] != 1) last_long_reduced = d;
  }
  std::array<std::size_t, max_rank> order{};
  std::array<std::uint8_t, max_rank> group_of_dim{};
  for (std::size_t d = 0; d < rank; ++d) {
    const bool after_reduced = last_long_reduced == rank || d > last_long_reduced;
    if (is_reduced[d]) {
      group_of_dim[d] = 1;
    } else {
      group_of_dim[d] = in[d] != 1 && after_reduced && o != op::argmax ? 2 : 0;
    }
  }
  std::size_t position = 0;
  std::array<std::int64_t, max_rank> dims{};
  std::array<std::uint8_t, max_rank> groups{};
  for (std::uint8_t g = 0; g < 3; ++g) {
    for (std::size_t d = 0; d < rank; ++d) {
      if (group_of_dim[d] != g) continue;
      order[position] = d;
      dims[position] = in[d];
      groups[position] = g;
      ++position;
    }
  }
  const auto strides = leaf_strides(e, in, std::span(order.data(), rank));
  reduction_plan<memory_leaf_count_v<E>> plan;
  plan.loop = make_plan(std::span(dims.data(), rank), strides, std::span(groups.data(), rank));
  plan.outer_dims = plan.loop.span_of(0);
  plan.reduced_dims = plan.loop.span_of(1);
  plan.inner_dims = plan.loop.span_of(2);
  plan.outputs_outer = plan.loop.count(plan.outer_dims);
  plan.reduced = plan.loop.count(plan.reduced_dims);
  plan.outputs_inner = plan.loop.count(plan.inner_dims);
  std::array<std::int64_t, max_rank> out_dims{};
  std::size_t out_rank = 0;
  for (std::size_t d = 0; d < rank; ++d) {
    if (!is_reduced[d]) {
      out_dims[out_rank++] = in[d];
    } else if (keep) {
      out_dims[out_rank++] = 1;
    }
  }
  plan.out = xlite::shape(std::span(out_dims.data(), out_rank));
  return plan;
}

// Sets index[0, first) to the position `flat` of dimensions [first_dim, last_dim) (the
// last of them fastest).
inline void unravel(const loop_nest& plan, std::pair<std::size_t, std::size_t> span, std::int64_t flat,
                    std::array<std::int64_t, max_rank>& index) {
  for (std::size_t d = span.second; d-- > span.first;) {
    index[d] = flat % plan.dims[d];
    flat /= plan.dims[d];
  }
}

// Four accumulators of batches and one of scalars for the tail: four chains of additions,
// so that a reduction is bound by the loads rather than by the latency of each addition.
template <op O, class R, class Arch>
struct accumulators {
  using red = kernels::reduction<O>;
  using batch = kernels::batch_t<R, Arch>;
  std::array<batch, 4> lanes = {batch(red::template identity<R>()), batch(red::template identity<R>()),
                                batch(red::template identity<R>()), batch(red::template identity<R>())};
  R tail = red::template identity<R>();

  R total() const {
    const batch all = red::combine(red::combine(lanes[0], lanes[1]), red::combine(lanes[2], lanes[3]));
    return red::combine(kernels::combine_lanes<O, R, Arch>(all), tail);
  }
};

// Accumulates positions [j, stop) of the expression's current row. Flattened as run_row is.
template <op O, class Arch, class L, bool Contiguous, class R, class B>
[[gnu::flatten]] void accumulate_row(const B& bound_row, std::int64_t j, std::int64_t stop,
                                     accumulators<O, R, Arch>& acc) {
  using red = kernels::reduction<O>;
  using batch = kernels::batch_t<R, Arch>;
  constexpr auto width = static_cast<std::int64_t>(kernels::lanes<L, Arch>);
  const B expr = bound_row; // a local copy, as in run_row: kept in registers
  if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
    for (; j + 4 * width <= stop; j += 4 * width) {
      for (std::size_t k = 0; k < 4; ++k) {
        acc.lanes[k] = red::combine(
            acc.lanes[k], batch(expr.template get<Arch, L, Contiguous>(j + static_cast<std::int64_t>(k) * width)));
      }
    }
    for (; j + width <= stop; j += width)
      acc.lanes[0] = red::combine(acc.lanes[0], batch(expr.template get<Arch, L, Contiguous>(j)));
  }
  for (; j < stop; ++j) {
    acc.tail = red::combine(acc.tail, static_cast<R>(expr.template get<kernels::scalar_arch, L, Contiguous>(j)));
  }
}

// Accumulates the reduced positions [begin, end) of output p, innermost dimension reduced.
template <op O, class Arch, class L, class R, class B, std::size_t Leaves>
R reduce_block(B expr, const reduction_plan<Leaves>& plan, std::int64_t p, std::int64_t begin, std::int64_t end) {
  std::array<std::int64_t, max_rank> index{};
  unravel(plan.loop, plan.outer_dims, p, index);
  accumulators<O, R, Arch> acc;
  walk_rows(expr, plan.loop, index, plan.reduced_dims.first, begin, end,
            [&](std::int64_t j, std::int64_t stop, std::int64_t) {
              if (plan.loop.rows_contiguous) {
                accumulate_row<O, Arch, L, true>(expr, j, stop, acc);
              } else {
                accumulate_row<O, Arch, L, false>(expr, j, stop, acc);
              }
            });
  return acc.total();
}

// Output rows [p][c_begin, c_end) with the innermost dimension kept: each output element
// accumulates its reduced positions in order, SIMD across outputs. Flattened as run_row is.
template <op O, class Arch, class L, class R, class B, std::size_t Leaves>
[[gnu::flatten]] void reduce_columns(B expr, const reduction_plan<Leaves>& plan, R* out_row, std::int64_t p,
                                     std::int64_t c_begin, std::int64_t c_end) {
  using red = kernels::reduction<O>;
  using batch = kernels::batch_t<R, Arch>;
  constexpr auto width = static_cast<std::int64_t>(kernels::lanes<L, Arch>);
  std::fill(out_row + c_begin, out_row + c_end, red::template identity<R>());
  std::array<std::int64_t, max_rank> index{};
  unravel(plan.loop, plan.outer_dims, p, index);
  for (std::int64_t q = 0; q < plan.reduced; ++q) {
    unravel(plan.loop, plan.reduced_dims, q, index);
    walk_rows(expr, plan.loop, index, plan.inner_dims.first, c_begin, c_end,
              [&](std::int64_t j, std::int64_t stop, std::int64_t offset) {
                R* out = out_row + c_begin + offset - j;
                if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
                  for (; j + width <= stop; j += width) {
                    red::combine(batch::load_unaligned(out + j), batch(expr.template get<Arch, L, false>(j)))
                        .store_unaligned(out + j);
                  }
                }
                for (; j < stop; ++j) {
                  out[j] = red::combine(out[j], static_cast<R>(expr.template get<kernels::scalar_arch, L, false>(j)));
                }
              });
  }
}

template <op O, class E>
auto reduce_leaves(const E& e, const axes& which, bool keep) {
  using V = typename E::value_type;
  using R = typename reduction_result<O, V>::type;
  const auto plan = plan_reduction(e, which, keep, O);
  tensor<R> out(tensor<R>::uninitialized, plan.out);
  if (plan.reduced == 0) {
    if constexpr (O == op::max || O == op::min) {
      throw value_error(detail::message(name(O), ": cannot reduce over an empty axis (shape ", e.shape, ")"));
    } else {
      const R fill =
          O == op::mean ? std::numeric_limits<R>::quiet_NaN() : kernels::reduction<O>::template identity<R>();
      std::fill(out.begin(), out.end(), fill);
      return out;
    }
  }
  if (out.size() == 0) return out;
  const auto bound_expr = bind(e, plan.loop);
  using L = lane_type_t<E>;
  constexpr bool simd = simd_evaluable_v<E> && std::is_same_v<R, V>;
  thread_pool& pool = current_thread_pool();
  kernels::dispatch<simd>([&](auto arch) {
    using Arch = decltype(arch);
    if (plan.inner_dims.first == plan.inner_dims.second) { // the innermost dimension is reduced
      const std::int64_t blocks = (plan.reduced + reduction_block - 1) / reduction_block;
      std::vector<R> partial(static_cast<std::size_t>(plan.outputs_outer * blocks));
      const std::int64_t grain = std::max<std::int64_t>(1, reduction_block / plan.reduced);
      pool.parallel_for(plan.outputs_outer * blocks, grain, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t task = first; task < last; ++task) {
          const std::int64_t p = task / blocks;
          const std::int64_t b = task % blocks;
          partial[static_cast<std::size_t>(task)] = reduce_block<O, Arch, L, R>(
              bound_expr, plan, p, b * reduction_block, std::min(plan.reduced, (b + 1) * reduction_block));
        }
      });
      for (std::int64_t p = 0; p < plan.outputs_outer; ++p) {
        R total = partial[static_cast<std::size_t>(p * blocks)];
        for (std::int64_t b = 1; b < blocks; ++b) {
          total = kernels::reduction<O>::combine(total, partial[static_cast<std::size_t>(p * blocks + b)]);
        }
        out.data()[p] = total;
      }
    } else {
      const std::int64_t inner = plan.outputs_inner;
      const std::int64_t column_grain =
          std::max<std::int64_t>(64, reduction_block / std::max<std::int64_t>(1, plan.reduced));
      const std::int64_t chunks = (inner + column_grain - 1) / column_grain;
      pool.parallel_for(plan.outputs_outer * chunks, 1, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t task = first; task < last; ++task) {
          const std::int64_t p = task / chunks;
          const std::int64_t c = (task % chunks) * column_grain;
          reduce_columns<O, Arch, L, R>(bound_expr, plan, out.data() + p * inner, p, c,
                                        std::min(inner, c + column_grain));
        }
      });
    }
  });
  if constexpr (O == op::mean) {
    const R count = static_cast<R>(plan.reduced);
    for (R& v : out) v /= count;
  }
  return out;
}

// argmax over one axis (or the flattened tensor): the index of the first maximum, NaN
// counting as the maximum, as torch.argmax.
template <class E>
tensor<std::int64_t> argmax_leaves(const E& e, const axes& which, bool keep) {
  using V = typename E::value_type;
  if (!which.all() && which.list().size() != 1) {
    throw index_error(detail::message("argmax: takes one axis or none, got ", which.list().size()));
  }
  const auto plan = plan_reduction(e, which, keep, op::argmax);
  tensor<std::int64_t> out(tensor<std::int64_t>::uninitialized, plan.out);
  if (plan.reduced == 0)
    throw value_error(detail::message("argmax: cannot reduce over an empty axis (shape ", e.shape, ")"));
  const auto bound_expr = bind(e, plan.loop);
  using L = lane_type_t<E>;
  current_thread_pool().parallel_for(plan.outputs_outer, std::max<std::int64_t>(1, reduction_block / plan.reduced),
                                     [&](std::int64_t first, std::int64_t last) {
                                       for (std::int64_t p = first; p < last; ++p) {
                                         auto expr = bound_expr;
                                         std::array<std::int64_t, max_rank> index{};
                                         unravel(plan.loop, plan.outer_dims, p, index);
                                         V best{};
                                         std::int64_t best_at = -1;
                                         walk_rows(expr, plan.loop, index, plan.reduced_dims.first, 0, plan.reduced,
                                                   [&](std::int64_t j, std::int64_t stop, std::int64_t offset) {
                                                     for (std::int64_t k = j; k < stop; ++k) {
                                                       const V v = expr.template get<kernels::scalar_arch, L, false>(k);
                                                       const bool better =
                                                           best_at < 0 || v > best || (v != v && best == best);
                                                       if (better) {
                                                         best = v;
                                                         best_at = offset + (k - j);
                                                       }
                                                     }
                                                   });
                                         out.data()[p] = best_at;
                                       }
                                     });
  return out;
}

// Reductions of expressions with deferred leaves (matmul) reduce their computed values.
template <op O, class E>
auto reduce(const E& e, const axes& which, bool keep) {
  if constexpr (deferred_count_v<E> > 0) {
    return reduce_leaves<O>(resolve_deferred(e), which, keep);
  } else {
    return reduce_leaves<O>(e, which, keep);
  }
}

template <class E>
tensor<std::int64_t> reduce_argmax(const E& e, const axes& which, bool keep) {
  if constexpr (deferred_count_v<E> > 0) {
    return argmax_leaves(resolve_deferred(e), which, keep);
  } else {
    return argmax_leaves(e, which, keep);
  }
}

} // namespace xlite::expr

namespace xlite {

#define XLITE_REDUCTION(function, op_name)                                                                             \
  template <class E>                                                                                                   \
  requires expr::tensor_like<E>                                                                                        \
  auto function(E&& e, const axes& which = {}) {                                                                       \
    return expr::reduce<op::op_name>(expr::to_operand(std::forward<E>(e)), which, false);                              \
  }                                                                                                                    \
  template <class E>                                                                                                   \
  requires expr::tensor_like<E>                                                                                        \
  auto function(E&& e, const axes& which, keepdims_t) {                                                                \
    return expr::reduce<op::op_name>(expr::to_operand(std::forward<E>(e)), which, true);                               \
  }
XLITE_REDUCTION(sum, sum)
XLITE_REDUCTION(mean, mean)
XLITE_REDUCTION(prod, prod)
XLITE_REDUCTION(max, max)
XLITE_REDUCTION(min, min)
#undef XLITE_REDUCTION

template <class E>
requires expr::tensor_like<E> tensor<std::int64_t> argmax(E&& e, const axes& which = {}) {
  return expr::reduce_argmax(expr::to_operand(std::forward<E>(e)), which, false);
}
template <class E>
requires expr::tensor_like<E> tensor<std::int64_t> argmax(E&& e, const axes& which, keepdims_t) {
  return expr::reduce_argmax(expr::to_operand(std::forward<E>(e)), which, true);
}

} // namespace xlite

namespace xlite::expr {
using xlite::argmax, xlite::mean, xlite::prod, xlite::sum;
} // namespace xlite::expr
