#include <xlite/ir/sharding.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <random>
#include <unordered_set>
#include <vector>

#include "device_ids.hpp"

using Catch::Matchers::Contains;
using xlite::op;
using xlite::shape;
using xlite::ir::device_array;
using xlite::ir::sharding;
using xlite::ir::subgroup;

TEST_CASE("sharding: XLA's text for replicated, tiled, partially replicated and partial", "[sharding]") {
  CHECK(sharding::replicated().to_string() == "{replicated}");
  CHECK(sharding::tiled(device_array({2, 2}, {0, 1, 2, 3})).to_string() == "{devices=[2,2]0,1,2,3}");
  CHECK(sharding::tiled(device_array({2, 1, 2}, {0, 2, 1, 3}), {subgroup::replicated}).to_string() ==
        "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}");
  CHECK(sharding::tiled(device_array({1, 2}, {0, 1}), {subgroup::partial}).to_string() ==
        "{devices=[1,2]0,1 last_tile_dims={partial_sum}}");
  CHECK(sharding::tiled(device_array({2, 2, 2}, iota_ids(8)), {subgroup::partial, subgroup::replicated}, op::max)
            .to_string() == "{devices=[2,2,2]0,1,2,3,4,5,6,7 last_tile_dims={partial_max, replicated}}");
}

TEST_CASE("sharding: equal placements are equal shardings, with equal hashes", "[sharding]") {
  // One tile, replicas everywhere: replicated, however it was written.
  CHECK(sharding::tiled(device_array({1, 1, 4}, {3, 1, 2, 0}), {subgroup::replicated}) == sharding::replicated());
  CHECK(sharding::tiled(device_array({1}, {0})) == sharding::replicated());
  // Subgroups of one device are dropped.
  const sharding rows = sharding::tiled(device_array({4, 1}, {0, 1, 2, 3}));
  CHECK(sharding::tiled(device_array({4, 1, 1}, {0, 1, 2, 3}), {subgroup::replicated}) == rows);
  CHECK(sharding::tiled(device_array({4, 1, 1, 1}, {0, 1, 2, 3}), {subgroup::partial, subgroup::replicated}) == rows);
  CHECK(std::hash<sharding>{}(sharding::tiled(device_array({4, 1, 1}, {0, 1, 2, 3}), {subgroup::replicated})) ==
        std::hash<sharding>{}(rows));
  // The reduction of a sharding without partial values does not matter.
  CHECK(sharding::tiled(device_array({4, 1}, {0, 1, 2, 3}), {}, op::max) == rows);

  // What differs is unequal, and hashes differently.
  const std::vector<sharding> distinct = {
      sharding::replicated(),
      rows,
      sharding::tiled(device_array({4, 1}, {1, 0, 2, 3})),
      sharding::tiled(device_array({1, 4}, {0, 1, 2, 3})),
      sharding::tiled(device_array({2, 1, 2}, {0, 1, 2, 3}), {subgroup::replicated}),
      sharding::tiled(device_array({2, 1, 2}, {0, 1, 2, 3}), {subgroup::partial}),
      sharding::tiled(device_array({2, 1, 2}, {0, 1, 2, 3}), {subgroup::partial}, op::min),
      sharding::tiled(device_array({2, 2}, {0, 1, 2, 3}), {subgroup::partial}), // rank 1, not 2
  };
  std::unordered_set<std::uint64_t> hashes;
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    hashes.insert(distinct[i].hash());
    for (std::size_t j = 0; j < distinct.size(); ++j) CHECK((distinct[i] == distinct[j]) == (i == j));
  }
  CHECK(hashes.size() == distinct.size());
}

TEST_CASE("sharding: counts, tile assignment and placements", "[sharding]") {
  const sharding s =
      sharding::tiled(device_array({2, 1, 2, 2}, {7, 6, 5, 4, 3, 2, 1, 0}), {subgroup::partial, subgroup::replicated});
  CHECK(s.tile_count(0) == 2);
  CHECK(s.tile_count(1) == 1);
  CHECK(s.tile_count(5) == 1);
  CHECK(s.partial_count() == 2);
  CHECK(s.replica_count() == 2);
  CHECK(s.is_partial());
  CHECK_FALSE(s.is_replicated());
  CHECK(s.tile_assignment() == device_array({2, 1, 2, 2}, {7, 6, 5, 4, 3, 2, 1, 0}));
  CHECK(s.placement_of(4, 2) == xlite::ir::placement{.tile = {0, 0}, .partial_index = 1, .replica_index = 1});
  CHECK(s.placement_of(1, 2) == xlite::ir::placement{.tile = {1, 0}, .partial_index = 1, .replica_index = 0});
  CHECK_FALSE(s.placement_of(8, 2).has_value());

  const sharding r = sharding::replicated();
  CHECK(r.tile_count(0) == 1);
  CHECK_FALSE(r.tile_assignment().has_value());
  CHECK(r.placement_of(3, 2) == xlite::ir::placement{.tile = {0, 0}});
  CHECK(r.shard_shape(shape{5, 3}) == shape{5, 3});
}

TEST_CASE("sharding: shards cover the tensor once per replica and partial term, padded alike", "[sharding]") {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 200; ++round) {
    // A random rank-1 to rank-3 tensor, some dimensions not divisible by their tile count.
    const std::size_t rank = 1 + rng() % 3;
    std::vector<std::int64_t> dims(rank);
    std::vector<std::int64_t> tile_dims(rank);
    for (std::size_t axis = 0; axis < rank; ++axis) {
      dims[axis] = static_cast<std::int64_t>(rng() % 9);
      tile_dims[axis] = 1 + static_cast<std::int64_t>(rng() % 4);
    }
    const std::int64_t partial = 1 + static_cast<std::int64_t>(rng() % 2);
    const std::int64_t replicas = 1 + static_cast<std::int64_t>(rng() % 3);
    tile_dims.push_back(partial);
    tile_dims.push_back(replicas);
    const std::int64_t devices =
        std::accumulate(tile_dims.begin(), tile_dims.end(), std::int64_t{1}, std::multiplies<>());
    std::vector<std::int64_t> ids = iota_ids(devices);
    std::shuffle(ids.begin(), ids.end(), rng);
    const sharding s = sharding::tiled(device_array(tile_dims, ids), {subgroup::partial, subgroup::replicated});
    const shape global(dims);
    INFO("shape " << global << ", sharding " << s);

    const shape shard = s.shard_shape(global);
    std::vector<int> held(static_cast<std::size_t>(global.numel()), 0);
    for (std::int64_t device = 0; device < devices; ++device) {
      const auto bounds = s.shard_bounds(global, device);
      std::int64_t count = 1;
      for (std::size_t axis = 0; axis < rank; ++axis) {
        const auto [begin, end] = bounds[axis];
        CHECK(0 <= begin);
        CHECK(begin <= end);
        CHECK(end <= global[axis]);
        CHECK(end - begin <= shard[axis]);
        // Tiles of ceil(n / t) elements, as XLA pads them.
        CHECK(shard[axis] == (global[axis] + s.tile_count(axis) - 1) / s.tile_count(axis));
        count *= end - begin;
      }
      // Mark the elements the device holds.
      std::vector<std::int64_t> at(rank);
      for (std::int64_t k = 0; k < count; ++k) {
        std::int64_t rest = k;
        std::int64_t flat = 0;
        for (std::size_t axis = rank; axis-- > 0;) {
          const std::int64_t extent = bounds[axis].second - bounds[axis].first;
          at[axis] = bounds[axis].first + rest % extent;
          rest /= extent;
        }
        for (std::size_t axis = 0; axis < rank; ++axis) flat = flat * global[axis] + at[axis];
        ++held[static_cast<std::size_t>(flat)];
      }
    }
    for (const int times : held) CHECK(times == partial * replicas);
  }
}

TEST_CASE("sharding: malformed tile assignments are value_errors that say what is wrong", "[sharding]") {
  CHECK_THROWS_AS(sharding::tiled(device_array({2}, {1, 1})), xlite::value_error);
  CHECK_THROWS_WITH(sharding::tiled(device_array({2}, {1, 1})), Contains("device 1 appears twice"));
  CHECK_THROWS_WITH(sharding::tiled(device_array({2}, {0, -3})), Contains("device ids are non-negative, not -3"));
  CHECK_THROWS_WITH(sharding::tiled(device_array({2, 2}, {0, 1, 2, 3}), {subgroup::replicated, subgroup::partial}),
                    Contains("at most one partial and one replicated, in that order"));
  CHECK_THROWS_WITH(sharding::tiled(device_array({2}, {0, 1}), {subgroup::partial, subgroup::replicated}),
                    Contains("fewer dimensions than the 2 subgroups"));
  CHECK_THROWS_WITH(sharding::tiled(device_array({1, 2}, {0, 1}), {subgroup::partial}, op::add),
                    Contains("combine with sum, max, min or prod, not add"));
  CHECK_THROWS_WITH(sharding::tiled(device_array(std::vector<std::int64_t>(9, 1), {0})),
                    Contains("at most 8 dimensions"));

  const sharding rows = sharding::tiled(device_array({4, 1}, {0, 1, 2, 3}));
  CHECK_THROWS_AS(rows.shard_shape(shape{8}), xlite::shape_error);
  CHECK_THROWS_WITH(rows.shard_shape(shape{8}),
                    Contains("{devices=[4,1]0,1,2,3} has 2 tiled dimensions but the tensor has rank 1 (shape (8,))"));
  CHECK_THROWS_WITH(rows.shard_bounds(shape{8, 2}, 4), Contains("device 4 is not in the sharding"));
}
