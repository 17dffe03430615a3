// Gradients through control flow: cond against finite differences on both branches, with
// captured values, integer operands, unused results, nesting and second derivatives; one
// compilation whichever branch runs; while_loop's refusal.

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "gradient_check.hpp"
#include "xlite/autodiff.hpp"
#include "xlite/lazy.hpp"
#include "xlite/runtime/metrics.hpp"

using namespace xlite;
using L = lazy::tensor;
using gradient_check::check;
using gradient_check::random_host;

namespace {

// Two results from x (3, 4) and the captured w (4): the predicate is the sign of sum(x).
std::vector<L> two_branches(const L& x, const L& w) {
  return lazy::cond(
      lazy::sum(x) > 0.0,
      [&](const std::vector<L>& v) {
        return std::vector<L>{lazy::sin(v[0]) * w, v[0] * v[0]};
      },
      [&](const std::vector<L>& v) {
        return std::vector<L>{lazy::exp(v[0]) + w, v[0] * w * w};
      },
      {x});
}

} // namespace

TEST_CASE("grad of cond matches finite differences on either branch", "[autodiff][control]") {
  for (const double sign : {1.0, -1.0}) {
    INFO("the " << (sign > 0 ? "true" : "false") << " branch");
    // All of x on one side of 0, so a finite-difference step never flips the predicate.
    const auto x = sign > 0 ? random_host(shape{3, 4}, 0.2, 2) : random_host(shape{3, 4}, -2, -0.2);
    const auto w = random_host(shape{4});
    check("both results",
          [](const std::vector<L>& v) {
            const std::vector<L> r = two_branches(v[0], v[1]);
            return r[0] * 3.0 + r[1];
          },
          {x, w});
    check("the first result only", [](const std::vector<L>& v) { return two_branches(v[0], v[1])[0]; }, {x, w});
    check("the second result only", [](const std::vector<L>& v) { return two_branches(v[0], v[1])[1]; }, {x, w});
  }
}

TEST_CASE("grad of cond skips integer operands and reaches nested conds", "[autodiff][control]") {
  const auto x = random_host(shape{5}, 0.5, 2);
  const auto f = [](const std::vector<L>& v) {
    const L count = L::from(xlite::tensor<std::int32_t>{3});
    const L inner_pred = lazy::sum(v[1]) > 0.0;
    return lazy::cond(
        lazy::sum(v[0]) > 0.0,
        [&](const std::vector<L>& in) {
          // A cond inside a branch, reading the outer branch's operand and a capture.
          const L nested = lazy::cond(
              inner_pred, [&](const std::vector<L>& y) { return std::vector<L>{lazy::tanh(y[0]) * v[1]}; },
              [&](const std::vector<L>& y) { return std::vector<L>{y[0]}; }, {in[0]})[0];
          return std::vector<L>{nested * lazy::cast(in[1], dtype::f64), in[1] + 1};
        },
        [](const std::vector<L>& in) {
          return std::vector<L>{in[0], in[1]};
        },
        {v[0], count})[0];
  };
  check("nested", f, {x, random_host(shape{5}, 0.5, 2)});
  check("nested, inner false branch", f, {x, random_host(shape{5}, -2, -0.5)});
}

TEST_CASE("grad of a gradient through cond: second derivatives", "[autodiff][control]") {
  const std::vector<double> at{0.3, 1.1, 2.0};
  const L x = L::from(xlite::tensor<double>{at[0], at[1], at[2]});
  const auto cubic = [](const L& v) {
    return lazy::cond(
        lazy::sum(v) > 0.0, [](const std::vector<L>& in) { return std::vector<L>{in[0] * in[0] * in[0]}; },
        [](const std::vector<L>& in) { return std::vector<L>{in[0]}; }, {v})[0];
  };
  const L dx = grad(lazy::sum(cubic(x)), {x})[0];
  const auto second = grad(lazy::sum(dx), {x})[0].to_host<double>();
  for (std::size_t i = 0; i < at.size(); ++i) CHECK(second.data()[i] == Approx(6 * at[i]));
}

TEST_CASE("a training step through cond compiles once whichever branch runs", "[autodiff][control]") {
  const L w = L::from(xlite::tensor<float>{0.5f, -1.0f, 2.0f});
  const auto step_gradient = [&](float offset) {
    const L x = L::from(xlite::tensor<float>{1.0f + offset, 2.0f + offset, 3.0f + offset});
    const L y = lazy::cond(
        lazy::sum(x) > 0.0f, [&](const std::vector<L>& v) { return std::vector<L>{v[0] * w}; },
        [&](const std::vector<L>& v) { return std::vector<L>{v[0] * w * w}; }, {x})[0];
    const L g = grad(lazy::sum(y), {w})[0];
    mark_step();
    return g.to_host<float>();
  };
  (void)step_gradient(0); // compiles
  const std::int64_t compiled_before = metrics::counter_value("UncachedCompile");
  const auto positive = step_gradient(1);  // true branch: d/dw sum(x * w) = x
  const auto negative = step_gradient(-9); // false branch: d/dw sum(x * w * w) = 2 x w
  CHECK(metrics::counter_value("UncachedCompile") == compiled_before);
  CHECK(positive(0) == 2.0f);
  CHECK(positive(2) == 4.0f);
  CHECK(negative(0) == 2 * -8.0f * 0.5f);
  CHECK(negative(1) == 2 * -7.0f * -1.0f);
}

TEST_CASE("grad refuses while_loop, naming it", "[autodiff][control]") {
  const auto doubled_until_ten = [](const L& start) {
    return lazy::while_loop([](const std::vector<L>& v) { return lazy::sum(v[0]) < 10.0f; },
                            [](const std::vector<L>& v) { return std::vector<L>{v[0] * 2.0f}; }, {start})[0];
  };
  const L x = L::from(xlite::tensor<float>{1.0f, 2.0f});
  const L looped = doubled_until_ten(x);
  CHECK_THROWS_AS(grad(lazy::sum(looped), {x}), value_error);
  CHECK_THROWS_WITH(grad(lazy::sum(looped), {x}),
                    Catch::Contains("grad: while_loop is not differentiable in reverse mode"));
  // A loop on the way to the output but not between it and the inputs is no obstacle.
  const L z = L::from(xlite::tensor<float>{3.0f, 4.0f});
  const L dx = grad(lazy::sum(x * doubled_until_ten(z)), {x})[0];
  CHECK(dx.to_host<float>()(1) == 8.0f); // z doubled once: (6, 8)
}
