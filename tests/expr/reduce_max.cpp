// The extrema of expr/reduce.hpp (max, min, argmax) of float and double against naive loops:
// random shapes of rank 0 to 5 (empty ones too), random axes, keepdims, fused broadcast
// inputs, every path, large inputs on 1 to 8 threads; NaN (max and min propagate it, argmax
// points at the first), ties (the first index), empty axes (a value_error), bad axes. All
// exact. The check is reduce_check.hpp's.

#include "reduce_check.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

using Catch::Matchers::Contains;
using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

TEST_CASE("reduce: max, min and argmax of float and double match the loop", "[reduce][accuracy]") {
  check_reduction<op::max, float>(27, true);
  check_reduction<op::max, double>(28, false);
  check_reduction<op::min, float>(29, false);
  check_reduction<op::min, double>(30, true);
  check_reduction<op::argmax, float>(31, true);
  check_reduction<op::argmax, double>(32, false);
}

// reduce.cpp's test of the same name, for max and min.
TEST_CASE("reduce: max and min over only axes of length 1 give the elements themselves", "[reduce]") {
  check_reduction<op::max, float>(64, true, selection::singleton_axes);
  check_reduction<op::min, double>(65, false, selection::singleton_axes);
}

// argmax walks the reduced axis innermost in its loop plan, with that axis's stride:
// argmax(x, {0}) of shape (3, 4) once read x's first row and the start of the second.
TEST_CASE("reduce: argmax over an axis followed by longer axes", "[reduce]") {
  check_reduction<op::argmax, float>(71, true, selection::strided_argmax);
  check_reduction<op::argmax, double>(72, false, selection::strided_argmax);
  const tensor<float> m{{1, 5, 5, 2}, {5, 5, 5, 5}, {0, 0, 0, 9}};
  xlite_test::for_each_isa_path([&](xlite::isa) {
    CHECK(xlite::argmax(m, {0}) == tensor<std::int64_t>{1, 0, 0, 2});
    CHECK(xlite::argmax(m, {-2}, xlite::keepdims) == tensor<std::int64_t>{{1, 0, 0, 2}});
  });
}

TEST_CASE("reduce: large max and argmax match the loop and give the same bits for 1, 2, 3, 5 and 8 threads",
          "[reduce][threads]") {
  check_large_reductions<op::max, op::argmax>(52);
}

TEST_CASE("reduce: NaN, infinities, ties and empty axes in max, min and argmax", "[reduce][special]") {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float inf = std::numeric_limits<float>::infinity();
  const tensor<float> ties{{1, 5, 5, 2}, {5, 5, 5, 5}, {0, 0, 0, 5}};
  const tensor<double> equal(shape{3, 41}, -2.0);
  const tensor<float> opposite{1, inf, 2, -inf, 3}, minus_infinities(shape{19}, -inf);
  const tensor<float> empty(shape{3, 0});
  const tensor<double> scalar(shape{}, 2.5);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    // NaN in a SIMD batch or in the tail: max and min propagate it, argmax points at the
    // first NaN (NaN counts as the largest, as in torch.argmax).
    for (const std::int64_t at : {0, 5, 17, 35, 36}) {
      tensor<float> x(shape{37}, 1.0f);
      x(at) = nan;
      x(20) = 7.0f;
      INFO("NaN at " << at);
      CHECK(std::isnan(xlite::max(x)()));
      CHECK(std::isnan(xlite::min(x)()));
      CHECK(xlite::argmax(x)() == at);
      x(36) = nan;
      CHECK(xlite::argmax(x)() == at);
    }
    // Signed zeros, one of them in a SIMD batch or in the tail: max is +0 and min -0 (IEEE
    // 754-2019 orders -0 below +0), whatever the order of the lanes and blocks.
    for (const std::int64_t at : {0, 17, 36}) {
      INFO("the odd zero at " << at);
      tensor<float> negative_zeros(shape{37}, -0.0f);
      negative_zeros(at) = 0.0f;
      CHECK_FALSE(std::signbit(xlite::max(negative_zeros)()));
      CHECK(std::signbit(xlite::min(negative_zeros)()));
      tensor<double> positive_zeros(shape{37}, 0.0);
      positive_zeros(at) = -0.0;
      CHECK(std::signbit(xlite::min(positive_zeros)()));
      CHECK_FALSE(std::signbit(xlite::max(positive_zeros)()));
    }
    // Ties: the first index, in the flattened order and along either axis.
    CHECK(xlite::argmax(ties)() == 1);
    CHECK(xlite::argmax(ties, {0}) == tensor<std::int64_t>{1, 0, 0, 1});
    CHECK(xlite::argmax(ties, {1}) == tensor<std::int64_t>{1, 0, 3});
    CHECK(xlite::argmax(ties, {-1}, xlite::keepdims) == tensor<std::int64_t>{1, 0, 3}.reshaped(shape{3, 1}));
    CHECK(xlite::argmax(equal, {1}) == tensor<std::int64_t>(shape{3}, 0));
    // Infinities.
    CHECK(xlite::max(opposite)() == inf);
    CHECK(xlite::min(opposite)() == -inf);
    CHECK(xlite::max(minus_infinities)() == -inf);
    CHECK(xlite::argmax(minus_infinities)() == 0);
    // Empty axes: a value_error naming the op; the non-empty axis: an empty result.
    CHECK_THROWS_AS(xlite::max(empty), xlite::value_error);
    CHECK_THROWS_WITH(xlite::max(empty, {1}), Contains("max: cannot reduce over an empty axis") && Contains("(3, 0)"));
    CHECK_THROWS_WITH(xlite::min(empty), Contains("min: cannot reduce over an empty axis"));
    CHECK_THROWS_WITH(xlite::argmax(empty, {1}), Contains("argmax: cannot reduce over an empty axis"));
    CHECK(xlite::max(empty, {0}).shape() == shape{0});
    // Rank 0.
    CHECK(xlite::max(scalar, {}, xlite::keepdims).shape() == shape{});
    CHECK(xlite::argmax(scalar)() == 0);
  });
}

TEST_CASE("reduce: bad axes of max, min and argmax are index_errors naming the op and the axis", "[reduce][errors]") {
  const tensor<float> x(shape{2, 3, 4});
  CHECK_THROWS_AS(xlite::max(x, {3}), xlite::index_error);
  CHECK_THROWS_WITH(xlite::max(x, {3}), Contains("max: axis 3 is out of range for rank 3"));
  CHECK_THROWS_WITH(xlite::min(x, {2, -1}), Contains("min: axis -1 is given twice"));
  CHECK_THROWS_WITH(xlite::min(x * x, {7}), Contains("min: axis 7"));
  CHECK_THROWS_WITH(xlite::argmax(x, {5}), Contains("argmax: axis 5"));
  CHECK_THROWS_AS(xlite::argmax(x, {0, 1}), xlite::index_error);
  CHECK_THROWS_WITH(xlite::argmax(x, {0, 1}), Contains("argmax") && Contains("one axis"));
}
