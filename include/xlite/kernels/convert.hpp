#pragma once

// float <-> bfloat16 over arrays. Every path gives the bits of the scalar conversion in
// core/bfloat16.hpp (VCVTNEPS2BF16's rounding), whichever runs:
//   avx512_bf16  VCVTNEPS2BF16 itself
//   avx512       the same rounding in 32-bit integer lanes of a zmm register
//   avx2         the same in ymm registers
//   portable     the scalar conversion
// bfloat16 -> float is a 16-bit shift on every path.
//
// These kernels are written with intrinsics under `target` attributes, so that every
// build has every path and picks one at run time (active_isa(), capped by XLITE_ISA),
// unlike the xsimd code of kernels/simd.hpp, which has the path it was compiled for.

#include <cstdint>
#include <cstring>

#include "xlite/core/bfloat16.hpp"
#include "xlite/core/cpu_features.hpp"
#include "xlite/kernels/intrinsics.hpp"

namespace xlite::kernels {

// One path's pair of conversions, over [0, n).
struct bf16_conversion {
  isa level;
  void (*to_bfloat16)(const float* in, bfloat16* out, std::int64_t n);
  void (*to_float)(const bfloat16* in, float* out, std::int64_t n);
};

namespace detail {

inline void to_bfloat16_portable(const float* in, bfloat16* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = bfloat16(in[i]);
}

inline void to_float_portable(const bfloat16* in, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

#if XLITE_X86_KERNELS
XLITE_INTRINSICS_BEGIN

// The scalar rounding of core/bfloat16.hpp on 16 lanes: NaN quiet, subnormals to signed
// zero, otherwise round to nearest even. Returns the results in the low halves of the lanes.
XLITE_TARGET_AVX512 inline __m512i round_to_bfloat16_avx512(__m512i bits) {
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __mmask16 tiny = _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7f800000)); // exponent 0
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
  __m512i result = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
  result = _mm512_mask_mov_epi32(result, nan, _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40)));
  return _mm512_mask_mov_epi32(result, tiny, _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x8000)));
}

XLITE_TARGET_AVX512 inline void to_bfloat16_avx512(const float* in, bfloat16* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i rounded = round_to_bfloat16_avx512(_mm512_loadu_si512(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(rounded));
  }
  if (i < n) { // the tail under a mask: no scalar loop to keep in step with the vector one
    const __mmask16 mask = first_lanes(n - i);
    const __m512i rounded = round_to_bfloat16_avx512(_mm512_maskz_loadu_epi32(mask, in + i));
    _mm256_mask_storeu_epi16(out + i, mask, _mm512_cvtepi32_epi16(rounded));
  }
}

XLITE_TARGET_AVX512_BF16 inline void to_bfloat16_avx512_bf16(const float* in, bfloat16* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + i + 16), _mm512_loadu_ps(in + i));
    _mm512_storeu_si512(out + i, (__m512i)pair);
  }
  for (; i < n; i += 16) {
    const __mmask16 mask = first_lanes(n - i);
    const __m256bh half = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, in + i));
    _mm256_mask_storeu_epi16(out + i, mask, (__m256i)half);
  }
}

XLITE_TARGET_AVX512 inline void to_float_avx512(const bfloat16* in, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(wide, 16));
  }
  if (i < n) {
    const __mmask16 mask = first_lanes(n - i);
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, in + i));
    _mm512_mask_storeu_epi32(out + i, mask, _mm512_slli_epi32(wide, 16));
  }
}

// The same rounding on 8 lanes.
XLITE_TARGET_AVX2 inline __m256i round_to_bfloat16_avx2(__m256i bits) {
  const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  // magnitude > 0x7f800000, unsigned; both are below 2^31, so the signed compare is right.
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff));
  __m256i result = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
  result = _mm256_blendv_epi8(result, _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40)), nan);
  const __m256i signed_zero = _mm256_srli_epi32(_mm256_and_si256(bits, sign_bit), 16);
  return _mm256_blendv_epi8(result, signed_zero, tiny);
}

XLITE_TARGET_AVX2 inline void to_bfloat16_avx2(const float* in, bfloat16* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i low = round_to_bfloat16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    const __m256i high = round_to_bfloat16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8)));
    // packus works within 128-bit halves (low0-3 high0-3 low4-7 high4-7): put them in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  to_bfloat16_portable(in + i, out + i, n - i);
}

XLITE_TARGET_AVX2 inline void to_float_avx2(const bfloat16* in, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(wide, 16));
  }
  to_float_portable(in + i, out + i, n - i);
}

XLITE_INTRINSICS_END
#endif // XLITE_X86_KERNELS

} // namespace detail

// The conversion path of `level`, which the caller has checked the CPU runs.
inline bf16_conversion bf16_conversion_of(isa level) {
#if XLITE_X86_KERNELS
  switch (level) {
  case isa::amx:
  case isa::avx512_bf16:
    return {isa::avx512_bf16, detail::to_bfloat16_avx512_bf16, detail::to_float_avx512};
  case isa::avx512:
    return {isa::avx512, detail::to_bfloat16_avx512, detail::to_float_avx512};
  case isa::avx2:
    return {isa::avx2, detail::to_bfloat16_avx2, detail::to_float_avx2};
  case isa::portable:
    break;
  }
#else
  static_cast<void>(level);
#endif
  return {isa::portable, detail::to_bfloat16_portable, detail::to_float_portable};
}

// The path active_isa() selects.
inline bf16_conversion active_bf16_conversion() { return bf16_conversion_of(active_isa()); }

inline void convert(const float* in, bfloat16* out, std::int64_t n) { active_bf16_conversion().to_bfloat16(in, out, n); }
inline void convert(const bfloat16* in, float* out, std::int64_t n) { active_bf16_conversion().to_float(in, out, n); }

} // namespace xlite::kernels
