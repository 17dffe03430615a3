#include <xlite/spmd/partition_spec.hpp>
#include <xlite/spmd/visualize.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "../runtime/eight_devices.hpp"
#include "device_ids.hpp"

using xlite::shape;
using xlite::ir::device_array;
using xlite::ir::sharding;
using xlite::ir::subgroup;
using xlite::spmd::mesh;
using xlite::spmd::none;
using xlite::spmd::to_sharding;
using xlite::spmd::visualize;

TEST_CASE("visualize: a tile per cell, naming the devices that hold it", "[visualize]") {
  use_eight_devices();
  const mesh m(eight, {4, 2}, {"x", "y"});
  CHECK(visualize(to_sharding(m, {"y", "x"}, shape{8, 4}), shape{8, 4}) ==
        "(8, 4) in tiles of (4, 1): {devices=[2,4]0,2,4,6,1,3,5,7}\n"
        "┌───────┬───────┬───────┬───────┐\n"
        "│ cpu 0 │ cpu 2 │ cpu 4 │ cpu 6 │\n"
        "├───────┼───────┼───────┼───────┤\n"
        "│ cpu 1 │ cpu 3 │ cpu 5 │ cpu 7 │\n"
        "└───────┴───────┴───────┴───────┘\n");

  // Rows over 'x', replicas over 'y'; 10 rows in tiles of 3 (the last padded).
  CHECK(visualize(to_sharding(m, {"x", none}, shape{10, 6}), shape{10, 6}) ==
        "(10, 6) in tiles of (3, 6): {devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}\n"
        "┌─────────┐\n"
        "│ cpu 0,1 │\n"
        "├─────────┤\n"
        "│ cpu 2,3 │\n"
        "├─────────┤\n"
        "│ cpu 4,5 │\n"
        "├─────────┤\n"
        "│ cpu 6,7 │\n"
        "└─────────┘\n");

  CHECK(visualize(sharding::replicated(), shape{3}) == "(3,) in tiles of (3,): {replicated}\n"
                                                       "┌─────────────┐\n"
                                                       "│ all devices │\n"
                                                       "└─────────────┘\n");
}

TEST_CASE("visualize: partial values, and tensors of rank 0 and 3", "[visualize]") {
  use_eight_devices();
  const sharding sum = sharding::tiled(device_array({2, 1, 2}, {0, 1, 2, 3}), {subgroup::partial});
  CHECK(visualize(sum, shape{4, 4}) ==
        "(4, 4) in tiles of (2, 4): {devices=[2,1,2]0,1,2,3 last_tile_dims={partial_sum}}\n"
        "┌───────────┐\n"
        "│ cpu 0 + 1 │\n"
        "├───────────┤\n"
        "│ cpu 2 + 3 │\n"
        "└───────────┘\n");
  const sharding max =
      sharding::tiled(device_array({2, 2}, {0, 1, 2, 3}), {subgroup::partial, subgroup::replicated}, xlite::op::max);
  CHECK(visualize(max, shape{}) ==
        "() in tiles of (): {devices=[2,2]0,1,2,3 last_tile_dims={partial_max, replicated}}\n"
        "┌───────────────────┐\n"
        "│ cpu max(0,1, 2,3) │\n"
        "└───────────────────┘\n");

  const mesh m(eight, {2, 2, 2}, {"a", "b", "c"});
  CHECK(visualize(to_sharding(m, {"a", "b", "c"}, shape{2, 2, 2}), shape{2, 2, 2}) ==
        "(2, 2, 2) in tiles of (1, 1, 1): {devices=[2,2,2]0,1,2,3,4,5,6,7}\n"
        "          ┌───────┬───────┐\n"
        "[0, 0, :] │ cpu 0 │ cpu 1 │\n"
        "          ├───────┼───────┤\n"
        "[0, 1, :] │ cpu 2 │ cpu 3 │\n"
        "          ├───────┼───────┤\n"
        "[1, 0, :] │ cpu 4 │ cpu 5 │\n"
        "          ├───────┼───────┤\n"
        "[1, 1, :] │ cpu 6 │ cpu 7 │\n"
        "          └───────┴───────┘\n");
}
