// The math functions of expr/functions.hpp (exp log log1p rsqrt tanh sigmoid gelu sin cos
// pow), on float and double, against a long double loop with the ULP bounds of
// accuracy.hpp; their special values; gelu's error where its exact-erf form cancels.

#include "accuracy.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>
#include <limits>

using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

template <class F>
void math_ops(F&& f) {
  for_ops<op::exp, op::log, op::log1p, op::rsqrt, op::tanh, op::sigmoid, op::gelu, op::sin, op::cos, op::pow>(f);
}

} // namespace

TEST_CASE("functions: exp log log1p rsqrt tanh sigmoid gelu sin cos pow are within their ULP bounds",
          "[functions][accuracy]") {
  math_ops([](auto o) {
    check_row<decltype(o)::value, float>(101);
    check_row<decltype(o)::value, double>(102);
  });
}

TEST_CASE("functions: special values of the math functions", "[functions][special]") {
  const auto run = [](auto type) {
    using T = decltype(type);
    check_special_values<op::exp, T>(
        {{{-inf}, 0.0}, {{inf}, inf}, {{qnan}, qnan}, {{0.0}, 1}, {{-0.0}, 1}, {{1000}, inf}, {{-1000}, 0.0}});
    check_special_values<op::log, T>(
        {{{0.0}, -inf}, {{-0.0}, -inf}, {{-1}, qnan}, {{inf}, inf}, {{1}, 0.0}, {{qnan}, qnan}, {{-inf}, qnan}});
    check_special_values<op::log1p, T>({{{-1}, -inf}, {{-2}, qnan}, {{0.0}, 0.0}, {{inf}, inf}, {{qnan}, qnan}});
    check_special_values<op::rsqrt, T>(
        {{{0.0}, inf}, {{-0.0}, -inf}, {{inf}, 0.0}, {{-1}, qnan}, {{4}, 0.5}, {{0.25}, 2}, {{qnan}, qnan}});
    check_special_values<op::tanh, T>(
        {{{inf}, 1}, {{-inf}, -1}, {{-0.0}, -0.0}, {{0.0}, 0.0}, {{qnan}, qnan}, {{30}, 1}, {{-30}, -1}});
    check_special_values<op::sigmoid, T>({{{inf}, 1}, {{-inf}, 0.0}, {{qnan}, qnan}, {{0.0}, 0.5}, {{100}, 1}});
    check_special_values<op::gelu, T>({{{inf}, inf}, {{qnan}, qnan}, {{0.0}, 0.0}, {{-0.0}, -0.0}, {{-40}, -0.0}});
    check_special_values<op::sin, T>({{{-0.0}, -0.0}, {{0.0}, 0.0}, {{inf}, qnan}, {{-inf}, qnan}, {{qnan}, qnan}});
    check_special_values<op::cos, T>({{{0.0}, 1}, {{-0.0}, 1}, {{inf}, qnan}, {{qnan}, qnan}});
  };
  run(float{});
  run(double{});
  // Float tanh batches clamp at 10 and their result at 1 (kernels/elementwise.hpp): exactly
  // +-1 from 9.57 on, as the correctly rounded float tanh is.
  check_special_values<op::tanh, float>({{{9.6}, 1}, {{-9.6}, -1}, {{10}, 1}, {{12}, 1}, {{-1e30}, -1}});
}

// C and torch.log1p keep the sign of a zero (xsimd::log1p(-0.0) alone is +0.0).
TEST_CASE("functions: log1p(-0.0) is -0.0", "[functions][special]") {
  check_special_values<op::log1p, float>({{{-0.0}, -0.0}});
  check_special_values<op::log1p, double>({{{-0.0}, -0.0}});
}

// C's pow (C11 F.10.4.4), which torch.pow follows, on the SIMD batches as on the scalar
// path (std::pow); xsimd 8.1's own pow gets these wrong, e.g. pow(0, 0), pow(NaN, 0),
// pow(1, NaN), pow(1, Inf), pow(0, -1) and pow(-0.0, 3).
TEST_CASE("functions: pow follows C's pow for zeros, infinities, NaN and negative bases", "[functions][special]") {
  const auto run = [](auto type) {
    using T = decltype(type);
    check_special_values<op::pow, T>({
        {{2, 0.0}, 1},         {{0.0, 0.0}, 1},    {{qnan, 0.0}, 1},   {{inf, -0.0}, 1}, // x^0 is 1, even for NaN
        {{1, qnan}, 1},        {{1, inf}, 1},      {{1, 3.5}, 1},                        // 1^y is 1, even for NaN
        {{-1, 3}, -1},         {{-1, 2}, 1},       {{-1, -3}, -1},     {{-1, inf}, 1},
        {{-8, 1.0 / 3}, qnan},                                                           // negative bases
        {{0.0, 2}, 0.0},       {{0.0, 3}, 0.0},    {{-0.0, 3}, -0.0},  {{-0.0, 2}, 0.0}, // zero bases
        {{0.0, -1}, inf},      {{-0.0, -1}, -inf}, {{0.0, -2}, inf},   {{2, -inf}, 0.0},
        {{0.5, inf}, 0.0},     {{2, inf}, inf},    {{0.5, -inf}, inf}, {{inf, -1}, 0.0},
        {{inf, 2}, inf},       {{-inf, 3}, -inf},  {{-inf, 2}, inf},   {{-inf, -3}, -0.0},
        {{qnan, 1}, qnan},     {{2, qnan}, qnan},
    });
  };
  run(float{});
  run(double{});
}

// 0.5 x (1 + erf(x / sqrt 2)) loses relative accuracy where 1 + erf cancels (x below about
// -1.5, where erf is near -1): there the error is bounded relative to |x| instead. Measured
// worst: float 0.37 eps |x| (every path), double 15.7 eps |x| (xsimd's erf; scalar 0.21).
TEST_CASE("functions: gelu below -1.5 is within eps |x| (float) and 16 eps |x| (double) of the exact value",
          "[functions][accuracy]") {
  const auto run = [](auto type, double bound) {
    using T = decltype(type);
    rng g(103);
    const tensor<T> x = random_tensor<T>(g, shape{2003}, -12, -1.5);
    xlite_test::for_each_isa_path([&](xlite::isa) {
      const tensor<T> got = xlite::gelu(x);
      long double worst = 0;
      for (std::int64_t i = 0; i < x.size(); ++i) {
        const long double v = x.data()[i];
        const long double exact = v / 2 * std::erfc(-v / std::sqrt(2.0L));
        worst = std::max(worst, std::fabs(got.data()[i] - exact) / (std::numeric_limits<T>::epsilon() * std::fabs(v)));
      }
      INFO(path_name() << ": worst error " << static_cast<double>(worst) << " eps |x|");
      CHECK(worst <= bound);
    });
  };
  run(float{}, 1);
  run(double{}, 16);
}

TEST_CASE("functions: measured ULP errors of the math functions", "[.ulp_report]") {
  math_ops([](auto o) {
    std::cout << results_text(decltype(o)::value, "float32", check_row<decltype(o)::value, float>(101)) << '\n';
    std::cout << results_text(decltype(o)::value, "float64", check_row<decltype(o)::value, double>(102)) << '\n';
  });
}
