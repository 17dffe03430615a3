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
// interleaved batches, each row's batches left over one to a chain from the first (the
// last of them holding the row's end in its first lanes), combined pairwise then lane by
// lane left to right; blocks combine left to right. (The order depends on the batch width, so
// two ISA paths may differ in the last bits of a floating-point sum; each is reproducible.)
// When the innermost input dimension is kept, each output element instead accumulates its
// reduced elements one at a time in row-major order, SIMD across outputs; where its column
// falls in a tile of a single batch (the last columns of a row), sum, mean, prod, max and
// min accumulate them in four chains in turn, restarted on chain 0 at each run along the
// last reduced dimension and merged pairwise (fold_columns). So the bits may depend on
// the tile and on how the reduced dimensions merge (which a broadcast leaf decides), never
// on the thread count. Slices of at least 2^19 elements down 128 columns or more (one kept
// inner dimension; more than 16384 with 32 rows or more) are the exception for sum, mean,
// prod, max and min on the SIMD path (stream_columns): each column accumulates in
// row-major order with no chains, in blocks of 2^18 / min(columns, 16384) rows (the last
// block shorter), the blocks combined in order. argmax walks the row loops, fold_columns
// and stream_columns (from 2^22 elements on); its answer, the first maximum (NaN counting
// as the largest), does not depend on the order.

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
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

// What a reduction of element type V takes: mean computes in floating point; the largest,
// smallest or mean of bools means nothing; a bfloat16 sum, product or mean would round
// every step to 8 bits.
template <op O, class V>
inline constexpr bool averages_floating_point = O != op::mean || std::is_floating_point_v<V>;
template <op O, class V>
inline constexpr bool orders_no_bools = !std::is_same_v<V, bool> || O == op::sum || O == op::prod;
template <op O, class V>
inline constexpr bool accumulates_no_bfloat16 = dtype_of_v<V> != dtype::bf16 || O == op::max || O == op::min;
template <op O, class V>
constexpr bool is_reduction_allowed() {
  return averages_floating_point<O, V> && orders_no_bools<O, V> && accumulates_no_bfloat16<O, V>;
}

namespace checks {
template <op O, class V>
struct reduction_allowed {
  static_assert(averages_floating_point<O, V>,
                "xlite: mean of an integral or bool expression: write mean(xlite::cast<float>(x))");
  static_assert(orders_no_bools<O, V>,
                "xlite: max/min/mean of a bool expression: cast it first, e.g. xlite::cast<std::int32_t>(mask)");
  static_assert(accumulates_no_bfloat16<O, V>,
                "xlite: sum, prod and mean of a bfloat16 expression would compute in bfloat16: sum in float, "
                "e.g. xlite::sum(xlite::cast<float>(x))");
};
} // namespace checks

// sum and prod widen integers to int64, as torch.sum does; the rest keep the type.
template <op O, class V>
using reduction_result_t =
    std::conditional_t<(O == op::sum || O == op::prod) && !std::is_floating_point_v<V>, std::int64_t, V>;

// The layout of a reduction: dimensions in three groups (kept before the last reduced
// dimension, reduced, kept after it), each merged where the operands allow.
template <std::size_t Leaves>
struct reduction_plan {
  loop_plan<Leaves> loop;
  xlite::shape out{};
  std::int64_t outputs_outer = 1; // P: positions of group 0
  std::int64_t reduced = 1;       // Q: positions of group 1 (may be 0)
  std::int64_t outputs_inner = 1; // I: positions of group 2
  std::pair<std::size_t, std::size_t> outer_dims{}, reduced_dims{}, inner_dims{};
};

// Every axis reduced and nothing broadcast, as sum(x * y) or sum(m, {0, 1}): one flat run,
// made without plan_reduction's grouping of the dimensions (sum(x * y) of 16 floats: 98 ->
// 82 ns). It is the plan that grouping gives such an input: one dimension, in the reduced
// group, stride 1 for every leaf; no outer or inner outputs (their spans and counts keep
// their defaults).
template <std::size_t Leaves>
reduction_plan<Leaves> plan_flat_reduction(const xlite::shape& in, bool keep) {
  reduction_plan<Leaves> plan{.loop = flat_plan<Leaves>(in.numel())};
  plan.loop.group[0] = 1;
  plan.reduced_dims = {0, 1};
  plan.inner_dims = {1, 1};
  plan.reduced = in.numel();
  if (keep) {
    std::array<std::int64_t, max_rank> ones;
    ones.fill(1);
    plan.out = xlite::shape(std::span(ones.data(), in.rank()));
  }
  return plan;
}

template <class E>
reduction_plan<memory_leaf_count_v<E>> plan_reduction(const E& e, const axes& which, bool keep, op o) {
  const xlite::shape& in = e.shape;
  const std::size_t rank = in.rank();
  std::array<bool, max_rank> is_reduced{};
  if (which.all()) {
    is_reduced.fill(true); // all 8: one store, where a memset of `rank` bytes stalls the loads after it
  } else {
    for (const std::int64_t axis : which.list()) {
      const std::size_t a = normalize_axis(axis, rank, name(o));
      if (is_reduced[a]) {
        throw index_error(detail::message(name(o), ": axis ", axis, " is given twice (shape ", in, ")"));
      }
      is_reduced[a] = true;
    }
  }
  const bool every_axis = which.all() || which.list().size() == rank; // each at most once, as checked
  if (every_axis && memory_leaves_have_shape(e, in)) return plan_flat_reduction<memory_leaf_count_v<E>>(in, keep);
  // Kept axes after the last reduced one longer than 1 (all of them, when there is none)
  // go to group 2, reduced SIMD across outputs; the rest to group 0. Reduced axes of length
  // 1 join group 1 so that it has a place in the plan even when no other axis is reduced.
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
      group_of_dim[d] = in[d] != 1 && after_reduced ? 2 : 0;
    }
  }
  std::size_t position = 0;
  std::array<std::uint8_t, max_rank> groups{};
  for (std::uint8_t g = 0; g < 3; ++g) {
    for (std::size_t d = 0; d < rank; ++d) {
      if (group_of_dim[d] != g) continue;
      order[position] = d;
      groups[position] = g;
      ++position;
    }
  }
  reduction_plan<memory_leaf_count_v<E>> plan;
  plan_leaves(plan.loop, e, in, std::span(order.data(), rank), std::span(groups.data(), rank));
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

// Sets index[first_dim, last_dim) to the position `flat` of those dimensions (the last of
// them fastest).
inline void unravel(const loop_nest& plan, std::pair<std::size_t, std::size_t> span, std::int64_t flat,
                    std::array<std::int64_t, max_rank>& index) {
  for (std::size_t d = span.second; d-- > span.first;) {
    index[d] = flat % plan.dims[d];
    flat /= plan.dims[d];
  }
}

// ---- the loops ---------------------------------------------------------------------------------

// Visits positions [j, stop) of the expression's current row in the order every reduction
// takes them, updating an accumulator: on_batch(acc, chain, batch, j) on Acc::chains
// interleaved chains of whole batches (so that a reduction is bound by its loads, not by the
// latency of each combine), then the batches left over one to a chain from chain 0, the
// last of them the row's end in its first lanes and Acc::padding() in the others. On the
// scalar path, on chain 0, a value at a time. Flattened as run_row is.
template <class Arch, class L, bool Contiguous, class B, class Acc, class OnBatch>
[[gnu::flatten]] void visit_row(const B& bound_row, std::int64_t j, std::int64_t stop, Acc& acc, OnBatch on_batch) {
  // A local copy of the expression, as in run_row, which can live in registers. Not of the
  // accumulator: it is a local of accumulate_block or accumulate_rows (flattened) that
  // nothing else can reach, and g++ copied argmax's (over 500 bytes) with memcpy, twice a
  // row (argmax over 16384 rows of 16 floats took 3x as long).
  const B expr = bound_row;
  if constexpr (std::is_same_v<Arch, kernels::scalar_arch>) {
    for (; j < stop; ++j) on_batch(acc, 0, expr.template get<Arch, L, Contiguous>(j), j);
  } else {
    constexpr auto width = static_cast<std::int64_t>(kernels::lanes<L, Arch>);
    static_assert(Acc::chains <= 4, "unroll the chains' loop below as far as there are chains");
    constexpr auto step = static_cast<std::int64_t>(Acc::chains) * width;
    for (; j + step <= stop; j += step) {
#pragma GCC unroll 4 // or g++ -O2 keeps the accumulators on the stack, indexed by chain
      for (std::size_t chain = 0; chain < Acc::chains; ++chain) {
        const std::int64_t at = j + static_cast<std::int64_t>(chain) * width;
        on_batch(acc, chain, expr.template get<Arch, L, Contiguous>(at), at);
      }
    }
    // Whole batches spread over the chains rather than all on chain 0, where they would wait
    // on each other; the row's end as a batch, where a scalar loop waited on each element
    // (and argmax's mispredicted its branches on random data). False once the row is done.
    const auto leftover = [&]<std::size_t chain>() {
      if (j + width <= stop) {
        on_batch(acc, chain, expr.template get<Arch, L, Contiguous>(j), j);
        j += width;
        return true;
      }
      if (j < stop) {
        const auto count = static_cast<std::size_t>(stop - j);
        const auto v = expr.template get_first<Arch, L, Contiguous>(j, count);
        using V = std::decay_t<decltype(v)>;
        on_batch(acc, chain, xsimd::select(kernels::first_lanes_mask<typename V::value_type, Arch>(count), v,
                                           V(Acc::template padding<typename V::value_type>())),
                 j);
      }
      return false;
    };
    [&]<std::size_t... chain>(std::index_sequence<chain...>) {
      (leftover.template operator()<chain>() && ...);
    }(std::make_index_sequence<Acc::chains>{});
  }
}

// Four chains' accumulators merged pairwise, (0 1) (2 3): the order fixed, as the bits of
// the result depend on it. The row loops' accumulators and fold_columns' chains alike.
template <class A, class Merge>
A merge_pairwise(const std::array<A, 4>& chain, Merge merge) {
  return merge(merge(chain[0], chain[1]), merge(chain[2], chain[3]));
}

// A Fold whose accumulators of separate chains of one column's positions merge: it gives
// the accumulator of no position (identity) and merges two (merge).
template <class Fold, class A>
concept merging_fold = requires(const A& a) {
  { Fold::template identity<A>() } -> std::same_as<A>;
  { Fold::merge(a, a) } -> std::same_as<A>;
};

// How many chains a single batch of columns folds into, where its Fold merges them.
inline constexpr std::size_t column_chains = 4;

// The chains of one column after the first start at no position (the first at position 0).
template <class Fold, class A>
void start_chains(std::array<A, column_chains>& chain) {
  for (std::size_t c = 1; c < chain.size(); ++c) chain[c] = Fold::template identity<A>();
}
template <class Fold, class A>
A merge_chains(const std::array<A, column_chains>& chain) {
  return merge_pairwise(chain, [](const A& a, const A& b) { return Fold::merge(a, b); });
}

// Folds columns [c_begin, c_end) of output row p (the innermost dimension kept) over the
// reduced positions q in order (single batches: in chains), SIMD across outputs, a tile of
// columns at a time: eight
// batches (AVX-512), four, then single batches, then the columns left over as one masked
// batch (with no SIMD path, tiles of 256 scalars). A tile's accumulators live in registers
// through all of q, and each step to the next q moves the leaves' rows instead of finding
// them again. (Folding row by row into the outputs in memory, as this did before, took
// twice as long on one thread at 256 x 256: each output batch waited on its own store from
// the row before.) The Fold gives an accumulator for the value at q = 0 (start(v)), adds
// the value at q (add(acc, q, v)) and stores a finished accumulator for column c
// (finish(acc, c), finish_first(acc, c, count) for a masked batch), on batches and on
// scalars alike; a merging_fold's single batches fold in column_chains chains. Which tile
// a column falls in, and so how it is folded, depends only on the task's columns, which
// the reduced count fixes. Flattened.
template <class Arch, class L, class B, std::size_t Leaves, class Fold>
[[gnu::flatten]] void fold_columns(const B& bound_expr, const reduction_plan<Leaves>& plan, std::int64_t p,
                                   std::int64_t c_begin, std::int64_t c_end, const Fold& fold) {
  constexpr auto width = static_cast<std::int64_t>(kernels::lanes<L, Arch>);
  const strides_t* const strides = plan.loop.leaf_strides.data();
  std::array<std::int64_t, max_rank> index{}; // the reduced dimensions' part stays at 0 between tiles
  unravel(plan.loop, plan.outer_dims, p, index);
  const std::size_t last_reduced = plan.reduced_dims.second - 1;
  const std::int64_t along_last = plan.loop.dims[last_reduced];
  // A local copy, as in visit_row, that can live in registers: finish's stores could alias
  // the parameter, which lives in the caller's frame.
  B row = bound_expr;
  // Folds n <= N values of arch A from position j of the current row, `apart` apart, into
  // columns from `column`. Masked (N = 1): a batch of which only the first `lanes` are
  // columns, read and stored alone (`apart` and `n` unused).
  const auto fold_tile = [&]<class A, std::size_t N, bool Masked = false>(
      std::int64_t j, std::int64_t apart, std::size_t n, std::int64_t column, std::size_t lanes = 0) {
    const auto value = [&](std::size_t k) {
      if constexpr (Masked) {
        return row.template get_first<A, L, false>(j, lanes);
      } else {
        return row.template get<A, L, false>(j + static_cast<std::int64_t>(k) * apart);
      }
    };
    const B at_first_row = row;
    using accumulator = decltype(fold.start(value(0)));
    // A tile of one batch folds into `chains` accumulators in turn, where the fold can merge
    // them (not argmax's): with one, each step waited on the last one's add (one thread,
    // sum(x, {0}) of 16384 x 16 floats 14 -> 11 us, of 16384 x 10 16 -> 10).
    constexpr std::size_t chains = N == 1 && merging_fold<Fold, accumulator> ? column_chains : 1;
    std::array<accumulator, N * chains> acc{}; // chain c of column k at c * N + k; zeros g++ drops
#pragma GCC unroll 8
    for (std::size_t k = 0; k < n; ++k) acc[k] = fold.start(value(k));
    if constexpr (chains > 1) start_chains<Fold>(acc);
    const auto add = [&](std::size_t chain, std::int64_t q) {
#pragma GCC unroll 8
      for (std::size_t k = 0; k < n; ++k) fold.add(acc[chain * N + k], q, value(k));
    };
    // Each step to the next q moves the rows along the last reduced dimension; only where it
    // wraps (reduced dimensions that do not merge) is the next row found from the index. A
    // run along that dimension is a loop without calls: x86-64 keeps no vector register
    // across a call, and g++ kept the accumulators in memory where the loop over q made one
    // (one thread, sum(x * x, {0}) of 4096 x 256 floats: 68 us with next_index inline, 84
    // out of line, 61 now; sum(x * x, {0, 2}) of 256 x 4 x 256 x 16 floats: 1218, 2020, 398).
    for (std::int64_t run = 0; run < plan.reduced; run += along_last) {
      if (run > 0) {
        index[last_reduced] = along_last - 1; // not kept up by step_row: where next_index wraps it
        next_index(plan.loop, plan.reduced_dims, index);
        start_row(row, strides, index.data(), plan.loop.rank - 1);
        add(0, run);
      }
      std::int64_t q = run + 1;
      const std::int64_t run_end = run + along_last;
      if constexpr (chains > 1) {
        for (; q + static_cast<std::int64_t>(chains) <= run_end; q += chains) {
#pragma GCC unroll 4
          for (std::size_t c = 0; c < chains; ++c) {
            step_row(row, strides, last_reduced);
            add(c, q + static_cast<std::int64_t>(c));
          }
        }
      }
      for (; q < run_end; ++q) {
        step_row(row, strides, last_reduced);
        add(0, q);
      }
    }
    if constexpr (chains > 1) acc[0] = merge_chains<Fold>(acc);
    if constexpr (Masked) {
      fold.finish_first(acc[0], column, lanes);
    } else {
#pragma GCC unroll 8
      for (std::size_t k = 0; k < n; ++k) fold.finish(acc[k], column + static_cast<std::int64_t>(k) * apart);
    }
    row = at_first_row;
    for (std::size_t d = plan.reduced_dims.first; d < plan.reduced_dims.second; ++d) index[d] = 0;
  };
  walk_rows(row, plan.loop, index, plan.inner_dims.first, c_begin, c_end,
            [&](std::int64_t j, std::int64_t stop, std::int64_t offset) {
              const std::int64_t column_of_0 = c_begin + offset - j;
              if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
                const auto fold_tiles_of = [&]<std::size_t N>() {
                  constexpr auto columns = static_cast<std::int64_t>(N) * width;
                  for (; j + columns <= stop; j += columns) {
                    fold_tile.template operator()<Arch, N>(j, width, N, column_of_0 + j);
                  }
                };
                // AVX-512's 32 vector registers hold eight batches' accumulators (sixteen
                // for argmax); AVX2's 16 would spill argmax's. Eight rather than four: one
                // thread, sum(x * y, {0}) of 64 x 1024 floats 7.1 -> 5.5 us, of 16 x 4096
                // 7.1 -> 6.0; no change at 256 x 256 and 1024 x 1024.
                if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) fold_tiles_of.template operator()<8>();
                fold_tiles_of.template operator()<4>();
                fold_tiles_of.template operator()<1>();
                // Fewer columns than a batch has lanes: one masked batch. As scalars, they
                // took sum(x, {0}) of 16384 x 10 floats 37 us on one thread (now 10).
                if (j < stop) {
                  fold_tile.template operator()<Arch, 1, true>(j, width, 1, column_of_0 + j,
                                                               static_cast<std::size_t>(stop - j));
                }
              } else {
                // No SIMD path: tiles of 256 columns. g++ vectorizes the loop over a tile's
                // columns itself, and tiles of 16 took 1.6-3x the time of the row-by-row
                // loop before for max over 256 x 256 and sum over 8 x 64 x 128 floats.
                constexpr std::int64_t scalar_tile = 256;
                for (; j < stop; j += scalar_tile) {
                  const auto n = static_cast<std::size_t>(std::min(scalar_tile, stop - j));
                  fold_tile.template operator()<Arch, scalar_tile>(j, 1, n, column_of_0 + j);
                }
              }
            });
}

// Runs acc.add_row over reduced positions [begin, end) of the output at index[outer dims]
// (the innermost dimension reduced), row by row, into a fresh Acc, and returns
// finish(acc, begin). The reduced dims of `index` are walk_rows's to set. Flattened, with
// finish inside: the accumulators stay in registers from the first row to the part, where
// returning them, or passing them down to each row, stored and loaded them on every output.
template <class Acc, class L, class B, std::size_t Leaves, class Finish>
[[gnu::flatten]] auto accumulate_block(B& expr, const reduction_plan<Leaves>& plan,
                                       std::array<std::int64_t, max_rank>& index, std::int64_t begin,
                                       std::int64_t end, Finish finish) {
  Acc acc;
  walk_rows(expr, plan.loop, index, plan.reduced_dims.first, begin, end,
            [&](std::int64_t j, std::int64_t stop, std::int64_t offset) {
              if (plan.loop.rows_contiguous) {
                acc.template add_row<L, true>(expr, j, stop, offset);
              } else {
                acc.template add_row<L, false>(expr, j, stop, offset);
              }
            });
  return finish(acc, begin);
}

// Calls on_total(acc) for `count` outputs in order from the one at index[outer dims], acc an
// Acc over the output's reduced positions, and steps index past them. Where those are one
// row (the innermost dimension), a local copy of the expression, which can live in
// registers, moves from row to row by an addition per leaf along the outputs' fastest
// dimension, and start_row reads the index only where that dimension wraps. (With
// start_row and next_index for every row, as walk_rows had then, each row's loads
// waited on the index's stores: sum(x, {1}) over 16384 x 16 floats took 1.8x as long,
// over 4096 x 100 1.7x.) The grouped reductions' loop: accumulate_row_blocks steps the same
// way, but its blocks' counters, run with one block an output, took sum(x, {1}) over 16384
// rows of 10 floats 2x as long as this loop, whose rows all start at 0. (One call here for
// whole groups and the last, short one, rather than a second for the last, took 3-6% more
// for rows of 16, where it saved 9% of the code of a file of five reductions.) Flattened, as
// accumulate_block.
template <class Acc, class L, class B, std::size_t Leaves, class OnTotal>
[[gnu::flatten]] void accumulate_rows(const B& bound_expr, const reduction_plan<Leaves>& plan,
                                      std::array<std::int64_t, max_rank>& index, std::int64_t count,
                                      OnTotal on_total) {
  B row = bound_expr;
  const std::size_t inner_dim = plan.loop.rank - 1;
  if (plan.reduced_dims.first != inner_dim) { // several reduced dimensions: walk_rows visits them
    for (; count > 0; --count) {
      accumulate_block<Acc, L>(row, plan, index, 0, plan.reduced, [&](const Acc& acc, std::int64_t) {
        on_total(acc);
        return 0;
      });
      next_index(plan.loop, plan.outer_dims, index);
    }
    return;
  }
  const strides_t* const strides = plan.loop.leaf_strides.data();
  // The outputs' fastest dimension. Without one there is one output, whose step past its
  // row (along dimension 0, the reduced one) is never used.
  const bool has_outer = plan.outer_dims.first != plan.outer_dims.second;
  const std::size_t output_dim = has_outer ? plan.outer_dims.second - 1 : 0;
  const auto walk = [&]<bool Contiguous>() {
    while (count > 0) {
      start_row(row, strides, index.data(), inner_dim);
      const std::int64_t along = has_outer ? std::min(count, plan.loop.dims[output_dim] - index[output_dim]) : 1;
      for (std::int64_t k = 0; k < along; ++k) {
        Acc acc;
        acc.template add_row<L, Contiguous>(row, 0, plan.reduced, 0);
        on_total(acc);
        step_row(row, strides, output_dim);
      }
      if (has_outer) index[output_dim] += along - 1;
      next_index(plan.loop, plan.outer_dims, index);
      count -= along;
    }
  };
  if (plan.loop.rows_contiguous) {
    walk.template operator()<true>();
  } else {
    walk.template operator()<false>();
  }
}

// Sets partial[task] = finish(acc, block_begin) for tasks [first, last), where each output's
// reduced positions are one row (the innermost dimension, alone): task t is block t % blocks
// of output t / blocks, an Acc over reduced positions [block_begin, block_begin +
// reduction_block) of its row. A local copy of the expression, which can live in registers,
// is placed on the first task's row and moved from output to output by an addition per leaf
// along the outputs' fastest dimension, reading the index only where that dimension wraps.
// One output (sum(x * y)) has no index: its row is where bind put it. Each block is add_row
// on its piece of the row and nothing else: through accumulate_block's walk_rows, each block
// after the first cost about 60 ns more than its loop (one thread, Xeon under KVM; at 2^16
// floats 1.05-1.08 of a hand loop's time, now 1.03-1.06), and dividing out the one output's
// index, 10-13 ns a call. Flattened, as accumulate_block.
template <class Acc, class L, bool Contiguous, class B, std::size_t Leaves, class Part, class Finish>
[[gnu::flatten]] void accumulate_row_blocks(const B& bound_expr, const reduction_plan<Leaves>& plan,
                                            std::int64_t blocks, std::int64_t first, std::int64_t last, Part* partial,
                                            Finish finish) {
  B row = bound_expr;
  const auto add_block = [&](std::int64_t task, std::int64_t block) {
    const std::int64_t begin = block * reduction_block;
    Acc acc;
    acc.template add_row<L, Contiguous>(row, begin, std::min(plan.reduced, begin + reduction_block), 0);
    partial[task] = finish(acc, begin);
  };
  if (plan.outer_dims.first == plan.outer_dims.second) { // one output: task t is its block t
    for (std::int64_t task = first; task < last; ++task) add_block(task, task);
    return;
  }
  const strides_t* const strides = plan.loop.leaf_strides.data();
  const std::size_t inner_dim = plan.loop.rank - 1;
  const std::size_t output_dim = plan.outer_dims.second - 1; // the outputs' fastest dimension
  std::array<std::int64_t, max_rank> index{};
  unravel(plan.loop, plan.outer_dims, first / blocks, index);
  start_row(row, strides, index.data(), inner_dim);
  std::int64_t block = first % blocks;
  std::int64_t outputs_left_in_dim = plan.loop.dims[output_dim] - index[output_dim];
  for (std::int64_t task = first; task < last; ++task) {
    add_block(task, block);
    if (++block < blocks) continue;
    block = 0;
    if (--outputs_left_in_dim > 0) {
      step_row(row, strides, output_dim);
    } else {
      index[output_dim] = plan.loop.dims[output_dim] - 1;
      next_index(plan.loop, plan.outer_dims, index);
      start_row(row, strides, index.data(), inner_dim);
      outputs_left_in_dim = plan.loop.dims[output_dim];
    }
  }
}

// Calls run(bound_expr, plan, first, last) over tasks [0, count) in chunks of `chunk`. On
// one thread, or for one task, in place: on the plan where it is, as evaluate_into's serial
// loop (copying it into a closure first waits on the stores that just made it). Else on the
// pool, with everything by value, as in parallel_rows: a joining worker fetches the closure
// in a few transfers, from the pool's copy, rather than following references into this
// frame and the caller's. `run` holds the rest of what the tasks read, by value.
template <class B, std::size_t Leaves, class Run>
void run_tasks(thread_pool& pool, std::int64_t count, std::int64_t chunk, const B& bound_expr,
               const reduction_plan<Leaves>& plan, Run run) {
  if (count == 1 || pool.num_threads() == 1) {
    run(bound_expr, plan, 0, count);
    return;
  }
  pool.parallel_for(
      count, chunk,
      [run, bound_expr, plan](std::int64_t first, std::int64_t last) { run(bound_expr, plan, first, last); },
      thread_pool::workers_may_copy);
}

// The innermost dimension reduced: each output's reduced positions are cut into blocks of
// reduction_block, the blocks of all outputs run as parallel tasks, each into an Acc that
// finish(acc, block_begin) turns into a part, and each output's parts combine in block
// order before store(p, total).
template <class Acc, class L, class B, std::size_t Leaves, class Finish, class Combine, class Store>
void reduce_rows(const B& bound_expr, const reduction_plan<Leaves>& plan, thread_pool& pool, Finish finish,
                 Combine combine, Store store) {
  using part = decltype(finish(std::declval<const Acc&>(), std::int64_t{}));
  const std::int64_t blocks = (plan.reduced + reduction_block - 1) / reduction_block;
  const std::int64_t tasks = plan.outputs_outer * blocks;
  // Up to 16 parts (a full reduction of up to 2^18 elements) stay on the stack.
  std::array<part, 16> few_parts{};
  std::vector<part> many_parts(tasks > std::ssize(few_parts) ? static_cast<std::size_t>(tasks) : 0);
  part* const partial = many_parts.empty() ? few_parts.data() : many_parts.data();
  run_tasks(pool, tasks, tasks_per_chunk(tasks, std::min(plan.reduced, reduction_block), pool.num_threads()),
            bound_expr, plan,
            [partial, blocks, finish](const B& expr, const reduction_plan<Leaves>& layout, std::int64_t first,
                                      std::int64_t last) {
              if (layout.reduced_dims.first == layout.loop.rank - 1) {
                if (layout.loop.rows_contiguous) {
                  accumulate_row_blocks<Acc, L, true>(expr, layout, blocks, first, last, partial, finish);
                } else {
                  accumulate_row_blocks<Acc, L, false>(expr, layout, blocks, first, last, partial, finish);
                }
                return;
              }
              // Several reduced dimensions: walk_rows visits their rows. The first task's
              // output and block divided out once, the tasks after it stepped from there (as
              // accumulate_row_blocks does), and one copy of the expression for walk_rows to
              // point at each row, not one per task.
              std::array<std::int64_t, max_rank> index{};
              B walker = expr;
              std::int64_t block = first % blocks;
              unravel(layout.loop, layout.outer_dims, first / blocks, index);
              for (std::int64_t task = first; task < last; ++task) {
                const std::int64_t begin = block * reduction_block;
                const std::int64_t end = std::min(layout.reduced, begin + reduction_block);
                partial[task] = accumulate_block<Acc, L>(walker, layout, index, begin, end, finish);
                if (++block == blocks) {
                  block = 0;
                  next_index(layout.loop, layout.outer_dims, index);
                }
              }
            });
  for (std::int64_t p = 0; p < plan.outputs_outer; ++p) {
    part total = partial[p * blocks];
    for (std::int64_t b = 1; b < blocks; ++b) total = combine(total, partial[p * blocks + b]);
    store(p, total);
  }
}

// Totals of the output at index[outer dims] and the group - 1 after it (the innermost
// dimension reduced, each output one block) into out[0, group): each output's chains
// merged into one batch (chains_total), then Acc::store_totals of them all, which combines
// the lanes of the whole group at once. Flattened, as accumulate_block.
template <class Acc, class L, class B, std::size_t Leaves, class R>
[[gnu::flatten]] void total_group(const B& expr, const reduction_plan<Leaves>& plan,
                                  std::array<std::int64_t, max_rank>& index, R* out) {
  using merged = decltype(std::declval<const Acc&>().chains_total());
  std::array<merged, Acc::batch::size> chains;
  const std::int64_t row_length = plan.loop.dims[plan.loop.rank - 1];
  std::size_t k = 0;
  accumulate_rows<Acc, L>(expr, plan, index, std::ssize(chains),
                          [&](const Acc& acc) { chains[k++] = acc.chains_total(row_length); });
  Acc::store_totals(chains, out);
}

// Row reductions over rows this long at most take reduce_rows_in_groups. Longer rows gained
// nothing (4096 x 1000 floats), and fewer tasks of more outputs would leave threads idle
// where there are few rows. The choice does not depend on the thread count: a NaN's
// payload could (x86 keeps the first operand's, and the two paths may add in either
// order).
inline constexpr std::int64_t grouped_row_length = 1024;

// reduce_rows for every reduction over short rows: the outputs in groups of a batch's
// lanes (total_group), and those after the last whole group one by one.
template <class Acc, class L, class B, std::size_t Leaves, class R>
void reduce_rows_in_groups(const B& bound_expr, const reduction_plan<Leaves>& plan, thread_pool& pool, R* out) {
  constexpr auto group = static_cast<std::int64_t>(Acc::batch::size);
  const std::int64_t groups = (plan.outputs_outer + group - 1) / group;
  run_tasks(pool, groups, tasks_per_chunk(groups, group * plan.reduced, pool.num_threads()), bound_expr, plan,
            [out](const B& expr, const reduction_plan<Leaves>& layout, std::int64_t first, std::int64_t last) {
              std::array<std::int64_t, max_rank> index{};
              unravel(layout.loop, layout.outer_dims, first * group, index);
              for (std::int64_t p = first * group; p < last * group; p += group) {
                if (p + group <= layout.outputs_outer) {
                  total_group<Acc, L>(expr, layout, index, out + p);
                  continue;
                }
                R* to = out + p;
                accumulate_rows<Acc, L>(expr, layout, index, layout.outputs_outer - p,
                                        [&](const Acc& acc) { *to++ = acc.total(); });
              }
            });
}

// The innermost dimension kept: fold_columns over tasks of columns of each output row, run
// in parallel, with fold_for(p) the Fold of output row p.
template <class Arch, class L, class B, std::size_t Leaves, class FoldFor>
void reduce_columns(const B& bound_expr, const reduction_plan<Leaves>& plan, thread_pool& pool, FoldFor fold_for) {
  const std::int64_t column_grain =
      std::max<std::int64_t>(64, reduction_block / std::max<std::int64_t>(1, plan.reduced));
  const std::int64_t chunks = (plan.outputs_inner + column_grain - 1) / column_grain;
  run_tasks(pool, plan.outputs_outer * chunks, 1, bound_expr, plan,
            [fold_for, column_grain, chunks](const B& expr, const reduction_plan<Leaves>& layout,
                                             std::int64_t first, std::int64_t last) {
              for (std::int64_t task = first; task < last; ++task) {
                const std::int64_t p = task / chunks;
                const std::int64_t c = task % chunks * column_grain;
                fold_columns<Arch, L>(expr, layout, p, c, std::min(layout.outputs_inner, c + column_grain),
                                      fold_for(p));
              }
            });
}

// ---- sum, mean, prod, max, min ---------------------------------------------------------------

// A batch per chain of visit_row (on the scalar path a value, on chain 0). Four chains:
// eight (on AVX-512) brought sum(x * y) of 2^26 floats 1-5% closer to a hand FMA loop (of
// 2^16 1%), but made sum(x * x, {1}) over 4096 x 1000 floats 30% slower with the batches
// left over all on chain 0, and sum(x, {1}) over 4096 x 100 15% slower with them spread.
template <op O, class R, class Arch>
struct accumulators {
  using red = kernels::reduction<O>;
  using batch = kernels::batch_t<R, Arch>;
  static constexpr std::size_t chains = 4;
  // Spelled out, with no loop (not fill()): a loop would keep the accumulators in memory
  // once everything from here to total() is inlined into accumulate_block.
  std::array<batch, chains> lanes = {batch(red::template identity<R>()), batch(red::template identity<R>()),
                                     batch(red::template identity<R>()), batch(red::template identity<R>())};

  // What the lanes past a row's end hold: nothing to the total.
  template <class T>
  static constexpr T padding() {
    return red::template identity<T>();
  }

  template <class L, bool Contiguous, class B>
  void add_row(const B& expr, std::int64_t j, std::int64_t stop, std::int64_t /*offset*/) {
    visit_row<Arch, L, Contiguous>(expr, j, stop, *this,
                                   [](accumulators& acc, std::size_t chain, const auto& v, std::int64_t) {
                                     acc.lanes[chain] = red::combine(acc.lanes[chain], batch(v));
                                   });
  }

  // Neighbouring chains combined pairwise, (0 1) (2 3), then the lanes left to right. All
  // four whatever the rows' length: the identity adds nothing, and three adds cost less
  // than the branches that would skip them.
  batch chains_total(std::int64_t /*length*/ = std::numeric_limits<std::int64_t>::max()) const {
    return merge_pairwise(lanes, [](const batch& a, const batch& b) { return red::combine(a, b); });
  }
  R total() const { return kernels::combine_lanes<O, R, Arch>(chains_total()); }
  // total() of a batch's lanes of outputs at once, from their chains_total(), into out.
  static void store_totals(const std::array<batch, kernels::lanes<R, Arch>>& chains, R* out) {
    kernels::combine_lanes_of_each<O, R, Arch>(chains).store_unaligned(out);
  }
};

// The Fold of fold_columns for sum, mean, prod, max and min into a row of outputs R.
template <op O, class R>
struct fold_reduction {
  using red = kernels::reduction<O>;
  R* row;

  template <class V>
  static auto start(const V& v) {
    if constexpr (kernels::is_batch_v<V>) { // a batch of R: R is V on the SIMD path
      return red::combine(V(red::template identity<R>()), v);
    } else {
      return red::combine(red::template identity<R>(), static_cast<R>(v));
    }
  }
  template <class A, class V>
  static void add(A& acc, std::int64_t, const V& v) {
    acc = red::combine(acc, A(v));
  }
  template <class A>
  void finish(const A& acc, std::int64_t c) const {
    if constexpr (kernels::is_batch_v<A>) {
      acc.store_unaligned(row + c);
    } else {
      row[c] = acc;
    }
  }
  // finish of a batch of which only the first `count` lanes are columns.
  template <class A>
  void finish_first(const A& acc, std::int64_t c, std::size_t count) const {
    kernels::store_first(row + c, acc, count);
  }
  // Accumulators of separate chains of one column's positions, and how they merge.
  template <class A>
  static A identity() {
    return A(red::template identity<R>());
  }
  template <class A>
  static A merge(const A& a, const A& b) {
    return red::combine(a, b);
  }
};

// Slices of at least this many elements down at least this many columns (one inner
// dimension), sum, mean, prod, max, min and argmax (from streamed_argmax_slice on) fold
// by rows on the SIMD path (stream_columns); the shape alone decides, so the bits do not
// depend on the thread count. fold_columns walks all reduced positions for each tile of columns: a pass over
// the slice per tile, each reading a piece of every row, which the prefetchers follow
// poorly once the slice is out of L2. In L2 the tiles' registers win, and on narrow slices
// each output batch would wait on its own store from the row before (one thread,
// sum(x, {0}) floats: 256 x 256 2.4 us by tiles, 2.8 a row at a time; 16384 x 16 10.6 and
// 67.5; at the threshold, 4096 x 128, 34 and 31-34).
inline constexpr std::int64_t streamed_slice = 1 << 19;
inline constexpr std::int64_t streamed_columns = 128;
// Streamed slices fold in blocks of whole rows, at most this many elements of each panel,
// each into scratch rows of its own, which then combine in block order: threads split the rows,
// each reading its rows whole and in order, where splitting the columns had each read a
// part of every row.
inline constexpr std::int64_t streamed_block = 1 << 18;
// Longer rows are cut into panels of this many columns, each a task of its own, so that a
// block holds 16 rows (the last may hold fewer) and the scratch rows are about a
// sixteenth of the slice. Such rows stream only where there are at least panel_min_rows
// of them: fold_columns reads 16 long rows well, and many badly. One thread, sum(x, {0})
// floats, by tiles against streamed: 256 x 65536 5.6 against 2.1 ms, 96 x 32768 514
// against 215 us, 48 x 65536 389 against 210, 40 x 131072 815 against 480, 32 x 262144
// 1195 against 889; but in L3, 32 x 65536 and 64 x 32768 took 1.2 times as long
// streamed, and 64 x 65536 the same; 16 x 262144 took 335 us by tiles, 381 in a
// hand-written streamed loop.
inline constexpr std::int64_t streamed_panel = streamed_block / 16;
inline constexpr std::int64_t panel_min_rows = 32;

template <std::size_t Leaves>
bool streams_columns(const reduction_plan<Leaves>& plan) {
  return plan.inner_dims.second - plan.inner_dims.first == 1 && plan.outputs_inner >= streamed_columns &&
         plan.reduced * plan.outputs_inner >= streamed_slice &&
         (plan.outputs_inner <= streamed_panel || plan.reduced >= panel_min_rows);
}

// Streamed panels whose rows of accumulators are at least this many bytes long fold in
// groups of row_group rows: each batch of columns takes its accumulator from memory once
// per group, adds the group's rows in order in a register, and stores it once, which
// reads the rows as row_group streams, each on pages of its own. A column's additions
// keep their order, so the grouping changes no bits. One thread, sum(x, {0}) floats, a
// row at a time against in groups of four: 4096 x 4096 4.5 against 2.7 ms, 512 x 16384
// 2.2 against 1.1, 64 x 8192 49 against 33 us. On shorter rows a hand-written loop mostly
// lost: out of cache, 65536 x 256 (1 KiB rows) 2.3 against 4.9 ms and 16384 x 1024 2.7
// against 3.1, where several rows interleaved within a page confuse the prefetchers; in
// L3, 1024 x 1024, it gained (64 against 52 us).
inline constexpr std::int64_t grouped_row_bytes = 16 * 1024;
inline constexpr std::int64_t row_group = 4;

// The rows of a streamed slice's blocks each fold into: for sum, mean, prod, max and min a
// row of accumulators of R per block. A Fold of stream_columns gives, for the columns of
// its block's scratch rows, their start (start), the accumulator of a batch of columns
// (load, load_first for a masked one), that accumulator with the values of the block's
// row `at` added (add), and its store (store, store_first); merge then combines each
// output row's blocks in order into the output.
template <op O, class R, class Arch>
struct streamed_reduction {
  using red = kernels::reduction<O>;
  using batch = kernels::batch_t<R, Arch>;
  using scratch_type = R;
  using output_type = R;
  static constexpr std::int64_t scratch_rows = 1;
  R* row;

  streamed_reduction(R* block_rows, std::int64_t /*columns*/) : row(block_rows) {}
  void start(std::int64_t c_begin, std::int64_t c_end) const {
    std::fill(row + c_begin, row + c_end, red::template identity<R>());
  }
  batch load(std::int64_t c) const { return batch::load_unaligned(row + c); }
  batch load_first(std::int64_t c, std::size_t lanes) const { return kernels::load_first<batch>(row + c, lanes); }
  static void add(batch& acc, const batch& v, std::int64_t /*at*/) { acc = red::combine(acc, v); }
  void store(std::int64_t c, const batch& acc) const { acc.store_unaligned(row + c); }
  void store_first(std::int64_t c, const batch& acc, std::size_t lanes) const {
    kernels::store_first(row + c, acc, lanes);
  }
  // An output row's `blocks` scratch rows, one after another, combined in order into out.
  static void merge(R* blocks_rows, std::int64_t blocks, std::int64_t columns, std::int64_t /*rows_per_block*/,
                    R* out) {
    constexpr auto width = static_cast<std::int64_t>(batch::size);
    std::copy_n(blocks_rows, columns, out);
    for (std::int64_t block = 1; block < blocks; ++block) {
      const R* const from = blocks_rows + block * columns;
      std::int64_t c = 0;
      for (; c + width <= columns; c += width) {
        red::combine(batch::load_unaligned(out + c), batch::load_unaligned(from + c)).store_unaligned(out + c);
      }
      for (; c < columns; ++c) out[c] = red::combine(out[c], from[c]);
    }
  }
};

// Folds columns [c_begin, c_end) (a panel) of reduced positions [q_begin, q_end) of output
// row p (one inner dimension) into the same columns of `fold`'s scratch rows, a position at
// a time in order: fold.start, then fold.add of each position's values (for a
// streamed_reduction, red::combine with the identity first, as fold_reduction's start,
// then its add: as fold_columns' tiles of several batches fold each column, no chains),
// the panel's end as one masked batch; panels of grouped_row_bytes or more in groups of
// row_group rows. Contiguous: no leaf broadcast along the columns
// (plan.loop.rows_contiguous), so no batch tests for one. The Fold by value, a local copy
// that no store can alias: by reference, g++ loaded its row pointer again after every
// store through it (sum(x, {0}) of 4096 x 128 floats 29 -> 34 us). Flattened.
template <class Arch, class L, bool Contiguous, class B, std::size_t Leaves, class Fold>
[[gnu::flatten]] void stream_columns(const B& bound_expr, const reduction_plan<Leaves>& plan, std::int64_t p,
                                     std::int64_t q_begin, std::int64_t q_end, std::int64_t c_begin, std::int64_t c_end,
                                     const Fold fold) {
  using batch = typename Fold::batch;
  constexpr auto width = static_cast<std::int64_t>(batch::size);
  const strides_t* const strides = plan.loop.leaf_strides.data();
  std::array<std::int64_t, max_rank> index{};
  unravel(plan.loop, plan.outer_dims, p, index);
  unravel(plan.loop, plan.reduced_dims, q_begin, index);
  const std::size_t inner_dim = plan.loop.rank - 1;
  const std::size_t last_reduced = plan.reduced_dims.second - 1;
  const std::int64_t along_last = plan.loop.dims[last_reduced];
  const std::int64_t whole_end = c_begin + (c_end - c_begin) / width * width;
  B row = bound_expr; // a local copy, as in fold_columns
  start_row(row, strides, index.data(), inner_dim);
  // To the next reduced position: along the last reduced dimension a step; where it wraps,
  // the row from the index (past q_end, a row that is never read).
  const auto next_row = [&] {
    if (index[last_reduced] + 1 < along_last) {
      ++index[last_reduced];
      step_row(row, strides, last_reduced);
    } else {
      next_index(plan.loop, plan.reduced_dims, index);
      start_row(row, strides, index.data(), inner_dim);
    }
  };
  // Folds the rows given, in order, the first at position `first` of the block.
  const auto fold_rows = [&](std::int64_t first, const auto&... rows) {
    std::int64_t c = c_begin;
    for (; c < whole_end; c += width) {
      auto acc = fold.load(c);
      std::int64_t at = first;
      (Fold::add(acc, batch(rows.template get<Arch, L, Contiguous>(c)), at++), ...);
      fold.store(c, acc);
    }
    if (c < c_end) {
      const auto lanes = static_cast<std::size_t>(c_end - c);
      auto acc = fold.load_first(c, lanes);
      std::int64_t at = first;
      (Fold::add(acc, batch(rows.template get_first<Arch, L, Contiguous>(c, lanes)), at++), ...);
      fold.store_first(c, acc, lanes);
    }
  };
  fold.start(c_begin, c_end);
  std::int64_t q = q_begin;
  if ((c_end - c_begin) * static_cast<std::int64_t>(sizeof(typename batch::value_type)) >= grouped_row_bytes) {
    for (; q + row_group <= q_end; q += row_group) {
      [&]<std::size_t... k>(std::index_sequence<k...>) {
        const auto at_next = [&](std::size_t) {
          const B r = row;
          next_row();
          return r;
        };
        // Rows q, q + 1, ...: a braced list runs its initializers left to right.
        const std::array<B, sizeof...(k)> group{at_next(k)...};
        fold_rows(q - q_begin, group[k]...);
      }(std::make_index_sequence<static_cast<std::size_t>(row_group)>{});
    }
  }
  for (; q < q_end; ++q) {
    fold_rows(q - q_begin, row);
    next_row();
  }
}

// The first memory leaf's address (a slice as large as streams_columns picks has one).
template <class B>
const void* first_leaf_address(B expr) {
  const void* address = nullptr;
  auto first = [&]<class T>(bound_memory<T>& leaf) {
    if (address == nullptr) address = leaf.base;
  };
  expr.for_each_leaf(first);
  return address;
}

// reduce_columns for the slices streams_columns picks, into out: each output row's
// reduced positions in blocks of whole rows that fill streamed_block elements of a panel
// (the last block may hold fewer), the panels of the blocks of all output rows as parallel
// tasks, each block into Fold's scratch rows, then each output row's blocks merged in
// order into out, a row at a time. The scratch rows
// start 2 KiB past the first leaf's offset in a 4 KiB page: a load waits on an earlier
// store to an address with the same low 12 bits (4K aliasing), and where rows are whole
// pages long every load of a block would (one thread, 16 bytes past the leaf against 2
// KiB: 256 x 4096 floats 102 against 58-63 us, 1024 x 1024 70 against 54-56).
template <class Arch, class L, class Fold, class B, std::size_t Leaves>
void reduce_columns_streamed(const B& bound_expr, const reduction_plan<Leaves>& plan, thread_pool& pool,
                             typename Fold::output_type* out) {
  using S = typename Fold::scratch_type;
  constexpr std::int64_t page = 4096;
  const std::int64_t columns = plan.outputs_inner;
  const std::int64_t panel = std::min(columns, streamed_panel);
  const std::int64_t panels = (columns + panel - 1) / panel;
  const std::int64_t rows_per_block = streamed_block / panel; // at least 16
  const std::int64_t blocks = (plan.reduced + rows_per_block - 1) / rows_per_block;
  const std::int64_t block_size = Fold::scratch_rows * columns; // a block's scratch rows
  constexpr auto size = static_cast<std::int64_t>(sizeof(S));
  const aligned_array<S> scratch = allocate_aligned<S>(plan.outputs_outer * blocks * block_size + page / size);
  const auto offset = [](const void* p) {
    return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) % page);
  };
  const std::int64_t shift = (offset(first_leaf_address(bound_expr)) + page / 2 - offset(scratch.get()) + page) % page;
  S* const rows = scratch.get() + shift / size;
  run_tasks(pool, plan.outputs_outer * blocks * panels, 1, bound_expr, plan,
            [rows, columns, blocks, rows_per_block, panel, panels, block_size](
                const B& expr, const reduction_plan<Leaves>& layout, std::int64_t first, std::int64_t last) {
              for (std::int64_t task = first; task < last; ++task) {
                const std::int64_t block_of_all = task / panels; // output row p's block, p * blocks + block
                const std::int64_t p = block_of_all / blocks, q = block_of_all % blocks * rows_per_block;
                const std::int64_t q_end = std::min(layout.reduced, q + rows_per_block);
                const std::int64_t c = task % panels * panel, c_end = std::min(columns, c + panel);
                const Fold fold(rows + block_of_all * block_size, columns);
                if (layout.loop.rows_contiguous) {
                  stream_columns<Arch, L, true, B, Leaves>(expr, layout, p, q, q_end, c, c_end, fold);
                } else {
                  stream_columns<Arch, L, false, B, Leaves>(expr, layout, p, q, q_end, c, c_end, fold);
                }
              }
            });
  for (std::int64_t p = 0; p < plan.outputs_outer; ++p) {
    Fold::merge(rows + p * blocks * block_size, blocks, columns, rows_per_block, out + p * columns);
  }
}

// How reduce_rows finishes a block, combines two parts and stores an output's total, for
// reduce_leaves (the first three) and argmax_leaves (the last three). Named types, not
// lambdas: a lambda's type differs in each instantiation of the function that holds it, so
// sum(x) and sum(x, {1}) in one file would compile reduce_rows, the loop, twice.
struct total_of_block {
  template <class Acc>
  auto operator()(const Acc& acc, std::int64_t) const {
    return acc.total();
  }
};
template <op O>
struct combine_parts {
  template <class R>
  R operator()(R a, R b) const {
    return kernels::reduction<O>::combine(a, b);
  }
};
template <class R>
struct store_total {
  R* out;
  void operator()(std::int64_t p, R total) const { out[p] = total; }
};
struct winner_of_block {
  template <class Acc>
  auto operator()(const Acc& acc, std::int64_t block_begin) const {
    return acc.winner(block_begin);
  }
};
struct better_candidate {
  template <class C>
  C operator()(const C& a, const C& b) const {
    return better(a, b);
  }
};
struct store_position {
  std::int64_t* out;
  template <class C>
  void operator()(std::int64_t p, const C& total) const {
    out[p] = total.at;
  }
};

// EveryAxis: the call named no axes (sum(e)), so every axis is reduced and the result has
// no kept axis to run SIMD across: only reduce_rows can run, and only it is compiled, not
// reduce_rows_in_groups, reduce_columns or reduce_columns_streamed, which axes known at run
// time may need. A file with one sum(x * y) took 21.0 G instructions of g++ -O2, now 13.5 G.
template <op O, bool EveryAxis, class E>
auto reduce_leaves(const E& e, const axes& which, bool keep) {
  using V = typename E::value_type;
  using R = reduction_result_t<O, V>;
  using red = kernels::reduction<O>;
  const auto plan = plan_reduction(e, which, keep, O);
  tensor<R> out(tensor<R>::uninitialized, plan.out);
  if (plan.reduced == 0) {
    if constexpr (O == op::max || O == op::min) {
      throw value_error(detail::message(name(O), ": cannot reduce over an empty axis (shape ", shape_of(e), ")"));
    } else {
      const R fill = O == op::mean ? std::numeric_limits<R>::quiet_NaN() : red::template identity<R>();
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
    constexpr auto group = static_cast<std::int64_t>(kernels::lanes<R, Arch>);
    const bool rows = EveryAxis || plan.inner_dims.first == plan.inner_dims.second;
    if constexpr (group > 1 && !EveryAxis) {
      if (rows && plan.reduced <= grouped_row_length && plan.outputs_outer >= group) {
        reduce_rows_in_groups<accumulators<O, R, Arch>, L>(bound_expr, plan, pool, out.data());
        return;
      }
    }
    if (rows) {
      reduce_rows<accumulators<O, R, Arch>, L>(bound_expr, plan, pool, total_of_block{}, combine_parts<O>{},
                                               store_total<R>{out.data()});
    } else if constexpr (!EveryAxis) {
      if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
        if (streams_columns(plan)) {
          reduce_columns_streamed<Arch, L, streamed_reduction<O, R, Arch>>(bound_expr, plan, pool, out.data());
          return;
        }
      }
      reduce_columns<Arch, L>(bound_expr, plan, pool, [out = out.data(), inner = plan.outputs_inner](std::int64_t p) {
        return fold_reduction<O, R>{out + p * inner};
      });
    }
  });
  if constexpr (O == op::mean) {
    const R count = static_cast<R>(plan.reduced);
    for (R& v : out) v /= count;
  }
  return out;
}

// ---- argmax ------------------------------------------------------------------------------------

// The SIMD loops keep each lane's position in a lane of the value type, so that the one
// mask that selects a lane's value selects its position too. Lanes of T count exactly to
// this (float to 2^24): above the block size, so every row reduction's block-relative
// positions fit, and the reduced length for the SIMD path over columns.
template <class T>
constexpr std::int64_t exact_positions() {
  if constexpr (std::is_floating_point_v<T>) {
    return std::int64_t{1} << std::numeric_limits<T>::digits;
  } else {
    return static_cast<std::int64_t>(std::numeric_limits<T>::max());
  }
}
static_assert(reduction_block <= exact_positions<float>() && reduction_block <= exact_positions<std::int32_t>());

// Chains of lanes, as accumulators has, each with the first maximum among the positions it
// has seen (in increasing order) and where it is; on the scalar path, one candidate.
// Positions count from the block's start. A chain's lanes hold the position of the first
// batch of its group (so that the chains share one broadcast): lane l of chain k is at
// at[k] + k * width + l. A chain starts with the padding at the first group's positions, as
// if the block began with a group of padding; that never changes the answer: the padding
// is the lowest value, and where it is also the block's largest, the block's first
// position holds it.
template <class T, class Arch>
struct argmax_accumulators {
  using batch = kernels::batch_t<T, Arch>;
  // Four, as accumulators. Eight on AVX-512 (one thread, floats, when the batches left over
  // all went on chain 0): argmax(x) of 2^16 4.5 -> 2.7 us, over 64 rows of 32000 137 -> 95
  // us, but over 4096 rows of 100 87 -> 97, and with a round of four chains before the
  // batches left over, rows of 16 10% slower. Not measured since the leftovers are spread
  // over the chains.
  static constexpr std::size_t chains = 4;

  // What the lanes past a row's end hold: never a first maximum, since the positions
  // before them hold at least as much.
  template <class U>
  static constexpr U padding() {
    return kernels::reduction<op::max>::identity<U>();
  }

  // Spelled out, as accumulators' lanes.
  std::array<batch, chains> best = {batch(padding<T>()), batch(padding<T>()), batch(padding<T>()),
                                    batch(padding<T>())};
  std::array<batch, chains> at{};
  kernels::argmax_candidate<T> scalar_best;

  template <class L, bool Contiguous, class B>
  void add_row(const B& expr, std::int64_t j, std::int64_t stop, std::int64_t offset) {
    const std::int64_t position_of_0 = offset - j;
    visit_row<Arch, L, Contiguous>(
        expr, j, stop, *this,
        [position_of_0](argmax_accumulators& acc, std::size_t chain, const auto& v, std::int64_t first) {
          if constexpr (std::is_same_v<Arch, kernels::scalar_arch>) {
            const auto value = static_cast<T>(v);
            if (acc.scalar_best.at < 0 || kernels::argmax_replaces(value, acc.scalar_best.value))
              acc.scalar_best = {value, position_of_0 + first};
          } else {
            const auto group = first - static_cast<std::int64_t>(chain * batch::size);
            const auto replace = kernels::argmax_replaces(v, acc.best[chain]);
            acc.best[chain] = xsimd::select(replace, v, acc.best[chain]);
            acc.at[chain] = xsimd::select(replace, batch(static_cast<T>(position_of_0 + group)), acc.at[chain]);
          }
        });
  }

  // (The merges below are AVX-512 intrinsics once inlined.)
  XLITE_INTRINSICS_BEGIN

  // The chains as one batch of candidates, lane l of chain k at at[k] + k * width + l: those
  // that visit_row reached in rows of `length` (chain k's first batch starts at k * width).
  // A chain it did not reach could only lose, and each merge is seven mask operations
  // (merging all four, argmax over 16384 rows of 10 floats took 1.3x as long).
  kernels::argmax_lanes<T, Arch> chains_total(std::int64_t length = std::numeric_limits<std::int64_t>::max()) const {
    const auto chain = [&](std::size_t k) {
      return kernels::argmax_lanes<T, Arch>{
          best[k], at[k] + kernels::lane_indices<T, Arch>() + batch(static_cast<T>(k * batch::size))};
    };
    // Pairwise, (0 1) (2 3), as accumulators. (One after another in a loop, argmax over
    // 16384 rows of 10 floats took 1.5x as long.)
    static_assert(chains == 4, "merge the chains below as there are chains");
    const std::int64_t last_reached = (length - 1) / static_cast<std::int64_t>(batch::size);
    const auto first = last_reached >= 1 ? better(chain(0), chain(1)) : chain(0);
    if (last_reached < 2) return first;
    return better(first, last_reached >= 3 ? better(chain(2), chain(3)) : chain(2));
  }

  // The winner of the block that starts at reduced position block_begin: the largest value
  // (or a NaN, if there is one) at the first position that holds it.
  kernels::argmax_candidate<T> winner(std::int64_t block_begin) const {
    kernels::argmax_candidate<T> result = scalar_best;
    if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) result = kernels::best_in_lanes(chains_total());
    result.at += block_begin;
    return result;
  }
  std::int64_t total() const { return winner(0).at; }

  // total() of a batch's lanes of outputs at once, from their chains_total(), into out.
  static void store_totals(const std::array<kernels::argmax_lanes<T, Arch>, kernels::lanes<T, Arch>>& chains,
                           std::int64_t* out) {
    std::array<T, kernels::lanes<T, Arch>> positions;
    kernels::best_positions_of_each(chains).store_unaligned(positions.data());
    for (std::size_t g = 0; g < positions.size(); ++g) out[g] = static_cast<std::int64_t>(positions[g]);
  }
  XLITE_INTRINSICS_END
};

// The Fold of fold_columns for argmax into a row of positions: each column's first
// maximum and the reduced position q where it is, in lanes of V on the SIMD path (exact
// there: the caller takes the scalar path for longer columns).
template <class V>
struct fold_argmax {
  std::int64_t* row;

  template <class X>
  struct column_best {
    X value;
    X at;
  };

  template <class X>
  static auto start(const X& v) {
    if constexpr (kernels::is_batch_v<X>) {
      return column_best<X>{v, X(V(0))};
    } else {
      return kernels::argmax_candidate<V>{v, 0};
    }
  }
  template <class X>
  static void add(column_best<X>& acc, std::int64_t q, const X& v) {
    const auto replace = kernels::argmax_replaces(v, acc.value);
    acc.value = xsimd::select(replace, v, acc.value);
    acc.at = xsimd::select(replace, X(static_cast<V>(q)), acc.at);
  }
  static void add(kernels::argmax_candidate<V>& acc, std::int64_t q, const V& v) {
    if (kernels::argmax_replaces(v, acc.value)) acc = {v, q};
  }
  template <class X>
  void finish(const column_best<X>& acc, std::int64_t c) const {
    finish_first(acc, c, X::size);
  }
  // finish of a batch of which only the first `count` lanes are columns.
  template <class X>
  void finish_first(const column_best<X>& acc, std::int64_t c, std::size_t count) const {
    std::array<V, X::size> at;
    acc.at.store_unaligned(at.data());
    for (std::size_t lane = 0; lane < count; ++lane)
      row[c + static_cast<std::int64_t>(lane)] = static_cast<std::int64_t>(at[lane]);
  }
  void finish(const kernels::argmax_candidate<V>& acc, std::int64_t c) const { row[c] = acc.at; }
};

// argmax streams the slices streams_columns picks from this many elements on: it keeps two
// rows per block (values and positions), and up to L3 fold_columns' tiles in registers win.
// One thread, argmax(x, {0}) floats, by tiles against streamed: 2048 x 1024 160 against
// 212 us, 1024 x 1024 76 against 99, 4096 x 128 40 against 52; from 2^22 elements on,
// 4096 x 1024 1.33 against 0.40 ms, 65536 x 256 5.65 against 2.45, 4096 x 4096 5.84
// against 3.67, 256 x 65536 6.02 against 4.27.
inline constexpr std::int64_t streamed_argmax_slice = 1 << 22;

template <std::size_t Leaves>
bool streams_argmax_columns(const reduction_plan<Leaves>& plan) {
  return streams_columns(plan) && plan.reduced * plan.outputs_inner >= streamed_argmax_slice;
}

// The Fold of stream_columns for argmax: rows of each column's first maximum and of its
// position from the block's start, in lanes of V (exact: the SIMD path takes only columns
// of at most exact_positions<V>() positions). A column starts with the padding at position
// 0, which the block's first row replaces unless it holds the padding, the lowest value,
// itself. merge takes each column's winner over the blocks in order, the earlier block's
// between equals.
template <class V, class Arch>
struct streamed_argmax {
  using batch = kernels::batch_t<V, Arch>;
  using scratch_type = V;
  using output_type = std::int64_t;
  static constexpr std::int64_t scratch_rows = 2; // the values, then their positions
  using accumulator = kernels::argmax_lanes<V, Arch>;
  V* value;
  V* at;

  streamed_argmax(V* block_rows, std::int64_t columns) : value(block_rows), at(block_rows + columns) {}
  void start(std::int64_t c_begin, std::int64_t c_end) const {
    std::fill(value + c_begin, value + c_end, kernels::reduction<op::max>::identity<V>());
    std::fill(at + c_begin, at + c_end, V(0));
  }
  accumulator load(std::int64_t c) const { return {batch::load_unaligned(value + c), batch::load_unaligned(at + c)}; }
  accumulator load_first(std::int64_t c, std::size_t lanes) const {
    return {kernels::load_first<batch>(value + c, lanes), kernels::load_first<batch>(at + c, lanes)};
  }
  static void add(accumulator& acc, const batch& v, std::int64_t position) {
    const auto replace = kernels::argmax_replaces(v, acc.value);
    acc.value = xsimd::select(replace, v, acc.value);
    acc.at = xsimd::select(replace, batch(static_cast<V>(position)), acc.at);
  }
  void store(std::int64_t c, const accumulator& acc) const {
    acc.value.store_unaligned(value + c);
    acc.at.store_unaligned(at + c);
  }
  void store_first(std::int64_t c, const accumulator& acc, std::size_t lanes) const {
    kernels::store_first(value + c, acc.value, lanes);
    kernels::store_first(at + c, acc.at, lanes);
  }
  // The first block's rows keep the winners so far, SIMD across columns, their positions
  // from the slice's start (exact, as in the blocks). (Column by column with a branch,
  // argmax of 256 x 65536 floats took 4.57 ms on one thread, against 3.88 now.)
  static void merge(V* blocks_rows, std::int64_t blocks, std::int64_t columns, std::int64_t rows_per_block,
                    std::int64_t* out) {
    constexpr auto width = static_cast<std::int64_t>(batch::size);
    const streamed_argmax best(blocks_rows, columns);
    for (std::int64_t block = 1; block < blocks; ++block) {
      const streamed_argmax next(blocks_rows + block * scratch_rows * columns, columns);
      const batch first_row(static_cast<V>(block * rows_per_block));
      const auto merge_batch = [&](const accumulator& acc, const accumulator& other) {
        return better(acc, accumulator{other.value, other.at + first_row});
      };
      std::int64_t c = 0;
      for (; c + width <= columns; c += width) best.store(c, merge_batch(best.load(c), next.load(c)));
      if (c < columns) {
        const auto lanes = static_cast<std::size_t>(columns - c);
        best.store_first(c, merge_batch(best.load_first(c, lanes), next.load_first(c, lanes)), lanes);
      }
    }
    for (std::int64_t c = 0; c < columns; ++c) out[c] = static_cast<std::int64_t>(best.at[c]);
  }
};

// argmax over one axis (or, EveryAxis, the flattened tensor: compiling only the row loops, as
// reduce_leaves).
template <bool EveryAxis, class E>
tensor<std::int64_t> argmax_leaves(const E& e, const axes& which, bool keep) {
  using V = typename E::value_type;
  if (!which.all() && which.list().size() != 1) {
    throw index_error(detail::message("argmax: takes one axis or none, got ", which.list().size()));
  }
  const auto plan = plan_reduction(e, which, keep, op::argmax);
  tensor<std::int64_t> out(tensor<std::int64_t>::uninitialized, plan.out);
  if (plan.reduced == 0)
    throw value_error(detail::message("argmax: cannot reduce over an empty axis (shape ", shape_of(e), ")"));
  if (out.size() == 0) return out;
  const auto bound_expr = bind(e, plan.loop);
  using L = lane_type_t<E>;
  constexpr bool simd = simd_evaluable_v<E> && kernels::simd_element_v<V>;
  thread_pool& pool = current_thread_pool();
  const bool columns = !EveryAxis && plan.inner_dims.first != plan.inner_dims.second;
  const auto run = [&](auto arch) {
    using Arch = decltype(arch);
    constexpr auto group = static_cast<std::int64_t>(kernels::lanes<V, Arch>);
    if constexpr (group > 1 && !EveryAxis) {
      if (!columns && plan.reduced <= grouped_row_length && plan.outputs_outer >= group) {
        reduce_rows_in_groups<argmax_accumulators<V, Arch>, L>(bound_expr, plan, pool, out.data());
        return;
      }
    }
    if (!columns) {
      reduce_rows<argmax_accumulators<V, Arch>, L>(bound_expr, plan, pool, winner_of_block{}, better_candidate{},
                                                   store_position{out.data()});
    } else if constexpr (!EveryAxis) {
      if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
        if (streams_argmax_columns(plan)) {
          reduce_columns_streamed<Arch, L, streamed_argmax<V, Arch>>(bound_expr, plan, pool, out.data());
          return;
        }
      }
      reduce_columns<Arch, L>(bound_expr, plan, pool, [out = out.data(), inner = plan.outputs_inner](std::int64_t p) {
        return fold_argmax<V>{out + p * inner};
      });
    }
  };
  // Columns longer than lanes of V count exactly take the scalar path.
  if constexpr (simd) {
    if (!columns || plan.reduced <= exact_positions<V>()) {
      kernels::dispatch<true>(run);
      return out;
    }
  }
  kernels::dispatch<false>(run);
  return out;
}

// Reductions of expressions with deferred leaves (matmul) reduce their computed values.
template <op O, bool EveryAxis = false, class E>
auto reduce(const E& e, const axes& which, bool keep) {
  using V = typename E::value_type;
  static_cast<void>(sizeof(checks::reduction_allowed<O, V>));
  if constexpr (!is_reduction_allowed<O, V>()) {
    return tensor<V>(); // the check failed: the loops would only add errors to its sentence
  } else if constexpr (deferred_count_v<E> > 0) {
    return reduce_leaves<O, EveryAxis>(resolve_deferred(e), which, keep);
  } else {
    return reduce_leaves<O, EveryAxis>(e, which, keep);
  }
}

template <bool EveryAxis = false, class E>
tensor<std::int64_t> reduce_argmax(const E& e, const axes& which, bool keep) {
  if constexpr (deferred_count_v<E> > 0) {
    return argmax_leaves<EveryAxis>(resolve_deferred(e), which, keep);
  } else {
    return argmax_leaves<EveryAxis>(e, which, keep);
  }
}

} // namespace xlite::expr

namespace xlite {

// With no axes named, every axis is reduced, known when the call compiles (reduce_leaves).
#define XLITE_REDUCTION(function, op_name)                                                                             \
  template <class E>                                                                                                   \
  requires expr::tensor_like<E>                                                                                        \
  auto function(E&& e) {                                                                                               \
    return expr::reduce<op::op_name, true>(expr::to_operand(std::forward<E>(e)), axes{}, false);                       \
  }                                                                                                                    \
  template <class E>                                                                                                   \
  requires expr::tensor_like<E>                                                                                        \
  auto function(E&& e, const axes& which) {                                                                            \
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
requires expr::tensor_like<E> tensor<std::int64_t> argmax(E&& e) {
  return expr::reduce_argmax<true>(expr::to_operand(std::forward<E>(e)), axes{}, false);
}
template <class E>
requires expr::tensor_like<E> tensor<std::int64_t> argmax(E&& e, const axes& which) {
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
