// Sharded checkpoints in SPMD mode on 8 devices: saved from a 2x4 mesh, loaded onto a 4x2
// mesh, whole, and consolidated into one file; atomic as a whole; malformed ones reported.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "../runtime/eight_devices.hpp"
#include "io_check.hpp"
#include "xlite/io/checkpoint.hpp"
#include "xlite/io/safetensors.hpp"
#include "xlite/lazy.hpp"

using xlite::any_tensor;
using xlite::tensor;
using xlite_test::read_bytes;
using xlite_test::scratch_directory;
using xlite_test::write_bytes;
namespace spmd = xlite::spmd;
namespace lazy = xlite::lazy;

namespace {

void use_spmd_on_eight_devices() {
  use_eight_devices();
  xlite::runtime::use_spmd();
}

const std::vector<std::int64_t> all_devices{0, 1, 2, 3, 4, 5, 6, 7};

tensor<float> random_floats(const xlite::shape& s, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  tensor<float> t(s);
  for (float& v : t) v = dist(rng);
  return t;
}

// The tile files in `dir`.
std::size_t tile_files(const scratch_directory& dir) {
  std::size_t count = 0;
  for (const auto& name : dir.files()) count += name.ends_with(".safetensors");
  return count;
}

// The tensors of a small model, as host values, and the specs they are saved with on a
// 2x4 mesh ('x', 'y'): tiled both ways, unevenly (5 rows over 2, 7 columns over 4),
// replicated, over one axis with replicas, and a bfloat16 tensor.
struct model {
  tensor<float> w = random_floats({8, 6}, 1);
  tensor<float> v = random_floats({5, 7}, 2);
  tensor<float> b = random_floats({6}, 3);
  tensor<float> e = random_floats({4, 3}, 4);
  tensor<xlite::bfloat16> h = tensor<xlite::bfloat16>{xlite::bfloat16(1.5f), xlite::bfloat16(-2.0f),
                                                      xlite::bfloat16(0.25f), xlite::bfloat16(8.0f)};
  tensor<std::int32_t> step = tensor<std::int32_t>(xlite::shape{}, 41);
};

} // namespace

TEST_CASE("checkpoint: saved from a 2x4 mesh, loads onto a 4x2 mesh, whole and consolidated", "[io][checkpoint]") {
  use_spmd_on_eight_devices();
  scratch_directory dir;
  const model host;
  const spmd::mesh from(all_devices, {2, 4}, {"x", "y"});
  const auto w = lazy::tensor::from(host.w), v = lazy::tensor::from(host.v), b = lazy::tensor::from(host.b),
             e = lazy::tensor::from(host.e), h = lazy::tensor::from(host.h);
  spmd::mark_sharding(w, from, {"x", "y"});
  spmd::mark_sharding(v, from, {"y", "x"});
  spmd::mark_sharding(e, from, {"x", spmd::none});
  spmd::mark_sharding(h, from, {"y"});
  xlite::save_sharded(dir.path() / "ckpt", {{"w", w}, {"v", v}, {"b", b}, {"e", e}, {"h", h}, {"step", host.step}},
                      {{"epoch", "3"}});

  SECTION("the index says which device holds which tile") {
    const std::string index = read_bytes(dir.path() / "ckpt" / "index.json");
    CHECK(xlite::load_sharded_metadata(dir.path() / "ckpt") == xlite::tensor_metadata{{"epoch", "3"}});
    CHECK_THAT(index, Catch::Matchers::Contains(
                          R"("w":{"dtype":"F32","shape":[8,6],"sharding":"{devices=[2,4]0,1,2,3,4,5,6,7}")"));
    // v's 5 rows over 'y' (4 tiles of 2: the last empty) and 7 columns over 'x' (2 of 4).
    CHECK_THAT(index, Catch::Matchers::Contains(R"({"file":6,"begin":[4,4],"shape":[1,3]})"));
    CHECK_THAT(index, Catch::Matchers::Contains(R"({"file":7,"begin":[5,4],"shape":[0,3]})"));
    // e is tiled over 'x' only: the four replicas along 'y' write their tile once.
    CHECK_THAT(index,
               Catch::Matchers::Contains(
                   R"("tiles":[{"file":0,"begin":[0,0],"shape":[2,3]},{"file":4,"begin":[2,0],"shape":[2,3]}])"));
    CHECK_THAT(index, Catch::Matchers::Contains(R"("b":{"dtype":"F32","shape":[6],"sharding":"{replicated}")"));
    std::size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "ckpt")) {
      files += entry.path().extension() == ".safetensors";
    }
    CHECK(files == 8);
  }

  SECTION("onto a 4x2 mesh with other specs") {
    const spmd::mesh onto({7, 6, 5, 4, 3, 2, 1, 0}, {4, 2}, {"a", "b"});
    const std::map<std::string, spmd::partition_spec, std::less<>> specs{
        {"w", {"b", "a"}}, {"v", {"a", spmd::none}}, {"h", {{"a", "b"}}}};
    const auto loaded = xlite::load_sharded(dir.path() / "ckpt", onto, specs);
    REQUIRE(loaded.size() == 6);
    CHECK(spmd::sharding_of(loaded.at("w")) == spmd::to_sharding(onto, {"b", "a"}, {8, 6}));
    CHECK(spmd::sharding_of(loaded.at("v")) == spmd::to_sharding(onto, {"a", spmd::none}, {5, 7}));
    CHECK(spmd::sharding_of(loaded.at("b")) == xlite::ir::sharding::replicated());
    CHECK(loaded.at("w").to_host<float>() == host.w);
    CHECK(loaded.at("v").to_host<float>() == host.v);
    CHECK(loaded.at("b").to_host<float>() == host.b);
    CHECK(loaded.at("e").to_host<float>() == host.e);
    CHECK(loaded.at("h").to_host<xlite::bfloat16>() == host.h);
    CHECK(loaded.at("step").to_host<std::int32_t>() == host.step);
    // The loaded tensors compute like any others: a matmul over the new layout.
    CHECK(lazy::sum(lazy::matmul(loaded.at("w"), lazy::reshape(loaded.at("e"), {6, 2}))).item<float>() ==
          Approx(lazy::sum(lazy::matmul(lazy::tensor::from(host.w), lazy::reshape(lazy::tensor::from(host.e), {6, 2})))
                     .item<float>()));
    CHECK_THROWS_WITH(xlite::load_sharded(dir.path() / "ckpt", onto, {{"nope", {"a"}}}),
                      Catch::Matchers::Contains("a spec is given for 'nope', which the checkpoint does not hold"));
  }

  SECTION("whole, as on one device, and consolidated into one safetensors file") {
    const auto whole = xlite::load_sharded(dir.path() / "ckpt");
    CHECK(whole.at("w").get<float>() == host.w);
    CHECK(whole.at("v").get<float>() == host.v);
    CHECK(whole.at("h").get<xlite::bfloat16>() == host.h);
    CHECK(whole.at("step").get<std::int32_t>() == host.step);
    xlite::consolidate(dir.path() / "ckpt", dir / "full.safetensors");
    const auto full = xlite::load(dir / "full.safetensors");
    CHECK(full.size() == 6);
    for (const auto& [name, t] : whole) CHECK(full.at(name) == t);
    CHECK(xlite::load_metadata(dir / "full.safetensors") == xlite::tensor_metadata{{"epoch", "3"}});
  }
}

TEST_CASE("checkpoint: pending and partial sharded values are computed and saved", "[io][checkpoint]") {
  use_spmd_on_eight_devices();
  scratch_directory dir;
  const spmd::mesh m(all_devices, {8}, {"data"});
  const tensor<float> xs = random_floats({16, 4}, 5), ws = random_floats({4, 3}, 6);
  const auto x = lazy::tensor::from(xs);
  spmd::mark_sharding(x, m, {"data"});
  const auto y = lazy::relu(x) * 2.0f;                                     // pending, tiled like x
  const auto g = lazy::matmul(lazy::transpose(x), lazy::tensor::from(xs)); // partial sums over 'data'
  xlite::save_sharded(dir.path(), {{"y", y}, {"g", g}, {"w", lazy::tensor::from(ws)}});
  const auto whole = xlite::load_sharded(dir.path());
  CHECK(whole.at("y").get<float>() == y.to_host<float>());
  CHECK(whole.at("g").get<float>() == g.to_host<float>());
  CHECK(whole.at("w").get<float>() == ws);
  for (std::int64_t i = 0; i < 16; ++i) {
    for (std::int64_t j = 0; j < 4; ++j) CHECK(whole.at("y").get<float>()(i, j) == std::max(xs(i, j), 0.0f) * 2.0f);
  }
}

TEST_CASE("checkpoint: a new save replaces the previous one and removes its files", "[io][checkpoint]") {
  use_spmd_on_eight_devices();
  scratch_directory dir;
  const spmd::mesh m(all_devices, {8}, {"data"});
  const auto first = lazy::tensor::from(random_floats({8, 2}, 7));
  spmd::mark_sharding(first, m, {"data"});
  xlite::save_sharded(dir.path(), {{"p", first}});
  const auto second = lazy::tensor::from(random_floats({16, 2}, 8));
  spmd::mark_sharding(second, m, {"data"});
  xlite::save_sharded(dir.path(), {{"p", second}});
  CHECK(xlite::load_sharded(dir.path()).at("p").get<float>() == second.to_host<float>());
  CHECK(tile_files(dir) == 8);
  CHECK(dir.files().size() == 9); // and index.json
}

TEST_CASE("checkpoint: a save killed midway leaves the previous checkpoint whole", "[io][checkpoint][crash]") {
  use_spmd_on_eight_devices();
  scratch_directory dir;
  const tensor<float> previous = random_floats({4, 4}, 9);
  xlite::save_sharded(dir.path(), {{"w", previous}});
  const tensor<float> next(xlite::shape{32 << 20}, 0.5f); // 128 MiB, written by device 0's file

  bool killed_midway = false;
  for (int attempt = 0; attempt < 5 && !killed_midway; ++attempt) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) { // host tensors only: no device worker is needed in the child
      try {
        xlite::save_sharded(dir.path(), {{"w", next}});
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    const auto writing = [&] {
      for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        std::error_code gone;
        if (entry.path().string().find(".tmp.") != std::string::npos &&
            std::filesystem::file_size(entry.path(), gone) > (1u << 20) && !gone) {
          return true;
        }
      }
      return false;
    };
    bool caught_writing = false;
    while (!(caught_writing = writing()) && std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(child, nullptr, WNOHANG) == child) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    const auto loaded = xlite::load_sharded(dir.path()).at("w").get<float>();
    killed_midway = caught_writing && loaded == previous;
    if (!killed_midway) {
      CHECK(loaded == next); // the child won the race: the new checkpoint, whole
      xlite::save_sharded(dir.path(), {{"w", previous}});
    }
  }
  CHECK(killed_midway);
  // The next save removes what the killed one left.
  xlite::save_sharded(dir.path(), {{"w", previous}});
  CHECK(tile_files(dir) == 8);
  CHECK(dir.files().size() == 9);
}

TEST_CASE("checkpoint: a save that fails leaves the previous checkpoint and none of its own files",
          "[io][checkpoint]") {
  use_spmd_on_eight_devices();
  scratch_directory dir;
  const tensor<float> previous = random_floats({4}, 13);
  xlite::save_sharded(dir.path() / "a", {{"w", previous}});
  // index.json is a directory in b, so the save fails after writing its tile files.
  std::filesystem::create_directories(dir.path() / "b" / "index.json");
  CHECK_THROWS_AS(xlite::save_sharded(dir.path() / "b", {{"w", previous}}), xlite::io_error);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path() / "b"), {}) == 1);
  // And a failed save over a checkpoint keeps it.
  CHECK_THROWS_AS(xlite::save_sharded(dir.path() / "a", {{"w", previous}, {"w", previous}}), xlite::value_error);
  CHECK(xlite::load_sharded(dir.path() / "a").at("w").get<float>() == previous);
}

TEST_CASE("checkpoint: malformed indexes and tile files are reported", "[io][checkpoint]") {
  use_spmd_on_eight_devices();
  scratch_directory dir;
  const spmd::mesh m(all_devices, {2, 4}, {"x", "y"});
  const auto w = lazy::tensor::from(random_floats({4, 4}, 10));
  spmd::mark_sharding(w, m, {"x", "y"});
  xlite::save_sharded(dir.path(), {{"w", w}});
  const auto index_path = dir.path() / "index.json";
  const std::string index = read_bytes(index_path);
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = index;
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  const std::string first_tile = R"({"file":0,"begin":[0,0],"shape":[2,1]})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {replaced(R"("shape":[2,1]})", R"("shape":[2,2]})"), "two tiles of tensor 'w' overlap"},
      {replaced(first_tile + ",", ""), "the tiles of tensor 'w' cover 14 of its 16 elements"},
      {replaced(R"("begin":[0,0])", R"("begin":[3,0])"), "lies outside its shape (4, 4)"},
      {replaced(R"({"file":0,)", R"({"file":9,)"), "a tile of tensor 'w' names file 9 of 8"},
      {replaced(R"("format":"xlite-sharded-checkpoint-1")", R"("format":"other")"), "the format is not"},
      {replaced(".device-0-of-8", "/../x"), "which is not a plain file name"},
      {replaced(R"("dtype":"F32")", R"("dtype":"I32")"), "is F32 (2, 1), not I32 (2, 1) as index.json says"},
      {index.substr(0, index.size() / 2), "index.json"},
      {replaced(first_tile, R"({"file":0,"file":0,"begin":[0,0],"shape":[2,1]})"),
       "a tile of tensor 'w' has two 'file'"},
      {replaced(first_tile, R"({"begin":[0,0],"shape":[2,1]})"),
       "a tile of tensor 'w' needs a file, a begin and a shape"},
      {replaced(R"({"file":1,)", R"({"file":0,)"), "two tiles of tensor 'w' are in file 0"},
      {replaced(R"("devices":8)", R"("devices":7)"), "index.json says 7 devices but lists 8 files"},
      {replaced(R"("w":{)", R"("__metadata__":{)"), "'__metadata__' is safetensors' own key"},
      // A shape the files cannot hold is found out before anything is allocated for it.
      {index.substr(0, index.find(R"("w":{)")) +
           R"("w":{"dtype":"F32","shape":[1000000000000],"sharding":"","tiles":[{"file":0,"begin":[0],"shape":[1000000000000]}]}}})",
       "the tile of tensor 'w' is F32 (2, 1), not F32 (1000000000000,) as index.json says"},
  };
  for (const auto& [text, problem] : cases) {
    INFO("expected: " << problem);
    write_bytes(index_path, text);
    CHECK_THROWS_AS(xlite::load_sharded(dir.path()), xlite::io_error);
    CHECK_THROWS_WITH(xlite::load_sharded(dir.path()),
                      Catch::Matchers::StartsWith("load_sharded('") && Catch::Matchers::Contains(problem));
  }
  write_bytes(index_path, index);
  std::filesystem::remove(dir.path() /
                          (index.substr(index.find("\"files\":[\"") + 10, 16) + ".device-5-of-8.safetensors"));
  CHECK_THROWS_WITH(xlite::load_sharded(dir.path()), Catch::Matchers::Contains("cannot open the file"));
  std::filesystem::remove(index_path);
  CHECK_THROWS_WITH(xlite::load_sharded(dir.path()),
                    Catch::Matchers::Contains("is it a checkpoint saved by save_sharded?"));
}

TEST_CASE("checkpoint: load_sharded never crashes on a mutated index", "[io][checkpoint][fuzz]") {
  use_spmd_on_eight_devices();
  scratch_directory dir;
  const spmd::mesh m(all_devices, {2, 4}, {"x", "y"});
  const auto w = lazy::tensor::from(random_floats({5, 6}, 11));
  spmd::mark_sharding(w, m, {"y", "x"});
  xlite::save_sharded(dir.path(), {{"w", w}, {"b", random_floats({3}, 12)}});
  const auto index_path = dir.path() / "index.json";
  const std::string index = read_bytes(index_path);
  std::mt19937_64 rng(2026);
  int loaded = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    write_bytes(index_path, xlite_test::mutated(index, rng));
    try {
      const auto whole = xlite::load_sharded(dir.path());
      ++loaded;
    } catch (const xlite::io_error&) {
    }
  }
  CHECK(loaded > 0); // edits of the metadata or the sharding's text leave a valid index
  CHECK(loaded < 750);
}
