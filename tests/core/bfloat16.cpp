#include <xlite/core/bfloat16.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "all_floats.hpp"

using xlite::bfloat16;
using xlite_test::float_from_bits;

namespace {

// The rounding of a float to bfloat16 written from its definition, not from the bit trick
// the library uses: the two bfloat16 values around x (the truncation and the next one up
// in magnitude), whichever is nearer in exact double arithmetic, the even one on a tie;
// NaN quiet with its sign and upper payload; float subnormals to a zero of their sign.
std::uint16_t bfloat16_reference_bits(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  if (std::isnan(x)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  if (std::isinf(x) || x == 0.0f || std::fpclassify(x) == FP_SUBNORMAL) return std::isinf(x) ? bits >> 16 : sign;
  const auto below = static_cast<std::uint16_t>(bits >> 16); // truncated toward zero
  const auto above = static_cast<std::uint16_t>(below + 1);  // next in magnitude (may be Inf)
  const double exact = std::fabs(static_cast<double>(x));
  const auto magnitude = [](std::uint16_t b) {
    const auto f = std::fabs(static_cast<double>(float_from_bits(static_cast<std::uint32_t>(b) << 16)));
    // The value past max() that rounding compares with is 2^128, not Inf.
    return std::isinf(f) ? std::ldexp(1.0, 128) : f;
  };
  const double down = exact - magnitude(below);
  const double up = magnitude(above) - exact;
  if (down < up) return below;
  if (up < down) return above;
  return (below & 1u) == 0 ? below : above;
}

} // namespace

TEST_CASE("float to bfloat16 rounds every one of the 2^32 floats as the definition says", "[bfloat16]") {
  const auto sweep =
      xlite_test::sweep_all_floats([](float x) { return bfloat16(x).bits() == bfloat16_reference_bits(x); });
  INFO("first mismatch at float bits 0x" << std::hex << sweep.first_failure);
  CHECK(sweep.failures == 0);
}

TEST_CASE("bfloat16 special values", "[bfloat16]") {
  CHECK(bfloat16(1.0f).bits() == 0x3f80);
  CHECK(bfloat16(-2.0f).bits() == 0xc000);
  CHECK(bfloat16(0.0f).bits() == 0x0000);
  CHECK(bfloat16(-0.0f).bits() == 0x8000);
  CHECK(bfloat16(std::numeric_limits<float>::infinity()).bits() == 0x7f80);
  CHECK(bfloat16(-std::numeric_limits<float>::infinity()).bits() == 0xff80);
  CHECK(bfloat16(std::numeric_limits<float>::max()).bits() == 0x7f80); // rounds past max() to Inf
  CHECK(bfloat16(float_from_bits(0x7f7f7fffu)).bits() == 0x7f7f);      // just below the tie: max()
  // Ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  CHECK(bfloat16(float_from_bits(0x3f808000u)).bits() == 0x3f80);
  CHECK(bfloat16(float_from_bits(0x3f818000u)).bits() == 0x3f82);
  // NaNs stay NaN, quiet, keeping their sign.
  CHECK(bfloat16(float_from_bits(0x7f800001u)).bits() == 0x7fc0); // a signalling NaN with payload only in the low bits
  CHECK(bfloat16(float_from_bits(0xffa00000u)).bits() == 0xffe0);
  CHECK(std::isnan(static_cast<float>(bfloat16(std::nanf("")))));
  // Float subnormals flush to zero of their sign, as VCVTNEPS2BF16 does.
  CHECK(bfloat16(float_from_bits(0x00000001u)).bits() == 0x0000);
  CHECK(bfloat16(float_from_bits(0x807fffffu)).bits() == 0x8000);
  // bfloat16 to float is exact, subnormals included.
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = bfloat16::from_bits(static_cast<std::uint16_t>(b));
    const float f = h;
    REQUIRE(std::bit_cast<std::uint32_t>(f) == b << 16);
    if (!std::isnan(f) && std::fpclassify(f) != FP_SUBNORMAL) REQUIRE(bfloat16(f).bits() == b); // round trip
  }
}

TEST_CASE("bfloat16 arithmetic goes through float with PyTorch's result types", "[bfloat16]") {
  const bfloat16 a = 1.5f;
  const bfloat16 b = 0.00390625f; // 2^-8: 1.5 + b is halfway between two bfloat16
  STATIC_REQUIRE(std::is_same_v<decltype(a + b), bfloat16>);
  STATIC_REQUIRE(std::is_same_v<decltype(a * 2), bfloat16>);
  STATIC_REQUIRE(std::is_same_v<decltype(a * 2.0f), float>);
  STATIC_REQUIRE(std::is_same_v<decltype(2.0 * a), double>);
  CHECK(static_cast<float>(a + b) == 1.5f);                  // rounded once, to even
  CHECK(static_cast<float>(a + b + b) == 1.5f);              // and again
  CHECK(a + static_cast<float>(b) == 1.50390625f);           // float arithmetic keeps the bits
  CHECK(static_cast<float>(a * 2) == 3.0f);
  CHECK(static_cast<float>(bfloat16(1.0f) + 257) == 258.0f); // 1 + 257 in float, then rounded; not 1 + bfloat16(257) = 256
  CHECK(static_cast<float>(257 - bfloat16(1.0f)) == 256.0f);
  CHECK(static_cast<float>(a / bfloat16(3.0f)) == bfloat16(1.5f / 3.0f));
  CHECK(static_cast<float>(-a) == -1.5f);
  bfloat16 c = a;
  c -= bfloat16(0.5f);
  CHECK(static_cast<float>(c) == 1.0f);
  CHECK(a > b);
  CHECK(a == 1.5f);
  CHECK(bfloat16(-0.0f) == bfloat16(0.0f));
  constexpr bfloat16 folded = bfloat16(3.0f) * bfloat16(0.5f); // usable in constant expressions
  STATIC_REQUIRE(folded.bits() == 0x3fc0);
}

TEST_CASE("numeric_limits<bfloat16> describes the format", "[bfloat16]") {
  using limits = std::numeric_limits<bfloat16>;
  STATIC_REQUIRE(limits::is_specialized);
  STATIC_REQUIRE(limits::digits == 8);
  CHECK(static_cast<float>(limits::epsilon()) == 0x1p-7f);
  CHECK(static_cast<float>(limits::min()) == 0x1p-126f);
  CHECK(static_cast<float>(limits::denorm_min()) == 0x1p-133f);
  CHECK(static_cast<float>(limits::max()) == 0x1.fep127f);
  CHECK(static_cast<float>(limits::lowest()) == -0x1.fep127f);
  CHECK(std::isinf(static_cast<float>(limits::infinity())));
  CHECK(std::isnan(static_cast<float>(limits::quiet_NaN())));
  CHECK(std::isnan(static_cast<float>(limits::signaling_NaN())));
  CHECK(static_cast<float>(limits::round_error()) == 0.5f);
  // epsilon is the gap after 1, and digits10 / max_digits10 follow from 8 significant bits.
  CHECK(static_cast<float>(bfloat16::from_bits(bfloat16(1.0f).bits() + 1)) - 1.0f == static_cast<float>(limits::epsilon()));
  CHECK(limits::digits10 == static_cast<int>(std::floor((limits::digits - 1) * std::log10(2.0))));
  CHECK(limits::max_digits10 == static_cast<int>(std::ceil(limits::digits * std::log10(2.0) + 1)));
}

TEST_CASE("bfloat16 hashes equal values alike and prints its value", "[bfloat16]") {
  const std::hash<bfloat16> hash;
  CHECK(hash(bfloat16(0.0f)) == hash(bfloat16(-0.0f)));
  std::unordered_set<bfloat16> seen{bfloat16(1.0f), bfloat16(-0.0f), bfloat16(1.0f + 0x1p-9f)}; // the last rounds to 1
  CHECK(seen.size() == 2);
  CHECK(seen.contains(bfloat16(0.0f)));
  std::ostringstream out;
  out << bfloat16(0.1f) << ' ' << bfloat16(-3.0f);
  CHECK(out.str() == "0.100098 -3"); // 0.1 is 0.10009765625 in bfloat16
}
