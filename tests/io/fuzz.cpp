// The loaders on hostile input: random bytes, and valid files with bytes flipped, replaced,
// inserted, deleted or cut off. Every outcome must be a loaded value or an io_error; any
// other exception fails the test, and a crash or undefined behaviour kills it (the
// sanitize preset runs this under AddressSanitizer and UndefinedBehaviorSanitizer).

#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <string>

#include "io_check.hpp"
#include "xlite/io/npy.hpp"
#include "xlite/io/npz.hpp"
#include "xlite/io/safetensors.hpp"

using xlite::tensor;
using xlite_test::read_bytes;
using xlite_test::scratch_directory;
using xlite_test::write_bytes;

namespace {

// Runs `load` on `trials` mutations of `valid` and on random files; returns how many loaded.
int fuzz(const std::filesystem::path& path, const std::string& valid, const std::function<void()>& load, int trials) {
  std::mt19937_64 rng(2026);
  int loaded = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::string bytes;
    if (trial % 8 == 7) {
      bytes.resize(rng() % 200);
      for (char& b : bytes) b = static_cast<char>(rng());
    } else {
      bytes = xlite_test::mutated(valid, rng);
    }
    write_bytes(path, bytes);
    try {
      load();
      ++loaded;
    } catch (const xlite::io_error&) {
    }
  }
  return loaded;
}

} // namespace

TEST_CASE("safetensors: load never crashes on random or mutated files", "[io][fuzz]") {
  scratch_directory dir;
  const auto valid_path = dir / "valid.safetensors";
  xlite::save(valid_path,
              {{"w", tensor<float>{{1, 2}, {3, 4}}},
               {"mask", tensor<bool>{true, false, true}},
               {"ids", tensor<std::int64_t>{5}},
               {"h", tensor<xlite::bfloat16>{xlite::bfloat16(0.5f)}}},
              {{"format", "pt"}});
  const std::string valid = read_bytes(valid_path);
  const auto path = dir / "fuzzed.safetensors";
  const int loaded = fuzz(
      path, valid, [&] { xlite::load(path); }, 4000);
  // Flips inside the data leave a valid file: some must load, and most must not.
  CHECK(loaded > 0);
  CHECK(loaded < 2000);
}

TEST_CASE("npy: load_npy never crashes on random or mutated files", "[io][fuzz]") {
  scratch_directory dir;
  const auto valid_path = dir / "valid.npy";
  xlite::save_npy(valid_path, tensor<float>{{1, 2, 3}, {4, 5, 6}});
  const auto path = dir / "fuzzed.npy";
  const int loaded = fuzz(
      path, read_bytes(valid_path), [&] { xlite::load_npy(path); }, 4000);
  CHECK(loaded > 0);
  CHECK(loaded < 2000);
}

TEST_CASE("npz: load_npz never crashes on random or mutated archives", "[io][fuzz]") {
  scratch_directory dir;
  const auto valid_path = dir / "valid.npz";
  xlite::save_npz(valid_path, {{"w", tensor<float>{{1, 2}, {3, 4}}}, {"mask", tensor<bool>{true, false}}});
  const auto path = dir / "fuzzed.npz";
  const int loaded = fuzz(
      path, read_bytes(valid_path), [&] { xlite::load_npz(path); }, 4000);
  CHECK(loaded > 0);
  CHECK(loaded < 2000);
}
