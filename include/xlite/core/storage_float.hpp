#pragma once

// What bfloat16 and float16 share: 16-bit storage types that compute in float, as
// PyTorch's c10::BFloat16 and c10::Half do.
//   H op H and H op integer give H: computed in float (the integer converted to float),
//   the result rounded to H once; H op float and H op double give float and double.
//   Comparisons compare the float values (through the implicit conversion to float).
//   Printing prints the float value; std::hash hashes the value, +0 and -0 alike.
// Each type supplies its conversions and numeric_limits, and opts in below.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <type_traits>

namespace xlite {

// Set to true by core/bfloat16.hpp and core/float16.hpp.
template <class T>
inline constexpr bool is_storage_float_v = false;

template <class T>
concept storage_float = is_storage_float_v<T>;

#define XLITE_STORAGE_FLOAT_ARITHMETIC(OP)                                                                            \
  template <storage_float H>                                                                                           \
  constexpr H operator OP(H a, H b) noexcept {                                                                         \
    return H(static_cast<float>(a) OP static_cast<float>(b));                                                         \
  }                                                                                                                    \
  template <storage_float H, std::floating_point T>                                                                    \
  constexpr T operator OP(H a, T b) noexcept {                                                                         \
    return static_cast<T>(static_cast<float>(a)) OP b;                                                                 \
  }                                                                                                                    \
  template <storage_float H, std::floating_point T>                                                                    \
  constexpr T operator OP(T a, H b) noexcept {                                                                         \
    return a OP static_cast<T>(static_cast<float>(b));                                                                 \
  }                                                                                                                    \
  template <storage_float H, std::integral T>                                                                          \
  constexpr H operator OP(H a, T b) noexcept {                                                                         \
    return H(static_cast<float>(a) OP static_cast<float>(b));                                                         \
  }                                                                                                                    \
  template <storage_float H, std::integral T>                                                                          \
  constexpr H operator OP(T a, H b) noexcept {                                                                         \
    return H(static_cast<float>(a) OP static_cast<float>(b));                                                         \
  }                                                                                                                    \
  template <storage_float H>                                                                                           \
  constexpr H& operator OP##=(H& a, H b) noexcept {                                                                    \
    return a = a OP b;                                                                                                 \
  }

XLITE_STORAGE_FLOAT_ARITHMETIC(+)
XLITE_STORAGE_FLOAT_ARITHMETIC(-)
XLITE_STORAGE_FLOAT_ARITHMETIC(*)
XLITE_STORAGE_FLOAT_ARITHMETIC(/)
#undef XLITE_STORAGE_FLOAT_ARITHMETIC

// Both formats keep the sign in the top bit: negation flips it, NaN included.
template <storage_float H>
constexpr H operator-(H a) noexcept {
  return H::from_bits(static_cast<std::uint16_t>(a.bits() ^ 0x8000u));
}
template <storage_float H>
constexpr H operator+(H a) noexcept {
  return a;
}

template <storage_float H>
std::ostream& operator<<(std::ostream& out, H value) {
  return out << static_cast<float>(value);
}

} // namespace xlite

template <xlite::storage_float H>
struct std::hash<H> {
  std::size_t operator()(H value) const noexcept {
    const std::uint16_t bits = value.bits() == 0x8000u ? 0 : value.bits(); // -0 == +0
    return std::hash<std::uint16_t>{}(bits);
  }
};
