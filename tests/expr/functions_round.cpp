// The piecewise ops of expr/functions.hpp, exact in IEEE arithmetic: min, max, clamp and
// relu (NaN-propagating, as in PyTorch), floor, ceil and round (half to even, the sign of
// zero kept), on float and double against a naive loop with the bounds of accuracy.hpp;
// their special values; floor, ceil and round of integers.

#include "accuracy.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <iostream>
#include <limits>

using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

// Operands for decltype alone: declared, never defined (in the anonymous namespace g++
// would warn of that).
template <class T>
const tensor<T>& tensor_of();

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

template <class E, std::size_t I>
constexpr bool takes_number = xlite::expr::bound<E>::template takes_number<I>();

template <class F>
void piecewise_ops(F&& f) {
  for_ops<op::minimum, op::maximum, op::clamp, op::relu, op::floor, op::ceil, op::round>(f);
}

} // namespace

TEST_CASE("functions: min max clamp relu floor ceil round are exact on every path", "[functions][accuracy]") {
  piecewise_ops([](auto o) {
    check_row<decltype(o)::value, float>(11);
    check_row<decltype(o)::value, double>(12);
  });
}

TEST_CASE("functions: special values of min max clamp relu floor ceil round (NaN, Inf, signed zeros, ties)",
          "[functions][special]") {
  const auto run = [](auto type) {
    using T = decltype(type);
    // minimum, maximum and clamp propagate NaN from any operand, as torch.minimum does, and
    // order -0 below +0 (IEEE 754-2019), so that neither operand order nor path matters.
    check_special_values<op::minimum, T>({{{qnan, 1}, qnan},
                                          {{1, qnan}, qnan},
                                          {{-inf, 1}, -inf},
                                          {{inf, qnan}, qnan},
                                          {{-0.0, 0.0}, -0.0},
                                          {{0.0, -0.0}, -0.0},
                                          {{0.0, 0.0}, 0.0}});
    check_special_values<op::maximum, T>({{{qnan, 1}, qnan},
                                          {{1, qnan}, qnan},
                                          {{inf, 1}, inf},
                                          {{-inf, qnan}, qnan},
                                          {{-0.0, 0.0}, 0.0},
                                          {{0.0, -0.0}, 0.0},
                                          {{-0.0, -0.0}, -0.0}});
    check_special_values<op::clamp, T>({{{qnan, 0, 1}, qnan},
                                        {{-0.0, 0.0, 1}, 0.0},
                                        {{0.0, -1, -0.0}, -0.0},
                                        {{5, 0, 1}, 1},
                                        {{-5, 0, 1}, 0},
                                        {{0.5, qnan, 1}, qnan},
                                        {{0.5, 0, qnan}, qnan},
                                        {{inf, 0, 1}, 1},
                                        {{-inf, 0, 1}, 0}});
    check_special_values<op::relu, T>({{{qnan}, qnan}, {{-inf}, 0}, {{inf}, inf}, {{-3}, 0}, {{3}, 3}});
    check_special_values<op::floor, T>({{{-0.0}, -0.0},
                                        {{-0.5}, -1},
                                        {{0.5}, 0},
                                        {{qnan}, qnan},
                                        {{inf}, inf},
                                        {{-inf}, -inf},
                                        {{-8388607.5}, -8388608},
                                        {{1e30}, 1e30, true}});
    check_special_values<op::ceil, T>(
        {{{-0.5}, -0.0}, {{-0.0}, -0.0}, {{0.5}, 1}, {{qnan}, qnan}, {{-inf}, -inf}, {{8388607.5}, 8388608}});
    // Half to even, the sign of zero kept; 2^23 - 0.5 and 2^52 - 0.5 are the last halves.
    check_special_values<op::round, T>({{{0.5}, 0.0},
                                        {{1.5}, 2},
                                        {{2.5}, 2},
                                        {{-0.5}, -0.0},
                                        {{-1.5}, -2},
                                        {{-2.5}, -2},
                                        {{-0.4}, -0.0},
                                        {{0.49999997}, 0.0},
                                        {{8388607.5}, 8388608},
                                        {{-8388606.5}, -8388606},
                                        {{4503599627370495.5}, 4503599627370496, true},
                                        {{qnan}, qnan},
                                        {{inf}, inf},
                                        {{-inf}, -inf},
                                        {{-0.0}, -0.0}});
  };
  run(float{});
  run(double{});
}

// max and min with a number c, and clamp with number bounds, take shorter forms on x86
// (kernels::detail::maximum_with_number, minimum_with_number). For every pairing of
// special values, on every path, each must give the bits of the same op over a tensor
// filled with c, and IEEE 754-2019's maximum and minimum: NaN if either operand is, -0
// below +0. Which NaN is not promised: g++ may swap the operands of the a + b that makes
// it, on every path.
TEST_CASE("functions: max, min and clamp against a number give the bits of the tensor form", "[functions][special]") {
  // Which operands are numbers that the node takes so is known from the expression's type.
  static_assert(takes_number<decltype(xlite::max(tensor_of<float>(), 1.0f)), 1>);
  static_assert(!takes_number<decltype(xlite::max(tensor_of<float>(), 1.0f)), 0>);
  static_assert(takes_number<decltype(xlite::min(1.0f, tensor_of<float>())), 0>);
  static_assert(takes_number<decltype(xlite::clamp(tensor_of<float>(), 0.0f, 1.0f)), 1>);
  static_assert(takes_number<decltype(xlite::clamp(tensor_of<float>(), 0.0f, 1.0f)), 2>);
  static_assert(takes_number<decltype(xlite::clamp(tensor_of<float>(), tensor_of<float>(), 1.0f)), 2>);
  static_assert(!takes_number<decltype(xlite::clamp(tensor_of<float>(), tensor_of<float>(), 1.0f)), 1>);
  static_assert(!takes_number<decltype(xlite::clamp(tensor_of<float>(), 0.0f, tensor_of<float>())), 2>);
  static_assert(!takes_number<decltype(xlite::clamp(1.0f, tensor_of<float>(), tensor_of<float>())), 1>);
  static_assert(!takes_number<decltype(xlite::clamp(1.0f, tensor_of<float>(), 2.0f)), 2>); // x a number: general
  static_assert(!takes_number<decltype(xlite::max(tensor_of<float>(), tensor_of<float>())), 0>);
  static_assert(!takes_number<decltype(xlite::max(tensor_of<float>(), tensor_of<float>())), 1>);
  static_assert(takes_number<decltype(xlite::min(tensor_of<double>(), 1.0)), 1>);
  static_assert(!takes_number<decltype(xlite::max(tensor_of<int>(), 1)), 1>);

  const auto run = [](auto type) {
    using T = decltype(type);
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    constexpr Bits sign = Bits{1} << (8 * sizeof(T) - 1);
    constexpr Bits quiet = std::bit_cast<Bits>(std::numeric_limits<T>::quiet_NaN());
    const std::vector<T> values{T(0),
                                -T(0),
                                T(1),
                                T(-1),
                                T(-2.5),
                                T(inf),
                                T(-inf),
                                std::numeric_limits<T>::denorm_min(),
                                -std::numeric_limits<T>::denorm_min(),
                                std::numeric_limits<T>::lowest(),
                                std::bit_cast<T>(quiet),
                                std::bit_cast<T>(quiet | sign),
                                std::bit_cast<T>(quiet | 0x2345),                   // a payload
                                std::bit_cast<T>(std::bit_cast<Bits>(T(inf)) | 1)}; // signaling
    // Each value in a few lane positions, and a row end that is not a whole batch.
    tensor<T> x(shape{static_cast<std::int64_t>(3 * values.size() + 5)});
    for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = values[static_cast<std::size_t>(i * 5) % values.size()];
    const auto same_values = [](const tensor<T>& got, const tensor<T>& want) {
      return std::ranges::equal(got, want, [](T g, T w) { return same_value(g, w); });
    };
    // IEEE's maximum (Max) or minimum of v and c: a NaN, or the value with the sign of
    // zero that orders -0 below +0.
    const auto check_ieee = [&]<bool Max>(const tensor<T>& got, T c) {
      for (std::int64_t i = 0; i < x.size(); ++i) {
        const T v = x.data()[i], r = got.data()[i];
        INFO((Max ? "max" : "min") << " of " << bits_text(v) << " gave " << bits_text(r));
        if (std::isnan(v) || std::isnan(c)) {
          CHECK(std::isnan(r));
        } else {
          CHECK(r == (Max ? std::max(v, c) : std::min(v, c)));
          CHECK(std::signbit(r) == (Max ? std::signbit(v) && std::signbit(c) : std::signbit(v) || std::signbit(c)));
        }
      }
    };
    for_each_isa_path([&](xlite::isa) {
      for (const T c : values) {
        INFO(path_name() << ", the number " << bits_text(c) << " (bits " << std::hex << std::bit_cast<Bits>(c) << ")");
        const tensor<T> filled(x.shape(), c);
        const tensor<T> max_right = xlite::max(x, c), min_right = xlite::min(x, c);
        CHECK(same_values(max_right, xlite::max(x, filled)));
        CHECK(same_values(xlite::max(c, x), xlite::max(filled, x)));
        CHECK(same_values(min_right, xlite::min(x, filled)));
        CHECK(same_values(xlite::min(c, x), xlite::min(filled, x)));
        CHECK(same_values(xlite::clamp(x, c, T(0.75)), xlite::clamp(x, filled, T(0.75))));
        CHECK(same_values(xlite::clamp(x, T(-0.75), c), xlite::clamp(x, T(-0.75), filled)));
        CHECK(same_values(xlite::clamp(x, c, c), xlite::clamp(x, filled, filled)));
        check_ieee.template operator()<true>(max_right, c);
        check_ieee.template operator()<false>(min_right, c);
      }
    });
  };
  run(float{});
  run(double{});
}

// For integers, floor, ceil and round are the identity, negative elements and int64 values
// past 2^53 (which a detour through double would round) included.
TEST_CASE("functions: floor, ceil and round of integers are the integers", "[functions][integer]") {
  const auto run = [](auto type, std::uint64_t seed) {
    using T = decltype(type);
    constexpr double top = static_cast<double>(std::numeric_limits<T>::max()) * 0.999;
    const domain any{{part::integers, -top, top}, {part::integers, -9, 9}};
    check_exact_op<op::floor, T>(seed, any);
    check_exact_op<op::ceil, T>(seed + 1, any);
    check_exact_op<op::round, T>(seed + 2, any);
  };
  run(std::int32_t{}, 340);
  run(std::int64_t{}, 350);
}

TEST_CASE("functions: measured ULP errors of min max clamp relu floor ceil round", "[.ulp_report]") {
  piecewise_ops([](auto o) {
    std::cout << results_text(decltype(o)::value, "float32", check_row<decltype(o)::value, float>(11)) << '\n';
    std::cout << results_text(decltype(o)::value, "float64", check_row<decltype(o)::value, double>(12)) << '\n';
  });
}
