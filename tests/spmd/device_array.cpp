#include <xlite/ir/device_array.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "device_ids.hpp"

using Catch::Matchers::Contains;
using xlite::ir::device_array;

TEST_CASE("device_array: indexing, finding and printing, as numpy", "[device_array]") {
  const device_array a({2, 3}, {5, 1, 4, 0, 2, 3});
  CHECK(a.rank() == 2);
  CHECK(a.size() == 6);
  const std::int64_t at12[] = {1, 2};
  CHECK(a[at12] == 3);
  CHECK(a.index_of(4) == std::vector<std::int64_t>{0, 2});
  CHECK(a.index_of(0) == std::vector<std::int64_t>{1, 0});
  CHECK(a.index_of(9).empty());
  CHECK(a.to_string() == "[[5, 1, 4], [0, 2, 3]]");
  CHECK(device_array({6}, iota_ids(6)).to_string() == "[0, 1, 2, 3, 4, 5]");
  CHECK(device_array({}, {7}).to_string() == "7");
  CHECK(a.reshape({3, 2}).to_string() == "[[5, 1], [4, 0], [2, 3]]");
  CHECK(a.reshape({6}) == device_array({6}, {5, 1, 4, 0, 2, 3}));
  CHECK(a != a.reshape({3, 2}));
}

TEST_CASE("device_array: transpose moves each id to the permuted index", "[device_array]") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    const std::size_t rank = 1 + rng() % 4;
    std::vector<std::int64_t> dims(rank);
    for (auto& d : dims) d = 1 + static_cast<std::int64_t>(rng() % 4);
    const std::int64_t n = std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
    std::vector<std::int64_t> ids = iota_ids(n);
    std::shuffle(ids.begin(), ids.end(), rng);
    const device_array a(dims, ids);
    std::vector<std::size_t> order(rank);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const device_array t = a.transpose(order);
    for (std::size_t k = 0; k < rank; ++k) CHECK(t.dims()[k] == dims[order[k]]);
    for (const std::int64_t id : ids) { // result[i] == a[j] where j[order[k]] = i[k]
      const std::vector<std::int64_t> at = t.index_of(id);
      std::vector<std::int64_t> source(rank);
      for (std::size_t k = 0; k < rank; ++k) source[order[k]] = at[k];
      CHECK(a[source] == id);
    }
  }
}

TEST_CASE("device_array: ids that do not fill the dimensions are shape_errors", "[device_array]") {
  CHECK_THROWS_AS(device_array({2, 3}, {0, 1, 2}), xlite::shape_error);
  CHECK_THROWS_WITH(device_array({2, 3}, {0, 1, 2}), Contains("3 device ids do not fill dimensions [2, 3]"));
  CHECK_THROWS_WITH(device_array({2, 0}, {}), Contains("dimensions [2, 0] must be positive"));
  CHECK_THROWS_AS(device_array({1LL << 40, 1LL << 40}, {0}), xlite::shape_error); // the product overflows
}
