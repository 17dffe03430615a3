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

// Two-source shuffles with constant indices on GNU vector types (g++ 12, clang); defined
// as 0 by hand, transpose_batches goes through memory. Set it, if at all, for the whole
// program: it changes an inline function's body.
#ifndef XLITE_HAS_SHUFFLEVECTOR
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define XLITE_HAS_SHUFFLEVECTOR 1
#endif
#endif
#endif
#ifndef XLITE_HAS_SHUFFLEVECTOR
#define XLITE_HAS_SHUFFLEVECTOR 0
#endif

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

// n batches of n lanes transposed: lane g of batch k of the result is lane k of v[g]. With
// GNU vector types, log2(n) rounds of interleaving the lower (upper) halves of batches i and
// i + n/2 into batches 2i (2i + 1), which g++ and clang turn into two-source shuffles.
template <class T, class Arch>
std::array<batch_t<T, Arch>, lanes<T, Arch>>
transpose_batches(const std::array<batch_t<T, Arch>, lanes<T, Arch>>& v) {
  constexpr std::size_t n = lanes<T, Arch>;
  if constexpr (n == 1) {
    return v;
  } else {
    using batch = batch_t<T, Arch>;
    std::array<batch, n> result;
#if XLITE_HAS_SHUFFLEVECTOR
    using register_type = typename batch::register_type;
    using lanes_vector [[gnu::vector_size(sizeof(register_type))]] = T;
    const auto interleave = []<bool upper, std::size_t... i>(const lanes_vector& a, const lanes_vector& b,
                                                             std::index_sequence<i...>) {
      return __builtin_shufflevector(a, b, (i % 2 * n + i / 2 + (upper ? n / 2 : 0))...);
    };
    // Arrays of the C kind (a vector type as a template argument loses its attribute),
    // unrolled, so that they can live in registers.
    lanes_vector rows[n], before[n];
#pragma GCC unroll 16
    for (std::size_t g = 0; g < n; ++g) rows[g] = std::bit_cast<lanes_vector>(static_cast<register_type>(v[g]));
#pragma GCC unroll 4
    for (std::size_t round = 1; round < n; round *= 2) {
#pragma GCC unroll 16
      for (std::size_t g = 0; g < n; ++g) before[g] = rows[g];
#pragma GCC unroll 8
      for (std::size_t i = 0; i < n / 2; ++i) {
        rows[2 * i] = interleave.template operator()<false>(before[i], before[i + n / 2], std::make_index_sequence<n>{});
        rows[2 * i + 1] =
            interleave.template operator()<true>(before[i], before[i + n / 2], std::make_index_sequence<n>{});
      }
    }
#pragma GCC unroll 16
    for (std::size_t k = 0; k < n; ++k) result[k] = batch(std::bit_cast<register_type>(rows[k]));
#else
    alignas(64) std::array<std::array<T, n>, n> rows;
    for (std::size_t g = 0; g < n; ++g) v[g].store_aligned(rows[g].data());
    for (std::size_t k = 0; k < n; ++k) {
      alignas(64) std::array<T, n> column;
      for (std::size_t g = 0; g < n; ++g) column[g] = rows[g][k];
      result[k] = batch::load_aligned(column.data());
    }
#endif
    return result;
  }
}

// combine_lanes of as many batches as a batch has lanes, at once: lane g of the result is
// combine_lanes(v[g]), the same value from the same steps in the same order. Transposed,
// then combined batch by batch: one batch op per lane for them all, where combine_lanes is
// a chain of lanes - 1 scalar ops for each (most of the time of a row reduction over short
// rows).
template <op O, class T, class Arch>
batch_t<T, Arch> combine_lanes_of_each(const std::array<batch_t<T, Arch>, lanes<T, Arch>>& v) {
  const auto columns = transpose_batches<T, Arch>(v);
  batch_t<T, Arch> result = columns[0];
#pragma GCC unroll 16
  for (std::size_t k = 1; k < columns.size(); ++k) result = reduction<O>::combine(result, columns[k]);
  return result;
}

// The swizzles and compares below are AVX-512 intrinsics once inlined.
XLITE_INTRINSICS_BEGIN

// The swizzle that gives each lane the lane Distance away (its partner in a tree across
// lanes).
template <std::size_t Distance>
struct lane_partner {
  static constexpr std::size_t get(std::size_t lane, std::size_t) { return lane ^ Distance; }
};

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

// A batch of candidates: lane l of `at` is where lane l of `value` is, no two lanes at the
// same position. better picks lane by lane what argmax_candidate's picks: the larger value,
// a NaN over any number, the earlier position between equals (neither replaces the other).
// That is a total order, so candidates combine in any order to the same winner.
template <class T, class Arch>
struct argmax_lanes {
  batch_t<T, Arch> value;
  batch_t<T, Arch> at;

  friend argmax_lanes better(const argmax_lanes& a, const argmax_lanes& b) {
    const auto b_wins = argmax_replaces(b.value, a.value) || (!argmax_replaces(a.value, b.value) && b.at < a.at);
    return {xsimd::select(b_wins, b.value, a.value), xsimd::select(b_wins, b.at, a.at)};
  }
};

// The winner of a batch of candidates: better over its lanes as a tree of swizzles.
template <std::size_t Distance = 1, class T, class Arch>
argmax_candidate<T> best_in_lanes(const argmax_lanes<T, Arch>& c) {
  if constexpr (Distance >= lanes<T, Arch>) {
    return {c.value.get(0), static_cast<std::int64_t>(c.at.get(0))};
  } else {
    using index = xsimd::batch<xsimd::as_unsigned_integer_t<T>, Arch>;
    constexpr auto partner = xsimd::make_batch_constant<index, lane_partner<Distance>>();
    return best_in_lanes<2 * Distance>(better(c, {xsimd::swizzle(c.value, partner), xsimd::swizzle(c.at, partner)}));
  }
}

// Whether a lane's index has the bit `Distance`.
template <std::size_t Distance>
struct lane_has_bit {
  static constexpr bool get(std::size_t lane, std::size_t) { return (lane & Distance) != 0; }
};

// One level of best_positions_of_each: c[i] and c[i + Distance] into c[i], for i below
// Distance. Each holds its rows' candidates in alternating runs of Distance lanes; the
// result keeps c[i]'s runs in the lanes without the bit Distance and c[i + Distance]'s in
// those with it, each lane the better of a run's lane and the lane Distance from it.
template <std::size_t Distance, class T, class Arch>
void merge_candidate_halves(std::array<argmax_lanes<T, Arch>, lanes<T, Arch>>& c) {
  using batch = batch_t<T, Arch>;
  using index = xsimd::batch<xsimd::as_unsigned_integer_t<T>, Arch>;
  constexpr auto upper = xsimd::make_batch_bool_constant<batch, lane_has_bit<Distance>>();
  constexpr auto partner = xsimd::make_batch_constant<index, lane_partner<Distance>>();
  // a's lanes where upper is set, b's elsewhere, each moved Distance lanes over.
  const auto across = [&](const batch& a, const batch& b) { return xsimd::swizzle(xsimd::select(upper, a, b), partner); };
#pragma GCC unroll 8
  for (std::size_t i = 0; i < Distance; ++i) {
    const argmax_lanes<T, Arch>& x = c[i];
    const argmax_lanes<T, Arch>& y = c[i + Distance];
    c[i] = better(argmax_lanes<T, Arch>{xsimd::select(upper, y.value, x.value), xsimd::select(upper, y.at, x.at)},
                  argmax_lanes<T, Arch>{across(x.value, y.value), across(x.at, y.at)});
  }
  if constexpr (Distance > 1) merge_candidate_halves<Distance / 2>(c);
}

// The positions best_in_lanes gives for as many candidate batches as a batch has lanes, at
// once: lane g of the result is that of c[g]. A tree of merge_candidate_halves, which ends
// with row g's winner in lane g: lanes - 1 merges and twice as many blends and swizzles
// for them all, where best_in_lanes is a chain of log2(lanes) merges for each row, and a
// transpose of values and positions twice the swizzles (with the transposes, argmax over
// 16384 rows of 10 floats took 1.3x as long).
template <class T, class Arch>
batch_t<T, Arch> best_positions_of_each(std::array<argmax_lanes<T, Arch>, lanes<T, Arch>> c) {
  merge_candidate_halves<lanes<T, Arch> / 2>(c);
  return c[0].at;
}

XLITE_INTRINSICS_END

} // namespace xlite::kernels
