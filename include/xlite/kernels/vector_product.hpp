#pragma once

// The innermost loops of a product with a vector, in the two forms its layout gives:
//   rows  out[j] = sum over k of x[k] * M[k, j], M's rows running along k (row k at
//         m + k * ld): the vector meets one row of the matrix at a time;
//   dots  out[i] = sum over k of M[i, k] * x[k], M's rows running along the outputs (row i
//         at m + i * ld): one dot product per row.
// The vector's x[k] is at x + k * x_stride. kernels/gemm.hpp runs a GEMM with m = 1 or
// n = 1 here: the micro-kernels would pad the one row of A (or column of B) to a whole panel,
// pack the other operand, and multiply 12 rows, or 32 columns, for the one the product has.
//
// The numerics are the GEMM's, so a product gives the same bits either way: each element is
// one accumulator that takes k = 0, 1, ..., in order, by fused multiply-adds on the vector
// paths and by a product and a sum on the portable one (tile_update: how the accumulator
// starts and ends). The rows form keeps the accumulators in `out` between groups of k,
// which is exact: a chunk of out stays in L1 while the matrix streams past it, row after
// row in order. The dots form reads 16 (AVX-512) or 8 (AVX2) rows at a time a vector of k
// each, and transposes them in registers, so that each lane accumulates one row in order.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "xlite/kernels/gemm_microkernel.hpp"
#include "xlite/kernels/gemm_pack.hpp"
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

XLITE_NO_CONTRACTION_FUNCTION inline void vector_dots_portable(const float* m, std::int64_t ld, vector_operand<float> x,
                                                               std::int64_t steps, float* out, std::int64_t width,
                                                               const tile_update& update) {
  XLITE_NO_CONTRACTION_BODY
  start_vector(out, width, update);
  for (std::int64_t i = 0; i < width; ++i) {
    const float* row = m + i * ld;
    float acc = out[i];
    for (std::int64_t k = 0; k < steps; ++k) acc += row[k] * x.at(k);
    out[i] = acc;
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

// r[i] = column i of the 8 x 8 block whose rows were r[0..7].
XLITE_TARGET_AVX2 inline void transpose_8x8(__m256 (&r)[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 u[8];
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

XLITE_TARGET_AVX2 inline void vector_dots_avx2(const float* m, std::int64_t ld, vector_operand<float> x,
                                               std::int64_t steps, float* out, std::int64_t width,
                                               const tile_update& update) {
  start_vector(out, width, update);
  for (std::int64_t i0 = 0; i0 < width; i0 += 8) {
    const std::int64_t rows = std::min<std::int64_t>(8, width - i0);
    alignas(32) float lanes[8] = {};
    std::copy(out + i0, out + i0 + rows, lanes);
    __m256 acc = _mm256_load_ps(lanes);
    for (std::int64_t k0 = 0; k0 < steps; k0 += 8) {
      const std::int64_t n = std::min<std::int64_t>(8, steps - k0);
      __m256 r[8];
      if (rows == 8 && n == 8) {
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(m + (i0 + i) * ld + k0);
      } else { // an edge block, zero-padded through the stack
        alignas(32) float block[8][8] = {};
        for (std::int64_t i = 0; i < rows; ++i) std::copy(m + (i0 + i) * ld + k0, m + (i0 + i) * ld + k0 + n, block[i]);
        for (int i = 0; i < 8; ++i) r[i] = _mm256_load_ps(block[i]);
      }
      transpose_8x8(r);
      for (std::int64_t q = 0; q < n; ++q) acc = _mm256_fmadd_ps(r[q], _mm256_set1_ps(x.at(k0 + q)), acc);
    }
    _mm256_store_ps(lanes, acc);
    std::copy(lanes, lanes + rows, out + i0);
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

// The `rows` rows from `first` (at most 16: lanes from `rows` on are garbage) through steps
// [k0, k0 + n), n at most 16, into acc.
XLITE_TARGET_AVX512 __attribute__((always_inline)) inline void dots_block_avx512(const float* first, std::int64_t ld,
                                                                                 vector_operand<float> x,
                                                                                 std::int64_t k0, std::int64_t n,
                                                                                 std::int64_t rows, __m512& acc) {
  __m512 r[16];
  if (rows == 16 && n == 16) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(first + i * ld + k0);
    transpose_16x16(r);
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) acc = _mm512_fmadd_ps(r[q], _mm512_set1_ps(x.at(k0 + q)), acc);
    return;
  }
  const __mmask16 step_lanes = first_lanes(n);
  for (int i = 0; i < 16; ++i) {
    r[i] = i < rows ? _mm512_maskz_loadu_ps(step_lanes, first + i * ld + k0) : _mm512_setzero_ps();
  }
  transpose_16x16(r);
  for (std::int64_t q = 0; q < n; ++q) acc = _mm512_fmadd_ps(r[q], _mm512_set1_ps(x.at(k0 + q)), acc);
}

XLITE_TARGET_AVX512 __attribute__((always_inline)) inline void
dots_full_avx512(const float* p, std::int64_t ld, vector_operand<float> x, std::int64_t k0, __m512& acc) {
  __m512 r[16];
  const float* p4 = p + 4 * ld;
  const float* p8 = p + 8 * ld;
  const float* p12 = p4 + 8 * ld;
  r[0] = _mm512_loadu_ps(p);
  r[1] = _mm512_loadu_ps(p + ld);
  r[2] = _mm512_loadu_ps(p + 2 * ld);
  r[3] = _mm512_loadu_ps(p + 3 * ld);
  r[4] = _mm512_loadu_ps(p4);
  r[5] = _mm512_loadu_ps(p4 + ld);
  r[6] = _mm512_loadu_ps(p4 + 2 * ld);
  r[7] = _mm512_loadu_ps(p4 + 3 * ld);
  r[8] = _mm512_loadu_ps(p8);
  r[9] = _mm512_loadu_ps(p8 + ld);
  r[10] = _mm512_loadu_ps(p8 + 2 * ld);
  r[11] = _mm512_loadu_ps(p8 + 3 * ld);
  r[12] = _mm512_loadu_ps(p12);
  r[13] = _mm512_loadu_ps(p12 + ld);
  r[14] = _mm512_loadu_ps(p12 + 2 * ld);
  r[15] = _mm512_loadu_ps(p12 + 3 * ld);
  transpose_16x16(r);
  const float* xs = x.x + k0 * x.stride;
#pragma GCC unroll 16
  for (int q = 0; q < 16; ++q) acc = _mm512_fmadd_ps(r[q], _mm512_set1_ps(xs[q * x.stride]), acc);
}

// Two blocks of 16 rows at a time where there are: each lane's chain waits four cycles for
// its last FMA, so one block keeps the FMA unit a quarter busy, and a second doubles that.
XLITE_TARGET_AVX512 inline void vector_dots_avx512(const float* m, std::int64_t ld, vector_operand<float> x,
                                                   std::int64_t steps, float* out, std::int64_t width,
                                                   const tile_update& update) {
  start_vector(out, width, update);
  std::int64_t i0 = 0;
  for (; i0 + 32 <= width; i0 += 32) {
    __m512 acc0 = _mm512_loadu_ps(out + i0);
    __m512 acc1 = _mm512_loadu_ps(out + i0 + 16);
    std::int64_t k0 = 0;
    for (; k0 + 16 <= steps; k0 += 16) {
      dots_full_avx512(m + i0 * ld + k0, ld, x, k0, acc0);
      dots_full_avx512(m + (i0 + 16) * ld + k0, ld, x, k0, acc1);
    }
    if (k0 < steps) {
      dots_block_avx512(m + i0 * ld, ld, x, k0, steps - k0, 16, acc0);
      dots_block_avx512(m + (i0 + 16) * ld, ld, x, k0, steps - k0, 16, acc1);
    }
    _mm512_storeu_ps(out + i0, acc0);
    _mm512_storeu_ps(out + i0 + 16, acc1);
  }
  for (; i0 < width; i0 += 16) {
    const std::int64_t rows = std::min<std::int64_t>(16, width - i0);
    const __mmask16 row_lanes = first_lanes(rows);
    __m512 acc = _mm512_maskz_loadu_ps(row_lanes, out + i0);
    for (std::int64_t k0 = 0; k0 < steps; k0 += 16) {
      dots_block_avx512(m + i0 * ld, ld, x, k0, std::min<std::int64_t>(16, steps - k0), rows, acc);
    }
    _mm512_mask_storeu_ps(out + i0, row_lanes, acc);
  }
  finish_vector(out, width, update);
}

XLITE_INTRINSICS_END
#endif // XLITE_X86_KERNELS

} // namespace xlite::kernels::gemm_detail
