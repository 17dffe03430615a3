// SPMD across processes (XLITE_USE_SPMD=1): the property test's random programs, sharded
// over 8 devices of 2 or 4 processes, equal the programs on whole values as they do in one
// process; the hybrid mesh's DCN axis is the processes when each holds one slice; and a
// sharded checkpoint is saved by every process's devices.

#include <xlite/io.hpp>
#include <xlite/lazy.hpp>
#include <xlite/runtime/processes.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "../lazy/spmd_programs.hpp"

TEST_CASE("mpi: random programs sharded across processes equal the programs on whole values", "[mpi][spmd]") {
  REQUIRE(xlite::runtime::is_spmd());
  REQUIRE(xlite::runtime::global_runtime_device_count() == 8);
  xlite_test::check_random_programs(20261124, 14);
}

TEST_CASE("mpi: a tensor sharded over the processes of a hybrid mesh holds each process's rows there", "[mpi][spmd]") {
  const std::int64_t processes = xlite::runtime::process_count();
  const xlite::spmd::mesh m = xlite::spmd::hybrid_mesh({1, 8 / processes}, {processes, 1}, {"dcn", "ici"});
  xlite::tensor<float> host(xlite::shape{8, 3});
  for (std::int64_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<float>(i);
  const auto x = xlite::lazy::tensor::from(host);
  xlite::spmd::mark_sharding(x, m, {"dcn", xlite::spmd::none}); // rows split over the processes
  const auto doubled = x * 2.0f;
  const auto total = xlite::lazy::sum(x);
  xlite::mark_step();
  const auto got = doubled.to_host<float>();
  for (std::int64_t i = 0; i < host.size(); ++i) CHECK(got.data()[i] == 2.0f * static_cast<float>(i));
  CHECK(total.item<float>() == 276.0f); // 0 + 1 + ... + 23
  // Process p's devices hold rows [8p/P, 8(p+1)/P): the shard of its first device.
  const auto shards = x.state()->shards;
  REQUIRE(shards);
  const std::int64_t first = xlite::runtime::global_device(xlite::device("cpu:0"));
  const auto local = shards->shard(first)->wait();
  CHECK(local->as<float>()[0] == static_cast<float>(3 * 8 / processes * xlite::runtime::process_index()));
  for (std::int64_t d = 0; d < 8; ++d)
    CHECK((shards->shard(d) != nullptr) == (xlite::runtime::process_of(d) == xlite::runtime::process_index()));
}

TEST_CASE("mpi: a sharded checkpoint saved by every process loads whole and consolidates", "[mpi][spmd][checkpoint]") {
  // One directory for the run, shared by its processes (one host here); CTest names it.
  const char* named = std::getenv("XLITE_TEST_CHECKPOINT_DIR");
  REQUIRE(named);
  const std::filesystem::path dir = named;
  const std::int64_t processes = xlite::runtime::process_count();
  const xlite::spmd::mesh m = xlite::spmd::hybrid_mesh({1, 8 / processes}, {processes, 1}, {"dcn", "ici"});
  xlite::tensor<float> w_host(xlite::shape{8, 6}), b_host(xlite::shape{6});
  for (std::int64_t i = 0; i < w_host.size(); ++i) w_host.data()[i] = 0.5f * static_cast<float>(i) - 3.0f;
  for (std::int64_t i = 0; i < b_host.size(); ++i) b_host.data()[i] = static_cast<float>(i * i);
  const auto w = xlite::lazy::tensor::from(w_host);
  xlite::spmd::mark_sharding(w, m, {"dcn", "ici"});                       // a tile per device, in every process
  const auto b = xlite::lazy::tensor::from(b_host);                       // whole: device 0's process writes it
  const auto partial = xlite::lazy::matmul(xlite::lazy::transpose(w), w); // contracted over the sharded rows
  xlite::mark_step();
  const auto gram = partial.to_host<float>();
  xlite::save_sharded(dir, {{"w", w}, {"b", b}, {"gram", partial}});
  // Every file of every process is there once the save returns, in every process.
  const xlite::tensor_map loaded = xlite::load_sharded(dir);
  CHECK(loaded.at("w").get<float>() == w_host);
  CHECK(loaded.at("b").get<float>() == b_host);
  CHECK(loaded.at("gram").get<float>() == gram);
  std::int64_t tile_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    tile_files += entry.path().extension() == ".safetensors";
  CHECK(tile_files == 8);
  // A second save replaces the first: still 8 files, the new values.
  const auto doubled = w * 2.0f;
  xlite::mark_step();
  xlite::save_sharded(dir, {{"w", doubled}});
  xlite::tensor<float> twice = w_host;
  for (float& v : twice) v *= 2.0f;
  CHECK(xlite::load_sharded(dir).at("w").get<float>() == twice);
  xlite::save_sharded(dir, {{"w", w}, {"b", b}, {"gram", partial}}); // what the consolidation test reads
}
