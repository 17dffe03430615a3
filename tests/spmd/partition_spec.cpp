#include <xlite/spmd/partition_spec.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "../runtime/eight_devices.hpp"
#include "device_ids.hpp"

using Catch::Matchers::Contains;
using xlite::shape;
using xlite::ir::sharding;
using xlite::spmd::dim_spec;
using xlite::spmd::hybrid_mesh;
using xlite::spmd::mesh;
using xlite::spmd::none;
using xlite::spmd::partition_spec;
using xlite::spmd::to_sharding;

namespace {

std::string text(const mesh& m, const partition_spec& spec, const shape& global) {
  return to_sharding(m, spec, global).to_string();
}

} // namespace

TEST_CASE("partition_spec: prints as the Python tuple", "[partition_spec]") {
  CHECK(partition_spec{"data", none}.to_string() == "('data', None)");
  CHECK(partition_spec{{"data", "model"}}.to_string() == "(('data', 'model'),)");
  CHECK(partition_spec{0, {1, "z"}, none}.to_string() == "(0, (1, 'z'), None)");
  CHECK(partition_spec{}.to_string() == "()");
  CHECK(partition_spec{"x", none} == partition_spec{dim_spec("x"), dim_spec(none)});
}

TEST_CASE("partition_spec: the seed's examples on a 4x2 mesh give XLA's tile assignments", "[partition_spec]") {
  use_eight_devices();
  const mesh m(eight, {4, 2}, {"x", "y"});
  // 4-way data parallel input: rows over 'x', replicated over 'y'.
  CHECK(text(m, {0, none}, shape{8, 32}) == "{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}");
  // 2-way model parallel weight: columns over 'y', replicated over 'x'.
  CHECK(text(m, {none, 1}, shape{10, 32}) == "{devices=[1,2,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}");
  // Both axes, by name or by index: every device a tile.
  CHECK(text(m, {"x", "y"}, shape{8, 4}) == "{devices=[4,2]0,1,2,3,4,5,6,7}");
  CHECK(to_sharding(m, {"x", "y"}, shape{8, 4}) == to_sharding(m, {0, 1}, shape{8, 4}));
  // Axes swapped: the tile assignment is the mesh transposed.
  CHECK(text(m, {"y", "x"}, shape{8, 4}) == "{devices=[2,4]0,2,4,6,1,3,5,7}");
  // One dimension over both axes: order matters.
  CHECK(text(m, {{"x", "y"}}, shape{8}) == "{devices=[8]0,1,2,3,4,5,6,7}");
  CHECK(text(m, {{"y", "x"}}, shape{8}) == "{devices=[8]0,2,4,6,1,3,5,7}");
  // The seed's rank-3 example: the first dimension replicated.
  CHECK(text(m, {none, "x", "y"}, shape{8, 8, 16}) == "{devices=[1,4,2]0,1,2,3,4,5,6,7}");
  // Fewer entries than dimensions: the rest are not split (JAX's rule).
  CHECK(to_sharding(m, {"x"}, shape{8, 8, 16}) == to_sharding(m, {"x", none, none}, shape{8, 8, 16}));
  // Nothing split: replicated.
  CHECK(to_sharding(m, {none, none}, shape{8, 4}) == sharding::replicated());
  CHECK(to_sharding(m, {}, shape{}) == sharding::replicated());
}

TEST_CASE("partition_spec: each device holds the tile its mesh coordinates select", "[partition_spec]") {
  use_eight_devices();
  const std::vector<mesh> meshes = {
      mesh(eight, {1, 8}, {"a", "b"}),         mesh(eight, {8, 1}, {"a", "b"}),
      mesh(eight, {2, 4}, {"a", "b"}),         mesh({3, 1, 0, 2, 7, 5, 6, 4}, {4, 2}, {"a", "b"}),
      mesh(eight, {2, 2, 2}, {"a", "b", "c"}), hybrid_mesh({1, 2, 2}, {2, 1, 1}, {"a", "b", "c"})};
  std::mt19937_64 rng(3);
  for (const mesh& m : meshes) {
    for (int round = 0; round < 40; ++round) {
      // A random rank-1 to rank-3 shape and a spec using each mesh axis at most once.
      const std::size_t rank = 1 + rng() % 3;
      std::vector<std::int64_t> dims(rank);
      for (auto& d : dims) d = 1 + static_cast<std::int64_t>(rng() % 10);
      std::vector<std::vector<std::size_t>> axes_of(rank);
      std::vector<std::size_t> axes(m.rank());
      std::iota(axes.begin(), axes.end(), 0);
      std::shuffle(axes.begin(), axes.end(), rng);
      for (const std::size_t axis : axes) {
        const std::size_t dim = rng() % (rank + 1);
        if (dim < rank) axes_of[dim].push_back(axis); // dim == rank: the axis replicates
      }
      std::vector<dim_spec> entries;
      for (const auto& list : axes_of) {
        if (list.empty()) {
          entries.emplace_back(none);
        } else if (list.size() == 1 && rng() % 2) {
          entries.emplace_back(m.axis_name(list[0])); // by name
        } else {
          std::vector<xlite::spmd::axis_ref> refs;
          for (const std::size_t axis : list) refs.emplace_back(static_cast<std::int64_t>(axis));
          entries.emplace_back(dim_spec(refs));
        }
      }
      const partition_spec spec(entries);
      const shape global(dims);
      const sharding s = to_sharding(m, spec, global);
      INFO("mesh " << m << ", spec " << spec << ", shape " << global << ", sharding " << s);

      for (const std::int64_t device : m.device_ids()) {
        const std::vector<std::int64_t> at = m.logical_mesh().index_of(device);
        const auto bounds = s.shard_bounds(global, device);
        for (std::size_t dim = 0; dim < rank; ++dim) {
          std::int64_t tile = 0;
          std::int64_t tiles = 1;
          for (const std::size_t axis : axes_of[dim]) { // the first axis outermost
            tile = tile * m.axis_size(axis) + at[axis];
            tiles *= m.axis_size(axis);
          }
          const std::int64_t size = (dims[dim] + tiles - 1) / tiles;
          CHECK(bounds[dim].first == std::min(tile * size, dims[dim]));
          CHECK(bounds[dim].second == std::min((tile + 1) * size, dims[dim]));
        }
      }
    }
  }
}

TEST_CASE("partition_spec: bad specs are errors naming the spec, the shape and the mesh's axes", "[partition_spec]") {
  use_eight_devices();
  const mesh m(eight, {4, 2}, {"data", "model"});
  CHECK_THROWS_AS(to_sharding(m, {"data", none, "model"}, shape{8, 4}), xlite::value_error);
  CHECK_THROWS_WITH(to_sharding(m, {"data", none, "model"}, shape{8, 4}),
                    Contains("mark_sharding: the partition spec has 3 entries but the tensor has rank 2 (partition "
                             "spec ('data', None, 'model'), tensor shape (8, 4), mesh ('data': 4, 'model': 2))"));
  CHECK_THROWS_WITH(
      to_sharding(m, {"batch", none}, shape{8, 4}),
      Contains("mark_sharding: the mesh has no axis named 'batch'; its axes are ('data': 4, 'model': 2)"));
  CHECK_THROWS_AS(to_sharding(m, {2, none}, shape{8, 4}), xlite::index_error);
  CHECK_THROWS_WITH(to_sharding(m, {2, none}, shape{8, 4}), Contains("mesh axis 2 does not exist"));
  CHECK_THROWS_WITH(to_sharding(m, {-1, none}, shape{8, 4}), Contains("mesh axis -1 does not exist"));
  CHECK_THROWS_WITH(
      to_sharding(m, {"data", "data"}, shape{8, 4}),
      Contains("mesh axis 'data' splits dimension 0 and dimension 1; an axis can split one dimension only"));
  CHECK_THROWS_WITH(to_sharding(m, {{"model", 1}}, shape{8}), Contains("mesh axis 1 is named twice for dimension 0"));
  CHECK_THROWS_WITH(to_sharding(mesh({0, 1, 2, 3}, {2, 2}), {0, 1}, shape{8, 4}, "fsdp"),
                    Contains("fsdp: the mesh has 4 devices but the program runs on 8; a mesh must cover every device"));
}
