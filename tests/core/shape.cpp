#include <xlite/core/shape.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <random>
#include <vector>

using Catch::Matchers::Contains;
using xlite::shape;

TEST_CASE("shape: rank, dimensions, element count, printing", "[shape]") {
  const shape scalar;
  CHECK(scalar.rank() == 0);
  CHECK(scalar.numel() == 1);
  CHECK(scalar.to_string() == "()");

  const shape s{2, 3, 4};
  CHECK(s.rank() == 3);
  CHECK(s[1] == 3);
  CHECK(s.numel() == 24);
  CHECK(s.to_string() == "(2, 3, 4)");
  CHECK(shape{5}.to_string() == "(5,)");
  CHECK(shape{4, 0, 2}.numel() == 0);
  CHECK(std::vector<std::int64_t>(s.begin(), s.end()) == std::vector<std::int64_t>{2, 3, 4});

  CHECK(shape(std::vector<std::size_t>{2, 3, 4}) == s);
  CHECK(shape{2, 3} != s);
}

TEST_CASE("shape: equality compares rank and every dimension; printing takes any size", "[shape]") {
  // Shapes compare as whole arrays, the dimensions past the rank being 0: a trailing 0 still
  // makes another shape, as does a leading 1.
  CHECK(shape{2, 3} != shape{2, 3, 0});
  CHECK(shape{2, 3, 0} == shape(std::vector<int>{2, 3, 0}));
  CHECK(shape{3} != shape{1, 3});
  CHECK(shape{} == shape());
  CHECK(shape{} != shape{0});
  CHECK(xlite::broadcast_shapes(shape{2, 1, 4}, shape{3, 1}, "add") == shape{2, 3, 4});
  for (std::size_t axis = 0; axis < xlite::max_rank; ++axis) { // each dimension counts
    std::vector<std::int64_t> dims(xlite::max_rank, 5);
    const shape reference(dims);
    dims[axis] = 6;
    CHECK(shape(dims) != reference);
  }
  CHECK(shape{0}.to_string() == "(0,)");
  CHECK(shape{10, 1, 0}.to_string() == "(10, 1, 0)");
  CHECK(shape({(1LL << 62) + 3, 0}).to_string() == "(4611686018427387907, 0)");
  CHECK(shape({0, INT64_MAX}).to_string() == "(0, 9223372036854775807)");
  CHECK(shape({1, 1, 1, 1, 1, 1, 1, 1}).numel() == 1);
  CHECK(shape({7, 11, 13}).numel() == 1001);
}

TEST_CASE("shape: invalid dimensions are shape_errors that say what is wrong", "[shape]") {
  CHECK_THROWS_WITH(shape({2, -1}), Contains("dimension 1 is negative (-1)"));
  CHECK_THROWS_WITH(shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), Contains("rank 9 exceeds the maximum rank 8"));
  CHECK_THROWS_AS(shape({1LL << 32, 1LL << 32}), xlite::shape_error);
  CHECK_THROWS_WITH(shape({1LL << 32, 1LL << 32}), Contains("more elements than int64 can count"));
  CHECK_THROWS_AS(shape(std::vector<std::uint64_t>{1ULL << 63}), xlite::shape_error);
  CHECK_NOTHROW(shape({0, 1LL << 62, 1LL << 62}));      // zero elements, however large the rest
  CHECK(shape({1LL << 62, 1LL << 62, 0}).numel() == 0); // no overflow on the way to the 0
  CHECK_NOTHROW(shape({1, 1, 1, 1, 1, 1, 1, 1}));
}

namespace {

// NumPy's broadcasting rule written the long way, as an independent reference: pad both
// shapes with leading 1s to the same rank, then take each dimension pair in turn.
std::vector<std::int64_t> reference_broadcast(std::vector<std::int64_t> a, std::vector<std::int64_t> b, bool& ok) {
  while (a.size() < b.size()) a.insert(a.begin(), 1);
  while (b.size() < a.size()) b.insert(b.begin(), 1);
  std::vector<std::int64_t> out(a.size());
  ok = true;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || b[i] == 1) {
      out[i] = a[i];
    } else if (a[i] == 1) {
      out[i] = b[i];
    } else {
      ok = false;
    }
  }
  return out;
}

} // namespace

TEST_CASE("broadcast_shapes agrees with NumPy's rule on random shapes", "[shape][property]") {
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> rank_of(0, 5);
  std::uniform_int_distribution<int> dim_of(0, 4); // small dims so 0s, 1s and clashes are common
  int compatible = 0;
  int incompatible = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<std::int64_t> a(rank_of(rng)), b(rank_of(rng));
    for (auto& d : a) d = dim_of(rng);
    for (auto& d : b) d = dim_of(rng);
    bool ok = false;
    const auto expected = reference_broadcast(a, b, ok);
    INFO(shape(a) << " with " << shape(b));
    if (ok) {
      ++compatible;
      CHECK(xlite::broadcast_shapes(shape(a), shape(b), "add") == shape(expected));
      CHECK(xlite::broadcast_shapes(shape(b), shape(a), "add") == shape(expected));
    } else {
      ++incompatible;
      CHECK_THROWS_AS(xlite::broadcast_shapes(shape(a), shape(b), "add"), xlite::shape_error);
    }
  }
  CHECK(compatible > 1000); // both branches were really exercised
  CHECK(incompatible > 1000);
}

TEST_CASE("broadcast_shapes of three shapes is NumPy's rule applied twice", "[shape][property]") {
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> rank_of(0, 4);
  std::uniform_int_distribution<int> dim_of(0, 3);
  int compatible = 0;
  int incompatible = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<std::int64_t> a(rank_of(rng)), b(rank_of(rng)), c(rank_of(rng));
    for (auto* v : {&a, &b, &c}) {
      for (auto& d : *v) d = dim_of(rng);
    }
    bool first_ok = false, second_ok = false;
    const auto expected = reference_broadcast(reference_broadcast(a, b, first_ok), c, second_ok);
    const shape sa(a), sb(b), sc(c);
    const std::array<const shape*, 3> shapes{&sa, &sb, &sc};
    INFO(sa << ", " << sb << " and " << sc);
    if (first_ok && second_ok) {
      ++compatible;
      CHECK(xlite::broadcast_shapes(shapes, "where") == shape(expected));
    } else {
      ++incompatible;
      CHECK_THROWS_AS(xlite::broadcast_shapes(shapes, "where"), xlite::shape_error);
    }
  }
  CHECK(compatible > 1000);
  CHECK(incompatible > 1000);
}

TEST_CASE("broadcast_shapes: the error names the op, both shapes and the dimension", "[shape]") {
  CHECK_THROWS_WITH(xlite::broadcast_shapes(shape{2, 3}, shape{4}, "mul"),
                    Contains("mul: shapes (2, 3) and (4,) cannot be broadcast together") &&
                        Contains("dimension -1 is 3 in (2, 3) and 4 in (4,)"));
  // Of three shapes, the error names all and the two that disagree: dimension -1's 5 comes
  // from (5,), not from (4, 5), the broadcast of the first two.
  const std::array<shape, 3> three{shape{4, 1}, shape{5}, shape{2, 1, 6}};
  const std::array<const shape*, 3> pointers{&three[0], &three[1], &three[2]};
  CHECK_THROWS_WITH(xlite::broadcast_shapes(pointers, "where"),
                    Contains("where: shapes (4, 1), (5,) and (2, 1, 6) cannot be broadcast together: "
                             "dimension -1 is 5 in (5,) and 6 in (2, 1, 6)"));
  // Rank 0 broadcasts against anything, so it is not named: the list has only the others.
  const std::array<shape, 5> with_scalars{shape{}, shape{2, 3}, shape{}, shape{4}, shape{}};
  const std::array<const shape*, 5> scalar_pointers{&with_scalars[0], &with_scalars[1], &with_scalars[2],
                                                    &with_scalars[3], &with_scalars[4]};
  CHECK_THROWS_WITH(xlite::broadcast_shapes(scalar_pointers, "clamp"),
                    Contains("clamp: shapes (2, 3) and (4,) cannot be broadcast together: "
                             "dimension -1 is 3 in (2, 3) and 4 in (4,)"));
  CHECK(xlite::broadcast_shapes(shape{}, shape{3, 1}, "add") == shape{3, 1});
  CHECK(xlite::broadcast_shapes(shape{0}, shape{1}, "add") == shape{0});
  CHECK(xlite::broadcast_shapes(shape{8, 1, 6, 1}, shape{7, 1, 5}, "add") == shape{8, 7, 6, 5});
}

TEST_CASE("normalize_axis accepts -rank to rank-1 and names the op otherwise", "[shape]") {
  CHECK(xlite::normalize_axis(-1, 3, "sum") == 2);
  CHECK(xlite::normalize_axis(-3, 3, "sum") == 0);
  CHECK(xlite::normalize_axis(2, 3, "sum") == 2);
  CHECK_THROWS_AS(xlite::normalize_axis(3, 3, "sum"), xlite::index_error);
  CHECK_THROWS_WITH(xlite::normalize_axis(-4, 3, "sum"),
                    Contains("sum: axis -4 is out of range for rank 3 (valid: -3 to 2)"));
  CHECK_THROWS_WITH(xlite::normalize_axis(0, 0, "mean"), Contains("mean: axis 0 given for a rank-0 tensor"));
}
