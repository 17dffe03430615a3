#pragma once

// Packing: copying a block of A or B into the panel layout the micro-kernels read
// (kernels/gemm_microkernel.hpp), so that the innermost loop walks memory in order and
// finds it in cache. A block of op(A) becomes panels of MR rows, a block of op(B) panels of
// NR columns; both are "panels of W indices by steps", so one routine packs both. Indices
// past the matrix's edge are packed as zeros, which the micro-kernel multiplies harmlessly.
//
// What a step holds decides the numerics of the path (see gemm.hpp):
//   floats          one k per step, the value as it is (fp32 precision)
//   swapped pairs   one k per step, in the order k+1, k, k+3, k+2, ...: a float kernel then
//                   accumulates in VDPBF16PS's order, odd k before even k of each pair
//   bf16 pairs      two k per step in one 32-bit element, the even k in the low half

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "xlite/core/bfloat16.hpp"
#include "xlite/kernels/intrinsics.hpp"

namespace xlite::kernels::gemm_detail {

// Element (index, k) of a block of op(A) (index: a row) or of op(B) (index: a column).
// k_major: consecutive k are ld apart in memory (A transposed, B not transposed), else
// consecutive indices are.
template <class T>
struct panel_source {
  const T* data; // element (0, 0) of the block
  std::int64_t ld;
  bool k_major;
};

// A source value rounded to bfloat16 (a no-op for bfloat16 sources).
inline bfloat16 as_bfloat16(float value) { return bfloat16(value); }
inline bfloat16 as_bfloat16(bfloat16 value) { return value; }

// Packs `count` indices by `steps` steps into panels of W: panel q starts at
// dst + q * steps * W, and holds fetch(index, step) at [step * W + index % W], zeros for
// indices from count up to the panel's end. The loop order follows the source's layout
// (KMajor: consecutive steps are far apart, consecutive indices adjacent), so that reads
// are contiguous.
template <int W, bool KMajor, class Packed, class Fetch>
void pack_panels(Packed* dst, std::int64_t count, std::int64_t steps, const Fetch& fetch) {
  const std::int64_t full = count / W * W; // indices in whole panels
  if constexpr (KMajor) {
    // Row by row of the source (one step of every panel), so that it is read in order.
    for (std::int64_t s = 0; s < steps; ++s) {
      for (std::int64_t first = 0; first < full; first += W) {
        Packed* row = dst + first * steps + s * W;
        for (int w = 0; w < W; ++w) row[w] = fetch(first + w, s);
      }
      if (full < count) {
        Packed* row = dst + full * steps + s * W;
        for (std::int64_t w = 0; w < W; ++w) row[w] = full + w < count ? fetch(full + w, s) : Packed{};
      }
    }
  } else {
    // A transpose, in blocks of 16 steps: each source row is read a cache line at a time
    // while the block of the panel being written stays in L1.
    constexpr std::int64_t block = 16;
    for (std::int64_t first = 0; first < count; first += W) {
      const std::int64_t width = count - first < W ? count - first : W;
      Packed* panel = dst + first * steps;
      for (std::int64_t s0 = 0; s0 < steps; s0 += block) {
        const std::int64_t s1 = s0 + block < steps ? s0 + block : steps;
        for (std::int64_t w = 0; w < W; ++w) {
          for (std::int64_t s = s0; s < s1; ++s) panel[s * W + w] = w < width ? fetch(first + w, s) : Packed{};
        }
      }
    }
  }
}

// Calls pack(fetch) with a fetch of source elements that knows the layout at compile time.
template <class T, class Pack>
void with_layout(const panel_source<T>& src, const Pack& pack) {
  const T* data = src.data;
  const std::int64_t ld = src.ld;
  if (src.k_major) {
    pack(std::true_type{}, [data, ld](std::int64_t index, std::int64_t k) { return data[k * ld + index]; });
  } else {
    pack(std::false_type{}, [data, ld](std::int64_t index, std::int64_t k) { return data[index * ld + k]; });
  }
}

// The three step formats over a source block of `depth` k.

// floats: one k per step.
template <int W, class T>
void pack_floats(float* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
  if constexpr (std::is_same_v<T, float>) {
    if (src.k_major) { // whole panel rows are copies (GCC's -O2 would not vectorize the loop)
      const std::int64_t full = count / W * W;
      for (std::int64_t k = 0; k < depth; ++k) {
        const float* row = src.data + k * src.ld;
        for (std::int64_t first = 0; first < full; first += W) {
          std::memcpy(dst + first * depth + k * W, row + first, W * sizeof(float));
        }
        for (std::int64_t w = full; w < full + W && full < count; ++w) {
          dst[full * depth + k * W + (w - full)] = w < count ? row[w] : 0.0f;
        }
      }
      return;
    }
  }
  with_layout(src, [&](auto k_major, const auto& at) {
    pack_panels<W, k_major()>(dst, count, depth,
                              [&](std::int64_t i, std::int64_t k) { return static_cast<float>(at(i, k)); });
  });
}

// The number of steps of a block of `depth` k in the pair formats: whole pairs.
constexpr std::int64_t pair_steps(std::int64_t depth) { return (depth + 1) / 2; }

// swapped pairs: 2 * pair_steps(depth) steps, k ^ 1 at step k, zero past depth.
template <int W, class T>
void pack_swapped_pairs(float* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
  with_layout(src, [&](auto k_major, const auto& at) {
    pack_panels<W, k_major()>(dst, count, 2 * pair_steps(depth), [&](std::int64_t i, std::int64_t s) {
      const std::int64_t k = s ^ 1;
      return k < depth ? static_cast<float>(as_bfloat16(at(i, k))) : 0.0f;
    });
  });
}

// bf16 pairs: `steps` steps (pair_steps(depth), or more for zero padding), k = 2s in the
// low half and 2s + 1 in the high half.
template <int W, class T>
void pack_bf16_pairs(std::uint32_t* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth,
                     std::int64_t steps) {
  with_layout(src, [&](auto k_major, const auto& at) {
    const auto bits = [&](std::int64_t i, std::int64_t k) -> std::uint32_t {
      return k < depth ? as_bfloat16(at(i, k)).bits() : 0u;
    };
    pack_panels<W, k_major()>(
        dst, count, steps, [&](std::int64_t i, std::int64_t s) { return bits(i, 2 * s) | bits(i, 2 * s + 1) << 16; });
  });
}

// The A panels of the AMX kernel (kernels/amx.hpp): blocks of 16 pair steps, each holding
// rows 0..W-1 of 16 pair words, so that a tile row is one row of A. `steps` is a multiple
// of 16.
template <int W, class T>
void pack_amx_rows(std::uint32_t* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth,
                   std::int64_t steps) {
  constexpr std::int64_t block = 16;
  with_layout(src, [&](auto, const auto& at) {
    const auto bits = [&](std::int64_t i, std::int64_t k) -> std::uint32_t {
      return k < depth ? as_bfloat16(at(i, k)).bits() : 0u;
    };
    for (std::int64_t first = 0; first < count; first += W) {
      std::uint32_t* panel = dst + first * steps;
      for (std::int64_t w = 0; w < W; ++w) {
        const std::int64_t i = first + w;
        for (std::int64_t s = 0; s < steps; ++s) {
          panel[(s / block) * W * block + w * block + s % block] =
              i < count ? bits(i, 2 * s) | bits(i, 2 * s + 1) << 16 : 0u;
        }
      }
    }
  });
}

#if XLITE_X86_KERNELS
XLITE_INTRINSICS_BEGIN

// bf16 pairs with AVX-512, for the avx512_bf16 path (the scalar packing above costs a
// quarter of a bf16 GEMM's time). 16 pair words at a time: the rounding is VCVTNE2PS2BF16,
// which is the scalar conversion's (kernels/convert.hpp checks it over all floats).

// The values that 16 pair words hold at 32 consecutive k: two per lane of `lanes` (which
// are the first few), less the last one when it lies past the end.
inline __mmask32 pair_values(__mmask16 lanes, bool last_odd) {
  const int values = 2 * __builtin_popcount(lanes) - (last_odd ? 1 : 0);
  return static_cast<__mmask32>((std::uint64_t{1} << values) - 1);
}

// Pair words of 16 consecutive indices at steps k and k + 1 of a k-major source (`next`
// is null past the end: zeros).
XLITE_TARGET_AVX512_BF16 inline __m512i pair_words(const float* row, const float* next, __mmask16 lanes) {
  const __m512 low = _mm512_maskz_loadu_ps(lanes, row);
  const __m512 high = next != nullptr ? _mm512_maskz_loadu_ps(lanes, next) : _mm512_setzero_ps();
  // 32 bfloat16: low's 16 in the lower half, high's in the upper; interleave them.
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(high, low);
  const __m512i index = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(index, both);
}

XLITE_TARGET_AVX512_BF16 inline __m512i pair_words(const bfloat16* row, const bfloat16* next, __mmask16 lanes) {
  const __m512i low = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, row));
  if (next == nullptr) return low;
  const __m512i high = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, next));
  return _mm512_or_si512(low, _mm512_slli_epi32(high, 16));
}

// 16 pair words of one index at 32 consecutive k of an index-major source (pairs adjacent
// in memory); `lanes` selects the pairs that exist, `last_odd` drops the k past the end.
XLITE_TARGET_AVX512_BF16 inline __m512i pair_words_along(const float* k0, __mmask16 lanes, bool last_odd) {
  const __mmask32 values = pair_values(lanes, last_odd);
  const __m512 low = _mm512_maskz_loadu_ps(static_cast<__mmask16>(values), k0);
  // k0 + 16 is formed only where it is in the row (a pointer past it is undefined, masked or not).
  const __m512 high =
      (values >> 16) != 0 ? _mm512_maskz_loadu_ps(static_cast<__mmask16>(values >> 16), k0 + 16) : _mm512_setzero_ps();
  return (__m512i)_mm512_cvtne2ps_pbh(high, low); // in order: already pairs
}

XLITE_TARGET_AVX512_BF16 inline __m512i pair_words_along(const bfloat16* k0, __mmask16 lanes, bool last_odd) {
  const __mmask32 values = pair_values(lanes, last_odd);
  return _mm512_maskz_loadu_epi16(values, k0);
}

// `steps` may exceed pair_steps(depth): the steps past it are zeros (AMX's whole blocks).
template <int W, class T>
XLITE_TARGET_AVX512_BF16 void pack_bf16_pairs_avx512(std::uint32_t* dst, const panel_source<T>& src, std::int64_t count,
                                                     std::int64_t depth, std::int64_t steps) {
  if (src.k_major) {
    // Step by step; within a step, panel by panel, 16 indices at a time.
    for (std::int64_t s = 0; s < steps; ++s) {
      const bool exists = 2 * s < depth;
      for (std::int64_t first = 0; first < count; first += W) {
        std::uint32_t* out = dst + first * steps + s * W;
        for (int w = 0; w < W; w += 16) {
          const std::int64_t left = exists ? count - first - w : 0;
          const __mmask16 store = first_lanes(W - w);
          __m512i words = _mm512_setzero_si512(); // past depth or count: zeros, and no pointer formed there
          if (left > 0) {
            const __mmask16 lanes = first_lanes(left);
            const T* row = src.data + 2 * s * src.ld + first + w;
            words = pair_words(row, 2 * s + 1 < depth ? row + src.ld : nullptr, lanes);
          }
          _mm512_mask_storeu_epi32(out + w, store, words);
        }
      }
    }
    return;
  }
  // Index by index: 16 steps of one index come from 32 consecutive values; they go to
  // every W-th word of the panel.
  alignas(64) std::uint32_t words[16];
  for (std::int64_t first = 0; first < count; first += W) {
    std::uint32_t* panel = dst + first * steps;
    for (std::int64_t w = 0; w < W; ++w) {
      const bool exists = first + w < count;
      for (std::int64_t s0 = 0; s0 < steps; s0 += 16) {
        const std::int64_t n = steps - s0 < 16 ? steps - s0 : 16;
        const std::int64_t pairs = std::clamp<std::int64_t>(pair_steps(depth) - s0, 0, n); // the rest are zeros
        if (exists && pairs > 0) {
          const __mmask16 lanes = first_lanes(pairs);
          const T* along = src.data + (first + w) * src.ld + 2 * s0;
          _mm512_store_si512(words, pair_words_along(along, lanes, 2 * (s0 + pairs) > depth));
        } else {
          _mm512_store_si512(words, _mm512_setzero_si512());
        }
        for (std::int64_t s = 0; s < n; ++s) panel[(s0 + s) * W + w] = words[s];
      }
    }
  }
}

// Float panels from an index-major float source (A not transposed, B transposed): a
// transpose, 16 indices by 16 steps at a time in registers, so that each step's W values
// are stored together instead of one by one.
XLITE_TARGET_AVX512 __attribute__((always_inline)) inline void transpose_16x16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  // Now r[4q + j] holds, in each 128-bit lane L, column 4L + j' of rows 4q..4q+3 for some j';
  // two rounds of 128-bit shuffles bring each column's four lanes together.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

template <int W>
XLITE_TARGET_AVX512 void pack_floats_index_major_avx512(float* dst, const float* src, std::int64_t ld,
                                                        std::int64_t count, std::int64_t depth) {
  for (std::int64_t first = 0; first < count; first += W) {
    float* panel = dst + first * depth;
    for (int w0 = 0; w0 < W; w0 += 16) { // 16 indices of the panel at a time
      const int width = W - w0 < 16 ? W - w0 : 16;
      const __mmask16 store_lanes = first_lanes(width);
      for (std::int64_t s0 = 0; s0 < depth; s0 += 16) {
        const std::int64_t n = depth - s0 < 16 ? depth - s0 : 16;
        const __mmask16 load_lanes = first_lanes(n);
        __m512 r[16];
        for (int i = 0; i < 16; ++i) {
          const std::int64_t index = first + w0 + i;
          r[i] = i < width && index < count ? _mm512_maskz_loadu_ps(load_lanes, src + index * ld + s0)
                                            : _mm512_setzero_ps();
        }
        transpose_16x16(r);
        for (std::int64_t s = 0; s < n; ++s) _mm512_mask_storeu_ps(panel + (s0 + s) * W + w0, store_lanes, r[s]);
      }
    }
  }
}

// pack_amx_rows with AVX-512: a block's 16 pair words of one row are one 64-byte store.
// From an index-major source (A as stored) they are 32 consecutive values; from a k-major
// one (A transposed) 16 steps of 16 rows are gathered a step at a time and transposed.
template <int W, class T>
XLITE_TARGET_AVX512_BF16 void pack_amx_rows_avx512(std::uint32_t* dst, const panel_source<T>& src, std::int64_t count,
                                                   std::int64_t depth, std::int64_t steps) {
  constexpr std::int64_t block = 16;
  const std::int64_t pairs_total = pair_steps(depth);
  for (std::int64_t first = 0; first < count; first += W) {
    std::uint32_t* panel = dst + first * steps;
    for (std::int64_t s0 = 0; s0 < steps; s0 += block) {
      std::uint32_t* out = panel + s0 * W; // rows of this block, 16 words each
      const std::int64_t pairs = std::clamp<std::int64_t>(pairs_total - s0, 0, block);
      const bool last_odd = 2 * (s0 + pairs) > depth;
      if (!src.k_major) {
        for (std::int64_t w = 0; w < W; ++w) {
          const std::int64_t row = first + w;
          const __m512i words = row < count && pairs > 0
                                    ? pair_words_along(src.data + row * src.ld + 2 * s0, first_lanes(pairs), last_odd)
                                    : _mm512_setzero_si512();
          _mm512_store_si512(out + w * block, words);
        }
        continue;
      }
      for (std::int64_t w0 = 0; w0 < W; w0 += 16) {
        const std::int64_t rows_left = count - first - w0;
        __m512 r[16];
        for (std::int64_t s = 0; s < block; ++s) {
          const std::int64_t k = 2 * (s0 + s);
          r[s] = _mm512_setzero_ps();
          if (s >= pairs || rows_left <= 0) continue; // zeros; no pointer past the source formed
          const T* at = src.data + k * src.ld + first + w0;
          r[s] = _mm512_castsi512_ps(pair_words(at, k + 1 < depth ? at + src.ld : nullptr, first_lanes(rows_left)));
        }
        transpose_16x16(r); // r[i]: the 16 steps of row w0 + i
        for (int i = 0; i < 16; ++i) _mm512_store_ps(out + (w0 + i) * block, r[i]);
      }
    }
  }
}

XLITE_INTRINSICS_END
#endif // XLITE_X86_KERNELS

} // namespace xlite::kernels::gemm_detail
