// xlite::grad as a user meets it: tie conventions at kinks, inputs the output does not
// depend on, intermediate inputs, bad arguments, and a training loop that compiles once.

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "xlite/autodiff.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/lazy.hpp"
#include "xlite/runtime/metrics.hpp"

using namespace xlite;
using L = lazy::tensor;

namespace {

template <class T>
std::vector<T> values(const L& t) {
  const auto h = t.to_host<T>();
  return {h.data(), h.data() + h.size()};
}

} // namespace

TEST_CASE("grad at kinks follows PyTorch and JAX", "[autodiff]") {
  SECTION("relu'(0) = 0 and abs'(0) = 0") {
    const L x = L::from(xlite::tensor<float>{-1.0f, 0.0f, 2.0f});
    CHECK(values<float>(grad(lazy::sum(lazy::relu(x)), {x})[0]) == std::vector<float>{0, 0, 1});
    CHECK(values<float>(grad(lazy::sum(lazy::abs(x)), {x})[0]) == std::vector<float>{-1, 0, 1});
  }
  SECTION("maximum and minimum split a tie equally (torch.maximum)") {
    const L a = L::from(xlite::tensor<float>{1.0f, 2.0f, 3.0f});
    const L b = L::from(xlite::tensor<float>{0.0f, 2.0f, 5.0f});
    const auto g = grad(lazy::sum(lazy::maximum(a, b)), {a, b});
    CHECK(values<float>(g[0]) == std::vector<float>{1, 0.5f, 0});
    CHECK(values<float>(g[1]) == std::vector<float>{0, 0.5f, 1});
  }
  SECTION("amax shares the gradient between all maxima (JAX)") {
    const L x = L::from(xlite::tensor<float>{{3.0f, 1.0f, 3.0f, 3.0f}, {0.0f, 4.0f, 2.0f, 1.0f}});
    CHECK(values<float>(grad(lazy::sum(lazy::amax(x, {1})), {x})[0]) ==
          std::vector<float>{1.0f / 3, 0, 1.0f / 3, 1.0f / 3, 0, 1, 0, 0});
  }
  SECTION("clamp passes the gradient on its bounds") {
    const L x = L::from(xlite::tensor<float>{-2.0f, -1.0f, 0.0f, 1.0f, 2.0f});
    CHECK(values<float>(grad(lazy::sum(lazy::clamp(x, -1.0f, 1.0f)), {x})[0]) == std::vector<float>{0, 1, 1, 1, 0});
  }
}

TEST_CASE("grad of an input the output does not depend on is zero", "[autodiff]") {
  const L x = L::from(xlite::tensor<float>{1.0f, 2.0f});
  const L unused = L::from(xlite::tensor<float>{{1.0f, 2.0f}, {3.0f, 4.0f}});
  const auto g = grad(lazy::sum(x * x), {x, unused});
  CHECK(values<float>(g[0]) == std::vector<float>{2, 4});
  REQUIRE(g[1].shape() == shape{2, 2});
  CHECK(values<float>(g[1]) == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("a computed tensor is device data: grad through it stops there (docs/autodiff.md)", "[autodiff]") {
  const L x = L::from(xlite::tensor<float>{1.0f, 2.0f});
  const L y = x * x;
  CHECK(values<float>(grad(lazy::sum(y), {x})[0]) == std::vector<float>{2, 4}); // traced: through y
  (void)y.to_host<float>();
  CHECK(values<float>(grad(lazy::sum(y), {x})[0]) == std::vector<float>{0, 0}); // read: y is a leaf
  CHECK(values<float>(grad(lazy::sum(y), {y})[0]) == std::vector<float>{1, 1});
}

TEST_CASE("grad with respect to intermediate results and with an output gradient", "[autodiff]") {
  const L x = L::from(xlite::tensor<double>{1.0, 2.0, 3.0});
  const L h = x * x;           // pending: a node of the trace, not a device value
  const L y = lazy::sum(h * x); // sum x^3
  const auto g = grad(y, {h, x});
  CHECK(values<double>(g[0]) == std::vector<double>{1, 2, 3});  // dy/dh = x
  CHECK(values<double>(g[1]) == std::vector<double>{3, 12, 27}); // dy/dx = 3x^2 through both paths
  const L v = L::from(xlite::tensor<double>{1.0, -1.0, 0.5});
  CHECK(values<double>(grad(h, {x}, v)[0]) == std::vector<double>{2, -4, 3}); // v * 2x
}

TEST_CASE("grad of a gradient: second derivatives", "[autodiff]") {
  const L x = L::from(xlite::tensor<double>{0.5, -1.0, 2.0});
  const L dx = grad(lazy::sum(lazy::sin(x) * x), {x})[0]; // cos(x) x + sin(x)
  const auto second = values<double>(grad(lazy::sum(dx), {x})[0]);
  const double at[] = {0.5, -1.0, 2.0};
  for (std::size_t i = 0; i < 3; ++i) CHECK(second[i] == Approx(2 * std::cos(at[i]) - at[i] * std::sin(at[i])));
}

TEST_CASE("grad rejects what has no gradient, naming it", "[autodiff]") {
  const L x = L::from(xlite::tensor<float>{1.0f, 2.0f});
  const L i = L::from(xlite::tensor<std::int64_t>{1, 2});
  CHECK_THROWS_AS(grad(lazy::sum(i), {x}), dtype_error);
  CHECK_THROWS_WITH(grad(lazy::sum(i), {x}),
                    Catch::Contains("grad: the output is int64") &&
                           Catch::Contains("only a floating-point output"));
  CHECK_THROWS_AS(grad(x * 2.0f, {x}), shape_error);
  CHECK_THROWS_WITH(grad(x * 2.0f, {x}),
                    Catch::Contains("is not a scalar") && Catch::Contains("(2,)"));
  CHECK_THROWS_AS(grad(lazy::sum(x), {i}), dtype_error);
  CHECK_THROWS_WITH(grad(lazy::sum(x), {i}),
                    Catch::Contains("input 0 is int64"));
  CHECK_THROWS_AS(grad(x, {x}, L::from(xlite::tensor<float>{1.0f})), shape_error);
  CHECK_THROWS_WITH(grad(x, {x}, L::from(xlite::tensor<float>{1.0f})),
                    Catch::Contains("output_gradient float32(1,)"));
  const L looped = lazy::while_loop([](const std::vector<L>& v) { return lazy::sum(v[0]) < 10.0f; },
                                    [](const std::vector<L>& v) { return std::vector<L>{v[0] * 2.0f}; }, {x})[0];
  CHECK_THROWS_AS(grad(lazy::sum(looped), {x}), value_error);
  CHECK_THROWS_WITH(grad(lazy::sum(looped), {x}),
                    Catch::Contains("grad: while_loop is not differentiable"));
}

TEST_CASE("a training loop with grad compiles once and converges", "[autodiff]") {
  // Logistic regression on a separable problem: 1 compilation for the first step, none after.
  xlite::tensor<float> features(shape{64, 3});
  xlite::tensor<float> labels(shape{64, 1});
  for (std::int64_t r = 0; r < 64; ++r) {
    const float a = static_cast<float>(r % 8) - 3.5f, b = static_cast<float>(r / 8) - 3.5f;
    features(r, 0) = a;
    features(r, 1) = b;
    features(r, 2) = 1;
    labels(r, 0) = a + 2 * b > 0.5f ? 1.0f : 0.0f;
  }
  const L x = L::from(features), y = L::from(labels);
  L w = lazy::zeros(shape{3, 1});
  lazy::mark_step();
  const std::int64_t compiled_before = metrics::counter_value("UncachedCompile");
  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < 60; ++step) {
    const L p = lazy::sigmoid(lazy::matmul(x, w));
    const L loss = -lazy::mean(y * lazy::log(p + 1e-6f) + (1.0f - y) * lazy::log(1.0f - p + 1e-6f));
    w = w - grad(loss, {w})[0] * (0.5f / static_cast<float>(1 + step / 20)); // a changing rate: a parameter
    lazy::mark_step();
    if (step == 0) first_loss = loss.item<float>();
    last_loss = loss.item<float>();
  }
  CHECK(metrics::counter_value("UncachedCompile") - compiled_before == 1);
  CHECK(last_loss < 0.25f * first_loss);
}
