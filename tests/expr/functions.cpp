// The arithmetic of expr/functions.hpp that IEEE defines exactly (+ - * / neg abs sqrt fma)
// on float and double, against a naive loop (elementwise_check.hpp) with the bounds of
// accuracy.hpp; special values; operators with plain scalars and constants; broadcast
// errors.
//
// The element-wise tests are split over functions*.cpp only to keep each translation unit's
// compile time moderate: every op on every element type is a fused loop of its own.

#include "accuracy.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>
#include <limits>

using Catch::Matchers::Contains;
using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

// The ops of this file, for every test that walks them.
template <class F>
void exact_ops(F&& f) {
  for_ops<op::add, op::sub, op::mul, op::div, op::neg, op::abs, op::sqrt>(f);
}

template <class F>
void exact_ops_and_fma(F&& f) {
  exact_ops(f);
  f(std::integral_constant<op, op::fma>{});
}

} // namespace

TEST_CASE("functions: + - * / neg abs sqrt are correctly rounded on every path", "[functions][accuracy]") {
  exact_ops([](auto o) {
    check_row<decltype(o)::value, float>(1);
    check_row<decltype(o)::value, double>(2);
  });
}

// One rounding on every path, the SSE one included, whose arch has no FMA instruction
// (xsimd's fma is x * y + z there), and AVX-512, where xsimd's is fused only by contraction.
TEST_CASE("functions: fma is correctly rounded on every path", "[functions][accuracy]") {
  check_row<op::fma, float>(3);
  check_row<op::fma, double>(4);
  // a * a + c where only the fused form keeps the last bits: (1 + 2^-12)^2 - (1 + 2^-11) is
  // 2^-24 in float, 0 when a * a is rounded first; likewise 2^-54 in double.
  const double f = std::ldexp(1.0, -12), d = std::ldexp(1.0, -27);
  check_special_values<op::fma, float>({{{1 + f, 1 + f, -(1 + 2 * f)}, std::ldexp(1.0, -24)}});
  check_special_values<op::fma, double>({{{1 + d, 1 + d, -(1 + 2 * d)}, std::ldexp(1.0, -54), true}});
}

TEST_CASE("functions: special values of + - * / neg abs sqrt (NaN, Inf, signed zeros)", "[functions][special]") {
  const auto run = [](auto type) {
    using T = decltype(type);
    check_special_values<op::add, T>({{{-0.0, -0.0}, -0.0},
                                      {{0.0, -0.0}, 0.0},
                                      {{inf, -inf}, qnan},
                                      {{inf, 1}, inf},
                                      {{qnan, 1}, qnan},
                                      {{3, -3}, 0.0}});
    check_special_values<op::sub, T>({{{0.0, 0.0}, 0.0}, {{-0.0, 0.0}, -0.0}, {{inf, inf}, qnan}, {{1, qnan}, qnan}});
    check_special_values<op::mul, T>({{{-0.0, 5}, -0.0}, {{0.0, inf}, qnan}, {{-2, inf}, -inf}, {{-0.0, -0.0}, 0.0}});
    check_special_values<op::div, T>({{{1, 0.0}, inf},
                                      {{1, -0.0}, -inf},
                                      {{0.0, 0.0}, qnan},
                                      {{-1, inf}, -0.0},
                                      {{inf, inf}, qnan},
                                      {{qnan, 1}, qnan}});
    check_special_values<op::neg, T>({{{0.0}, -0.0}, {{-0.0}, 0.0}, {{inf}, -inf}, {{qnan}, qnan}});
    check_special_values<op::abs, T>({{{-inf}, inf}, {{-3}, 3}, {{qnan}, qnan}, {{0.0}, 0.0}});
    check_special_values<op::sqrt, T>(
        {{{-0.0}, -0.0}, {{-1}, qnan}, {{inf}, inf}, {{0.0}, 0.0}, {{4}, 2}, {{-inf}, qnan}});
  };
  run(float{});
  run(double{});
}

// torch.abs clears the sign: the scalar path must agree with the SIMD batches, whose
// xsimd::abs does.
TEST_CASE("functions: abs(-0.0) is +0.0 in every element, on every path", "[functions][special]") {
  check_special_values<op::abs, float>({{{-0.0}, 0.0}});
  check_special_values<op::abs, double>({{{-0.0}, 0.0}});
}

TEST_CASE("functions: plain scalars and constants take the tensor's element type", "[functions]") {
  rng g(5);
  const tensor<float> x = random_tensor<float>(g, shape{3, 43}, -10, 10);
  const tensor<double> y = random_tensor<double>(g, shape{43}, -10, 10);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    const tensor<float> a = 2.0 - x; // a double literal joins a float tensor as a float
    const tensor<float> b = x / xlite::c<4>;
    const tensor<float> c = xlite::max(x, 0.5f);
    const tensor<double> d = xlite::scalar(3) * y;
    for (std::int64_t i = 0; i < x.size(); ++i) {
      const float v = x.data()[i];
      CHECK(a.data()[i] == 2.0f - v);
      CHECK(b.data()[i] == v / 4.0f);
      CHECK(c.data()[i] == (v < 0.5f ? 0.5f : v));
    }
    for (std::int64_t i = 0; i < y.size(); ++i) CHECK(d.data()[i] == 3.0 * y.data()[i]);
  });
}

TEST_CASE("functions: a broadcast mismatch is a shape_error naming the op and both shapes", "[functions][errors]") {
  const tensor<float> a(shape{2, 3}), b(shape{2}), c(shape{4, 1, 3});
  const tensor<bool> m(shape{5});
  CHECK_THROWS_AS(a + b, xlite::shape_error);
  CHECK_THROWS_WITH(a + b, Contains("add: shapes (2, 3) and (2,) cannot be broadcast together"));
  CHECK_THROWS_WITH(a * b, Contains("mul: shapes (2, 3) and (2,)"));
  CHECK_THROWS_WITH(b / a, Contains("div: shapes (2,) and (2, 3)"));
  CHECK_THROWS_WITH(xlite::exp(a) - b, Contains("sub: shapes (2, 3) and (2,)"));
  CHECK_THROWS_WITH(xlite::less(a, b), Contains("less: shapes (2, 3) and (2,)"));
  CHECK_THROWS_WITH(xlite::pow(a, b), Contains("pow: shapes (2, 3) and (2,)"));
  CHECK_THROWS_WITH(xlite::min(a, b), Contains("minimum: shapes (2, 3) and (2,)"));
  // Three operands: all are named, and the two that disagree (the first two broadcast to
  // (4, 2, 3), a shape none of them has).
  CHECK_THROWS_WITH(xlite::fma(a, c, b),
                    Contains("fma: shapes (2, 3), (4, 1, 3) and (2,) cannot be broadcast together: "
                             "dimension -1 is 3 in (2, 3) and 2 in (2,)"));
  CHECK_THROWS_WITH(xlite::where(m, a, a), Contains("where: shapes (5,), (2, 3) and (2, 3)"));
  CHECK_THROWS_WITH(xlite::clamp(a, 0.0f, b), Contains("clamp: shapes (2, 3) and (2,)"));
  CHECK_THROWS_WITH(xlite::where(m, a, 1.0f), Contains("where: shapes (5,) and (2, 3)"));
  // Deep in an expression: the innermost op that fails is named.
  CHECK_THROWS_WITH(xlite::relu(a * 2.0f + xlite::sqrt(b)), Contains("add: shapes (2, 3) and (2,)"));
  // The message says which dimension.
  CHECK_THROWS_WITH(a + b, Contains("dimension -1 is 3 in (2, 3) and 2 in (2,)"));
}

TEST_CASE("functions: measured ULP errors of + - * / neg abs sqrt fma", "[.ulp_report]") {
  exact_ops_and_fma([](auto o) {
    std::cout << results_text(decltype(o)::value, "float32", check_row<decltype(o)::value, float>(1)) << '\n';
    std::cout << results_text(decltype(o)::value, "float64", check_row<decltype(o)::value, double>(2)) << '\n';
  });
}
