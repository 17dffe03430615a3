#include <xlite/expr.hpp>
#include <xlite/expr/matmul.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using Catch::Matchers::Contains;
using xlite::bfloat16;
using xlite::shape;
using xlite::tensor;

namespace {

tensor<float> random_tensor(const shape& s, std::mt19937& rng) {
  tensor<float> t(s);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (float& x : t) x = value(rng);
  return t;
}

// NumPy's matmul in double, element by element, from the definition: 1-D operands as a row
// (left) or column (right), batch dimensions broadcast.
std::vector<double> reference_matmul(const tensor<float>& a, bool a_t, const tensor<float>& b, bool b_t,
                                     const shape& result) {
  const auto dims = [](const shape& s, bool t, bool left) { // (batch shape, rows, cols) of op(X)
    std::vector<std::int64_t> batch(s.begin(), s.end());
    std::int64_t rows = 1, cols = 1;
    if (s.rank() == 1) {
      (left ? cols : rows) = s[0];
      batch.clear();
    } else {
      rows = s[s.rank() - 2];
      cols = s[s.rank() - 1];
      batch.resize(s.rank() - 2);
      if (t) std::swap(rows, cols);
    }
    return std::tuple{batch, rows, cols};
  };
  const auto [a_batch, m, k] = dims(a.shape(), a_t, true);
  const auto [b_batch, k2, n] = dims(b.shape(), b_t, false);
  REQUIRE(k == k2);
  if (result.numel() == 0) return {};
  const std::int64_t entries = result.numel() / (m * n);
  const std::size_t batch_rank = result.rank() - (a.shape().rank() >= 2) - (b.shape().rank() >= 2);
  std::vector<double> out(static_cast<std::size_t>(result.numel()));
  for (std::int64_t e = 0; e < entries; ++e) {
    // The batch coordinate of entry e, then each operand's matrix offset under broadcasting.
    std::vector<std::int64_t> coordinate(batch_rank);
    for (std::int64_t rest = e, d = static_cast<std::int64_t>(batch_rank) - 1; d >= 0; --d) {
      coordinate[static_cast<std::size_t>(d)] = rest % result[static_cast<std::size_t>(d)];
      rest /= result[static_cast<std::size_t>(d)];
    }
    const auto offset = [&](const std::vector<std::int64_t>& own, std::int64_t matrix) {
      std::int64_t index = 0;
      for (std::size_t i = 0; i < own.size(); ++i) {
        const std::size_t d = batch_rank - own.size() + i;
        index = index * own[i] + (own[i] == 1 ? 0 : coordinate[d]);
      }
      return index * matrix;
    };
    const std::int64_t a0 = offset(a_batch, m * k);
    const std::int64_t b0 = offset(b_batch, k * n);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          const float x = a.data()[a0 + (a_t ? q * m + i : i * k + q)];
          const float y = b.data()[b0 + (b_t ? j * k + q : q * n + j)];
          sum += static_cast<double>(x) * y;
        }
        out[static_cast<std::size_t>((e * m + i) * n + j)] = sum;
      }
    }
  }
  return out;
}

void check_close(const tensor<float>& got, const std::vector<double>& expected, std::int64_t k) {
  REQUIRE(static_cast<std::size_t>(got.size()) == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    REQUIRE(std::fabs(got.data()[i] - expected[i]) <= (k + 2) * 0x1p-24 * k + 1e-30);
  }
}

} // namespace

TEST_CASE("matmul follows NumPy's rules for vectors, batches and broadcasting", "[matmul]") {
  std::mt19937 rng(5);
  struct case_t {
    shape a, b;
    bool a_t, b_t;
    shape result;
  };
  const case_t cases[] = {
      {{3, 4}, {4, 5}, false, false, {3, 5}},
      {{4}, {4, 5}, false, false, {5}},
      {{3, 4}, {4}, false, false, {3}},
      {{4}, {4}, false, false, {}},
      {{2, 3, 4}, {4, 5}, false, false, {2, 3, 5}},
      {{4, 5}, {6, 5, 2}, false, false, {6, 4, 2}},
      {{2, 1, 3, 4}, {5, 4, 6}, false, false, {2, 5, 3, 6}},
      {{4, 3}, {4, 5}, true, false, {3, 5}},
      {{3, 4}, {5, 4}, false, true, {3, 5}},
      {{7, 4, 33}, {7, 17, 4}, true, true, {7, 33, 17}},
      {{0, 4}, {4, 5}, false, false, {0, 5}},
      {{3, 0}, {0, 5}, false, false, {3, 5}},
      {{0, 2, 3}, {3, 4}, false, false, {0, 2, 4}},
      {{1, 3, 4}, {0, 5, 4}, false, true, {0, 3, 5}},
  };
  for (const case_t& c : cases) {
    INFO("a " << c.a << (c.a_t ? " transposed" : "") << ", b " << c.b << (c.b_t ? " transposed" : ""));
    const tensor<float> a = random_tensor(c.a, rng);
    const tensor<float> b = random_tensor(c.b, rng);
    tensor<float> got;
    if (c.a_t && c.b_t) {
      got = xlite::matmul(xlite::transposed(a), xlite::transposed(b));
    } else if (c.a_t) {
      got = xlite::matmul(xlite::transposed(a), b);
    } else if (c.b_t) {
      got = xlite::matmul(a, xlite::transposed(b));
    } else {
      got = xlite::matmul(a, b);
    }
    CHECK(got.shape() == c.result);
    const std::int64_t k = c.a_t ? c.a[c.a.rank() - 2] : c.a[c.a.rank() - 1];
    check_close(got, reference_matmul(a, c.a_t, b, c.b_t, c.result), k);
  }
}

TEST_CASE("matmul with an element-wise epilogue is one GEMM and equals the two-pass result", "[matmul]") {
  std::mt19937 rng(6);
  for (const auto& [m, n, k] : {std::tuple{37, 53, 29}, std::tuple{300, 700, 90}, std::tuple{1, 1000, 3}}) {
    const tensor<float> a = random_tensor({m, k}, rng);
    const tensor<float> w = random_tensor({k, n}, rng);
    const tensor<float> bias = random_tensor({n}, rng);
    const auto before = xlite::expr::deferred_evaluations();
    const tensor<float> fused = xlite::relu(xlite::matmul(a, w) + bias);
    const auto after = xlite::expr::deferred_evaluations();
    CHECK(after.fused == before.fused + 1);
    CHECK(after.materialized == before.materialized);
    const tensor<float> product = xlite::matmul(a, w);
    const tensor<float> two_passes = xlite::relu(product + bias);
    CHECK(std::memcmp(fused.data(), two_passes.data(), sizeof(float) * static_cast<std::size_t>(fused.size())) == 0);
  }
  // A matmul broadcast against a larger shape cannot write the output: computed first.
  const tensor<float> a = random_tensor({3, 4}, rng);
  const tensor<float> w = random_tensor({4, 5}, rng);
  const tensor<float> big = random_tensor({2, 3, 5}, rng);
  const auto before = xlite::expr::deferred_evaluations();
  const tensor<float> sum = xlite::matmul(a, w) + big;
  CHECK(xlite::expr::deferred_evaluations().materialized == before.materialized + 1);
  const tensor<float> product = xlite::matmul(a, w);
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t i = 0; i < 3; ++i) {
      for (std::int64_t j = 0; j < 5; ++j) CHECK(sum(b, i, j) == product(i, j) + big(b, i, j));
    }
  }
}

TEST_CASE("matmul reads its operands safely when the result overwrites one", "[matmul]") {
  std::mt19937 rng(7);
  tensor<float> a = random_tensor({16, 16}, rng);
  const tensor<float> b = random_tensor({16, 16}, rng);
  const tensor<float> expected = xlite::matmul(a, b);
  a = xlite::matmul(a, b); // a is read by the GEMM: through a new buffer
  CHECK(std::memcmp(a.data(), expected.data(), sizeof(float) * 256) == 0);
  tensor<float> c = random_tensor({16, 16}, rng);
  const tensor<float> c_before = c;
  c = xlite::relu(xlite::matmul(a, b) + c); // c is an element-wise operand: the GEMM must not overwrite it first
  const tensor<float> product = xlite::matmul(a, b);
  for (std::int64_t i = 0; i < 16; ++i) {
    for (std::int64_t j = 0; j < 16; ++j) CHECK(c(i, j) == std::max(product(i, j) + c_before(i, j), 0.0f));
  }
}

TEST_CASE("matmul takes expressions, bfloat16 and reductions", "[matmul]") {
  std::mt19937 rng(8);
  const tensor<float> a = random_tensor({5, 6}, rng);
  const tensor<float> b = random_tensor({6, 7}, rng);
  const tensor<float> doubled = a * 2.0f;
  const tensor<float> from_expression = xlite::matmul(a * 2.0f, b);
  const tensor<float> from_tensor = xlite::matmul(doubled, b);
  CHECK(std::memcmp(from_expression.data(), from_tensor.data(), sizeof(float) * 35) == 0);

  // bf16: the product of the rounded values, accumulated in float; the default result is
  // bfloat16, matmul<float> keeps the float accumulator.
  const tensor<bfloat16> a16 = xlite::cast<bfloat16>(a);
  const tensor<bfloat16> b16 = xlite::cast<bfloat16>(b);
  const tensor<float> wide = xlite::matmul<float>(a16, b16);
  const tensor<bfloat16> narrow = xlite::matmul(a16, b16);
  const tensor<float> a_rounded = xlite::cast<float>(a16);
  const tensor<float> b_rounded = xlite::cast<float>(b16);
  const std::vector<double> exact = reference_matmul(a_rounded, false, b_rounded, false, {5, 7});
  for (std::size_t i = 0; i < exact.size(); ++i) {
    CHECK(std::fabs(wide.data()[i] - exact[i]) <= 8 * 0x1p-24 * 6);
    CHECK(narrow.data()[i].bits() == bfloat16(wide.data()[i]).bits());
  }

  const tensor<float> row_sums = xlite::sum(xlite::matmul(a, b), {1});
  const tensor<float> product = xlite::matmul(a, b);
  const tensor<float> expected = xlite::sum(product, {1});
  CHECK(std::memcmp(row_sums.data(), expected.data(), sizeof(float) * 5) == 0);
  // With no axes, as with every axis named: the reduction of the computed product.
  const float total = xlite::sum(xlite::matmul(a, b))();
  const float total_expected = xlite::sum(product, {})();
  CHECK(std::memcmp(&total, &total_expected, sizeof(float)) == 0);
  CHECK(xlite::argmax(xlite::matmul(a, b))() == xlite::argmax(product, {})());
  CHECK(xlite::expr::signature<decltype(xlite::matmul(xlite::transposed(a), b) * 2.0f)>() ==
        "mul(matmul<float32>(transposed(tensor<float32>),tensor<float32>),scalar<float32>)");
}

TEST_CASE("matmul's shape errors name both shapes", "[matmul]") {
  const tensor<float> a(shape{2, 3});
  const tensor<float> b(shape{4, 5});
  CHECK_THROWS_AS(xlite::matmul(a, b), xlite::shape_error);
  CHECK_THROWS_WITH(xlite::matmul(a, b),
                    Contains("matmul: shapes (2, 3) and (4, 5)") && Contains("3 columns") && Contains("4 rows"));
  const tensor<float> s(shape{});
  CHECK_THROWS_WITH(xlite::matmul(s, b), Contains("scalar (rank 0)"));
  const tensor<float> v(shape{3});
  CHECK_THROWS_WITH(xlite::matmul(xlite::transposed(v), a), Contains("transposed() needs at least 2 dimensions"));
  const tensor<float> x(shape{2, 3, 4});
  const tensor<float> y(shape{3, 4, 5});
  CHECK_THROWS_WITH(xlite::matmul(x, y), Contains("matmul"));
}
