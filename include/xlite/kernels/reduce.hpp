#pragma once

// The reductions of the op set (sum, prod, max, min; mean is a sum divided by the count),
// as one functor each: an identity and a combine that work on scalars and on batches, and
// the fixed order in which a batch's lanes are combined. Both front ends reduce through
// these.

#include <array>
#include <cstddef>
#include <limits>

#include "xlite/core/op.hpp"
#include "xlite/kernels/elementwise.hpp"
#include "xlite/kernels/simd.hpp"

namespace xlite::kernels {

template <op O>
struct reduction;

template <>
struct reduction<op::sum> {
  template <class T>
  static constexpr T identity() {
    return T(0);
  }
  template <class V>
  static V combine(const V& a, const V& b) {
    return a + b;
  }
};

template <>
struct reduction<op::prod> {
  template <class T>
  static constexpr T identity() {
    return T(1);
  }
  template <class V>
  static V combine(const V& a, const V& b) {
    return a * b;
  }
};

// max and min propagate NaN, as torch.max and torch.min do.
template <>
struct reduction<op::max> {
  template <class T>
  static constexpr T identity() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  template <class V>
  static V combine(const V& a, const V& b) {
    return detail::maximum(a, b);
  }
};

template <>
struct reduction<op::min> {
  template <class T>
  static constexpr T identity() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  }
  template <class V>
  static V combine(const V& a, const V& b) {
    return detail::minimum(a, b);
  }
};

template <>
struct reduction<op::mean> : reduction<op::sum> {};

// A batch's lanes combined left to right: the same order on every run.
template <op O, class T, class Arch>
T combine_lanes(const batch_t<T, Arch>& v) {
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    return v;
  } else {
    alignas(64) std::array<T, lanes<T, Arch>> values;
    v.store_aligned(values.data());
    T result = values[0];
    for (std::size_t i = 1; i < values.size(); ++i) result = reduction<O>::combine(result, values[i]);
    return result;
  }
}

} // namespace xlite::kernels
