#pragma once

// Deferred leaves: operands of an element-wise expression whose values come from a
// computation over whole tensors, such as matmul (expr/matmul.hpp). The evaluator knows
// them only by this protocol, so that it needs none of their kernels:
//
//   D::value_type, D::is_deferred, d.shape
//   d.compute(out, region)    writes d's values, row-major, to `out` (room for d.shape),
//                             calling region(begin, rows, cols, row_stride) once for each
//                             finished block (`rows` runs of `cols` elements, the first at
//                             flat index `begin`, each `row_stride` after the one before),
//                             on the thread that finished it; the blocks cover the output
//   d.for_each_input(f)       f(data, shape, element size) for every tensor d reads
//
// An expression with deferred leaves is evaluated in one of two ways:
//   - fused: when its only deferred leaf has the expression's shape and element type, the
//     leaf computes straight into the output and the element-wise expression runs on each
//     finished block while it is still in cache (relu(matmul(a, b) + bias) is one GEMM whose
//     epilogue adds the bias and clamps);
//   - otherwise each deferred leaf is computed into a temporary tensor first, and the
//     expression then reads it as any other tensor.

#include <atomic>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xlite/expr/evaluate.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/kernels/simd.hpp"

namespace xlite::expr {

// How deferred leaves were evaluated, since the process started: fused into their
// expression's output, or computed into a temporary first. For tests, and for users who
// want to see that relu(matmul(a, b) + bias) is one pass.
struct deferred_counts {
  std::int64_t fused = 0;
  std::int64_t materialized = 0;
};

namespace deferred_detail {
inline std::atomic<std::int64_t> deferred_fused{0};
inline std::atomic<std::int64_t> deferred_materialized{0};
} // namespace deferred_detail

inline deferred_counts deferred_evaluations() {
  return {deferred_detail::deferred_fused.load(), deferred_detail::deferred_materialized.load()};
}


// E with every deferred leaf D replaced by Leaf<D::value_type>.
template <class E, template <class> class Leaf>
struct replaced {
  using type = std::conditional_t<is_deferred_v<E>, Leaf<typename E::value_type>, E>;
};
template <op O, class T, class... Operands, template <class> class Leaf>
struct replaced<node<O, T, Operands...>, Leaf> {
  using type = node<O, T, typename replaced<Operands, Leaf>::type...>;
};
template <class To, class Operand, template <class> class Leaf>
struct replaced<cast_node<To, Operand>, Leaf> {
  using type = cast_node<To, typename replaced<Operand, Leaf>::type>;
};

// Rebuilds e with make_leaf(d) in place of each deferred leaf d.
template <template <class> class Leaf, class E, class MakeLeaf>
typename replaced<E, Leaf>::type replace_deferred(const E& e, const MakeLeaf& make_leaf) {
  if constexpr (is_deferred_v<E>) {
    return make_leaf(e);
  } else if constexpr (requires { e.operands; }) {
    return unpack(
        [&](const auto&... o) {
          return typename replaced<E, Leaf>::type{{replace_deferred<Leaf>(o, make_leaf)...}, e.shape};
        },
        e.operands);
  } else if constexpr (requires { e.operand; }) {
    return typename replaced<E, Leaf>::type{replace_deferred<Leaf>(e.operand, make_leaf), e.shape};
  } else {
    return e;
  }
}

// e with each deferred leaf computed into a tensor of its own.
template <class E>
auto resolve_deferred(const E& e) {
  return replace_deferred<tensor_owner>(e, [](const auto& d) {
    using T = typename std::remove_cvref_t<decltype(d)>::value_type;
    tensor<T> values(tensor<T>::uninitialized, d.shape);
    ++deferred_detail::deferred_materialized;
    d.compute(values.data(), [](std::int64_t, std::int64_t, std::int64_t, std::int64_t) {});
    return tensor_owner<T>(std::move(values));
  });
}

// The one deferred leaf of e (deferred_count_v<E> is 1).
template <class E>
const auto& only_deferred(const E& e);

template <class First, class... Rest>
const auto& only_deferred_among(const First& first, const Rest&... rest) {
  if constexpr (deferred_count_v<First> == 1) {
    return only_deferred(first);
  } else {
    return only_deferred_among(rest...);
  }
}

template <class E>
const auto& only_deferred(const E& e) {
  if constexpr (is_deferred_v<E>) {
    return e;
  } else if constexpr (requires { e.operand; }) {
    return only_deferred(e.operand);
  } else {
    return unpack(
        [](const auto&... o) -> const auto& { return only_deferred_among(o...); }, e.operands);
  }
}

// Writes e, which has deferred leaves, to `out` (which overlaps none of e's inputs).
template <class T, class E>
void evaluate_deferred(T* out, const E& e) {
  if constexpr (is_deferred_v<E>) {
    ++deferred_detail::deferred_fused;
    e.compute(out, [](std::int64_t, std::int64_t, std::int64_t, std::int64_t) {});
    return;
  } else if constexpr (deferred_count_v<E> == 1) {
    const auto& d = only_deferred(e);
    using D = std::remove_cvref_t<decltype(d)>;
    if constexpr (std::is_same_v<typename D::value_type, T>) {
      if (d.shape == shape_of(e)) {
        // The element-wise part reads the deferred values where it writes its own: in place.
        const auto fused = replace_deferred<tensor_ref>(e, [&](const D&) { return tensor_ref<T>{out, e.shape}; });
        using F = std::remove_cvref_t<decltype(fused)>;
        ++deferred_detail::deferred_fused;
        const auto plan = plan_elementwise(fused);
        const bound_root<F> bound_expr = bind(fused, plan);
        kernels::dispatch<simd_evaluable_v<F>>([&](auto arch) {
          using Arch = decltype(arch);
          d.compute(out, [&](std::int64_t begin, std::int64_t rows, std::int64_t cols, std::int64_t row_stride) {
            for (std::int64_t r = 0; r < rows; ++r) {
              const std::int64_t first = begin + r * row_stride;
              if constexpr (!scalar_fallback_v<Arch, F>) {
                if (plan.contiguous) { // bind points each leaf's row at its data
                  run_row<Arch, lane_type_t<F>, true>(bound_expr, out, first, first + cols, store_path::cached);
                  continue;
                }
              }
              run_range<Arch, lane_type_t<F>>(bound_expr, plan, out, first, first + cols);
            }
          });
        });
        return;
      }
    }
  }
  evaluate_into(resolve_deferred(e), out);
}

} // namespace xlite::expr
