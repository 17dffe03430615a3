#pragma once

// The GEMM cases, C = A B with row-major A (m x k), B (k x n), C (m x n):
//   sgemm     float inputs, float products and accumulation
//   bf16gemm  bfloat16 inputs, float accumulation and float output (the TPU's numerics)
// at square sizes 256, 1024, 2048, one tall-skinny shape, m = 4096, k = 1024, n = 64 (a
// layer's activations times a narrow weight), and the two products with a vector at
// k = 4096: m = 1 (a row times a matrix, batch-1 inference) and n = 1 (a matrix times a
// column), which move 64 MiB for 32 MFLOP and are bound by memory, not by the FMA peak.
// Rates are FLOP/s (2 m n k per product).
// The limits: sgemm's is peak_fma/limit; bf16gemm's is the fastest bf16 instruction this
// machine has, peak_amx/limit with usable AMX, else peak_bf16/limit (VDPBF16PS), else
// peak_fma/limit (scripts/bench_table.py picks it).

#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "bench_common.hpp"

namespace xlite::bench {

struct gemm_shape {
  std::int64_t m, n, k;
};

inline const std::vector<gemm_shape> gemm_shapes = {{256, 256, 256},  {1024, 1024, 1024}, {2048, 2048, 2048},
                                                    {4096, 64, 1024}, {1, 4096, 4096},    {4096, 1, 4096}};

constexpr std::int64_t gemm_flops(const gemm_shape& s) { return 2 * s.m * s.n * s.k; }

// Registers fn as "<case_name>/<impl>/m:<m>/n:<n>/k:<k>/threads:<t>" for every shape and
// thread count; fn reads them back with gemm_shape_arg and gemm_threads_arg.
template <class Function>
void register_gemm(std::string_view case_name, std::string_view impl, Function fn,
                   const std::vector<std::int64_t>& threads = thread_counts) {
  auto* family = register_case(case_name, impl, fn)->ArgNames({"m", "n", "k", "threads"});
  for (const gemm_shape& s : gemm_shapes) {
    for (const std::int64_t t : threads) family->Args({s.m, s.n, s.k, t});
  }
}

inline gemm_shape gemm_shape_arg(const benchmark::State& state) { return {state.range(0), state.range(1), state.range(2)}; }
inline int gemm_threads_arg(const benchmark::State& state) { return static_cast<int>(state.range(3)); }

// The deterministic operands of a shape, as floats; bf16 impls round them to bfloat16.
struct gemm_operands {
  explicit gemm_operands(const gemm_shape& s)
      : shape(s), a(deterministic_floats(s.m * s.k, 3)), b(deterministic_floats(s.k * s.n, 4)), c(s.m * s.n) {}

  gemm_shape shape;
  aligned_floats a;
  aligned_floats b;
  aligned_floats c;
};

// Fails the benchmark unless C's first and last rows match a double-precision product of
// the (possibly bf16-rounded) operands within a tolerance of the accumulation order and,
// for bf16, the rounding of the operands (`tolerance` per unit of sum |a||b|).
template <class RoundInput>
void check_gemm(benchmark::State& state, const gemm_operands& g, const float* c, RoundInput round_input,
                double tolerance) {
  const gemm_shape& s = g.shape;
  for (const std::int64_t i : {std::int64_t{0}, s.m - 1}) {
    for (std::int64_t j = 0; j < s.n; ++j) {
      double exact = 0, magnitude = 0;
      for (std::int64_t q = 0; q < s.k; ++q) {
        const double product = static_cast<double>(round_input(g.a.data()[i * s.k + q])) * round_input(g.b.data()[q * s.n + j]);
        exact += product;
        magnitude += std::abs(product);
      }
      if (std::abs(c[i * s.n + j] - exact) > tolerance * magnitude + 1e-6) {
        state.SkipWithError("the product is wrong");
        return;
      }
    }
  }
}

inline float as_is(float x) { return x; }

} // namespace xlite::bench
