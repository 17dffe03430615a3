#pragma once

// What bfloat16 and float16 share: 16-bit storage types that compute in float, as
// PyTorch's c10::BFloat16 and c10::Half do.
//   storage_float_bits<H>   the 16 bits, from_bits() and bits();
//   storage_float_limits    the numeric_limits members both formats have alike;
//   H op H and H op integer give H: computed in float (the integer converted to float),
//   the result rounded to H once; H op float and H op double give float and double.
//   Comparisons compare the float values (through the implicit conversion to float).
//   Printing prints the float value; std::hash hashes the value, +0 and -0 alike.
// Each type supplies its conversions and numeric_limits, and opts in below.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <type_traits>

namespace xlite {

// The storage of H, a class that derives from storage_float_bits<H>. Default construction
// leaves the bits uninitialised, as for float: a tensor of a given shape is not written twice.
template <class H>
class storage_float_bits {
public:
  static constexpr H from_bits(std::uint16_t bits) noexcept {
    H value;
    static_cast<storage_float_bits&>(value).bits_ = bits;
    return value;
  }
  constexpr std::uint16_t bits() const noexcept { return bits_; }

protected:
  storage_float_bits() = default;
  constexpr explicit storage_float_bits(std::uint16_t bits) noexcept : bits_(bits) {}

private:
  std::uint16_t bits_;
};

// The numeric_limits members both formats have alike; each format's specialisation adds
// its precision, range and special values.
struct storage_float_limits {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
};

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
