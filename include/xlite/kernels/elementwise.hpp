#pragma once

// The element-wise ops of the op set (core/op.hpp), each as one functor that works on a
// scalar and on an xsimd batch alike. The static expression layer and the lazy runtime
// both evaluate through these, so they compute the same values.
//
// Semantics follow PyTorch: minimum/maximum/clamp propagate NaN (and order -0 below +0, as
// IEEE 754-2019 and XLA do), round is half-to-even, relu(NaN) is NaN, gelu is the exact erf
// form, rsqrt is 1/sqrt (not the 14-bit estimate), pow is C's pow, abs(-0.0) is +0.0. Every
// op rounds once: a * b + c rounds twice, fma once, on every path.

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "xlite/core/op.hpp"
#include "xlite/kernels/intrinsics.hpp"
#include "xlite/kernels/simd.hpp"

namespace xlite::kernels {

namespace detail {

// The element type of a batch, or the scalar itself.
template <class V>
struct lane {
  using type = V;
};
template <class T, class A>
struct lane<xsimd::batch<T, A>> {
  using type = T;
};
template <class V>
using lane_t = typename lane<V>::type;

// Keeps a floating-point value from being contracted with what follows: g++ (whose default
// for C++ is -ffp-contract=fast) fuses the product of mul with a following add into one fma
// wherever the target has FMA, so a * b + c would round once in the AVX2 and AVX-512 builds
// and twice in the SSE one. Op by op, as PyTorch evaluates it, it rounds twice everywhere;
// the fma op is the fused form. The asm is empty and "v" is any xmm/ymm/zmm register, so the
// value stays where it is: no instruction is added.
template <class V>
void round_separately([[maybe_unused]] V& value) {
#if defined(__GNUC__) && defined(__SSE2__)
  if constexpr (std::is_same_v<lane_t<V>, float> || std::is_same_v<lane_t<V>, double>) {
    if constexpr (is_batch_v<V>) {
      asm("" : "+v"(value.data));
    } else {
      asm("" : "+v"(value));
    }
  }
#endif
}

// a * b + c rounded once, for a floating-point batch. xsimd 8.1's fma is the FMA instruction
// for its fma3 and NEON archs, but a * b + c for AVX-512 (fused only when the compiler
// contracts it: g++ does by default, clang 14 does not) and for SSE. The arch is the batch's,
// fixed at compile time: an SSE batch runs on FMA machines too (the portable path), and its
// FMA-less code must round once there as well, so it takes the C library's fma lane by lane.
template <class B>
B fused_multiply_add(const B& a, const B& b, const B& c) {
  using A = typename B::arch_type;
  using T = typename B::value_type;
  if constexpr (std::is_base_of_v<xsimd::fma3<xsimd::avx2>, A> || std::is_base_of_v<xsimd::neon64, A>) {
    return xsimd::fma(a, b, c);
  }
#if XSIMD_WITH_AVX512F
  else if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    if constexpr (std::is_same_v<T, float>) {
      return _mm512_fmadd_ps(a, b, c);
    } else {
      return _mm512_fmadd_pd(a, b, c);
    }
  }
#endif
  else {
    std::array<T, B::size> x, y, z;
    a.store_unaligned(x.data());
    b.store_unaligned(y.data());
    c.store_unaligned(z.data());
    for (std::size_t i = 0; i < B::size; ++i) x[i] = std::fma(x[i], y[i], z[i]);
    return B::load_unaligned(x.data());
  }
}

// minimum and maximum as IEEE 754-2019 defines them, and XLA computes them: NaN from either
// operand propagates (as torch.minimum and torch.maximum), and -0 orders below +0, so the
// result depends neither on the operands' order nor on the path (batch or scalar loop)
// that computed it. x86's min and max return their second operand on a tie or a NaN.
template <bool Max, class V>
V ieee_min_max(const V& a, const V& b) {
  if constexpr (!is_batch_v<V>) {
    if constexpr (std::is_floating_point_v<V>) {
      if (std::isnan(a) || std::isnan(b)) return a + b;
      if (a == b) return std::signbit(a) == Max ? b : a; // +0 and -0, or one value twice
    }
    return (a < b) == Max ? b : a;
  } else if constexpr (!std::is_floating_point_v<typename V::value_type>) {
    return Max ? xsimd::max(a, b) : xsimd::min(a, b);
  }
#if XSIMD_WITH_AVX512DQ
  else if constexpr (std::is_base_of_v<xsimd::avx512dq, typename V::arch_type>) {
    // vrangeps/pd: imm8 bits 1:0 select min (00) or max (01), bits 3:2 = 01 take the sign
    // from the comparison, which orders -0 below +0. It returns the number beside a quiet
    // NaN, so lanes with a NaN take a + b instead: three instructions.
    constexpr int range = Max ? 0b0101 : 0b0100;
    if constexpr (std::is_same_v<typename V::value_type, float>) {
      return _mm512_mask_add_ps(_mm512_range_ps(a, b, range), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
    } else {
      return _mm512_mask_add_pd(_mm512_range_pd(a, b, range), _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q), a, b);
    }
  }
#endif
  else {
    // Both orders agree but on ties, where they hold +0 and -0 (or one value twice): the
    // AND of the two keeps +0, the OR -0. a + b is the NaN of whichever operand is one.
    const V tie_safe = Max ? (xsimd::max(a, b) & xsimd::max(b, a)) : (xsimd::min(a, b) | xsimd::min(b, a));
    return xsimd::select(xsimd::isnan(a) || xsimd::isnan(b), a + b, tie_safe);
  }
}

template <class V>
V minimum(const V& a, const V& b) {
  return ieee_min_max<false>(a, b);
}

template <class V>
V maximum(const V& a, const V& b) {
  return ieee_min_max<true>(a, b);
}

// Whether arch A's max and min are x86's, from SSE2 to AVX-512 (three families in xsimd,
// none derived from another): max(a, b) and min(a, b) are b on a tie and wherever either
// is NaN.
template <class A>
inline constexpr bool x86_min_max_v =
#if XSIMD_WITH_SSE2
    std::is_base_of_v<xsimd::sse2, A> || std::is_base_of_v<xsimd::avx, A> || std::is_base_of_v<xsimd::avx512f, A>;
#else
    false;
#endif

// maximum and minimum of a floating-point batch v and a number c: their bits (but for
// which NaN, which neither form promises) in two instructions on x86, where the general
// forms take three on AVX-512 and eight on AVX2. x86's max(c, v) and min(c, v) are right
// but v on a tie (+0 and -0) and wherever either is NaN; a number `mend`, made from c
// alone, puts those lanes right and leaves the others:
// - maximum adds it: c when c is NaN (the sum is NaN, as maximum's a + b); +0 when c is +0
//   (max(+0, -0) gives -0, and -0 + +0 is +0); else -0, as x + -0 is x for every x. The
//   sums assume rounding to nearest, as every xlite kernel does.
// - minimum ORs it in: c's bits when c is NaN (a NaN or'd with anything is one, maybe a
//   signaling one: nothing quiets it); the sign bit when c is -0 (min(-0, +0) gives +0;
//   every other result is then -0, below zero or NaN, which the sign bit leaves so); else
//   nothing.
// mend comes from c's bits without a branch, so that g++ -O2 computes it once, outside a
// loop: as a choice of branches it stayed in the loop, which -O3 alone unswitched.
template <class T>
struct number_bits {
  using bits_type = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  static constexpr bits_type sign = bits_type{1} << (8 * sizeof(T) - 1);
  bits_type bits;
  bool nan() const { return (bits & ~sign) > std::bit_cast<bits_type>(std::numeric_limits<T>::infinity()); }
};

template <class B>
B maximum_with_number(const B& v, typename B::value_type c) {
  using T = typename B::value_type;
  if constexpr (std::is_floating_point_v<T> && x86_min_max_v<typename B::arch_type>) {
    const number_bits<T> n{std::bit_cast<typename number_bits<T>::bits_type>(c)};
    const T mend = std::bit_cast<T>(n.nan() ? n.bits : n.bits == 0 ? decltype(n.bits){0} : n.sign);
    return xsimd::max(B(c), v) + B(mend);
  } else {
    return maximum(v, B(c));
  }
}

template <class B>
B minimum_with_number(const B& v, typename B::value_type c) {
  using T = typename B::value_type;
  if constexpr (std::is_floating_point_v<T> && x86_min_max_v<typename B::arch_type>) {
    const number_bits<T> n{std::bit_cast<typename number_bits<T>::bits_type>(c)};
    const T mend = std::bit_cast<T>(n.nan() || n.bits == n.sign ? n.bits : decltype(n.bits){0});
    return xsimd::min(B(c), v) | B(mend);
  } else {
    return minimum(v, B(c));
  }
}

// v with its magnitude at most c (a positive float), the sign kept; NaN lanes may come out
// as anything. One vrangeps (the smaller magnitude, the sign of v) where AVX512DQ has it.
template <class B>
B clamp_magnitude(const B& v, typename B::value_type c) {
#if XSIMD_WITH_AVX512DQ
  if constexpr (std::is_base_of_v<xsimd::avx512dq, typename B::arch_type>) {
    return _mm512_range_ps(v, B(c), 0b0010);
  } else
#endif
  {
    return xsimd::max(B(-c), xsimd::min(B(c), v));
  }
}

// tanh of a float batch: the rational approximation of XLA's CPU backend and Eigen (odd
// degree 13 over even degree 6; x below 0.0004, and NaN, pass through). One path for every
// lane: xsimd's tanh takes a polynomial below |x| = 0.625 and exp above, and runs both for
// a batch that mixes them, at 1.5 times the cost. The price is accuracy: at most 5 ULP from
// the correctly rounded tanh over every float (7 on SSE, which has no fma, and under clang
// 14 on AVX-512), against 1.
//
// The input is clamped to +-10, where the quotient lies a few ULP above 1 on every path
// (how many depends on how the fma chain rounds), and the result to +-1: tanh is exactly
// +-1 from |x| = 9.57 on (the correctly rounded one from 9.01; in between the quotient is
// at most 1 ULP short), and each clamp is one vrangeps on AVX-512. The compare-and-select
// that set +-1 from 9 on before cost tanh a fifth of its time on Zen 5, whose four FP
// pipes it keeps busy: 16 instructions now, against 20 (Eigen's tanh has 17).
template <class B>
B tanh_float(const B& x) {
  using F = typename B::value_type;
  const B t = clamp_magnitude(x, F(10));
  const B t2 = t * t;
  B p = xsimd::fma(t2, B(F(-2.76076847742355e-16)), B(F(2.00018790482477e-13)));
  p = xsimd::fma(t2, p, B(F(-8.60467152213735e-11)));
  p = xsimd::fma(t2, p, B(F(5.12229709037114e-08)));
  p = xsimd::fma(t2, p, B(F(1.48572235717979e-05)));
  p = xsimd::fma(t2, p, B(F(6.37261928875436e-04)));
  p = xsimd::fma(t2, p, B(F(4.89352455891786e-03)));
  B q = xsimd::fma(t2, B(F(1.19825839466702e-06)), B(F(1.18534705686654e-04)));
  q = xsimd::fma(t2, q, B(F(2.26843463243900e-03)));
  q = xsimd::fma(t2, q, B(F(4.89352518554385e-03)));
  // Not "|x| < 0.0004" but its negation's complement, true for NaN: NaN passes through
  // as x, whatever the clamps made of it. ~, not !: xsimd's ! compares with a batch_bool
  // built from one bool per lane, code that g++ then optimises away in every file (0.4% of
  // the instructions g++ -O3 runs on a file that evaluates E3).
  const auto tiny_or_nan = ~(xsimd::abs(x) >= B(F(0.0004)));
  return xsimd::select(tiny_or_nan, x, clamp_magnitude(t * p / q, F(1)));
}

// x * 2^k for a float batch p and whole-valued k in [-150, 128]: one rounding, so results
// below the smallest normal come out as the nearest subnormal and those past the largest
// float as inf. AVX-512's vscalefps does it in one instruction; elsewhere in two exact
// steps, since 2^k alone is not a normal float at either end of the range.
template <class B>
B scale_by_power_of_two(const B& p, const B& k) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_base_of_v<xsimd::avx512f, typename B::arch_type>) {
    return _mm512_scalef_ps(p, k);
  } else
#endif
  {
    using I = xsimd::as_integer_t<B>;
    const I whole = xsimd::to_int(k);
    const I half = whole >> 1;
    const auto power = [](const I& e) { return xsimd::bitwise_cast<B>((e + I(127)) << 23); };
    return p * power(half) * power(whole - half);
  }
}

// exp of a float batch: xsimd's reduction and polynomial (exp(r) for r = x - k ln 2 in
// [-ln 2 / 2, ln 2 / 2]; at most 2 ULP over all floats) with the input clamped instead of
// two compare-and-selects after, and the scaling by 2^k above: on AVX-512 a sixth faster
// than xsimd's, and right where xsimd is not (it flushes results below 2^-126 to 0 and
// returns inf from x = 88.38 on; floats reach 88.72).
//
// Written for a short dependency chain, which is what limits exp in a longer expression
// (e3 = exp(-x * x) * y + tanh(w)): k ln 2 is subtracted by fmas with the negated constants
// (xsimd's fnma negates k first, with a subtraction from 0 that g++ cannot fold, since it
// would change the sign of a zero), and the polynomial is evaluated in Estrin's form, three
// fmas deep after r * r instead of Horner's five. Measured on Zen 5 at 2^16 floats: exp 12%
// faster, e3 3% (level with Eigen's); the worst error over all floats stays 1.55 ULP from
// the exact value (1.53 before).
template <class B>
B exp_float(const B& x) {
  // Past these exp is 0 and inf in float; the clamp keeps k small enough to scale with.
  // min/max return their second operand when either is NaN: NaN stays NaN.
  const B a = xsimd::max(B(-104.0f), xsimd::min(B(89.0f), x));
  const B k = xsimd::nearbyint(a * B(0x1.715476p+0f)); // 1 / ln 2
  B r = xsimd::fma(k, B(-0x1.63p-1f), a);               // ln 2 in two parts: k * 0x1.63p-1 is exact
  r = xsimd::fma(k, B(0x1.bd0106p-13f), r);
  const B r2 = r * r;
  const B low = xsimd::fma(r, B(0x1.55534ap-3f), B(0.5f));
  const B high = xsimd::fma(r2, B(0x1.6ef19ep-10f), xsimd::fma(r, B(0x1.131b16p-7f), B(0x1.5552aep-5f)));
  const B y = xsimd::fma(r2, high, low);
  const B exp_r = xsimd::fma(y, r2, r) + B(1.0f);
  return scale_by_power_of_two(exp_r, k);
}

// exp for exp and sigmoid: exp_float for float batches, xsimd's for double ones, the C
// library's for scalars.
template <class V>
V exp_of(const V& x) {
  if constexpr (!is_batch_v<V>) {
    return std::exp(x);
  } else if constexpr (std::is_same_v<typename V::value_type, float>) {
    return exp_float(x);
  } else {
    return xsimd::exp(x);
  }
}

// exp(y log a) for a float batch, computed in double lanes, half a batch at a time, and
// rounded to float once.
template <class B>
B exp_of_product_in_double(const B& y, const B& a) {
  using A = typename B::arch_type;
  using D = xsimd::batch<double, A>;
  constexpr std::size_t n = B::size;
  constexpr std::size_t half = D::size;
  static_assert(std::is_same_v<typename B::value_type, float> && n == 2 * half);
  alignas(A::alignment()) float ys[n], as[n], out[n];
  y.store_aligned(ys);
  a.store_aligned(as);
  for (std::size_t h = 0; h < n; h += half) {
    alignas(A::alignment()) double yd[half], ad[half];
    for (std::size_t i = 0; i < half; ++i) {
      yd[i] = ys[h + i];
      ad[i] = as[h + i];
    }
    const D r = xsimd::exp(D::load_aligned(yd) * xsimd::log(D::load_aligned(ad)));
    r.store_aligned(yd);
    for (std::size_t i = 0; i < half; ++i) out[h + i] = static_cast<float>(yd[i]);
  }
  return B::load_aligned(out);
}

// pow of a floating-point batch as C (C11 F.10.4.4) and torch.pow define it. xsimd 8.1's pow
// is wrong in special lanes (pow(0, 0) = 0, pow(NaN, 0) = NaN, pow(1, NaN) = NaN, pow(0, -1) =
// 0, pow(-0.0, 3) = +0.0), so this computes |x|^y as it does, exp(y log |x|), which is also
// right for zero and infinite x and infinite y, and fixes the special lanes with selects.
//
// For floats, exp(y log |x|) is computed in double and rounded once: in float, log's rounding
// error, times |y log x|, reaches the result (pow(9, 2) gave 81.0000076, and the error grew
// to 55 ULP on the tested domains); in double the result is within 1 ULP of float. Doubles
// have no wider type, and keep xsimd's error (up to 743 ULP, tests/expr/accuracy.hpp).
template <class B>
B pow_of(const B& x, const B& y) {
  using T = typename B::value_type;
  const B ax = xsimd::abs(x);
  // x^0 and (+-1)^y are 1 even where y log |x| is NaN (0 * inf, inf * 0, NaN y); for x = -1
  // the sign and NaN below still apply. There 0 * log 1 stands in for y log |x|.
  const auto one = (y == B(0)) | (ax == B(1));
  const B magnitude = [&] {
    if constexpr (std::is_same_v<T, float>) {
      return exp_of_product_in_double(xsimd::select(one, B(0), y), xsimd::select(one, B(1), ax));
    } else {
      return exp_of(xsimd::select(one, B(0), y * xsimd::log(ax)));
    }
  }();
  // Negative bases (-0 and -inf too) take x's sign for odd y. Both tests are exact; +-inf
  // counts as an even integer, NaN as no integer.
  const auto y_integer = xsimd::trunc(y) == y;
  const B half = y * B(T(0.5));
  const auto y_odd = y_integer & (xsimd::trunc(half) != half);
  const B signed_result = xsimd::select(y_odd, xsimd::copysign(magnitude, x), magnitude);
  // NaN for finite x < 0 and a y that is no integer (nor infinite).
  const auto undefined = (x < B(0)) & (x > B(-std::numeric_limits<T>::infinity())) & ~y_integer;
  return xsimd::select(undefined, B(std::numeric_limits<T>::quiet_NaN()), signed_result);
}

// f(a, b) for scalars, on the unsigned type of a signed integer one: signed integers wrap
// modulo 2^N, as the SIMD instructions make them, where C++ leaves their overflow
// undefined (and the scalar path agreed with the SIMD ones only by luck of code generation).
template <class V, class F>
V wrapping(const V& a, const V& b, F f) {
  if constexpr (std::is_integral_v<V> && std::is_signed_v<V>) {
    using U = std::make_unsigned_t<V>;
    return static_cast<V>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return f(a, b);
  }
}
// The operations wrapping applies (<functional>'s functors would bring a heavy header into
// every file that evaluates an expression).
inline constexpr auto plus = [](const auto& a, const auto& b) { return a + b; };
inline constexpr auto minus = [](const auto& a, const auto& b) { return a - b; };
inline constexpr auto times = [](const auto& a, const auto& b) { return a * b; };

// abs of a scalar: the sign bit cleared for floating point, as xsimd::abs does for batches,
// so that abs(-0.0) is +0.0 (torch.abs) on the scalar path too; abs of the lowest integer
// wraps to itself.
template <class V>
V scalar_abs(const V& x) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::fabs(x);
  } else {
    return x < V(0) ? wrapping(V(0), x, minus) : x;
  }
}

// static_cast for one element, defined everywhere and as the SIMD conversions of the
// platform give it, so that every path agrees: on x86 a floating-point value that the
// integer type (or, below 32 bits, int32) cannot hold, NaN too, gives the lowest int32 or
// int64, cvttps2dq's "integer indefinite"; elsewhere (NEON) it saturates, NaN giving 0.
// 8-bit types then take the int32's low bits, as they take those of any int32.
template <class To, class From>
To scalar_cast(const From& x) {
  if constexpr (!std::is_integral_v<To> || std::is_same_v<To, bool>) {
    return static_cast<To>(x);
  } else if constexpr (!std::is_arithmetic_v<From>) { // bfloat16, float16: through float, exactly
    return scalar_cast<To>(static_cast<float>(x));
  } else if constexpr (!std::is_floating_point_v<From>) {
    return static_cast<To>(x);
  } else {
    using wide = std::conditional_t<(sizeof(To) > 4), std::int64_t, std::int32_t>;
    constexpr wide lowest = std::numeric_limits<wide>::min();
    const auto bound = -static_cast<From>(lowest); // 2^31 or 2^63, exact
    if (x >= -bound && x < bound) return static_cast<To>(static_cast<wide>(x));
#if defined(__x86_64__) || defined(__i386__)
    return static_cast<To>(lowest);
#else
    return static_cast<To>(x != x ? wide(0) : x < From(0) ? lowest : std::numeric_limits<wide>::max());
#endif
  }
}

} // namespace detail

// elementwise<op::name> is the functor for that op; each is defined once below.
template <op O>
struct elementwise;

template <>
struct elementwise<op::add> {
  template <class V>
  V operator()(const V& a, const V& b) const {
    return detail::wrapping(a, b, detail::plus);
  }
};
template <>
struct elementwise<op::sub> {
  template <class V>
  V operator()(const V& a, const V& b) const {
    return detail::wrapping(a, b, detail::minus);
  }
};
template <>
struct elementwise<op::mul> {
  template <class V>
  V operator()(const V& a, const V& b) const {
    V product = detail::wrapping(a, b, detail::times);
    detail::round_separately(product);
    return product;
  }
};
template <>
struct elementwise<op::div> {
  template <class V>
  V operator()(const V& a, const V& b) const {
    return a / b;
  }
};
// Flipping the sign bit, so that -(0.0) is -0.0 (xsimd's batch negation computes 0 - x).
template <>
struct elementwise<op::neg> {
  template <class V>
  V operator()(const V& a) const {
    if constexpr (is_batch_v<V>) {
      using T = typename V::value_type;
      if constexpr (std::is_floating_point_v<T>)
        return a ^ V(T(-0.0));
      else
        return -a;
    } else if constexpr (std::is_integral_v<V>) {
      return detail::wrapping(V(0), a, detail::minus);
    } else {
      return -a;
    }
  }
};
template <>
struct elementwise<op::equal> {
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a == b;
  }
};
// x != y is true when either is NaN (IEEE); xsimd 8's AVX and AVX-512 != is the ordered
// comparison, false for NaN, so batches negate ==.
template <>
struct elementwise<op::not_equal> {
  template <class V>
  auto operator()(const V& a, const V& b) const {
    if constexpr (is_batch_v<V>) {
      return ~(a == b);
    } else {
      return a != b;
    }
  }
};
template <>
struct elementwise<op::less> {
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a < b;
  }
};
template <>
struct elementwise<op::less_equal> {
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a <= b;
  }
};
template <>
struct elementwise<op::greater> {
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a > b;
  }
};
template <>
struct elementwise<op::greater_equal> {
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a >= b;
  }
};
// Logical ops take masks (batch_bool) or bools.
template <>
struct elementwise<op::logical_and> {
  template <class M>
  M operator()(const M& a, const M& b) const {
    if constexpr (is_batch_v<M>) {
      return a & b;
    } else {
      return a && b;
    }
  }
};
template <>
struct elementwise<op::logical_or> {
  template <class M>
  M operator()(const M& a, const M& b) const {
    if constexpr (is_batch_v<M>) {
      return a | b;
    } else {
      return a || b;
    }
  }
};
template <>
struct elementwise<op::logical_not> {
  template <class M>
  M operator()(const M& a) const {
    if constexpr (is_batch_v<M>) {
      return ~a;
    } else {
      return !a;
    }
  }
};
template <>
struct elementwise<op::where> {
  template <class M, class V>
  V operator()(const M& condition, const V& a, const V& b) const {
    if constexpr (is_batch_v<V>) {
      return xsimd::select(condition, a, b);
    } else {
      return condition ? a : b;
    }
  }
};
template <>
struct elementwise<op::fma> {
  template <class V>
  V operator()(const V& a, const V& b, const V& c) const {
    if constexpr (!std::is_floating_point_v<detail::lane_t<V>>) {
      return detail::wrapping(detail::wrapping(a, b, detail::times), c, detail::plus);
    } else if constexpr (is_batch_v<V>) {
      return detail::fused_multiply_add(a, b, c);
    } else {
      return std::fma(a, b, c);
    }
  }
};
template <>
struct elementwise<op::minimum> {
  template <class V>
  V operator()(const V& a, const V& b) const {
    return detail::minimum(a, b);
  }
};
template <>
struct elementwise<op::maximum> {
  template <class V>
  V operator()(const V& a, const V& b) const {
    return detail::maximum(a, b);
  }
};
template <>
struct elementwise<op::clamp> {
  template <class V>
  V operator()(const V& x, const V& lo, const V& hi) const {
    return detail::minimum(detail::maximum(x, lo), hi);
  }
};

// Math functions: xsimd's for batches, the C library's for scalars.
#define XLITE_MATH_FUNCTOR(name, batch_form, scalar_form)                                                              \
  template <>                                                                                                          \
  struct elementwise<op::name> {                                                                                       \
    template <class V>                                                                                                 \
    V operator()(const V& x) const {                                                                                   \
      if constexpr (is_batch_v<V>) {                                                                                   \
        return batch_form;                                                                                             \
      } else {                                                                                                         \
        return scalar_form;                                                                                            \
      }                                                                                                                \
    }                                                                                                                  \
  };

XLITE_MATH_FUNCTOR(abs, xsimd::abs(x), detail::scalar_abs(x))
XLITE_MATH_FUNCTOR(log, xsimd::log(x), std::log(x))
// xsimd's log1p(-0.0) is +0.0; C and torch.log1p keep the sign of a zero.
XLITE_MATH_FUNCTOR(log1p, xsimd::select(x == V(0), x, xsimd::log1p(x)), std::log1p(x))
XLITE_MATH_FUNCTOR(sqrt, xsimd::sqrt(x), std::sqrt(x))
XLITE_MATH_FUNCTOR(rsqrt, V(1) / xsimd::sqrt(x), V(1) / std::sqrt(x))
XLITE_MATH_FUNCTOR(relu, xsimd::select(x < V(0), V(0), x), x < V(0) ? V(0) : x)
XLITE_MATH_FUNCTOR(gelu, V(0.5) * x * (V(1) + xsimd::erf(x * V(0.7071067811865476))),
                   V(0.5) * x * (V(1) + std::erf(x * V(0.7071067811865476))))
XLITE_MATH_FUNCTOR(sin, xsimd::sin(x), std::sin(x))
XLITE_MATH_FUNCTOR(cos, xsimd::cos(x), std::cos(x))
#undef XLITE_MATH_FUNCTOR

// Rounding functions: the identity on integers (which xsimd::copysign does not take, and
// which std::floor would round to a double). Floating-point results keep the sign of zero
// (ceil(-0.5) is -0.0); xsimd's SSE2 emulation does not, so the batch forms copy the
// operand's sign, which a rounded value always has.
#define XLITE_ROUNDING_FUNCTOR(name, batch_form, scalar_form)                                                          \
  template <>                                                                                                          \
  struct elementwise<op::name> {                                                                                       \
    template <class V>                                                                                                 \
    V operator()(const V& x) const {                                                                                   \
      if constexpr (!std::is_floating_point_v<detail::lane_t<V>>) {                                                    \
        return x;                                                                                                      \
      } else if constexpr (is_batch_v<V>) {                                                                            \
        return batch_form;                                                                                             \
      } else {                                                                                                         \
        return scalar_form;                                                                                            \
      }                                                                                                                \
    }                                                                                                                  \
  };

XLITE_ROUNDING_FUNCTOR(floor, xsimd::copysign(xsimd::floor(x), x), std::floor(x))
XLITE_ROUNDING_FUNCTOR(ceil, xsimd::copysign(xsimd::ceil(x), x), std::ceil(x))
XLITE_ROUNDING_FUNCTOR(round, xsimd::copysign(xsimd::nearbyint(x), x), std::nearbyint(x))
#undef XLITE_ROUNDING_FUNCTOR

// exp and sigmoid: detail::exp_of.
template <>
struct elementwise<op::exp> {
  template <class V>
  V operator()(const V& x) const {
    return detail::exp_of(x);
  }
};
template <>
struct elementwise<op::sigmoid> {
  template <class V>
  V operator()(const V& x) const {
    return V(1) / (V(1) + detail::exp_of(-x));
  }
};

// tanh: detail::tanh_float for float batches.
template <>
struct elementwise<op::tanh> {
  template <class V>
  V operator()(const V& x) const {
    if constexpr (!is_batch_v<V>) {
      return std::tanh(x);
    } else if constexpr (std::is_same_v<typename V::value_type, float>) {
      return detail::tanh_float(x);
    } else {
      return xsimd::tanh(x);
    }
  }
};

template <>
struct elementwise<op::pow> {
  template <class V>
  V operator()(const V& base, const V& exponent) const {
    if constexpr (is_batch_v<V>) {
      return detail::pow_of(base, exponent);
    } else {
      return std::pow(base, exponent);
    }
  }
};

// xsimd's float -> int32 conversion is an AVX-512 intrinsic once inlined.
XLITE_INTRINSICS_BEGIN

// cast<To> is the one op with a type parameter, so it is not an elementwise<op> functor.
template <class To>
struct cast_to {
  template <class V>
  auto operator()(const V& x) const {
    if constexpr (is_batch_v<V>) {
      return xsimd::batch_cast<To>(x);
    } else {
      return detail::scalar_cast<To>(x);
    }
  }
};
XLITE_INTRINSICS_END

// Whether elementwise<O> computes T -> T on values of T (uint8_t standing for bool): the
// ops an element-wise node of that type can be, given that ir::elementwise casts integers
// to float where PyTorch computes in floating point.
template <op O, class T>
constexpr bool same_type_op() {
  if (info(O).kind != op_kind::elementwise) return false;
  switch (O) {
  case op::add:
  case op::sub:
  case op::mul:
  case op::neg:
  case op::fma:
  case op::minimum:
  case op::maximum:
  case op::clamp:
  case op::abs:
  case op::relu:
  case op::floor:
  case op::ceil:
  case op::round:
    return !std::is_same_v<T, std::uint8_t>;
  case op::div:
  case op::pow:
  case op::exp:
  case op::log:
  case op::log1p:
  case op::sqrt:
  case op::rsqrt:
  case op::tanh:
  case op::sigmoid:
  case op::gelu:
  case op::sin:
  case op::cos:
    return std::is_floating_point_v<T>;
  default:
    return false;
  }
}

// The same, for an op known at run time.
template <class T>
constexpr bool same_type_op(op code) {
  switch (code) {
#define XLITE_SAME_TYPE_OP(name, arity, kind, rule)                                                                    \
  case op::name:                                                                                                       \
    return same_type_op<op::name, T>();
    XLITE_OP_LIST(XLITE_SAME_TYPE_OP)
#undef XLITE_SAME_TYPE_OP
  }
  return false;
}

// Whether elementwise<O> approximates its function, by a polynomial, a quotient of two or
// a reduction to exp (10-40 instructions a batch), rather than computing it in one or two
// instructions as sqrt or a division does: what makes a loop over large arrays compute
// about as long as it moves (expr::store_path_for).
constexpr bool approximates(op o) noexcept {
  switch (o) {
  case op::pow:
  case op::exp:
  case op::log:
  case op::log1p:
  case op::tanh:
  case op::sigmoid:
  case op::gelu:
  case op::sin:
  case op::cos:
    return true;
  default:
    return false;
  }
}

namespace detail {

template <op O>
concept has_elementwise_functor = requires {
  sizeof(elementwise<O>);
};

template <std::size_t... I>
constexpr bool every_elementwise_op_has_a_functor(std::index_sequence<I...>) {
  return ((info(static_cast<op>(I)).kind != op_kind::elementwise || static_cast<op>(I) == op::cast ||
           has_elementwise_functor<static_cast<op>(I)>)&&...);
}

} // namespace detail

static_assert(detail::every_elementwise_op_has_a_functor(std::make_index_sequence<op_count>{}),
              "every element-wise op of core/op.hpp needs an elementwise<op> functor in this file");

} // namespace xlite::kernels
