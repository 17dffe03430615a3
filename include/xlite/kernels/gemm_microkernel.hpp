#pragma once

// The innermost loop of the GEMM: one tile of C, MR rows by NR columns, updated with the
// product of a packed panel of A (MR rows, kc steps) and a packed panel of B (kc steps, NR
// columns). Everything else in kernels/gemm.hpp exists to feed these loops from cache.
// Each kernel is a template on its row count, so that a last panel of fewer than MR rows
// (with_rows) computes only the rows it has.
//
// Packed layouts (kernels/gemm_pack.hpp writes them):
//   A panel: step s holds the MR values of rows 0..MR-1, i.e. a[s * MR + i];
//   B panel: step s holds the NR values of columns 0..NR-1, i.e. b[s * NR + j].
// A step is one k for float panels, and a pair of k (k = 2s, 2s+1) for bf16-pair panels,
// whose 32-bit elements hold two bfloat16: the even k in the low half.
//
// Accumulation order, the same on every path and for any thread count: each element of the
// tile is one accumulator that takes the steps in order, s = 0, 1, ..., as fused
// multiply-adds (float) or as VDPBF16PS does (bf16 pairs: the odd k's product, then the
// even k's, each added with one rounding). The portable path multiplies and adds in two
// roundings, whatever the compiler flags: contraction into FMA is turned off for it.

#include <cstdint>
#include <cstring>
#include <utility>

#include "xlite/kernels/intrinsics.hpp"
#include "xlite/kernels/no_contraction.hpp"

namespace xlite::kernels::gemm_detail {

// How a micro-kernel starts its accumulators and writes its tile back:
//   start  acc = 0 when start_scale is 0 (C is not read), else acc = start_scale * C;
//   write  C = acc when alpha is 1, else C = alpha * acc.
struct tile_update {
  float start_scale;
  float alpha;
};

// Where a micro-kernel finds element (row i, step s) of its A panel: packed (the layout
// above), or in place in a row-major A that is not transposed, rows `row_bytes` apart and
// steps consecutive (gemm.hpp's a_read_in_place says when).
template <class Packed, int MR>
struct packed_a {
  const Packed* a;
  Packed at(int i, std::int64_t s) const { return a[s * MR + i]; }
  const void* ahead(std::int64_t steps, std::int64_t s) const { return a + (steps + s) * MR; } // the next panel
};

template <class Packed, int MR>
struct a_in_place {
  const unsigned char* a;
  std::int64_t row_bytes;
  Packed at(int i, std::int64_t s) const {
    Packed value;
    std::memcpy(&value, a + i * row_bytes + s * static_cast<std::int64_t>(sizeof(Packed)), sizeof value);
    return value;
  }
  // The next panel is the next MR rows: step s touches row s % MR, cache line s / MR of it
  // (the last line once past the block's end), which covers the panel's lines well before
  // the driver gets there.
  const void* ahead(std::int64_t steps, std::int64_t s) const {
    const std::int64_t last_byte = (steps - 1) * static_cast<std::int64_t>(sizeof(Packed));
    const std::int64_t line = s / MR * 64;
    return a + (MR + s % MR) * row_bytes + (line < last_byte ? line : last_byte);
  }
};

// Calls f.template operator()<R>() with R = rows, for rows in [1, MR]: a micro-kernel
// instantiated for each row count. A last panel of 4 rows under a 12-row kernel otherwise
// costs as much as a whole one (m = 16: a third of the work wasted; m = 1: eleven twelfths).
template <class F, int... R>
void with_rows_of(int rows, F& f, std::integer_sequence<int, R...>) {
  (void)((rows == R + 1 && (f.template operator()<R + 1>(), true)) || ...);
}

template <int MR, class F>
void with_rows(int rows, F&& f) {
  if (rows == MR) return f.template operator()<MR>(); // whole panels, nearly every call
  with_rows_of(rows, f, std::make_integer_sequence<int, MR>{});
}

// ---- portable --------------------------------------------------------------------------------

template <int Rows, int NR, class A>
XLITE_NO_CONTRACTION_FUNCTION void micro_kernel_portable(std::int64_t steps, A a, const float* b, float* c,
                                                         std::int64_t ldc, const tile_update& update) {
  XLITE_NO_CONTRACTION_BODY
  float acc[Rows][NR];
  for (int i = 0; i < Rows; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = update.start_scale == 0.0f ? 0.0f : update.start_scale * c[i * ldc + j];
  }
  for (std::int64_t s = 0; s < steps; ++s) {
    for (int i = 0; i < Rows; ++i) {
      const float ai = a.at(i, s);
      for (int j = 0; j < NR; ++j) acc[i][j] += ai * b[s * NR + j];
    }
  }
  for (int i = 0; i < Rows; ++i) {
    for (int j = 0; j < NR; ++j) c[i * ldc + j] = update.alpha == 1.0f ? acc[i][j] : update.alpha * acc[i][j];
  }
}

#if XLITE_X86_KERNELS
XLITE_INTRINSICS_BEGIN

// ---- AVX2: 6 x 16, twelve ymm accumulators ------------------------------------------------------

template <int Rows, int NV, class A>
XLITE_TARGET_AVX2 inline void micro_kernel_avx2(std::int64_t steps, A a, const float* b, float* c, std::int64_t ldc,
                                                const tile_update& update) {
  constexpr int NR = 8 * NV;
  __m256 acc[Rows][NV];
  const __m256 start = _mm256_set1_ps(update.start_scale);
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      acc[i][v] =
          update.start_scale == 0.0f ? _mm256_setzero_ps() : _mm256_mul_ps(start, _mm256_loadu_ps(c + i * ldc + 8 * v));
    }
  }
  for (std::int64_t s = 0; s < steps; ++s) {
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_load_ps(b + s * NR + 8 * v);
#pragma GCC unroll 16
    for (int i = 0; i < Rows; ++i) {
      const __m256 ai = _mm256_set1_ps(a.at(i, s));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  const __m256 alpha = _mm256_set1_ps(update.alpha);
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      _mm256_storeu_ps(c + i * ldc + 8 * v, update.alpha == 1.0f ? acc[i][v] : _mm256_mul_ps(alpha, acc[i][v]));
    }
  }
}

// ---- AVX-512: float steps (FMA) and bf16-pair steps (VDPBF16PS) ---------------------------------

// The store and the start of a zmm tile are the same for both step kinds.
template <int Rows, int NV>
XLITE_TARGET_AVX512 inline void start_tile_avx512(__m512 (&acc)[Rows][NV], const float* c, std::int64_t ldc,
                                                  const tile_update& update) {
  const __m512 start = _mm512_set1_ps(update.start_scale);
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      acc[i][v] = update.start_scale == 0.0f ? _mm512_setzero_ps()
                                             : _mm512_mul_ps(start, _mm512_loadu_ps(c + i * ldc + 16 * v));
    }
  }
}

template <int Rows, int NV>
XLITE_TARGET_AVX512 inline void write_tile_avx512(const __m512 (&acc)[Rows][NV], float* c, std::int64_t ldc,
                                                  const tile_update& update) {
  const __m512 alpha = _mm512_set1_ps(update.alpha);
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      _mm512_storeu_ps(c + i * ldc + 16 * v, update.alpha == 1.0f ? acc[i][v] : _mm512_mul_ps(alpha, acc[i][v]));
    }
  }
}

template <int Rows, int NV, class A>
XLITE_TARGET_AVX512 inline void micro_kernel_avx512(std::int64_t steps, A a, const float* b, float* c, std::int64_t ldc,
                                                    const tile_update& update) {
  constexpr int NR = 16 * NV;
  constexpr std::int64_t b_ahead = 4;
  __m512 acc[Rows][NV];
  start_tile_avx512(acc, c, ldc, update);
  for (std::int64_t s = 0; s < steps; ++s) {
    // The next A panel, which the driver takes after this one's last tile: into L2 early.
    _mm_prefetch(static_cast<const char*>(a.ahead(steps, s)), _MM_HINT_T1);
    // B streams from L2 or L3: its step 4 ahead into L1 (5% at 2048^3 on Sapphire Rapids
    // with kc = 256; 2 and 8 measured worse), the last step again near the end (no pointer
    // past the panel).
    const std::int64_t b_next = s + b_ahead < steps ? s + b_ahead : steps - 1;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm_prefetch(reinterpret_cast<const char*>(b + b_next * NR + 16 * v), _MM_HINT_T0);
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + s * NR + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < Rows; ++i) {
      const __m512 ai = _mm512_set1_ps(a.at(i, s));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  write_tile_avx512(acc, c, ldc, update);
}

template <int Rows, int NV, class A>
XLITE_TARGET_AVX512_BF16 inline void micro_kernel_avx512_bf16(std::int64_t steps, A a, const std::uint32_t* b, float* c,
                                                              std::int64_t ldc, const tile_update& update) {
  constexpr int NR = 16 * NV;
  __m512 acc[Rows][NV];
  start_tile_avx512(acc, c, ldc, update);
  for (std::int64_t s = 0; s < steps; ++s) {
    // The next A panel, which the driver takes after this one's last tile: into L2 early.
    _mm_prefetch(static_cast<const char*>(a.ahead(steps, s)), _MM_HINT_T1);
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + s * NR + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < Rows; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a.at(i, s)));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
  }
  write_tile_avx512(acc, c, ldc, update);
}

XLITE_INTRINSICS_END
#endif // XLITE_X86_KERNELS

} // namespace xlite::kernels::gemm_detail
