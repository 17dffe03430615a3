// pad, gather, index_select and one_hot against naive loops over multi-indices, on random
// shapes, axes and element sizes; and their errors, at trace time and, for indices out of
// range, when the step runs.

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "xlite/expr.hpp"
#include "xlite/lazy.hpp"

using namespace xlite;

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 g(20261123);
  return g;
}

std::int64_t uniform(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng()); }

shape random_shape(std::size_t rank, std::int64_t max_dim = 7) {
  std::vector<std::int64_t> dims;
  for (std::size_t a = 0; a < rank; ++a) dims.push_back(uniform(1, max_dim));
  return shape(dims);
}

template <class T>
xlite::tensor<T> random_tensor(const shape& s, std::int64_t lo = -100, std::int64_t hi = 100) {
  xlite::tensor<T> t(s);
  for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(uniform(lo, hi));
  return t;
}

std::vector<std::int64_t> unravel(std::int64_t i, const shape& s) {
  std::vector<std::int64_t> p(s.rank());
  for (std::size_t a = s.rank(); a-- > 0;) {
    p[a] = i % s[a];
    i /= s[a];
  }
  return p;
}

std::int64_t ravel(const std::vector<std::int64_t>& p, const shape& s) {
  std::int64_t i = 0;
  for (std::size_t a = 0; a < s.rank(); ++a) i = i * s[a] + p[a];
  return i;
}

template <class T>
void check_pad(const shape& in) {
  const auto host = random_tensor<T>(in);
  std::vector<ir::padding> widths;
  for (std::size_t a = 0; a < in.rank(); ++a) widths.push_back({uniform(0, 3), uniform(0, 3)});
  const T fill = static_cast<T>(7);
  const auto x = lazy::tensor::from(host);
  const lazy::tensor padded_on_device = lazy::pad(x, widths, 7);
  const xlite::tensor<T> padded = padded_on_device.to_host<T>();
  for (std::int64_t i = 0; i < padded.size(); ++i) {
    std::vector<std::int64_t> p = unravel(i, padded.shape());
    bool inside = true;
    for (std::size_t a = 0; a < in.rank(); ++a) {
      p[a] -= widths[a].low;
      inside = inside && p[a] >= 0 && p[a] < in[a];
    }
    INFO(in << " position " << i);
    CHECK(padded.data()[i] == (inside ? host.data()[ravel(p, in)] : fill));
  }
}

} // namespace

TEST_CASE("pad surrounds its operand with the fill on every axis", "[lazy][indexing]") {
  for (int trial = 0; trial < 12; ++trial) {
    const shape in = random_shape(static_cast<std::size_t>(uniform(1, 4)));
    check_pad<float>(in);
    check_pad<std::int64_t>(in);
    check_pad<std::uint8_t>(in);
    check_pad<bfloat16>(in);
  }
  const auto x = lazy::tensor::from(xlite::tensor<float>({{1.0f, 2.0f}}));
  const auto p = lazy::pad(x, {{1, 0}, {0, 2}}, -1.5f).to_host<float>();
  CHECK(p.shape() == shape{2, 4});
  CHECK(p(0, 0) == -1.5f);
  CHECK(p(1, 1) == 2.0f);
  CHECK(p(1, 3) == -1.5f);
  CHECK_THROWS_AS(lazy::pad(x, {{1, 0}}), index_error);
  CHECK_THROWS_WITH(lazy::pad(x, {{1, 0}, {-1, 0}}), Catch::Contains("pad") && Catch::Contains("negative"));
}

TEST_CASE("gather and index_select read along an axis at the given indices", "[lazy][indexing]") {
  for (int trial = 0; trial < 24; ++trial) {
    const std::size_t rank = static_cast<std::size_t>(uniform(1, 4));
    const shape in = random_shape(rank);
    const auto axis = static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(rank) - 1));
    const auto host = random_tensor<float>(in);
    const auto x = lazy::tensor::from(host);
    INFO(in << " axis " << axis);

    // gather: an index no larger than x off the axis, any length along it.
    std::vector<std::int64_t> index_dims(in.begin(), in.end());
    for (std::size_t a = 0; a < rank; ++a) index_dims[a] = a == axis ? uniform(0, 5) : uniform(1, in[a]);
    const auto index = random_tensor<std::int32_t>(shape(index_dims), 0, in[axis] - 1);
    const auto gathered = lazy::gather(x, static_cast<std::int64_t>(axis), lazy::tensor::from(index)).to_host<float>();
    REQUIRE(gathered.shape() == index.shape());
    for (std::int64_t i = 0; i < gathered.size(); ++i) {
      std::vector<std::int64_t> p = unravel(i, index.shape());
      p[axis] = index.data()[i];
      CHECK(gathered.data()[i] == host.data()[ravel(p, in)]);
    }

    // index_select: a 1-D index, repeats allowed.
    const auto positions = random_tensor<std::int64_t>(shape{uniform(0, 6)}, 0, in[axis] - 1);
    const auto selected =
        lazy::index_select(x, static_cast<std::int64_t>(axis), lazy::tensor::from(positions)).to_host<float>();
    for (std::int64_t i = 0; i < selected.size(); ++i) {
      std::vector<std::int64_t> p = unravel(i, selected.shape());
      p[axis] = positions.data()[p[axis]];
      CHECK(selected.data()[i] == host.data()[ravel(p, in)]);
    }
  }
}

TEST_CASE("gather and index_select report bad indices", "[lazy][indexing]") {
  const auto x = lazy::tensor::from(xlite::tensor<float>({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}));
  const auto two = lazy::tensor::from(xlite::tensor<std::int64_t>({0, 2}));
  CHECK_THROWS_WITH(lazy::gather(x, 1, two), Catch::Contains("gather") && Catch::Contains("(2,)"));
  CHECK_THROWS_AS(lazy::gather(x, 1, lazy::tensor::from(xlite::tensor<std::int64_t>(shape{3, 1}, 0))), shape_error);
  CHECK_THROWS_AS(lazy::index_select(x, 1, lazy::tensor::from(xlite::tensor<float>({0.0f}))), dtype_error);
  CHECK_THROWS_AS(lazy::index_select(x, 2, two), index_error);
  // Out of range is only known when the step runs: the tensor fails, naming the index.
  const auto beyond = lazy::index_select(x, 1, lazy::tensor::from(xlite::tensor<std::int64_t>({1, 3})));
  CHECK_THROWS_WITH(beyond.to_host<float>(), Catch::Contains("index_select: index 3 is out of range for axis 1"));
  const auto negative = lazy::gather(x, 0, lazy::tensor::from(xlite::tensor<std::int64_t>({{-1, 0, 0}})));
  CHECK_THROWS_AS(negative.to_host<float>(), index_error);
}

TEST_CASE("one_hot marks each index on a new last axis", "[lazy][indexing]") {
  const auto labels = xlite::tensor<std::int32_t>({{0, 3}, {2, 5}}); // 5 is outside 4 classes: a zero row
  const auto encoded = lazy::one_hot(lazy::tensor::from(labels), 4, dtype::f32).to_host<float>();
  REQUIRE(encoded.shape() == shape{2, 2, 4});
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 2; ++j) {
      for (std::int64_t c = 0; c < 4; ++c) CHECK(encoded(i, j, c) == (labels(i, j) == c ? 1.0f : 0.0f));
    }
  }
  CHECK(lazy::one_hot(lazy::tensor::from(labels), 4).type() == dtype::i64);
  CHECK_THROWS_AS(lazy::one_hot(lazy::tensor::from(xlite::tensor<float>({1.0f})), 4), dtype_error);
  CHECK_THROWS_AS(lazy::one_hot(lazy::tensor::from(labels), 0), value_error);
}
