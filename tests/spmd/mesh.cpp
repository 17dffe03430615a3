#include <xlite/spmd/mesh.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "../runtime/eight_devices.hpp"
#include "device_ids.hpp"

using Catch::Matchers::Contains;
using xlite::spmd::hybrid_mesh;
using xlite::spmd::mesh;
using xlite::spmd::mesh_axis;

TEST_CASE("set_num_devices: fixes the device count before its first use, and only then", "[mesh]") {
  use_eight_devices();
  CHECK(xlite::device_count() == 8);
  CHECK(xlite::runtime::global_runtime_device_count() == 8);
  CHECK_THROWS_AS(xlite::runtime::set_num_devices(4), xlite::config_error);
  CHECK_THROWS_WITH(xlite::runtime::set_num_devices(4), Contains("already fixed at 8"));
  CHECK_THROWS_WITH(xlite::runtime::set_num_devices(0), Contains("0 is not a device count from 1 to 4096"));
  CHECK(xlite::device_count() == 8);
}

TEST_CASE("mesh: the seed's example, a 4x2 mesh with named axes", "[mesh]") {
  use_eight_devices();
  const mesh m(eight, {4, 2}, {"x", "y"});
  CHECK(m.size() == 8);
  CHECK(m.rank() == 2);
  CHECK(m.logical_mesh().to_string() == "[[0, 1], [2, 3], [4, 5], [6, 7]]");
  CHECK(m.shape() == std::vector<mesh_axis>{{"x", 4}, {"y", 2}});
  CHECK(m.axis_index("y", "test") == 1);
  CHECK(m.axes_text() == "('x': 4, 'y': 2)");

  // Ids in a custom order fill the shape row-major; axes may go unnamed.
  const mesh custom({7, 6, 5, 4, 3, 2, 1, 0}, {2, 2, 2});
  CHECK(custom.logical_mesh().to_string() == "[[[7, 6], [5, 4]], [[3, 2], [1, 0]]]");
  CHECK(custom.shape() == std::vector<mesh_axis>{{"", 2}, {"", 2}, {"", 2}});
  CHECK(custom.axes_text() == "(2, 2, 2)");
  CHECK(mesh(eight, {8}).axes_text() == "(8,)");
  CHECK(mesh({3, 5}, {2}, {"pair"}).size() == 2); // a mesh may hold some of the devices
  CHECK(custom != mesh(eight, {2, 2, 2}));
}

TEST_CASE("mesh: bad meshes are value_errors naming what is wrong", "[mesh]") {
  use_eight_devices();
  CHECK_THROWS_AS(mesh(eight, {4, 4}), xlite::value_error);
  CHECK_THROWS_WITH(mesh(eight, {4, 4}), Contains("a mesh of shape [4, 4] holds 16 devices, but 8 device ids"));
  CHECK_THROWS_WITH(mesh({0, 1, 2, 2}, {2, 2}), Contains("device id 2 appears twice"));
  CHECK_THROWS_WITH(mesh({0, 1, 2, 8}, {4}), Contains("device id 8 does not exist; there are 8 devices, ids 0 to 7"));
  CHECK_THROWS_WITH(mesh({0, -1}, {2}), Contains("device id -1 does not exist"));
  CHECK_THROWS_WITH(mesh(eight, {4, 2}, {"x", "x"}), Contains("the axis name 'x' appears twice"));
  CHECK_THROWS_WITH(mesh(eight, {4, 2}, {"x"}), Contains("1 axis names for a mesh of 2 axes"));
  CHECK_THROWS_WITH(mesh(eight, {4, 2}, {"x", ""}), Contains("axis 1 has an empty name"));
  CHECK_THROWS_WITH(mesh({0}, {}), Contains("the mesh shape has no axes"));
  CHECK_THROWS_WITH(mesh({}, {0}), Contains("axis sizes must be positive, not 0"));
  CHECK_THROWS_WITH(mesh(eight, {1LL << 32, 1LL << 32}), Contains("holds too many devices"));
  CHECK_THROWS_WITH(mesh(eight, {4, 2}, {"x", "y"}).axis_index("z", "mark_sharding"),
                    Contains("mark_sharding: the mesh has no axis named 'z'; its axes are ('x': 4, 'y': 2)"));
}

TEST_CASE("hybrid_mesh: ICI axes within a slice, DCN axes across slices", "[mesh]") {
  use_eight_devices();
  // The seed's example: 2 slices of 4 devices; 'data' crosses slices, 'fsdp' stays within.
  const mesh seed = hybrid_mesh({1, 4, 1}, {2, 1, 1}, {"data", "fsdp", "tensor"});
  CHECK(seed.shape() == std::vector<mesh_axis>{{"data", 2}, {"fsdp", 4}, {"tensor", 1}});
  CHECK(seed.logical_mesh().to_string() == "[[[0], [1], [2], [3]], [[4], [5], [6], [7]]]");

  // Slices of 2x2 devices, side by side along axis 1: numpy.block([[slice0, slice1]]).
  CHECK(hybrid_mesh({2, 2}, {1, 2}).logical_mesh().to_string() == "[[0, 1, 4, 5], [2, 3, 6, 7]]");
  CHECK(hybrid_mesh({2, 2}, {2, 1}).logical_mesh().to_string() == "[[0, 1], [2, 3], [4, 5], [6, 7]]");
  CHECK(hybrid_mesh({2, 1, 2}, {1, 2, 1}).logical_mesh().to_string() == "[[[0, 1], [4, 5]], [[2, 3], [6, 7]]]");
  CHECK(hybrid_mesh({4, 2}) == mesh(eight, {4, 2})); // one slice: the devices in order

  // Four slices of (2, 1) in a (2, 2) grid: block([[s0, s1], [s2, s3]]), each s = [[a], [b]].
  CHECK(hybrid_mesh({2, 1}, {2, 2}).logical_mesh().to_string() == "[[0, 2], [1, 3], [4, 6], [5, 7]]");
  CHECK(hybrid_mesh({1, 1}, {4, 2}).logical_mesh().to_string() == "[[0, 1], [2, 3], [4, 5], [6, 7]]");
}

TEST_CASE("hybrid_mesh: shapes that do not make the devices are value_errors", "[mesh]") {
  use_eight_devices();
  CHECK_THROWS_AS(hybrid_mesh({2, 2}, {1, 1}), xlite::value_error);
  CHECK_THROWS_WITH(hybrid_mesh({2, 2}, {1, 1}),
                    Contains("the ICI shape [2, 2] and the DCN shape [1, 1] do not make the 8 devices there are"));
  CHECK_THROWS_WITH(hybrid_mesh({2, 2}, {2}), Contains("the ICI shape has 2 axes but the DCN shape has 1"));
  CHECK_THROWS_WITH(hybrid_mesh({4, 0}, {1, 2}), Contains("axis 1 has sizes 0 (ICI) and 2 (DCN)"));
  CHECK_THROWS_WITH(hybrid_mesh({4, 2}, {}, {"a", "a"}), Contains("the axis name 'a' appears twice"));
}
