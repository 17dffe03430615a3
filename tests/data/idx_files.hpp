#pragma once

// Writing IDX files for the tests, raw or gzip'd, in a temporary directory that is removed
// at the end of the test case.

#include <zlib.h>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace xlite_test {

using bytes = std::vector<unsigned char>;

class temp_dir {
public:
  temp_dir() {
    static std::atomic<int> made{0};
    path_ = std::filesystem::temp_directory_path() /
            ("xlite-data-tests-" + std::to_string(::getpid()) + "-" + std::to_string(made++));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

// An IDX file's bytes: magic (0, 0, type, rank), big-endian lengths, then `data`.
inline bytes idx_bytes(unsigned type, const std::vector<std::uint32_t>& dims, const bytes& data) {
  bytes out{0, 0, static_cast<unsigned char>(type), static_cast<unsigned char>(dims.size())};
  for (const auto d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<unsigned char>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline void write_raw(const std::filesystem::path& file, const bytes& content) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
  REQUIRE(out.good());
}

inline void write_gz(const std::filesystem::path& file, const bytes& content) {
  gzFile out = gzopen(file.c_str(), "wb");
  REQUIRE(out != nullptr);
  if (!content.empty()) REQUIRE(gzwrite(out, content.data(), static_cast<unsigned>(content.size())) > 0);
  REQUIRE(gzclose(out) == Z_OK);
}

inline bytes read_raw(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

} // namespace xlite_test
