// Static expressions over lazy tensors (lazy/expression.hpp): built and simplified at
// compile time, traced in one call, one fused kernel, the static path's values.

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "xlite/compile/compiler.hpp"
#include "xlite/expr.hpp"
#include "xlite/lazy.hpp"

using namespace xlite;

namespace {

xlite::tensor<float> ramp(std::int64_t rows, std::int64_t cols, float scale) {
  xlite::tensor<float> t(shape{rows, cols});
  for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = scale * static_cast<float>(i % 37 - 18);
  return t;
}

compile::executable_ptr compiled(const lazy::tensor& t) {
  const std::vector<ir::node_ptr> outputs{t.node()};
  return compile::compile_graph(ir::capture(outputs).program);
}

} // namespace

TEST_CASE("a static expression over lazy leaves is one kernel with the static path's values", "[lazy][expression]") {
  const auto hx = ramp(67, 33, 0.25f), hw = ramp(67, 33, -0.5f);
  const auto hb = ramp(1, 33, 0.125f);
  const auto x = lazy::tensor::from(hx), w = lazy::tensor::from(hw), b = lazy::tensor::from(hb);

  const auto e = relu(lazy::leaf<float>(x) * lazy::leaf<float>(w) + lazy::leaf<float>(b)) * 0.5f - 2.0f;
  static_assert(expr::node_count_v<decltype(e)> == 10); // 3 lazy leaves, 2 scalars and 5 ops
  CHECK(expr::signature<decltype(lazy::leaf<float>(x) * 2.0f)>() == "mul(leaf<float32>,scalar<float32>)");
  lazy::tensor y = e;
  const xlite::tensor<float> expected = relu(hx * hw + hb) * 0.5f - 2.0f;

  const auto executable = compiled(y);
  CHECK(executable->kernels.size() == 1);
  const auto got = y.to_host<float>();
  REQUIRE(got.shape() == expected.shape());
  CHECK(std::memcmp(got.data(), expected.data(), sizeof(float) * static_cast<std::size_t>(got.size())) == 0);
}

TEST_CASE("a lazy expression is simplified at compile time and keeps its static element type", "[lazy][expression]") {
  const auto x = lazy::tensor::from(ramp(4, 5, 1.0f));
  const auto d = lazy::tensor::from(xlite::tensor<double>(shape{4, 5}, 2.0));

  // -(-x) is x: no op is traced.
  lazy::tensor same = -(-lazy::leaf<float>(x));
  CHECK(same.node() == x.node());

  lazy::tensor wide = xlite::cast<double>(lazy::leaf<float>(x)) * lazy::leaf<double>(d);
  CHECK(wide.type() == dtype::f64);
  CHECK(wide.to_host<double>()(3, 4) == 2.0 * static_cast<double>(ramp(4, 5, 1.0f)(3, 4)));
}

TEST_CASE("a lazy expression's scalars are graph parameters: a new value does not recompile", "[lazy][expression]") {
  const auto x = lazy::tensor::from(ramp(8, 8, 1.0f));
  xlite::mark_step();
  const std::int64_t before = metrics::counter_value("UncachedCompile");
  for (int step = 2; step < 6; ++step) {
    lazy::tensor y = lazy::leaf<float>(x) * static_cast<float>(step) + 3.0f;
    xlite::mark_step();
    CHECK(y.to_host<float>()(7, 7) == ramp(8, 8, 1.0f)(7, 7) * static_cast<float>(step) + 3.0f);
  }
  CHECK(metrics::counter_value("UncachedCompile") - before == 1);
}

TEST_CASE("lazy::leaf checks the tensor's dtype", "[lazy][expression]") {
  const auto i = lazy::tensor::from(xlite::tensor<std::int32_t>(shape{3}, 1));
  CHECK_THROWS_AS(lazy::leaf<float>(i), dtype_error);
  CHECK_THROWS_WITH(lazy::leaf<float>(i), Catch::Contains("lazy::leaf<float32>") && Catch::Contains("int32 (3,)"));
}
