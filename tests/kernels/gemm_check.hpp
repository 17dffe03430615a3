#pragma once

// What the GEMM tests share: random problems (sizes, layouts, scalars, batches, padded
// leading dimensions), gemm_args for them, and the check against a double-precision product.

#include <xlite/kernels/gemm.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

namespace xlite_test {

using xlite::bfloat16;
using xlite::kernels::gemm_args;
using xlite::kernels::gemm_precision;
using xlite::kernels::transpose;

// One random problem: sizes, layouts, scalars, batch, and its operands (with padding
// between rows, so that lda > columns is exercised).
struct gemm_case {
  std::int64_t m, n, k, batch;
  bool trans_a, trans_b;
  float alpha, beta;
  std::int64_t lda, ldb, ldc;
  std::int64_t stride_a, stride_b, stride_c;
  std::vector<float> a, b, c;

  float a_at(std::int64_t p, std::int64_t i, std::int64_t q) const { // op(A)(i, q) of problem p
    return a[static_cast<std::size_t>(p * stride_a + (trans_a ? q * lda + i : i * lda + q))];
  }
  float b_at(std::int64_t p, std::int64_t q, std::int64_t j) const {
    return b[static_cast<std::size_t>(p * stride_b + (trans_b ? j * ldb + q : q * ldb + j))];
  }
  std::size_t c_index(std::int64_t p, std::int64_t i, std::int64_t j) const {
    return static_cast<std::size_t>(p * stride_c + i * ldc + j);
  }
};

// A random problem of the given sizes: layouts, scalars, batch, padding and values random,
// A transposed or not as `trans_a` says when it is given.
inline gemm_case random_case_of_size(std::mt19937& rng, std::int64_t m, std::int64_t n, std::int64_t k,
                                     std::optional<bool> trans_a = std::nullopt) {
  std::uniform_int_distribution<int> coin(0, 1);
  std::uniform_int_distribution<int> pad(0, 3);
  gemm_case g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = std::uniform_int_distribution<std::int64_t>(1, 3)(rng);
  g.trans_a = coin(rng);
  if (trans_a) g.trans_a = *trans_a; // after the draw, so that the other draws stay the same
  g.trans_b = coin(rng);
  const float alphas[] = {1.0f, 1.0f, -0.5f, 2.0f};
  const float betas[] = {0.0f, 0.0f, 1.0f, 0.75f};
  g.alpha = alphas[std::uniform_int_distribution<int>(0, 3)(rng)];
  g.beta = betas[std::uniform_int_distribution<int>(0, 3)(rng)];
  g.lda = (g.trans_a ? g.m : g.k) + pad(rng);
  g.ldb = (g.trans_b ? g.k : g.n) + pad(rng);
  g.ldc = g.n + pad(rng);
  g.stride_a = (g.trans_a ? g.k : g.m) * g.lda + pad(rng);
  g.stride_b = coin(rng) ? 0 : (g.trans_b ? g.n : g.k) * g.ldb + pad(rng); // 0: B shared by the batch
  g.stride_c = g.m * g.ldc + pad(rng);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const auto fill = [&](std::vector<float>& v, std::int64_t count) {
    v.resize(static_cast<std::size_t>(count) + 1);
    for (float& x : v) x = value(rng);
  };
  fill(g.a, g.batch * g.stride_a);
  fill(g.b, g.batch * std::max<std::int64_t>(g.stride_b, (g.trans_b ? g.n : g.k) * g.ldb));
  fill(g.c, g.batch * g.stride_c);
  return g;
}

// A random problem with sizes up to max_size, small and odd ones often.
inline gemm_case random_case(std::mt19937& rng, std::int64_t max_size) {
  std::uniform_int_distribution<std::int64_t> size(0, max_size);
  const std::int64_t small_sizes[] = {0, 1, 2, 3, 7, 12, 13, 31, 33};
  const auto pick = [&] {
    return std::uniform_int_distribution<int>(0, 1)(rng) != 0 ? small_sizes[std::uniform_int_distribution<int>(0, 8)(rng)]
                                                              : size(rng);
  };
  const std::int64_t m = pick();
  const std::int64_t n = pick();
  const std::int64_t k = pick();
  return random_case_of_size(rng, m, n, k);
}

// A product with a vector: one row of C (m = 1) or one column (n = 1), `length` long, of
// random layout. gemm runs it as a vector product unless C is a column that is not
// contiguous (`contiguous` false: its padding is random).
inline gemm_case vector_case(std::mt19937& rng, std::int64_t length, std::int64_t depth, bool row, bool contiguous) {
  gemm_case g = row ? random_case_of_size(rng, 1, length, depth) : random_case_of_size(rng, length, 1, depth);
  if (!row && contiguous) g.ldc = 1;
  g.stride_c = g.m * g.ldc + 1;
  g.c.resize(static_cast<std::size_t>(g.batch * g.stride_c + 1), 3.0f);
  return g;
}

template <class In, class Out>
gemm_args<In, Out> args_of(const gemm_case& g, const In* a, const In* b, Out* c, gemm_precision precision) {
  return {.m = g.m, .n = g.n, .k = g.k, .a = a, .lda = g.lda, .trans_a = g.trans_a ? transpose::yes : transpose::no,
          .b = b, .ldb = g.ldb, .trans_b = g.trans_b ? transpose::yes : transpose::no, .c = c, .ldc = g.ldc,
          .alpha = g.alpha, .beta = g.beta, .batch = g.batch, .stride_a = g.stride_a, .stride_b = g.stride_b,
          .stride_c = g.stride_c, .precision = precision};
}

// The value rounded to bfloat16 and back, when the GEMM computes in bf16.
inline float input_value(float x, bool bf16) { return bf16 ? static_cast<float>(bfloat16(x)) : x; }

// Checks C against a double-precision product of the same (rounded) inputs, with the bound
// of a K-term float accumulation: |error| <= alpha * gamma(K + 2) * sum |a||b| + the
// roundings of beta * C and of alpha * acc (and of the bfloat16 output, when there is one).
inline void check_against_double(const gemm_case& g, const std::vector<float>& c, bool bf16, bool bf16_output) {
  constexpr double u = 0x1p-24;
  const double gamma = static_cast<double>(g.k + 2) * u / (1.0 - static_cast<double>(g.k + 2) * u);
  for (std::int64_t p = 0; p < g.batch; ++p) {
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) {
        double exact = 0.0;
        double magnitude = 0.0;
        for (std::int64_t q = 0; q < g.k; ++q) {
          const double product = static_cast<double>(input_value(g.a_at(p, i, q), bf16)) * input_value(g.b_at(p, q, j), bf16);
          exact += product;
          magnitude += std::fabs(product);
        }
        const double c0 = g.beta == 0.0f ? 0.0 : static_cast<double>(g.c[g.c_index(p, i, j)]);
        const double expected = g.alpha * exact + g.beta * c0;
        double bound = std::fabs(g.alpha) * gamma * magnitude + 2 * u * (std::fabs(g.beta * c0) + std::fabs(expected));
        if (bf16_output) bound += 0x1p-8 * (std::fabs(expected) + bound);
        const float got = c[g.c_index(p, i, j)];
        if (!(std::fabs(got - expected) <= bound + 1e-30)) {
          FAIL_CHECK("C(" << p << ", " << i << ", " << j << ") = " << got << ", expected " << expected << " within "
                          << bound);
          return;
        }
      }
    }
  }
}

inline bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Whether c differs from the problem's C only in C's elements: the padding between rows
// and between batches, and anything after the last batch, kept their values.
inline bool writes_only_c(const gemm_case& g, const std::vector<float>& c) {
  std::vector<float> expected = g.c;
  for (std::int64_t p = 0; p < g.batch; ++p) {
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) expected[g.c_index(p, i, j)] = c[g.c_index(p, i, j)];
    }
  }
  return same_bits(c, expected);
}

// The C of a problem, computed as the paths promise, by a naive loop: one float
// accumulator per element over k in order (fused multiply-adds, or multiply then add on
// the portable fp32 path), started and finished as gemm.hpp's header says; bf16 rounds the
// inputs to bfloat16 first.
inline std::vector<float> naive_chain(const gemm_case& g, bool fused, bool bf16 = false) {
  std::vector<float> c = g.c;
  for (std::int64_t p = 0; p < g.batch; ++p) {
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) {
        float& out = c[g.c_index(p, i, j)];
        float acc = g.alpha != 1.0f || g.beta == 0.0f ? 0.0f : (g.beta == 1.0f ? out : g.beta * out);
        for (std::int64_t q = 0; q < g.k; ++q) {
          const float x = input_value(g.a_at(p, i, q), bf16);
          const float y = input_value(g.b_at(p, q, j), bf16);
          if (fused) {
            acc = std::fma(x, y, acc);
          } else {
            // The product rounded on its own: through a volatile, which no compiler contracts
            // into an FMA, whatever the flags (GCC does even through an exact double product).
            const volatile float product = x * y;
            acc += product;
          }
        }
        if (g.alpha == 1.0f) {
          out = acc;
        } else if (g.beta == 0.0f) {
          out = g.alpha * acc;
        } else {
          out = std::fma(g.alpha, acc, g.beta * out);
        }
      }
    }
  }
  return c;
}

} // namespace xlite_test
