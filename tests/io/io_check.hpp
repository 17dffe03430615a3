#pragma once

// What the io tests share: a scratch directory, random tensors of every dtype, and files
// as bytes.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/io/any_tensor.hpp"

namespace xlite_test {

// A directory of its own for one test, removed with everything in it afterwards.
class scratch_directory {
public:
  scratch_directory() {
    static std::atomic<int> count{0};
    path_ = std::filesystem::temp_directory_path() /
            ("xlite-io-" + std::to_string(::getpid()) + "-" + std::to_string(count++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scratch_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  scratch_directory(const scratch_directory&) = delete;
  scratch_directory& operator=(const scratch_directory&) = delete;

  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

  // The names of the files in it, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

private:
  std::filesystem::path path_;
};

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline constexpr xlite::dtype all_dtypes[] = {xlite::dtype::boolean, xlite::dtype::u8,  xlite::dtype::i8,
                                              xlite::dtype::i32,     xlite::dtype::i64, xlite::dtype::f16,
                                              xlite::dtype::bf16,    xlite::dtype::f32, xlite::dtype::f64};

// Rank 0 to max_rank, dimensions 0 to 4: about one shape in six is empty.
inline xlite::shape random_shape(std::mt19937_64& rng, int max_rank = 5) {
  std::vector<std::int64_t> dims(std::uniform_int_distribution<int>(0, max_rank)(rng));
  for (auto& d : dims) d = std::uniform_int_distribution<std::int64_t>(0, 4)(rng);
  return xlite::shape(dims);
}

// Random elements; floats are random bit patterns (NaNs and infinities included), which
// the files must carry bit for bit.
inline xlite::any_tensor random_tensor(xlite::dtype type, const xlite::shape& s, std::mt19937_64& rng) {
  xlite::any_tensor t(type, s);
  auto bytes = t.bytes();
  for (auto& b : bytes) b = static_cast<std::byte>(rng());
  if (type == xlite::dtype::boolean) {
    for (auto& b : bytes) b &= std::byte{1};
  }
  return t;
}

// Bytes as a little-endian integer of `width` bytes.
inline std::string little_endian(std::uint64_t value, int width) {
  std::string out;
  for (int i = 0; i < width; ++i) out += static_cast<char>(value >> (8 * i) & 0xff);
  return out;
}

// `bytes` with 1 to 4 random edits: a bit flipped, a byte replaced by a random or a
// structural character, a byte inserted, bytes deleted, or the rest cut off.
inline std::string mutated(std::string bytes, std::mt19937_64& rng) {
  const auto position = [&] { return std::uniform_int_distribution<std::size_t>(0, bytes.size())(rng); };
  const int edits = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = position();
    switch (rng() % 6) {
    case 0: // flip a bit
      if (at < bytes.size()) bytes[at] = static_cast<char>(bytes[at] ^ (1 << rng() % 8));
      break;
    case 1: // a random byte
      if (at < bytes.size()) bytes[at] = static_cast<char>(rng());
      break;
    case 2: // a structural character where it may confuse a parser
      if (at < bytes.size()) bytes[at] = "{}[]\",:0123456789-. \\u'()"[rng() % 25];
      break;
    case 3:
      bytes.insert(at, 1, static_cast<char>(rng()));
      break;
    case 4:
      if (at < bytes.size()) bytes.erase(at, 1 + rng() % 8);
      break;
    default:
      bytes.resize(at); // cut off
    }
  }
  return bytes;
}

} // namespace xlite_test
