// The fused loop of expr/evaluate.hpp on the edges of its domain: empty and rank-0 tensors,
// expressions that own the temporaries they were built from, shared subexpressions
// (computed once only where the same leaves repeat), each op rounded on its own and nested
// wheres on one condition.

#include "reference.hpp"

#include <xlite/expr/xtensor.hpp>

#include <catch2/catch.hpp>

#include <xtensor/xadapt.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

TEST_CASE("evaluate: empty tensors give empty results of the broadcast shape", "[evaluate][empty]") {
  const tensor<float> empty(shape{3, 0, 2}), row{1.5f, 2.5f}, scalar(shape{}, 4.0f);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    const tensor<float> a = empty * row + scalar;
    CHECK(a.shape() == shape{3, 0, 2});
    CHECK(a.size() == 0);
    const tensor<float> b = xlite::exp(tensor<float>(shape{0}));
    CHECK(b.shape() == shape{0});
    const tensor<bool> m = empty > scalar;
    CHECK(m.shape() == shape{3, 0, 2});
    // (0, 1) against (1, 5): zero rows of five.
    const tensor<float> c = tensor<float>(shape{0, 1}) - tensor<float>(shape{1, 5}, 2.0f);
    CHECK(c.shape() == shape{0, 5});
    // Assigning an empty result replaces a non-empty tensor's shape.
    tensor<float> d{1, 2, 3};
    d = empty * 2.0f;
    CHECK(d.shape() == shape{3, 0, 2});
    tensor<float> e(shape{0});
    e = row * 2.0f;
    CHECK(e == tensor<float>{3.0f, 5.0f});
  });
}

TEST_CASE("evaluate: rank-0 tensors are scalars that broadcast", "[evaluate][rank0]") {
  const tensor<float> two(shape{}, 2.0f), three(shape{}, 3.0f);
  const tensor<double> x{1.0, -2.0, 4.0};
  xlite_test::for_each_isa_path([&](xlite::isa) {
    const tensor<float> five = two + three;
    CHECK(five.shape() == shape{});
    CHECK(five() == 5.0f);
    const tensor<float> e = xlite::exp(two) * three;
    CHECK(e.rank() == 0);
    CHECK(e() == Approx(std::exp(2.0f) * 3.0f).epsilon(1e-6));
    const tensor<double> y = x * xlite::cast<double>(two) - 1.0;
    CHECK(y == tensor<double>{1.0, -5.0, 7.0});
    const tensor<bool> m = two < three;
    CHECK(m.shape() == shape{});
    CHECK(m() == true);
    const tensor<float> s = xlite::scalar(2.0f) * three; // a scalar leaf and a rank-0 tensor
    CHECK(s.shape() == shape{});
    CHECK(s() == 6.0f);
  });
}

TEST_CASE("evaluate: an expression keeps the temporaries it was built from", "[evaluate][lifetime]") {
  const tensor<float> x{1, 2, 3};
  const auto e = x * tensor<float>{10, 20, 30} + xlite::exp(tensor<float>(shape{}, 0.0f));
  const auto copy = e;
  xlite_test::for_each_isa_path([&](xlite::isa) {
    CHECK(tensor<float>(e) == tensor<float>{11, 41, 91});
    CHECK(xlite::eval(copy) == tensor<float>{11, 41, 91});
  });
}

TEST_CASE("evaluate: a repeated subexpression gives the values of the unshared expression", "[evaluate][cse]") {
  // Ops that round once each, and no product that is then added to (which a compiler may
  // contract into an fma in one expression and not in the other, see assign.cpp).
  rng g(17);
  const tensor<float> a = random_tensor<float>(g, shape{4, 33}, -2, 2), b = random_tensor<float>(g, shape{33}, -2, 2);
  const tensor<float> c = random_tensor<float>(g, shape{4, 1}, -2, 2);
  const tensor<float> ab = a - b, cb = c - b;
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    const auto shared = (a - b) * xlite::sqrt(xlite::abs(a - b)) / ((a - b) + 3.0f);
    CHECK(xlite::expr::shared_subexpression_count(shared) == 1);
    CHECK(bitwise_equal(tensor<float>(shared), tensor<float>(ab * xlite::sqrt(xlite::abs(ab)) / (ab + 3.0f))));
    // The same node types over other tensors (broadcast differently) are computed apart.
    const auto distinct = (a - b) * xlite::sqrt(xlite::abs(c - b)) / ((a - b) + 3.0f);
    CHECK(xlite::expr::shared_subexpression_count(distinct) == 0);
    CHECK(bitwise_equal(tensor<float>(distinct), tensor<float>(ab * xlite::sqrt(xlite::abs(cb)) / (ab + 3.0f))));
  });
}

TEST_CASE("evaluate: an op's value is rounded before the op that uses it", "[evaluate][rounding]") {
  // gelu ends in a product, and exp in one on paths without AVX-512's vscalefps: inlined
  // into the loop, g++ would fuse that product with the addition or the reduction that
  // uses it on FMA targets. The fused results must equal those of the op evaluated alone.
  // x reaches below -87, where exp is subnormal. 3 x 37 ends in a masked batch on every
  // path; the sums take rows of 48, whole batches on every path, because a reduction's
  // batches start at each row and an element-wise loop's at the first element, and sin's
  // range reduction is chosen for a whole batch.
  rng g(31);
  const tensor<float> x = random_tensor<float>(g, shape{3, 37}, -100, 10);
  const tensor<float> y = random_tensor<float>(g, shape{3, 37}, -2, 2);
  const tensor<float> rows = random_tensor<float>(g, shape{4, 48}, -100, 10);
  const auto check = [&](const char* name, auto f) {
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO(name << " on " << path_name());
      const tensor<float> alone = f(x);
      CHECK(bitwise_equal(tensor<float>(f(x) + y), tensor<float>(alone + y)));
      CHECK(bitwise_equal(tensor<float>(y - f(x)), tensor<float>(y - alone)));
      const tensor<float> rows_alone = f(rows);
      CHECK(bitwise_equal(xlite::sum(f(rows), {0}), xlite::sum(rows_alone, {0})));
      CHECK(bitwise_equal(xlite::sum(f(rows), {1}), xlite::sum(rows_alone, {1})));
    });
  };
  check("gelu", [](const auto& t) { return xlite::gelu(t); });
  check("exp", [](const auto& t) { return xlite::exp(t); });
  check("sigmoid", [](const auto& t) { return xlite::sigmoid(t); });
  check("tanh", [](const auto& t) { return xlite::tanh(t); });
  check("sin", [](const auto& t) { return xlite::sin(t); });
  check("log1p of abs", [](const auto& t) { return xlite::log1p(xlite::abs(t)); });
  check("pow", [](const auto& t) { return xlite::pow(xlite::abs(t), 0.75f); });
}

TEST_CASE("evaluate: a where in a branch of a where on the same condition is merged", "[evaluate][where]") {
  // The merged branch (b below) holds NaN: a result that took it would show. The naive
  // loop picks a or d by the condition alone.
  rng g(23);
  const shape s{3, 37};
  const tensor<float> x = random_tensor<float>(g, s, -1, 1), y = random_tensor<float>(g, s, -1, 1);
  const tensor<float> a = random_tensor<float>(g, s, -2, 2), d = random_tensor<float>(g, shape{37}, -2, 2);
  const tensor<float> b(s, std::nanf(""));
  const auto c = x > 0.0f;
  tensor<float> expected(s);
  for (std::int64_t i = 0; i < s[0]; ++i) {
    for (std::int64_t j = 0; j < s[1]; ++j) expected(i, j) = x(i, j) > 0.0f ? a(i, j) : d(j);
  }
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    const auto in_true = xlite::where(c, xlite::where(c, a, b), d);
    CHECK(xlite::expr::merged_where_count(in_true) == 1);
    CHECK(bitwise_equal(tensor<float>(in_true), expected));
    const auto in_false = xlite::where(c, a, xlite::where(c, b, d));
    CHECK(xlite::expr::merged_where_count(in_false) == 1);
    CHECK(bitwise_equal(tensor<float>(in_false), expected));
    const auto in_both = xlite::where(c, xlite::where(c, a, b), xlite::where(c, b, d));
    CHECK(xlite::expr::merged_where_count(in_both) == 2);
    CHECK(bitwise_equal(tensor<float>(in_both), expected));
  });
  SECTION("a condition of the same type over other tensors is not merged") {
    const auto other = y > 0.0f;
    const auto e = xlite::where(c, xlite::where(other, a, b), d);
    CHECK(xlite::expr::merged_where_count(e) == 0);
    const tensor<float> got = e;
    for (std::int64_t i = 0; i < s[0]; ++i) {
      for (std::int64_t j = 0; j < s[1]; ++j) {
        const float want = x(i, j) > 0.0f ? (y(i, j) > 0.0f ? a(i, j) : b(i, j)) : d(j);
        CHECK(std::bit_cast<std::uint32_t>(got(i, j)) == std::bit_cast<std::uint32_t>(want));
      }
    }
  }
}

TEST_CASE("evaluate: leaves over the same memory with different shapes are not one subexpression", "[evaluate][cse]") {
  // xlite::adapt of two xtensor adaptors of one buffer: (3,) is its first row, (2, 3) all of
  // it. exp of each is the same node type with the same data pointer, but not the same values.
  std::vector<float> buffer{0, 1, 2, 3, 4, 5};
  const auto row = xt::adapt(buffer.data(), 3, xt::no_ownership(), std::vector<std::size_t>{3});
  const auto matrix = xt::adapt(buffer.data(), 6, xt::no_ownership(), std::vector<std::size_t>{2, 3});
  const auto e = xlite::exp(xlite::adapt(row)) + xlite::exp(xlite::adapt(matrix));
  CHECK(xlite::expr::shared_subexpression_count(e) == 0);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    const tensor<float> got = e;
    for (std::size_t r = 0; r < 2; ++r) {
      for (std::size_t k = 0; k < 3; ++k) {
        const float want = std::exp(buffer[k]) + std::exp(buffer[3 * r + k]);
        INFO("element (" << r << ", " << k << "): " << got(r, k) << ", want " << want);
        CHECK(ulp_distance(got(r, k), want) <= 4);
      }
    }
  });
}
