// save_npz() and load_npz(): round trips, the zip structure np.load expects, lazy tensors
// streamed into an archive, bfloat16 refused, and damaged archives reported.

#include <catch2/catch.hpp>

#include <zlib.h>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "io_check.hpp"
#include "xlite/io/npz.hpp"
#include "xlite/lazy.hpp"

using xlite::any_tensor;
using xlite::dtype;
using xlite::tensor;
using xlite_test::read_bytes;
using xlite_test::scratch_directory;
using xlite_test::write_bytes;

TEST_CASE("npz: every dtype, rank 0 to 5 and empty arrays round-trip bit for bit", "[io][npz]") {
  scratch_directory dir;
  std::mt19937_64 rng(11);
  std::map<std::string, any_tensor> saved;
  for (const dtype type : xlite_test::all_dtypes) {
    for (int i = 0; i < 4; ++i) {
      saved.emplace(std::string(name(type)) + "_" + std::to_string(i),
                    xlite_test::random_tensor(type, xlite_test::random_shape(rng), rng));
    }
  }
  xlite::save_npz(dir / "all.npz", saved);
  const xlite::tensor_map loaded = xlite::load_npz(dir / "all.npz");
  REQUIRE(loaded.size() == saved.size());
  for (const auto& [name, t] : saved) {
    INFO(name << " of shape " << t.shape());
    CHECK(loaded.at(name).type() == t.type());
    CHECK(loaded.at(name).shape() == t.shape());
    CHECK(
        std::equal(t.bytes().begin(), t.bytes().end(), loaded.at(name).bytes().begin(), loaded.at(name).bytes().end()));
  }
  xlite::save_npz(dir / "none.npz", std::map<std::string, any_tensor>{});
  CHECK(xlite::load_npz(dir / "none.npz").empty());
  CHECK(dir.files() == std::vector<std::string>{"all.npz", "none.npz"});
}

TEST_CASE("npz: the archive is a zip of .npy files, with CRC-32s that zlib agrees with", "[io][npz]") {
  scratch_directory dir;
  const tensor<float> w{{1, 2, 3}, {4, 5, 6}};
  xlite::save_npz(dir / "w.npz", {{"w", w}});
  const std::string bytes = read_bytes(dir / "w.npz");
  CHECK(bytes.substr(0, 4) == "PK\x03\x04");
  CHECK(bytes.substr(30, 5) == "w.npy");
  CHECK(bytes.substr(35, 6) == "\x93NUMPY");
  CHECK(bytes.find("PK\x07\x08") != std::string::npos); // the data descriptor
  CHECK(bytes.substr(bytes.size() - 22, 4) == "PK\x05\x06");
  // The .npy inside is exactly what save_npy writes.
  xlite::save_npy(dir / "w.npy", w);
  const std::string npy = read_bytes(dir / "w.npy");
  CHECK(bytes.substr(35, npy.size()) == npy);
  // CRC-32 against zlib's (the check value of "123456789" is CBF43926).
  const std::string check = "123456789";
  CHECK(xlite::io::detail::crc32(0, std::as_bytes(std::span(check.data(), check.size()))) == 0xCBF43926u);
  CHECK(xlite::io::detail::crc32(0, std::as_bytes(std::span(npy.data(), npy.size()))) ==
        ::crc32(0, reinterpret_cast<const Bytef*>(npy.data()), static_cast<uInt>(npy.size())));
}

TEST_CASE("npz: lazy tensors stream into the archive; a bad call writes nothing", "[io][npz]") {
  scratch_directory dir;
  const auto x = xlite::lazy::tensor::from(tensor<float>{1, -2, 3});
  const auto y = xlite::lazy::exp(x) + 1.0f;
  xlite::save_npz(dir / "lazy.npz", {{"y", y}, {"x", x}});
  const auto loaded = xlite::load_npz(dir / "lazy.npz");
  CHECK(loaded.at("y").get<float>() == y.to_host<float>());
  CHECK(loaded.at("x").get<float>() == tensor<float>{1, -2, 3});
  const auto path = dir / "b.npz";
  CHECK_THROWS_WITH(xlite::save_npz(path, {{"x", x}, {"x", x}}),
                    Catch::Matchers::Contains("the name 'x' is given twice"));
  CHECK_THROWS_WITH(xlite::save_npz(path, {{std::string(70000, 'n'), x}}),
                    Catch::Matchers::Contains("is longer than a zip entry's 65535 bytes"));
  CHECK(dir.files() == std::vector<std::string>{"lazy.npz"});
}

TEST_CASE("npz: damaged archives are reported with what is wrong", "[io][npz]") {
  scratch_directory dir;
  xlite::save_npz(dir / "good.npz", {{"a", tensor<float>{1, 2, 3}}, {"b", tensor<std::int64_t>{7}}});
  const std::string good = read_bytes(dir / "good.npz");
  const auto at_data = good.find("\x93NUMPY");
  const auto directory = good.find("PK\x01\x02");
  std::string flipped = good, renamed = good, bad_method = good, far_header = good;
  flipped[at_data + 130] = static_cast<char>(flipped[at_data + 130] ^ 1); // an element of 'a'
  renamed.replace(directory + 46, 5, "a.txt");
  bad_method[directory + 10] = 12; // bzip2
  far_header[directory + 42] = '\x7f';
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not a zip archive"},
      {"PK\x05\x06", "not a zip archive"},
      {good.substr(0, good.size() - 10), "not a zip archive"},
      {flipped, "entry 'a.npy': its CRC-32 does not match"},
      {renamed, "entry 'a.txt' is not an .npy file"},
      {bad_method, "compression method 12 is neither stored (0) nor deflated (8)"},
      {far_header, "no local header at byte"},
      {good.substr(0, directory) + good.substr(directory + 10), "the central directory"},
  };
  const auto path = dir / "bad.npz";
  for (const auto& [bytes, problem] : cases) {
    INFO("expected: " << problem);
    write_bytes(path, bytes);
    CHECK_THROWS_AS(xlite::load_npz(path), xlite::io_error);
    CHECK_THROWS_WITH(xlite::load_npz(path), Catch::Matchers::StartsWith("load_npz('" + path.string() + "'): ") &&
                                                 Catch::Matchers::Contains(problem));
  }
}
