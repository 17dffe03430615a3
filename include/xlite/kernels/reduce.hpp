#pragma once

// The reductions of the op set (sum, prod, max, min; mean is a sum divided by the count),
// as one functor each: an identity and a combine that work on scalars and on batches, and
// the fixed order in which a batch's lanes are combined. Both front ends reduce through
// these. argmax, which reduces to a position, has its own rule below.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "xlite/core/op.hpp"
#include "xlite/kernels/elementwise.hpp"
#include "xlite/kernels/intrinsics.hpp"
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

// A batch's lanes combined left to right: the same order on every run. With GNU vector
// types the lanes are read from the register with constant indices, which g++ and clang
// turn into shuffles (bit_cast keeps the lanes in memory order, as a store would): through
// a stored array, the batch's wide store and the narrow loads after it held up a row
// reduction of short rows on every output.
template <op O, class T, class Arch>
T combine_lanes(const batch_t<T, Arch>& v) {
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    return v;
  } else {
    static_assert(std::is_arithmetic_v<T>, "xlite: SIMD reductions are of arithmetic lanes");
    using register_type = typename batch_t<T, Arch>::register_type;
#if defined(__GNUC__)
    using lanes_vector [[gnu::vector_size(sizeof(register_type))]] = T;
    const auto values = std::bit_cast<lanes_vector>(static_cast<register_type>(v));
#else
    alignas(64) std::array<T, lanes<T, Arch>> values;
    v.store_aligned(values.data());
#endif
    return [&]<std::size_t... i>(std::index_sequence<i...>) {
      T result = values[0];
      ((result = reduction<O>::combine(result, T(values[i + 1]))), ...);
      return result;
    }(std::make_index_sequence<lanes<T, Arch> - 1>{});
  }
}

// The swizzles and compares below are AVX-512 intrinsics once inlined.
XLITE_INTRINSICS_BEGIN

// f over a batch's lanes as a tree of swizzles (log2 of the width), for an f whose result
// does not depend on the order, as min and max of numbers: every lane ends with the result.
template <std::size_t Distance>
struct lane_partner {
  static constexpr std::size_t get(std::size_t lane, std::size_t) { return lane ^ Distance; }
};
template <std::size_t Distance = 1, class T, class Arch, class F>
T across_lanes(const xsimd::batch<T, Arch>& v, F f) {
  if constexpr (Distance >= lanes<T, Arch>) {
    return v.get(0);
  } else {
    using index = xsimd::batch<xsimd::as_unsigned_integer_t<T>, Arch>;
    const auto partner = xsimd::swizzle(v, xsimd::make_batch_constant<index, lane_partner<Distance>>());
    return across_lanes<2 * Distance>(f(v, partner), f);
  }
}

// ---- argmax ----------------------------------------------------------------------------------
// The position of the first maximum, a NaN counting as larger than any number (the first
// NaN wins), as torch.argmax.

// Whether value v, met after `best`, takes its place: on scalars and, lane by lane, on
// batches. A loop that visits positions in increasing order and keeps the value and the
// position where this holds ends at the first maximum.
template <class V>
auto argmax_replaces(const V& v, const V& best) {
  if constexpr (!is_batch_v<V>) {
    return v > best || (v != v && best == best);
  } else if constexpr (!std::is_floating_point_v<typename V::value_type>) {
    return v > best;
  }
#if XSIMD_WITH_AVX512F
  else if constexpr (std::is_base_of_v<xsimd::avx512f, typename V::arch_type>) {
    // "Not less or equal, unordered" (v > best, or either is NaN) where best is ordered:
    // two compares, the second masked by the first.
    using mask = xsimd::batch_bool<typename V::value_type, typename V::arch_type>;
    if constexpr (std::is_same_v<typename V::value_type, float>) {
      return mask(_mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_ORD_Q), v, best, _CMP_NLE_UQ));
    } else {
      return mask(_mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(best, best, _CMP_ORD_Q), v, best, _CMP_NLE_UQ));
    }
  }
#endif
  else {
    return ~(v <= best) & (best == best);
  }
}

// A value and where it is. Candidates from loops over disjoint positions (SIMD lanes,
// blocks of a parallel loop) combine in any order to the same winner: the larger value,
// a NaN over any number, the earlier position between equals.
template <class T>
struct argmax_candidate {
  T value{};
  std::int64_t at = -1; // none yet

  friend argmax_candidate better(const argmax_candidate& a, const argmax_candidate& b) {
    if (a.at < 0 || b.at < 0) return a.at < 0 ? b : a;
    const bool a_first = a.at < b.at;
    const argmax_candidate& first = a_first ? a : b;
    const argmax_candidate& second = a_first ? b : a;
    return argmax_replaces(second.value, first.value) ? second : first;
  }
};

XLITE_INTRINSICS_END

} // namespace xlite::kernels
