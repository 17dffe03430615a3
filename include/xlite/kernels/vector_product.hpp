#pragma once

// The innermost loops of a product with a vector: out[j] = sum over k of x[k] * M[k, j], for
// a matrix M whose rows run along k (row k at m + k * ld) and a vector x (x[k] at
// x + k * x_stride). kernels/gemm.hpp runs a GEMM with m = 1 (or n = 1, A transposed) here:
// the micro-kernels would pad the one row of A (or column of B) to a whole panel and pack
// B, and multiply 12 rows, or 32 columns, for the one the product has.
//
// The numerics are the GEMM's, so a product gives the same bits either way: each element is
// one accumulator that takes k = 0, 1, ..., in order, by fused multiply-adds on the vector
// paths and by a product and a sum on the portable one (tile_update: how the accumulator
// starts and ends). The accumulators live in `out` between groups of k, which is exact: a
// chunk of out stays in L1 while the matrix streams past it, row after row in order.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "xlite/kernels/gemm_microkernel.hpp"
#include "xlite/kernels/intrinsics.hpp"
#include "xlite/kernels/no_contraction.hpp"

namespace xlite::kernels::gemm_detail {

// How many rows of the matrix the vector paths take while a tile of accumulators stays in
// registers, between the loads and stores of out.
inline constexpr std::int64_t vector_rows_at_once = 8;

// out = start_scale * out (0 when start_scale is 0: out is not read), before the first k.
inline void start_vector(float* out, std::int64_t width, const tile_update& update) {
  for (std::int64_t j = 0; j < width; ++j) out[j] = update.start_scale == 0.0f ? 0.0f : update.start_scale * out[j];
}

// out = alpha * out, after the last k.
inline void finish_vector(float* out, std::int64_t width, const tile_update& update) {
  if (update.alpha == 1.0f) return;
  for (std::int64_t j = 0; j < width; ++j) out[j] = update.alpha * out[j];
}

template <class T>
struct vector_operand {
  const T* x;
  std::int64_t stride;
  T at(std::int64_t k) const { return x[k * stride]; }
};

XLITE_NO_CONTRACTION_FUNCTION inline void vector_rows_portable(const float* m, std::int64_t ld, vector_operand<float> x,
                                                               std::int64_t steps, float* out, std::int64_t width,
                                                               const tile_update& update) {
  XLITE_NO_CONTRACTION_BODY
  start_vector(out, width, update);
  for (std::int64_t k = 0; k < steps; ++k) {
    const float xk = x.at(k);
    const float* row = m + k * ld;
    for (std::int64_t j = 0; j < width; ++j) out[j] += xk * row[j];
  }
  finish_vector(out, width, update);
}

#if XLITE_X86_KERNELS
XLITE_INTRINSICS_BEGIN

// Columns [j, j + 8 * NV) through rows [k0, k1), NV ymm accumulators.
template <int NV>
XLITE_TARGET_AVX2 inline void vector_tile_avx2(const float* m, std::int64_t ld, vector_operand<float> x,
                                               std::int64_t k0, std::int64_t k1, float* out) {
  __m256 acc[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = _mm256_loadu_ps(out + 8 * v);
  for (std::int64_t k = k0; k < k1; ++k) {
    const __m256 xk = _mm256_set1_ps(x.at(k));
    const float* row = m + k * ld;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[v] = _mm256_fmadd_ps(xk, _mm256_loadu_ps(row + 8 * v), acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + 8 * v, acc[v]);
}

XLITE_TARGET_AVX2 inline void vector_rows_avx2(const float* m, std::int64_t ld, vector_operand<float> x,
                                               std::int64_t steps, float* out, std::int64_t width,
                                               const tile_update& update) {
  start_vector(out, width, update);
  for (std::int64_t k0 = 0; k0 < steps; k0 += vector_rows_at_once) {
    const std::int64_t k1 = std::min(steps, k0 + vector_rows_at_once);
    std::int64_t j = 0;
    for (; j + 64 <= width; j += 64) vector_tile_avx2<8>(m + j, ld, x, k0, k1, out + j);
    for (; j + 8 <= width; j += 8) vector_tile_avx2<1>(m + j, ld, x, k0, k1, out + j);
    for (; j < width; ++j) { // the last columns, fewer than a vector: the same fused chain
      for (std::int64_t k = k0; k < k1; ++k) out[j] = std::fma(x.at(k), m[k * ld + j], out[j]);
    }
  }
  finish_vector(out, width, update);
}

// Columns [j, j + 16 * NV) through rows [k0, k1), NV zmm accumulators; the last vector's
// lanes from `last` on are neither read nor written.
template <int NV>
XLITE_TARGET_AVX512 inline void vector_tile_avx512(const float* m, std::int64_t ld, vector_operand<float> x,
                                                   std::int64_t k0, std::int64_t k1, float* out, __mmask16 last) {
  __m512 acc[NV];
  const auto lanes = [&](int v) { return v + 1 == NV ? last : static_cast<__mmask16>(0xffff); };
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_maskz_loadu_ps(lanes(v), out + 16 * v);
  for (std::int64_t k = k0; k < k1; ++k) {
    const __m512 xk = _mm512_set1_ps(x.at(k));
    const float* row = m + k * ld;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[v] = _mm512_fmadd_ps(xk, _mm512_maskz_loadu_ps(lanes(v), row + 16 * v), acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out + 16 * v, lanes(v), acc[v]);
}

XLITE_TARGET_AVX512 inline void vector_rows_avx512(const float* m, std::int64_t ld, vector_operand<float> x,
                                                   std::int64_t steps, float* out, std::int64_t width,
                                                   const tile_update& update) {
  start_vector(out, width, update);
  for (std::int64_t k0 = 0; k0 < steps; k0 += vector_rows_at_once) {
    const std::int64_t k1 = std::min(steps, k0 + vector_rows_at_once);
    std::int64_t j = 0;
    for (; j + 128 <= width; j += 128) vector_tile_avx512<8>(m + j, ld, x, k0, k1, out + j, 0xffff);
    for (; j < width; j += 16) vector_tile_avx512<1>(m + j, ld, x, k0, k1, out + j, first_lanes(width - j));
  }
  finish_vector(out, width, update);
}

XLITE_INTRINSICS_END
#endif // XLITE_X86_KERNELS

} // namespace xlite::kernels::gemm_detail
