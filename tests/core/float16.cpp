#include <xlite/core/float16.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "all_floats.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <xlite/core/cpu_features.hpp>
#define XLITE_TEST_F16C 1
#else
#define XLITE_TEST_F16C 0
#endif

using xlite::float16;
using xlite_test::float_from_bits;

namespace {

// float -> float16 from the definition, in double arithmetic (not the bit manipulation of
// core/float16.hpp): the nearest multiple of the spacing at x's binade (2^-24 below 2^-14),
// ties to even, Inf from 65520 up; NaN quiet with its sign and upper payload.
std::uint16_t float16_reference_bits(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7e00u | ((bits >> 13) & 0x3ffu));
  const double magnitude = std::fabs(static_cast<double>(x));
  if (magnitude == 0.0) return sign;
  if (magnitude >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7c00u);
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  const int binade = std::max(exponent - 1, -14); // 2^binade <= magnitude, or the subnormal range
  const double spacing = std::ldexp(1.0, binade - 10);
  const double units = std::nearbyint(magnitude / spacing); // exact division; rounds to even
  // units * spacing, encoded: subnormals are units (< 1024) at exponent field 0, normals
  // units in [1024, 2048] at exponent field binade + 15 (2048 carries into the next binade,
  // which encodes alike).
  const auto encoded = binade == -14 && units < 1024
                           ? static_cast<std::uint32_t>(units)
                           : (static_cast<std::uint32_t>(binade + 15) << 10) + static_cast<std::uint32_t>(units - 1024);
  return static_cast<std::uint16_t>(sign | encoded);
}

#if XLITE_TEST_F16C
__attribute__((target("f16c"))) std::uint16_t hardware_bits(float x) {
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return static_cast<std::uint16_t>(_mm_extract_epi16(h, 0));
}
__attribute__((target("f16c"))) float hardware_float(std::uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
// CPUID leaf 1, ECX bit 29; the VEX encoding also needs the OS's AVX state, which an AVX2
// level implies.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0 &&
         xlite::detected_isa() >= xlite::isa::avx2;
}
#endif

} // namespace

TEST_CASE("float to float16 rounds every one of the 2^32 floats as the definition says", "[float16]") {
  const auto sweep =
      xlite_test::sweep_all_floats([](float x) { return float16(x).bits() == float16_reference_bits(x); });
  INFO("first mismatch at float bits 0x" << std::hex << sweep.first_failure);
  CHECK(sweep.failures == 0);
}

TEST_CASE("float to float16 gives F16C's bits for every one of the 2^32 floats", "[float16]") {
#if XLITE_TEST_F16C
  if (!has_f16c()) {
    WARN("no F16C on this CPU: float16 is checked against the definition only");
    return;
  }
  const auto sweep = xlite_test::sweep_all_floats([](float x) { return float16(x).bits() == hardware_bits(x); });
  INFO("first mismatch at float bits 0x" << std::hex << sweep.first_failure);
  CHECK(sweep.failures == 0);
#else
  WARN("not an x86 build: float16 is checked against the definition only");
#endif
}

TEST_CASE("float16 to float is exact for all 65536 values", "[float16]") {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = float16::from_bits(static_cast<std::uint16_t>(b));
    const float f = h;
    INFO("float16 bits 0x" << std::hex << b);
#if XLITE_TEST_F16C
    if (has_f16c()) REQUIRE(std::bit_cast<std::uint32_t>(f) == std::bit_cast<std::uint32_t>(hardware_float(h.bits())));
#endif
    if (std::isnan(f)) {
      REQUIRE(float16(f).bits() == (b | 0x0200u)); // quiet, same payload and sign
    } else {
      REQUIRE(float16(f).bits() == b); // round trip, subnormals and -0 included
    }
  }
  CHECK(static_cast<float>(float16::from_bits(0x0001)) == 0x1p-24f);
  CHECK(static_cast<float>(float16::from_bits(0x03ff)) == 0x3ffp-24f);
  CHECK(static_cast<float>(float16::from_bits(0x3c00)) == 1.0f);
  CHECK(static_cast<float>(float16::from_bits(0xc000)) == -2.0f);
}

TEST_CASE("float16 special values", "[float16]") {
  CHECK(float16(65504.0f).bits() == 0x7bff);
  CHECK(float16(65519.996f).bits() == 0x7bff);                                 // below the tie: max()
  CHECK(float16(65520.0f).bits() == 0x7c00);                                   // the tie: to even, Inf
  CHECK(float16(-std::numeric_limits<float>::infinity()).bits() == 0xfc00);
  CHECK(float16(-0.0f).bits() == 0x8000);
  CHECK(float16(0x1p-25f).bits() == 0x0000);                                   // halfway to 2^-24: even
  CHECK(float16(0x1.000002p-25f).bits() == 0x0001);                            // just above: up
  CHECK(float16(0x3p-25f).bits() == 0x0002);                                   // 1.5 units: to even, 2
  CHECK(float16(0x1.ffcp-15f).bits() == 0x0400);                               // rounds up into the normals
  CHECK(float16(float_from_bits(0x7f800001u)).bits() == 0x7e00);               // signalling NaN, low payload: quiet
  CHECK(float16(float_from_bits(0xffa00000u)).bits() == 0xfd00 + 0x0200);
  CHECK(float16(1.0f + 0x1p-11f).bits() == 0x3c00);                            // a tie: to even
  CHECK(float16(1.0f + 0x3p-11f).bits() == 0x3c02);
}

TEST_CASE("float16 arithmetic goes through float with PyTorch's result types", "[float16]") {
  const float16 a = 1.0f;
  const float16 b = 0x1p-11f; // 1 + b is halfway between two float16
  STATIC_REQUIRE(std::is_same_v<decltype(a + b), float16>);
  STATIC_REQUIRE(std::is_same_v<decltype(a * 2), float16>);
  STATIC_REQUIRE(std::is_same_v<decltype(a * 2.0f), float>);
  STATIC_REQUIRE(std::is_same_v<decltype(2.0 * a), double>);
  CHECK(static_cast<float>(a + b) == 1.0f);            // rounded once, to even
  CHECK(a + static_cast<float>(b) == 1.0f + 0x1p-11f); // float arithmetic keeps the bits
  CHECK(static_cast<float>(float16(1.0f) + 2049) == 2050.0f); // 2049 is not a float16; 2050 is
  CHECK(static_cast<float>(-a) == -1.0f);
  CHECK(std::isnan(static_cast<float>(-std::numeric_limits<float16>::quiet_NaN())));
  float16 c = a;
  c *= float16(3.0f);
  CHECK(static_cast<float>(c) == 3.0f);
  CHECK(float16(2.0f) > a);
}

TEST_CASE("numeric_limits<float16> describes IEEE binary16", "[float16]") {
  using limits = std::numeric_limits<float16>;
  STATIC_REQUIRE(limits::is_specialized);
  STATIC_REQUIRE(limits::is_iec559);
  STATIC_REQUIRE(limits::digits == 11);
  CHECK(static_cast<float>(limits::epsilon()) == 0x1p-10f);
  CHECK(static_cast<float>(limits::min()) == 0x1p-14f);
  CHECK(static_cast<float>(limits::denorm_min()) == 0x1p-24f);
  CHECK(static_cast<float>(limits::max()) == 65504.0f);
  CHECK(static_cast<float>(limits::lowest()) == -65504.0f);
  CHECK(std::isinf(static_cast<float>(limits::infinity())));
  CHECK(std::isnan(static_cast<float>(limits::quiet_NaN())));
  CHECK(std::isnan(static_cast<float>(limits::signaling_NaN())));
  CHECK(static_cast<float>(limits::round_error()) == 0.5f);
  CHECK(static_cast<float>(float16::from_bits(float16(1.0f).bits() + 1)) - 1.0f == static_cast<float>(limits::epsilon()));
  CHECK(limits::digits10 == static_cast<int>(std::floor((limits::digits - 1) * std::log10(2.0))));
  CHECK(limits::max_digits10 == static_cast<int>(std::ceil(limits::digits * std::log10(2.0) + 1)));
  CHECK(std::ldexp(0.5, limits::min_exponent) == static_cast<float>(limits::min()));
  CHECK(std::ldexp(1.0, limits::max_exponent) > static_cast<float>(limits::max()));
  CHECK(std::pow(10.0, limits::min_exponent10) >= static_cast<float>(limits::min()));
  CHECK(std::pow(10.0, limits::max_exponent10) <= static_cast<float>(limits::max()));
}

TEST_CASE("float16 hashes equal values alike, prints its value and has its dtype", "[float16]") {
  const std::hash<float16> hash;
  CHECK(hash(float16(0.0f)) == hash(float16(-0.0f)));
  std::unordered_set<float16> seen{float16(1.0f), float16(-0.0f), float16(1.0f + 0x1p-12f)}; // the last rounds to 1
  CHECK(seen.size() == 2);
  CHECK(seen.contains(float16(0.0f)));
  std::ostringstream out;
  out << float16(0.1f) << ' ' << float16(-3.0f);
  CHECK(out.str() == "0.0999756 -3"); // 0.1 is 0.0999755859375 in float16
  STATIC_REQUIRE(xlite::dtype_of_v<float16> == xlite::dtype::f16);
}

#undef XLITE_TEST_F16C
