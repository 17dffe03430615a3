#pragma once

// The reductions of the op set (sum, prod, max, min; mean is a sum divided by the count),
// as one functor each: an identity and a combine that work on scalars and on batches, and
// the fixed order in which a batch's lanes are combined. Both front ends reduce through
// these. argmax, which reduces to a position, has its own rule below.

#include <array>
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
    return elementwise<op::add>{}(a, b); // integers wrap, on the scalar path too
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
    return detail::wrapping(a, b, detail::times);
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

// The swizzles, blends and compares below are AVX-512 intrinsics once inlined.
XLITE_INTRINSICS_BEGIN

// The swizzle that gives each lane the lane Distance away (its partner in a tree across
// lanes).
template <std::size_t Distance>
struct lane_partner {
  static constexpr std::size_t get(std::size_t lane, std::size_t) { return lane ^ Distance; }
};

// Whether a lane's index has the bit Distance.
template <std::size_t Distance>
struct lane_has_bit {
  static constexpr bool get(std::size_t lane, std::size_t) { return (lane & Distance) != 0; }
};

// A batch's lanes combined as a tree, the same on every run: lane l with lane l + n/2 for
// each l below n/2, then those with the ones n/4 on, down to one (the lower lane first in
// every combine). log2(n) swizzles and combines, where combining left to right was a chain
// of n - 1; and the tree lets combine_lanes_of_each do without a transpose (one thread,
// sum over 16384 rows of 10 floats 64 -> 56 us, of 16 63 -> 59).
template <op O, class T, class Arch, std::size_t Distance = lanes<T, Arch> / 2>
T combine_lanes(const batch_t<T, Arch>& v) {
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    return v;
  } else if constexpr (Distance == 0) {
    return v.get(0);
  } else {
    using index = xsimd::batch<xsimd::as_unsigned_integer_t<T>, Arch>;
    constexpr auto partner = xsimd::make_batch_constant<index, lane_partner<Distance>>();
    return combine_lanes<O, T, Arch, Distance / 2>(reduction<O>::combine(v, xsimd::swizzle(v, partner)));
  }
}

// What combine_lane_halves needs of its batches: a batch to take the lane layout from, a
// blend under a constant mask, a swizzle by constant indices. (Overloads for a struct of
// batches go with the struct, where argument-dependent lookup finds them.)
template <class T, class Arch>
const xsimd::batch<T, Arch>& lanes_of(const xsimd::batch<T, Arch>& v) {
  return v;
}
template <class Mask, class T, class Arch>
xsimd::batch<T, Arch> select_lanes(const Mask& mask, const xsimd::batch<T, Arch>& a, const xsimd::batch<T, Arch>& b) {
  return xsimd::select(mask, a, b);
}
template <class T, class Arch, class Indices>
xsimd::batch<T, Arch> swizzle_lanes(const xsimd::batch<T, Arch>& v, const Indices& indices) {
  return xsimd::swizzle(v, indices);
}

// A batch's lanes of batches of lanes (a sum's chains, argmax's candidates) combined at
// once, the tree of combine_lanes for each: lane g of c[0] ends with c[g]'s combine. At
// each level, c[i] and c[i + Distance], each holding its batches' partial combines in
// runs of 2 Distance lanes (at first, one batch's in all of them), become one in runs of
// Distance lanes: c[i]'s in the lanes without the bit Distance, c[i + Distance]'s in those
// with it, each lane the combine of a run's lane with the one Distance up, the lower
// first as in combine_lanes: so the same operands, the same bits (but for which of two
// NaNs' payloads a sum keeps: the compiler may swap an addition's operands, and x86 keeps
// the first's). lanes - 1 combines, each with two swizzles and two blends, where a
// transpose took log2(lanes) rounds of two-source shuffles of every batch. C is a batch,
// or a struct of batches with overloads as those above.
template <std::size_t Distance, class C, std::size_t N, class Combine>
void combine_lane_halves(std::array<C, N>& c, Combine combine) {
  if constexpr (Distance > 0) {
    using batch = std::decay_t<decltype(lanes_of(c[0]))>;
    using index = xsimd::batch<xsimd::as_unsigned_integer_t<typename batch::value_type>, typename batch::arch_type>;
    constexpr auto upper = xsimd::make_batch_bool_constant<batch, lane_has_bit<Distance>>();
    constexpr auto partner = xsimd::make_batch_constant<index, lane_partner<Distance>>();
#pragma GCC unroll 8
    for (std::size_t i = 0; i < Distance; ++i) {
      const C& x = c[i];
      const C& y = c[i + Distance];
      c[i] = combine(select_lanes(upper, swizzle_lanes(y, partner), x), select_lanes(upper, y, swizzle_lanes(x, partner)));
    }
    combine_lane_halves<Distance / 2>(c, combine);
  }
}

// combine_lanes of as many batches as a batch has lanes, at once: lane g of the result is
// combine_lanes(v[g]), bit for bit (NaN payloads aside).
template <op O, class T, class Arch>
batch_t<T, Arch> combine_lanes_of_each(std::array<batch_t<T, Arch>, lanes<T, Arch>> v) {
  if constexpr (!std::is_same_v<Arch, scalar_arch>) {
    combine_lane_halves<lanes<T, Arch> / 2>(v, [](const auto& a, const auto& b) { return reduction<O>::combine(a, b); });
  }
  return v[0];
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

// What combine_lane_halves needs of argmax_lanes: both batches alike.
template <class T, class Arch>
const batch_t<T, Arch>& lanes_of(const argmax_lanes<T, Arch>& c) {
  return c.value;
}
template <class Mask, class T, class Arch>
argmax_lanes<T, Arch> select_lanes(const Mask& mask, const argmax_lanes<T, Arch>& a, const argmax_lanes<T, Arch>& b) {
  return {xsimd::select(mask, a.value, b.value), xsimd::select(mask, a.at, b.at)};
}
template <class T, class Arch, class Indices>
argmax_lanes<T, Arch> swizzle_lanes(const argmax_lanes<T, Arch>& c, const Indices& indices) {
  return {xsimd::swizzle(c.value, indices), xsimd::swizzle(c.at, indices)};
}

// The positions best_in_lanes gives for as many candidate batches as a batch has lanes, at
// once: lane g of the result is that of c[g]. combine_lane_halves's tree with better,
// where best_in_lanes is a chain of log2(lanes) merges for each row (and a transpose of
// values and positions had twice the swizzles: argmax over 16384 rows of 10 floats took
// 1.3x as long).
template <class T, class Arch>
batch_t<T, Arch> best_positions_of_each(std::array<argmax_lanes<T, Arch>, lanes<T, Arch>> c) {
  combine_lane_halves<lanes<T, Arch> / 2>(c, [](const auto& a, const auto& b) { return better(a, b); });
  return c[0].at;
}

XLITE_INTRINSICS_END

} // namespace xlite::kernels
