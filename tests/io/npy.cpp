// save_npy() and load_npy(): round trips of NumPy's dtypes, files written by hand as NumPy
// writes them (Fortran order, other key orders, version 2, long headers), bfloat16 refused,
// and malformed files reported.

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "io_check.hpp"
#include "xlite/io/npy.hpp"

using xlite::any_tensor;
using xlite::dtype;
using xlite::tensor;
using xlite_test::little_endian;
using xlite_test::read_bytes;
using xlite_test::scratch_directory;
using xlite_test::write_bytes;

namespace {

// An .npy file of version 1.0 with the given dict and data.
std::string npy_of(const std::string& dict, const std::string& data, int major = 1) {
  const int length_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  header.append((64 - (8 + length_bytes + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  return std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0' + little_endian(header.size(), length_bytes) +
         header + data;
}

} // namespace

TEST_CASE("npy: every dtype, rank 0 to 5 and empty arrays round-trip bit for bit", "[io][npy]") {
  scratch_directory dir;
  std::mt19937_64 rng(7);
  for (const dtype type : xlite_test::all_dtypes) {
    for (int trial = 0; trial < 12; ++trial) {
      const any_tensor t = xlite_test::random_tensor(type, xlite_test::random_shape(rng), rng);
      INFO(name(type) << " of shape " << t.shape());
      xlite::save_npy(dir / "t.npy", t);
      const any_tensor back = xlite::load_npy(dir / "t.npy");
      CHECK(back.type() == type);
      CHECK(back.shape() == t.shape());
      CHECK(std::equal(back.bytes().begin(), back.bytes().end(), t.bytes().begin(), t.bytes().end()));
    }
  }
  xlite::save_npy(dir / "typed.npy", tensor<std::int64_t>{{1, 2, 3}, {4, 5, 6}});
  CHECK(xlite::load_npy(dir / "typed.npy").get<std::int64_t>() == tensor<std::int64_t>{{1, 2, 3}, {4, 5, 6}});
  CHECK(dir.files() == std::vector<std::string>{"t.npy", "typed.npy"});
}

TEST_CASE("npy: the header is NumPy's, as xtensor writes it", "[io][npy]") {
  scratch_directory dir;
  xlite::save_npy(dir / "f.npy", tensor<float>{{1, 2, 3}, {4, 5, 6}});
  const std::string bytes = read_bytes(dir / "f.npy");
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  const auto header_length = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
  CHECK((10 + header_length) % 64 == 0);
  CHECK(bytes.substr(10, dict.size()) == dict);
  CHECK(bytes.size() == 10 + static_cast<std::size_t>(header_length) + 24);
}

TEST_CASE("npy: bfloat16 is NumPy's 2-byte void, as np.save writes ml_dtypes' bfloat16", "[io][npy]") {
  scratch_directory dir;
  const auto path = dir / "b.npy";
  const tensor<xlite::bfloat16> h{xlite::bfloat16(1.5f), xlite::bfloat16(-2.0f)};
  xlite::save_npy(path, h);
  CHECK_THAT(read_bytes(path), Catch::Matchers::Contains("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }"));
  CHECK(xlite::load_npy(path).get<xlite::bfloat16>() == h);
  // A void of no byte order, as NumPy writes np.dtype('V2'), reads the same.
  write_bytes(path, npy_of("{'descr': '|V2', 'fortran_order': False, 'shape': (1,), }", std::string("\xc0\x3f", 2)));
  CHECK(static_cast<float>(xlite::load_npy(path).get<xlite::bfloat16>()(0)) == 1.5f);
}

TEST_CASE("npy: files as NumPy writes them: Fortran order, any key order, version 2, long headers", "[io][npy]") {
  scratch_directory dir;
  const auto path = dir / "n.npy";
  std::string ints;
  for (int v : {1, 4, 2, 5, 3, 6}) ints += little_endian(static_cast<std::uint64_t>(v), 4);

  // np.asfortranarray([[1, 2, 3], [4, 5, 6]]): columns are contiguous.
  write_bytes(path, npy_of("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", ints));
  CHECK(xlite::load_npy(path).get<std::int32_t>() == tensor<std::int32_t>{{1, 2, 3}, {4, 5, 6}});

  // Rank 3 in Fortran order: element (i, j, k) is at i + 2 j + 4 k.
  std::string cube;
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 2; ++i) cube += static_cast<char>(100 * i + 10 * j + k);
  write_bytes(path, npy_of("{'shape': (2, 2, 2), 'fortran_order': True, 'descr': '|u1'}", cube));
  const auto loaded = xlite::load_npy(path);
  const auto& c = loaded.get<std::uint8_t>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) CHECK(c(i, j, k) == 100 * i + 10 * j + k);

  // Double quotes, '=' byte order, a rank-1 tuple "(3,)", version 2.
  write_bytes(path, npy_of("{\"descr\": \"=f8\", \"fortran_order\": False, \"shape\": (3,)}",
                           std::string("\0\0\0\0\0\0\xf0\x3f", 8) + std::string(16, '\0'), 2));
  CHECK(xlite::load_npy(path).get<double>() == tensor<double>{1, 0, 0});

  // A header longer than 127 bytes: xtensor's own reader sign-extends its length's low byte.
  const xlite::shape wide{0, 1000000000, 1000000000, 1000000000, 1000000000, 1000000000, 1000000000, 1000000000};
  xlite::save_npy(path, any_tensor(dtype::f32, wide));
  CHECK(static_cast<unsigned char>(read_bytes(path)[8]) >= 128);
  CHECK(xlite::load_npy(path).shape() == wide);
}

TEST_CASE("npy: every kind of malformed file is reported with what is wrong", "[io][npy]") {
  scratch_directory dir;
  const std::string four(4, '\0');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not an .npy file (no \\x93NUMPY magic)"},
      {"PK\x03\x04 this is a zip", "not an .npy file"},
      {std::string("\x93NUMPY\x04\x00", 8), "format version 4.0 is not 1, 2 or 3"},
      {std::string("\x93NUMPY\x01\x00\x05", 9), "the data ends inside the header's length"},
      {std::string("\x93NUMPY\x01\x00", 8) + little_endian(0, 2), "the header: expected '{' at byte 0"},
      {std::string("\x93NUMPY\x02\x00", 8) + little_endian(1u << 30, 4), "runs past the end of the data"},
      {npy_of("{'descr': '<f4', 'fortran_order': False, }", four),
       "the dict needs 'descr', 'fortran_order' and 'shape'"},
      {npy_of("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", four), "descr '>f4' is not one xlite holds"},
      {npy_of("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", four), "descr '<c8' is not one xlite holds"},
      {npy_of("{'descr': '<f4', 'fortran_order': 1, 'shape': (1,), }", four), "expected True or False"},
      {npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", four), "expected a dimension"},
      {npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", four),
       "more than 8 dimensions"},
      {npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807, 2, 0), }", ""),
       "the dimensions (9223372036854775807, 2, 0) multiply past int64"},
      {npy_of("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", four),
       "an unknown or repeated key 'descr'"},
      {npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", four),
       "an unknown or repeated key 'x'"},
      {npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", four),
       "float32 of shape (2,) needs more than the 4 bytes that follow the header"},
      {npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", four + "x"),
       "float32 of shape (1,) needs 4 bytes, but 5 follow the header"},
      {npy_of("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x07", 2)),
       "bool element 1 is 7, not 0 or 1"},
      {npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk", four), "text after the dict"},
  };
  const auto path = dir / "bad.npy";
  for (const auto& [bytes, problem] : cases) {
    INFO("expected: " << problem);
    write_bytes(path, bytes);
    CHECK_THROWS_AS(xlite::load_npy(path), xlite::io_error);
    CHECK_THROWS_WITH(xlite::load_npy(path), Catch::Matchers::StartsWith("load_npy('" + path.string() + "'): ") &&
                                                 Catch::Matchers::Contains(problem));
  }
}
