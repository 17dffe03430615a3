// The IDX reader: raw and gzip'd files read back, every malformed file refused with an
// error of the right type that names the file, and random corruption never crashing it.

#include "xlite/data/idx.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../thrown.hpp"
#include "idx_files.hpp"

using namespace xlite_test;
using Catch::Matchers::Contains;
using xlite::data::format_error;
using xlite::data::read_idx;

namespace {

bytes counting(std::size_t n) {
  bytes data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<unsigned char>(i * 7 + 3);
  return data;
}

void write(const std::filesystem::path& file, const bytes& content, bool gzipped) {
  gzipped ? write_gz(file, content) : write_raw(file, content);
}

} // namespace

TEST_CASE("read_idx reads raw and gzip'd unsigned-byte files", "[data][idx]") {
  static_assert(std::is_base_of_v<xlite::io_error, format_error>);
  temp_dir dir;
  struct example {
    std::vector<std::uint32_t> dims;
    xlite::shape shape;
  };
  const std::vector<example> examples{{{5}, xlite::shape{5}},
                                      {{3, 4}, xlite::shape{3, 4}},
                                      {{2, 28, 28}, xlite::shape{2, 28, 28}},
                                      {{}, xlite::shape{}}, // rank 0: one element
                                      {{4, 0, 3}, xlite::shape{4, 0, 3}}};
  for (const bool gzipped : {false, true}) {
    for (const auto& e : examples) {
      const auto data = counting(static_cast<std::size_t>(e.shape.numel()));
      const auto file = dir / "example.idx";
      write(file, idx_bytes(0x08, e.dims, data), gzipped);
      const auto t = read_idx(file);
      INFO((gzipped ? "gzip'd " : "raw ") << e.shape);
      CHECK(t.shape() == e.shape);
      CHECK(bytes(t.begin(), t.end()) == data);
    }
  }
}

TEST_CASE("read_idx: a file that is missing or not a file is an io_error naming it", "[data][idx]") {
  temp_dir dir;
  const auto missing = dir / "missing-idx1-ubyte.gz";
  CHECK_THAT(message_of<xlite::io_error>([&] { read_idx(missing); }),
             Contains(missing.string()) && Contains("does not exist"));
  CHECK_THAT(message_of<xlite::io_error>([&] { read_idx(dir.path()); }),
             Contains(dir.path().string()) && Contains("not a regular file"));
}

TEST_CASE("read_idx refuses every malformed file with a format_error that names the file and the fault",
          "[data][idx]") {
  temp_dir dir;
  struct malformed {
    const char* name;
    bytes content;
    const char* fault;
  };
  const std::vector<malformed> cases{
      {"empty", {}, "truncated header"},
      {"cut within the magic number", {0, 0}, "truncated header"},
      {"cut within the lengths", bytes{0, 0, 8, 3, 0, 0, 0, 2, 0, 0}, "within the length of dimension 1 of 3"},
      {"bad magic", bytes{1, 0, 8, 1, 0, 0, 0, 2, 1, 2}, "bad magic number 0x01000801"},
      {"float32 type code", idx_bytes(0x0D, {1}, {0, 0, 0, 0}), "type code 0x0d (float32) is not supported"},
      {"unknown type code", idx_bytes(0x42, {1}, {0}), "unknown type code 0x42"},
      {"rank above xlite's", idx_bytes(0x08, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {0}), "rank 9 exceeds"},
      {"negative length", idx_bytes(0x08, {0x80000000U}, {}), "dimension 0 is 2147483648, negative"},
      {"lengths whose product overflows", idx_bytes(0x08, std::vector<std::uint32_t>(8, 0x7FFFFFFFU), {}),
       "more than 2^63 elements"},
      {"huge lengths in a small file", idx_bytes(0x08, {0x7FFFFFFFU, 0x7FFFFFFFU}, {1, 2, 3}),
       "need 4611686014132420609 bytes"},
      {"truncated data", idx_bytes(0x08, {2, 3}, counting(5)), "truncated data"},
      {"trailing bytes", idx_bytes(0x08, {2, 3}, counting(7)), "trailing data"},
      {"text", bytes{'h', 'e', 'l', 'l', 'o', '\n'}, "bad magic number 0x68656c6c"},
  };
  for (const bool gzipped : {false, true}) {
    for (const auto& c : cases) {
      const auto file = dir / (std::string(c.name) + (gzipped ? ".gz" : ""));
      write(file, c.content, gzipped);
      INFO((gzipped ? "gzip'd: " : "raw: ") << c.name);
      CHECK_THAT(message_of<format_error>([&] { read_idx(file); }),
                 Contains("read_idx: " + file.string() + ": ") && Contains(c.fault));
    }
  }
}

TEST_CASE("read_idx refuses damaged gzip streams", "[data][idx]") {
  temp_dir dir;
  const auto valid = dir / "valid.gz";
  write_gz(valid, idx_bytes(0x08, {100, 10}, counting(1000)));
  const bytes compressed = read_raw(valid);
  REQUIRE(compressed.size() > 40);
  const auto check = [&](const char* name, const bytes& content, const char* fault) {
    const auto file = dir / name;
    write_raw(file, content);
    INFO(name);
    CHECK_THAT(message_of<format_error>([&] { read_idx(file); }), Contains(file.string()) && Contains(fault));
  };
  check("half.gz", bytes(compressed.begin(), compressed.begin() + static_cast<long>(compressed.size() / 2)),
        "the gzip stream is cut short");
  check("no-trailer.gz", bytes(compressed.begin(), compressed.end() - 8), "its trailer is missing");
  bytes bad_crc = compressed;
  bad_crc[bad_crc.size() - 8] ^= 0x01; // the trailer's CRC-32
  check("bad-crc.gz", bad_crc, "corrupt gzip data (zlib: incorrect data check)");
  bytes bad_length = compressed;
  bad_length[bad_length.size() - 4] ^= 0x01; // the trailer's length
  check("bad-length.gz", bad_length, "corrupt gzip data (zlib: incorrect length check)");

  // Bytes after the stream are ignored, as zlib and gzip -d do.
  bytes padded = compressed;
  padded.insert(padded.end(), 16, 0);
  write_raw(dir / "padded.gz", padded);
  CHECK(read_idx(dir / "padded.gz").shape() == xlite::shape{100, 10});
}

TEST_CASE("read_idx survives random corruption: it reads or throws an xlite::error", "[data][idx]") {
  temp_dir dir;
  const bytes raw = idx_bytes(0x08, {6, 5, 4}, counting(120));
  write_gz(dir / "seed.gz", raw);
  const bytes gz = read_raw(dir / "seed.gz");
  std::mt19937 random(20261123); // the test's own choices: any platform's sequence will do
  const auto below = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(random); };
  int read = 0;
  int refused = 0;
  for (int round = 0; round < 400; ++round) {
    bytes content = round % 2 == 0 ? raw : gz;
    const int mutations = 1 + static_cast<int>(below(3));
    for (int m = 0; m < mutations; ++m) {
      switch (below(4)) {
      case 0: // flip bits of a byte
        if (!content.empty()) content[below(content.size())] ^= static_cast<unsigned char>(1 + below(255));
        break;
      case 1: // cut the file
        content.resize(below(content.size() + 1));
        break;
      case 2: // insert bytes
        content.insert(content.begin() + static_cast<long>(below(content.size() + 1)), 1 + below(8),
                       static_cast<unsigned char>(below(256)));
        break;
      default: // overwrite a header byte, where the lengths are
        if (content.size() > 4) content[4 + below(std::min<std::size_t>(content.size() - 4, 12))] = 0xFF;
        break;
      }
    }
    const auto file = dir / ("mutant-" + std::to_string(round));
    write_raw(file, content);
    try {
      const auto t = read_idx(file);
      CHECK(t.size() >= 0);
      ++read;
    } catch (const xlite::error& e) {
      CHECK_THAT(e.what(), Contains(file.string()));
      ++refused;
    }
    std::filesystem::remove(file);
  }
  CHECK(read + refused == 400);
  CHECK(refused > 200); // most mutations break the file
}
