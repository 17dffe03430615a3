// The integer forms of the element-wise ops (expr/functions.hpp): + - * neg abs min max
// clamp fma relu on int32 and int64 (floor ceil round: functions_round.cpp), exactly, on every path, with values
// that use all 64 bits of an int64 lane where the op allows; int8 and uint8, which have no
// SIMD batches and take the scalar path, with C++'s modular arithmetic.

#include "elementwise_check.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <iostream>
#include <limits>

using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

namespace {

// Ranges in which the op cannot overflow, so that the reference, in double, is exact (the
// wrapping itself has its own test case below).
struct integer_ranges {
  domain add, mul, fma_factor, fma_term, any;
};

template <class T>
integer_ranges ranges() {
  const auto within = [](double bound) { return domain{{part::integers, -bound, bound}, {part::integers, -9, 9}}; };
  if constexpr (sizeof(T) == 4) {
    return {within(1073741823.0), within(46340), within(32767), within(1073741823.0), within(2147483647.0)};
  } else {
    return {within(4.6e18), within(3037000499.0), within(1073741823.0), within(4.6e18), within(9.2e18)};
  }
}

template <class T>
void check_integer_ops(std::uint64_t seed) {
  const integer_ranges r = ranges<T>();
  check_exact_op<op::add, T>(seed + 1, r.add);
  check_exact_op<op::sub, T>(seed + 2, r.add);
  check_exact_op<op::mul, T>(seed + 3, r.mul);
  check_exact_op<op::neg, T>(seed + 4, r.any);
  check_exact_op<op::abs, T>(seed + 5, r.any);
  check_exact_op<op::minimum, T>(seed + 6, r.any);
  check_exact_op<op::maximum, T>(seed + 7, r.any);
  check_exact_op<op::clamp, T>(seed + 8, r.any);
  check_exact_op<op::relu, T>(seed + 9, r.any);
  // fma(a, b, c) = a * b + c: the product of two factors plus a term stays in range.
  rng g(seed + 13);
  for (const auto& shapes : shape_cases(3, g)) {
    std::vector<tensor<T>> in{random_tensor<T>(g, shapes[0], r.fma_factor),
                              random_tensor<T>(g, shapes[1], r.fma_factor), random_tensor<T>(g, shapes[2], r.fma_term)};
    xlite_test::for_each_isa_path([&](xlite::isa) {
      compare_with_reference(op::fma, in, evaluate_op<op::fma>(in, as_is), false, 0, path_name());
    });
  }
}

} // namespace

TEST_CASE("functions: int32 ops are exact on every path", "[functions][integer]") {
  check_integer_ops<std::int32_t>(300);
}

TEST_CASE("functions: int64 ops are exact on every path, in all 64 bits", "[functions][integer]") {
  check_integer_ops<std::int64_t>(320);
}

TEST_CASE("functions: int8 and uint8 take the scalar path and wrap as C++ does", "[functions][integer][scalar]") {
  using u8 = std::uint8_t;
  using i8 = std::int8_t;
  const tensor<u8> a{200, 100, 0, 255, 7};
  const tensor<u8> b{100, 200, 1, 255, 3};
  const tensor<i8> c{{-128, 127, 5}, {-1, 0, 100}};
  const tensor<i8> d{-1, 1, 100};
  static_assert(!xlite::expr::simd_evaluable_v<decltype(a + b)>);
  static_assert(!xlite::expr::simd_evaluable_v<decltype(xlite::cast<float>(c) * 2.0f)>);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    CHECK(tensor<u8>(a + b) == tensor<u8>{44, 44, 1, 254, 10}); // modulo 256
    CHECK(tensor<u8>(a - b) == tensor<u8>{100, 156, 255, 0, 4});
    CHECK(tensor<u8>(a * b) == tensor<u8>{32, 32, 0, 1, 21});
    CHECK(tensor<u8>(xlite::max(a, b)) == tensor<u8>{200, 200, 1, 255, 7});
    CHECK(tensor<bool>(a > b) == tensor<bool>{true, false, false, false, true});
    CHECK(tensor<i8>(c + d) == tensor<i8>{{127, -128, 105}, {-2, 1, -56}}); // broadcast, modulo 256
    CHECK(tensor<i8>(-c) == tensor<i8>{{-128, -127, -5}, {1, 0, -100}});
    CHECK(tensor<i8>(xlite::abs(d)) == tensor<i8>{1, 1, 100});
    CHECK(tensor<i8>(xlite::relu(c)) == tensor<i8>{{0, 127, 5}, {0, 0, 100}});
    CHECK(tensor<i8>(xlite::clamp(c, i8{-2}, i8{50})) == tensor<i8>{{-2, 50, 5}, {-1, 0, 50}});
    CHECK(tensor<float>(xlite::cast<float>(c) * 2.0f) == tensor<float>{{-256, 254, 10}, {-2, 0, 200}});
    CHECK(tensor<u8>(xlite::where(c < d, xlite::cast<u8>(c), u8{9})) == tensor<u8>{{128, 9, 5}, {9, 0, 9}});
  });
}

TEST_CASE("functions: a number outside an integer expression's type is an error naming op, number and type",
          "[functions][integer][errors]") {
  using Catch::Matchers::Contains;
  const tensor<std::uint8_t> u{0, 200, 255};
  const tensor<std::int32_t> i{1, -5, 7};
  CHECK_THROWS_WITH(u < 256, Contains("less: the number 256 does not fit uint8"));
  CHECK_THROWS_WITH(xlite::clamp(u, -1, 100), Contains("clamp: the number -1 does not fit uint8"));
  CHECK_THROWS_WITH(i > 3000000000LL, Contains("greater: the number 3000000000 does not fit int32"));
  CHECK_THROWS_WITH(xlite::where(u > 3, u, 300), Contains("where: the number 300 does not fit uint8"));
  CHECK_THROWS_AS(u + 256, xlite::value_error);
  // The numbers that fit, at both ends, and floating point expressions, which take any number.
  CHECK(tensor<bool>(u < 255) == tensor<bool>{true, true, false});
  CHECK(tensor<std::uint8_t>(xlite::clamp(u, 0, 255)) == u);
  CHECK(tensor<bool>(i > -2147483648LL) == tensor<bool>{true, true, true});
  CHECK(tensor<float>(xlite::cast<float>(i) * 3000000000LL).data()[0] == 3.0e9f);
}

TEST_CASE("functions: int32 and int64 wrap on every path, and casts from floating point are defined",
          "[functions][integer]") {
  constexpr std::int32_t lo = std::numeric_limits<std::int32_t>::min();
  constexpr std::int32_t hi = std::numeric_limits<std::int32_t>::max();
  constexpr std::int64_t lo64 = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t hi64 = std::numeric_limits<std::int64_t>::max();
  const tensor<std::int32_t> i{lo, hi, 3};
  const tensor<std::int64_t> l{hi64, 2};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const tensor<float> f{3e9f, nan, -1.0f, 300.0f, -2.5f};
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    CHECK(tensor<std::int32_t>(xlite::abs(i)) == tensor<std::int32_t>{lo, hi, 3});
    CHECK(tensor<std::int32_t>(-i) == tensor<std::int32_t>{lo, -hi, -3});
    CHECK(tensor<std::int32_t>(i + 1) == tensor<std::int32_t>{lo + 1, lo, 4});
#if XSIMD_WITH_SSE4_1 || !XSIMD_WITH_SSE2
    // SSE2 has no 32-bit multiply: xsimd 8 multiplies its lanes one by one as int, whose
    // overflow is undefined (UBSan stops there). Checked where the instruction exists.
    CHECK(tensor<std::int32_t>(i * 2) == tensor<std::int32_t>{0, -2, 6});
    CHECK(tensor<std::int32_t>(xlite::fma(i, i, 1)) == tensor<std::int32_t>{1, 2, 10});
#endif
    CHECK(tensor<std::int64_t>(xlite::sum(l))() == lo64 + 1);
    CHECK(tensor<std::int64_t>(l + 1) == tensor<std::int64_t>{lo64, 3});
    // Out of range and NaN: the lowest int32 or int64, as x86's conversions give (NEON's
    // saturate, NaN to 0); 8 bits: the int32's low bits.
#if defined(__x86_64__) || defined(__i386__)
    const std::int32_t big = lo, not_a_number = lo;
    const std::int64_t not_a_number64 = lo64;
#else
    const std::int32_t big = hi, not_a_number = 0;
    const std::int64_t not_a_number64 = 0;
#endif
    CHECK(tensor<std::int32_t>(xlite::cast<std::int32_t>(f)) == tensor<std::int32_t>{big, not_a_number, -1, 300, -2});
    CHECK(tensor<std::uint8_t>(xlite::cast<std::uint8_t>(f)) ==
          tensor<std::uint8_t>{static_cast<std::uint8_t>(big), static_cast<std::uint8_t>(not_a_number), 255, 44, 254});
    CHECK(tensor<std::int64_t>(xlite::cast<std::int64_t>(f)) ==
          tensor<std::int64_t>{3000000000, not_a_number64, -1, 300, -2});
  });
}
