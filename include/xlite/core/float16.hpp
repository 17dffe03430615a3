#pragma once

// xlite::float16: IEEE 754 binary16 (sign, 5 exponent bits, 10 mantissa bits): 11 bits of
// precision, range up to 65504, subnormals down to 2^-24.
//
// Conversion from float is the one x86's F16C (VCVTPS2PH, round-to-nearest-even) performs:
//   - round to nearest, ties to even; overflow gives +-Inf (from 65520 up in magnitude);
//   - float16 subnormals are kept (unlike bfloat16's flush): results below 2^-14 round to
//     multiples of 2^-24, and from 2^-25 down in magnitude to a zero of the same sign;
//   - NaN stays NaN, made quiet, with its sign and the upper 10 bits of its payload.
// Conversion to float is exact (F16C's VCVTPH2PS; a NaN comes out quiet). Arithmetic goes
// through float, as in PyTorch's c10::Half (core/storage_float.hpp).

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "xlite/core/dtype.hpp"
#include "xlite/core/storage_float.hpp"

namespace xlite {

namespace detail {

// VCVTPS2PH (round to nearest even) on one value.
constexpr std::uint16_t float_to_float16_bits(float value) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fff'ffffu;
  if (magnitude > 0x7f80'0000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu)); // NaN
  if (magnitude >= 0x477f'f000u) return static_cast<std::uint16_t>(sign | 0x7c00u); // 65520 and up, Inf: Inf
  if (magnitude >= 0x3880'0000u) {                                                  // 2^-14 and up: normal
    // Round the mantissa to 10 bits (a carry moves into the exponent, as it should), then
    // rebias the exponent from 127 to 15.
    const std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - 0x3800'0000u) >> 13));
  }
  if (magnitude <= 0x3300'0000u) return sign; // 2^-25 and below: zero (2^-25 ties to even, 0)
  // Subnormal: the value in units of 2^-24, rounded to nearest even (1024 is the smallest
  // normal, encoded alike).
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t mantissa = (magnitude & 0x7f'ffffu) | 0x80'0000u;
  const std::uint32_t shift = 126 - exponent; // 14 to 24
  const std::uint32_t units = mantissa >> shift;
  const std::uint32_t rest = mantissa & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  const bool up = rest > half || (rest == half && (units & 1u) != 0);
  return static_cast<std::uint16_t>(sign | (units + (up ? 1u : 0u)));
}

constexpr float float16_bits_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) { // Inf; NaN made quiet, as VCVTPH2PS does
    return std::bit_cast<float>(sign | 0x7f80'0000u | (mantissa != 0 ? 0x40'0000u : 0u) | mantissa << 13);
  }
  if (exponent != 0) return std::bit_cast<float>(sign | (exponent + 112) << 23 | mantissa << 13);
  // Zero or subnormal: mantissa * 2^-24, exact in float.
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return sign != 0 ? -magnitude : magnitude;
}

} // namespace detail

class float16 : public storage_float_bits<float16> {
public:
  float16() = default;
  // Implicit, as from float to double. Other numbers come through float: a double is
  // rounded to float first, as in PyTorch.
  constexpr float16(float value) noexcept : storage_float_bits(detail::float_to_float16_bits(value)) {} // NOLINT

  constexpr operator float() const noexcept { return detail::float16_bits_to_float(bits()); } // NOLINT
};

static_assert(sizeof(float16) == 2 && std::is_trivially_copyable_v<float16>);

template <>
struct dtype_of<float16> : std::integral_constant<dtype, dtype::f16> {};

template <>
inline constexpr bool is_storage_float_v<float16> = true;

} // namespace xlite

// numeric_limits of IEEE binary16.
template <>
class std::numeric_limits<xlite::float16> : public xlite::storage_float_limits {
  using h = xlite::float16;

public:
  static constexpr bool is_iec559 = true;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;

  static constexpr h min() noexcept { return h::from_bits(0x0400); } // 2^-14
  static constexpr h lowest() noexcept { return h::from_bits(0xfbff); }
  static constexpr h max() noexcept { return h::from_bits(0x7bff); }          // 65504
  static constexpr h epsilon() noexcept { return h::from_bits(0x1400); }      // 2^-10
  static constexpr h round_error() noexcept { return h::from_bits(0x3800); }  // 0.5
  static constexpr h infinity() noexcept { return h::from_bits(0x7c00); }
  static constexpr h quiet_NaN() noexcept { return h::from_bits(0x7e00); }
  static constexpr h signaling_NaN() noexcept { return h::from_bits(0x7d00); }
  static constexpr h denorm_min() noexcept { return h::from_bits(0x0001); } // 2^-24
};
