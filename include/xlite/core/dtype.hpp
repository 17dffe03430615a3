#pragma once

// Element types and how they combine. The promotion rules are PyTorch's (torch.promote_types
// and torch.result_type), so code ported from PyTorch computes in the same dtypes.
// The one departure: xlite has no int16, so uint8 with int8 promotes to int32, the smallest
// type here that holds both ranges (PyTorch gives int16).

#include <array>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

namespace xlite {

// Ordered by category (bool < integral < floating point), then by width; `promote_types`
// relies on neither order, but printing tables in this order reads naturally.
enum class dtype : std::uint8_t { boolean, u8, i8, i32, i64, f16, bf16, f32, f64 };

inline constexpr std::array all_dtypes{dtype::boolean, dtype::u8,   dtype::i8,  dtype::i32, dtype::i64,
                                       dtype::f16,     dtype::bf16, dtype::f32, dtype::f64};

// The three kinds PyTorch's scalar promotion distinguishes.
enum class dtype_category : std::uint8_t { boolean, integral, floating_point };

// The dtypes a plain C++ scalar becomes when it takes part in an op without a tensor of a
// higher category: PyTorch's defaults (int64 for integers, float32 for floating point).
inline constexpr dtype default_integral_dtype = dtype::i64;
inline constexpr dtype default_floating_dtype = dtype::f32;

namespace detail {

struct dtype_info {
  std::string_view name; // PyTorch's name: "float32", "bfloat16", ...
  std::size_t size;      // bytes per element
  dtype_category category;
  bool is_signed;
};

inline constexpr std::array<dtype_info, all_dtypes.size()> dtype_table{{
    {"bool", 1, dtype_category::boolean, false},
    {"uint8", 1, dtype_category::integral, false},
    {"int8", 1, dtype_category::integral, true},
    {"int32", 4, dtype_category::integral, true},
    {"int64", 8, dtype_category::integral, true},
    {"float16", 2, dtype_category::floating_point, true},
    {"bfloat16", 2, dtype_category::floating_point, true},
    {"float32", 4, dtype_category::floating_point, true},
    {"float64", 8, dtype_category::floating_point, true},
}};

constexpr const dtype_info& info(dtype t) { return dtype_table[static_cast<std::size_t>(t)]; }

} // namespace detail

constexpr std::string_view name(dtype t) { return detail::info(t).name; }
constexpr std::size_t size_of(dtype t) { return detail::info(t).size; }
constexpr dtype_category category(dtype t) { return detail::info(t).category; }
constexpr bool is_floating_point(dtype t) { return category(t) == dtype_category::floating_point; }
constexpr bool is_integral(dtype t) { return category(t) == dtype_category::integral; }
constexpr bool is_signed(dtype t) { return detail::info(t).is_signed; }

inline std::ostream& operator<<(std::ostream& out, dtype t) { return out << name(t); }

// The dtype of a result computed from tensors of dtypes a and b (torch.promote_types).
constexpr dtype promote_types(dtype a, dtype b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (is_floating_point(a)) {
    // float16 and bfloat16 each have range or precision the other lacks: both fit in float32.
    if (size_of(a) == size_of(b)) return dtype::f32;
    return size_of(a) > size_of(b) ? a : b;
  }
  if (is_signed(a) == is_signed(b)) return size_of(a) > size_of(b) ? a : b;
  // uint8 with a signed type: the result must be signed and hold 0..255 too.
  const dtype signed_one = is_signed(a) ? a : b;
  return size_of(signed_one) > 1 ? signed_one : dtype::i32;
}

// The dtype of a result computed from a tensor and a plain scalar (torch.result_type with a
// wrapped number): the scalar decides only when its category is higher than the tensor's.
// So uint8 + 300 stays uint8 and float16 + 2.5 stays float16, but int32 + 2.5 is float32.
constexpr dtype promote_with_scalar(dtype tensor, dtype_category scalar) {
  if (scalar <= category(tensor)) return tensor;
  return scalar == dtype_category::floating_point ? default_floating_dtype : default_integral_dtype;
}

// The dtype of a C++ element type. bfloat16 and float16 join in core/bfloat16.hpp and
// core/float16.hpp.
template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> : std::integral_constant<dtype, dtype::boolean> {};
template <>
struct dtype_of<std::uint8_t> : std::integral_constant<dtype, dtype::u8> {};
template <>
struct dtype_of<std::int8_t> : std::integral_constant<dtype, dtype::i8> {};
template <>
struct dtype_of<std::int32_t> : std::integral_constant<dtype, dtype::i32> {};
template <>
struct dtype_of<std::int64_t> : std::integral_constant<dtype, dtype::i64> {};
template <>
struct dtype_of<float> : std::integral_constant<dtype, dtype::f32> {};
template <>
struct dtype_of<double> : std::integral_constant<dtype, dtype::f64> {};

template <class T>
concept element_type = requires {
  dtype_of<std::remove_cv_t<T>>::value;
};

template <element_type T>
inline constexpr dtype dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

// The category a plain C++ scalar falls in, for promote_with_scalar.
template <class T>
requires std::is_arithmetic_v<T>
inline constexpr dtype_category scalar_category_v = std::is_same_v<T, bool> ? dtype_category::boolean
                                                    : std::is_integral_v<T> ? dtype_category::integral
                                                                            : dtype_category::floating_point;

} // namespace xlite
