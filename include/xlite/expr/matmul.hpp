#pragma once

// xlite::matmul: matrix products in static expressions, on the GEMM of kernels/gemm.hpp.
//
//   tensor<float> y = relu(matmul(x, w) + b);        one GEMM; relu(. + b) is its epilogue
//   tensor<float> z = matmul(transposed(x), w);      x's last two dimensions swapped, no copy
//   tensor<bfloat16> p = matmul(a16, b16);           bf16 products, float accumulation
//   tensor<float> q = matmul<float>(a16, b16);       ... and the float result, unrounded
//
// NumPy's matmul rules: a 1-D operand is a vector (a row on the left, a column on the
// right, its dimension dropped from the result); leading dimensions are batch dimensions
// and broadcast. Both operands have one element type, float or bfloat16 (cast the other:
// xlite does not convert implicitly); the result has it too unless given.
//
// matmul(a, b) is a deferred leaf (expr/deferred.hpp): nothing is computed until the
// expression it stands in is evaluated. Operands that are tensors are read then, without
// copies; operands that are expressions are evaluated into a buffer once, first. When the
// matmul fills the output and is the only one in its expression, the element-wise rest
// runs as the GEMM's epilogue, block by block while C is in cache.
//
// Not in xlite/expr.hpp, for compile time (it brings the GEMM kernels and <immintrin.h>):
// include xlite/expr/matmul.hpp, or xlite/xlite.hpp.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include "xlite/core/bfloat16.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/expr/assign.hpp"
#include "xlite/expr/functions.hpp"
#include "xlite/expr/graph.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/kernels/gemm.hpp"

namespace xlite::expr {

// transposed(x) as a matmul operand.
template <class E>
struct transposed_view {
  using value_type = typename E::value_type;
  E operand;
};

template <class E>
inline constexpr bool is_transposed_v = false;
template <class E>
inline constexpr bool is_transposed_v<transposed_view<E>> = true;

// An operand as the GEMM reads it: memory, and whether its last two dimensions are
// swapped. `held` keeps an evaluated operand alive.
template <class T>
struct matrix_stack {
  std::unique_ptr<const tensor<T>> held;
  const T* data;
  bool transposed;
};

template <class E>
const xlite::shape& stored_shape(const E& e) {
  if constexpr (is_transposed_v<E>) {
    return e.operand.shape;
  } else {
    return e.shape;
  }
}

// The memory of an operand: a tensor's own, or a buffer its expression is evaluated into.
template <class E>
auto to_matrix_stack(const E& e) {
  if constexpr (is_transposed_v<E>) {
    auto m = to_matrix_stack(e.operand);
    m.transposed = true;
    return m;
  } else {
    using T = typename E::value_type;
    if constexpr (is_memory_leaf_v<E>) {
      return matrix_stack<T>{nullptr, e.data, false};
    } else {
      auto values = std::make_unique<const tensor<T>>(e);
      const T* data = values->data();
      return matrix_stack<T>{std::move(values), data, false};
    }
  }
}

// Where a product's operands sit in memory: for each operand, the distance between the
// matrices of consecutive batch entries of the result, when one distance fits the whole
// batch (the operand has the result's batch dimensions, or none); otherwise `uniform` is
// false and the batch entries are found one by one.
struct matmul_geometry {
  std::int64_t m = 1, n = 1, k = 1;
  xlite::shape batch;                      // the result's batch dimensions
  xlite::shape a_batch, b_batch;           // each operand's, as stored
  std::int64_t a_matrix = 0, b_matrix = 0; // elements per matrix
  bool uniform = true;
  std::int64_t a_stride = 0, b_stride = 0;
};

// s without its last `drop` dimensions, then with `extra` appended.
inline xlite::shape reshaped(const xlite::shape& s, std::size_t drop, std::initializer_list<std::int64_t> extra = {}) {
  std::array<std::int64_t, max_rank + 2> dims{};
  std::size_t rank = 0;
  for (std::size_t d = 0; d + drop < s.rank(); ++d) dims[rank++] = s[d];
  for (const std::int64_t dim : extra) dims[rank++] = dim;
  return xlite::shape(std::span(dims.data(), rank));
}

// Shapes: a is (..., m, k) or (k), b (..., k, n) or (k); the result (batch..., m, n)
// without the dimensions of 1-D operands.
inline std::pair<matmul_geometry, xlite::shape> plan_matmul(const xlite::shape& a, bool a_transposed,
                                                             const xlite::shape& b, bool b_transposed) {
  const auto fail = [&](const auto&... why) {
    throw shape_error(detail::message("matmul: shapes ", a, a_transposed ? " (transposed)" : "", " and ", b,
                                      b_transposed ? " (transposed)" : "", ": ", why...));
  };
  if (a.rank() == 0 || b.rank() == 0) fail("an operand is a scalar (rank 0); matmul needs vectors or matrices");
  if ((a_transposed && a.rank() < 2) || (b_transposed && b.rank() < 2)) fail("transposed() needs at least 2 dimensions");
  matmul_geometry g;
  const auto last = [](const xlite::shape& s, std::size_t from_end) { return s[s.rank() - from_end]; };
  if (a.rank() == 1) {
    g.k = a[0];
  } else {
    g.m = a_transposed ? last(a, 1) : last(a, 2);
    g.k = a_transposed ? last(a, 2) : last(a, 1);
  }
  std::int64_t b_rows = b[0];
  if (b.rank() >= 2) {
    b_rows = b_transposed ? last(b, 1) : last(b, 2);
    g.n = b_transposed ? last(b, 2) : last(b, 1);
  }
  if (b_rows != g.k) {
    fail("the ", g.k, " columns of the first operand do not match the ", b_rows, " rows of the second");
  }
  g.a_batch = reshaped(a, a.rank() >= 2 ? 2 : 1);
  g.b_batch = reshaped(b, b.rank() >= 2 ? 2 : 1);
  g.batch = broadcast_shapes(g.a_batch, g.b_batch, "matmul");
  g.a_matrix = g.m * g.k;
  g.b_matrix = g.k * g.n;
  const auto stride_of = [&](const xlite::shape& own, std::int64_t matrix, std::int64_t& stride) {
    if (own.numel() == 1) {
      stride = 0;
    } else if (own == g.batch) {
      stride = matrix;
    } else {
      g.uniform = false;
    }
  };
  stride_of(g.a_batch, g.a_matrix, g.a_stride);
  stride_of(g.b_batch, g.b_matrix, g.b_stride);
  xlite::shape result = a.rank() >= 2 && b.rank() >= 2 ? reshaped(g.batch, 0, {g.m, g.n})
                        : a.rank() >= 2                ? reshaped(g.batch, 0, {g.m})
                        : b.rank() >= 2                ? reshaped(g.batch, 0, {g.n})
                                                       : reshaped(g.batch, 0);
  return {g, result};
}

// The offset of batch entry `index` of the result in an operand with batch dimensions `own`
// (broadcast against `batch`), in matrices.
inline std::int64_t batch_offset(const xlite::shape& batch, const xlite::shape& own, std::int64_t index) {
  std::int64_t offset = 0;
  std::int64_t own_stride = 1;
  for (std::size_t i = 0; i < batch.rank(); ++i) { // from the last batch dimension
    const std::size_t d = batch.rank() - 1 - i;
    const std::int64_t coordinate = index % batch[d];
    index /= batch[d];
    if (i < own.rank()) {
      const std::int64_t own_dim = own[own.rank() - 1 - i];
      if (own_dim != 1) offset += coordinate * own_stride;
      own_stride *= own_dim;
    }
  }
  return offset;
}

template <class Out, class A, class B>
struct matmul_node {
  using value_type = Out;
  using input_type = typename A::value_type;
  static constexpr bool is_deferred = true;

  A lhs;
  B rhs;
  matmul_geometry geometry;
  xlite::shape shape;

  // The tensors the GEMM reads while it writes the output. An operand that is an expression
  // is evaluated into a buffer before the GEMM starts, so a matmul nested in it (as in
  // matmul(matmul(a, b) + 1, c)) has read its own inputs by then: only memory leaves count.
  template <class F>
  void for_each_input(F&& f) const {
    const auto visit = [&](const auto& operand) {
      using E = std::remove_cvref_t<decltype(operand)>;
      if constexpr (is_transposed_v<E>) {
        for_each_memory_leaf(operand.operand, f);
      } else {
        for_each_memory_leaf(operand, f);
      }
    };
    visit(lhs);
    visit(rhs);
  }

  // The deferred-leaf protocol: region(begin, rows, cols, row_stride) for each block.
  template <class Region>
  void compute(Out* out, const Region& region) const {
    using In = input_type;
    const matrix_stack<In> a = to_matrix_stack(lhs);
    const matrix_stack<In> b = to_matrix_stack(rhs);
    const matmul_geometry& g = geometry;
    kernels::gemm_args<In, Out> args{.m = g.m, .n = g.n, .k = g.k,
                                     .a = a.data, .lda = a.transposed ? g.m : g.k,
                                     .trans_a = a.transposed ? kernels::transpose::yes : kernels::transpose::no,
                                     .b = b.data, .ldb = b.transposed ? g.k : g.n,
                                     .trans_b = b.transposed ? kernels::transpose::yes : kernels::transpose::no,
                                     .c = out, .ldc = g.n};
    struct context_type {
      const Region& region;
      std::int64_t first_batch;
      std::int64_t m, n;
    } context{region, 0, g.m, g.n};
    const kernels::gemm_epilogue epilogue{
        [](void* c, std::int64_t batch, std::int64_t row, std::int64_t col, std::int64_t rows, std::int64_t cols) {
          const auto& ctx = *static_cast<const context_type*>(c);
          ctx.region(((ctx.first_batch + batch) * ctx.m + row) * ctx.n + col, rows, cols, ctx.n);
        },
        &context};
    const std::int64_t entries = g.batch.numel();
    if (g.uniform) {
      args.batch = entries;
      args.stride_a = g.a_stride;
      args.stride_b = g.b_stride;
      args.stride_c = g.m * g.n;
      kernels::gemm(args, epilogue);
      return;
    }
    for (std::int64_t entry = 0; entry < entries; ++entry) {
      args.a = a.data + batch_offset(g.batch, g.a_batch, entry) * g.a_matrix;
      args.b = b.data + batch_offset(g.batch, g.b_batch, entry) * g.b_matrix;
      args.c = out + entry * g.m * g.n;
      context.first_batch = entry;
      kernels::gemm(args, epilogue);
    }
  }
};

template <class E>
inline constexpr bool is_matmul_operand_v = tensor_like<E> || is_transposed_v<std::remove_cvref_t<E>>;

template <class E>
auto to_matmul_operand(E&& e) {
  if constexpr (is_transposed_v<std::remove_cvref_t<E>>) {
    return std::forward<E>(e);
  } else {
    return to_operand(std::forward<E>(e));
  }
}

namespace checks {
template <class A, class B>
struct matmul_operands_must_match {
  static_assert(std::is_same_v<A, B>,
                "xlite: matmul's operands have different element types (A and B below); xlite does not convert "
                "implicitly: write xlite::cast<A>(b) or xlite::cast<B>(a)");
};
// The element types the GEMM multiplies and produces.
template <class T>
inline constexpr bool gemm_element_v = std::is_same_v<T, float> || std::is_same_v<T, bfloat16>;
template <class In, class Out>
struct matmul_types {
  static_assert(gemm_element_v<In>, "xlite: matmul multiplies float or bfloat16 operands (In below): cast the "
                                    "operands, e.g. xlite::cast<float>(x)");
  static_assert(gemm_element_v<Out>, "xlite: matmul's result is float or bfloat16 (Out below)");
};
} // namespace checks

} // namespace xlite::expr

namespace xlite {

// x with its last two dimensions swapped, as an operand of matmul: no copy, the GEMM reads
// it transposed. It is only a matmul operand, not an expression of its own (for a
// transposed copy, use xtensor: xt::transpose(xlite::as_xtensor(t))).
template <class A>
requires expr::tensor_like<A>
auto transposed(A&& a) {
  using operand = decltype(expr::to_operand(std::forward<A>(a)));
  return expr::transposed_view<operand>{expr::to_operand(std::forward<A>(a))};
}

// The matrix product of a and b (NumPy's matmul), of element type Out: by default the
// operands' type. Shape errors are thrown here, naming both shapes.
template <class Out = void, class A, class B>
requires(expr::is_matmul_operand_v<A> && expr::is_matmul_operand_v<B>)
auto matmul(A&& a, B&& b) {
  auto lhs = expr::to_matmul_operand(std::forward<A>(a));
  auto rhs = expr::to_matmul_operand(std::forward<B>(b));
  using L = decltype(lhs);
  using R = decltype(rhs);
  using In = typename L::value_type;
  static_cast<void>(sizeof(expr::checks::matmul_operands_must_match<In, typename R::value_type>));
  using Result = std::conditional_t<std::is_void_v<Out>, In, Out>;
  static_cast<void>(sizeof(expr::checks::matmul_types<In, Result>));
  if constexpr (!std::is_same_v<In, typename R::value_type> || !expr::checks::gemm_element_v<In> ||
                !expr::checks::gemm_element_v<Result>) {
    // A check above has failed, and the program with it: a stand-in result keeps its
    // sentence the only error (the GEMM over mixed operands added two more).
    return tensor<Result>(xlite::shape{});
  } else {
    auto [geometry, shape] = expr::plan_matmul(expr::stored_shape(lhs), expr::is_transposed_v<L>,
                                               expr::stored_shape(rhs), expr::is_transposed_v<R>);
    return expr::matmul_node<Result, L, R>{std::move(lhs), std::move(rhs), std::move(geometry), std::move(shape)};
  }
}

} // namespace xlite

namespace xlite::expr::signature_text {

template <class E>
struct signature_of<transposed_view<E>> {
  static constexpr auto value = literal("transposed(") + signature_of<E>::value + literal(")");
};

template <class Out, class A, class B>
struct signature_of<matmul_node<Out, A, B>> {
  static constexpr auto value = literal("matmul<") + from_view<short_name<dtype_of_v<Out>>>() + literal(">(") +
                                signature_of<A>::value + literal(",") + signature_of<B>::value + literal(")");
};

} // namespace xlite::expr::signature_text
