#pragma once

// xlite::bfloat16: the TPU's number format. The upper 16 bits of an IEEE float32 (sign,
// 8 exponent bits, 7 mantissa bits): float32's range with 8 bits of precision.
//
// Conversion from float is the one x86's VCVTNEPS2BF16 and the TPU perform, so that every
// path (this scalar code, the vector kernels of kernels/convert.hpp, the matrix units)
// gives the same bits:
//   - round to nearest, ties to even;
//   - NaN stays NaN, made quiet, with its sign and upper payload bits: (bits >> 16) | 0x40;
//   - +-Inf, +-0 and overflow behave as IEEE rounding says (overflow gives +-Inf);
//   - float subnormals become zero of the same sign (the hardware flushes them: its
//     conversion runs with denormals-are-zero and flush-to-zero).
// Conversion to float is exact (bits << 16), a bf16 subnormal included.
//
// Arithmetic goes through float, as in PyTorch's c10::BFloat16 (core/storage_float.hpp):
// bfloat16 op bfloat16 and bfloat16 op integer give bfloat16, rounded once; with float or
// double the result is float or double. Comparisons compare the float values.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "xlite/core/dtype.hpp"
#include "xlite/core/storage_float.hpp"

namespace xlite {

namespace detail {

// VCVTNEPS2BF16 on one value.
constexpr std::uint16_t float_to_bfloat16_bits(float value) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fff'ffffu) > 0x7f80'0000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u); // NaN
  if ((bits & 0x7f80'0000u) == 0) return static_cast<std::uint16_t>((bits >> 16) & 0x8000u);        // 0, subnormal
  const std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);                                 // ties to even
  return static_cast<std::uint16_t>((bits + rounding_bias) >> 16);
}

constexpr float bfloat16_bits_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

} // namespace detail

class bfloat16 : public storage_float_bits<bfloat16> {
public:
  bfloat16() = default;
  // Implicit, as from float to double. Other numbers come through float: a double is
  // rounded to float first, as in PyTorch.
  constexpr bfloat16(float value) noexcept : storage_float_bits(detail::float_to_bfloat16_bits(value)) {} // NOLINT

  constexpr operator float() const noexcept { return detail::bfloat16_bits_to_float(bits()); } // NOLINT
};

static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);

template <>
struct dtype_of<bfloat16> : std::integral_constant<dtype, dtype::bf16> {};

template <>
inline constexpr bool is_storage_float_v<bfloat16> = true;

} // namespace xlite

// numeric_limits as for an IEEE type with 8 significant bits and float's exponent range.
// Subnormals are stored (has_denorm), though float's conversion flushes them.
template <>
class std::numeric_limits<xlite::bfloat16> : public xlite::storage_float_limits {
  using b = xlite::bfloat16;

public:
  static constexpr bool is_iec559 = false; // no IEEE interchange format; float's conversion flushes subnormals
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;

  static constexpr b min() noexcept { return b::from_bits(0x0080); } // 2^-126
  static constexpr b lowest() noexcept { return b::from_bits(0xff7f); }
  static constexpr b max() noexcept { return b::from_bits(0x7f7f); }          // (2 - 2^-7) 2^127
  static constexpr b epsilon() noexcept { return b::from_bits(0x3c00); }      // 2^-7
  static constexpr b round_error() noexcept { return b::from_bits(0x3f00); }  // 0.5
  static constexpr b infinity() noexcept { return b::from_bits(0x7f80); }
  static constexpr b quiet_NaN() noexcept { return b::from_bits(0x7fc0); }
  static constexpr b signaling_NaN() noexcept { return b::from_bits(0x7fa0); }
  static constexpr b denorm_min() noexcept { return b::from_bits(0x0001); } // 2^-133
};
