#pragma once

// Reading IDX files, the format of MNIST and Fashion-MNIST: two zero bytes, a type code, the
// rank, one big-endian 32-bit length per dimension, then the elements in row-major order.
// The file may be gzip'd or not: zlib's gzread reads both.
//
// Nothing is allocated on the header's word alone: the data a header claims must fit in the
// file first (exactly, for an uncompressed file; within deflate's largest expansion, for a
// gzip'd one), so a corrupt or hostile file costs at most a bounded allocation.

#if !__has_include(<zlib.h>)
#error "xlite/data/idx.hpp reads gzip'd files with zlib: install it (Debian: zlib1g-dev) and link xlite::zlib"
#endif

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/expr/tensor.hpp"

namespace xlite::data {

// A file that exists but does not hold what the reader expects: not IDX, a type it does not
// read, lengths that do not match the data, or corrupt gzip data. An io_error, so code that
// handles "the file cannot be read" handles it too.
class format_error : public io_error {
public:
  using io_error::io_error;
};

namespace detail {

// Deflate expands at most 1032 times (a 258-byte match coded in two bits), so a gzip'd file
// of S bytes holds at most 1032 S bytes of data.
inline constexpr std::uint64_t max_deflate_expansion = 1032;

inline const char* idx_type_name(unsigned code) {
  switch (code) {
  case 0x08:
    return "unsigned byte";
  case 0x09:
    return "signed byte";
  case 0x0B:
    return "int16";
  case 0x0C:
    return "int32";
  case 0x0D:
    return "float32";
  case 0x0E:
    return "float64";
  default:
    return nullptr;
  }
}

// "0x0d".
inline std::string hex_text(unsigned value, int digits) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string text = "0x";
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) text += hex[(value >> shift) & 0xFU];
  return text;
}

// "(60000, 28, 28)", from the header's lengths, which may not make a valid xlite::shape.
inline std::string dims_text(std::span<const std::uint32_t> dims) {
  std::string text = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + (dims.size() == 1 ? ",)" : ")");
}

// A file opened with gzopen, whose errors name the file.
class idx_file {
public:
  explicit idx_file(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) fail<io_error>("the file does not exist");
    if (!std::filesystem::is_regular_file(status)) fail<io_error>("not a regular file");
    size_ = std::filesystem::file_size(path, ec);
    if (ec) fail<io_error>(ec.message());
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_) fail<io_error>(errno ? std::strerror(errno) : "gzopen failed");
    gzbuffer(file_.get(), 1U << 17); // fewer, larger reads than the default 8 KiB
  }

  // Reads up to `bytes` bytes; fewer only where the data ends.
  std::uint64_t read(void* out, std::uint64_t bytes) {
    auto* at = static_cast<unsigned char*>(out);
    std::uint64_t total = 0;
    while (total < bytes) {
      const auto chunk =
          static_cast<unsigned>(std::min<std::uint64_t>(bytes - total, 1U << 30)); // gzread takes an int's worth
      const int got = gzread(file_.get(), at + total, chunk);
      if (got < 0) fail_from_zlib();
      if (got == 0) break;
      total += static_cast<std::uint64_t>(got);
    }
    return total;
  }

  // Meaningful after the first read: whether zlib found a gzip header.
  bool compressed() { return gzdirect(file_.get()) == 0; }
  std::uint64_t size() const noexcept { return size_; }

  // After a read that came up short: whether a gzip stream ended before its trailer.
  bool cut_short() {
    int code = Z_OK;
    gzerror(file_.get(), &code);
    return code == Z_BUF_ERROR;
  }
  const char* end_of_data() { return cut_short() ? "the gzip stream is cut short" : "the file ends"; }

  template <class Error = format_error, class... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw Error(xlite::detail::message("read_idx: ", path_.string(), ": ", std::forward<Parts>(parts)...));
  }

private:
  [[noreturn]] void fail_from_zlib() {
    int code = Z_OK;
    std::string_view what = gzerror(file_.get(), &code);
    if (code == Z_ERRNO) fail<io_error>(std::strerror(errno));
    const std::string prefix = path_.string() + ": "; // zlib names the file too
    if (what.starts_with(prefix)) what.remove_prefix(prefix.size());
    fail("corrupt gzip data (zlib: ", what, ")");
  }

  struct closer {
    void operator()(gzFile f) const noexcept { gzclose(f); }
  };

  std::filesystem::path path_;
  std::uint64_t size_ = 0;
  std::unique_ptr<gzFile_s, closer> file_;
};

} // namespace detail

// The unsigned-byte IDX file `path` (type code 0x08), gzip'd or not, as a tensor of the
// header's shape. Throws io_error when the file cannot be read and format_error (an
// io_error) when its contents are wrong; both name the file. Bytes after the end of a gzip
// stream are ignored, as zlib does.
inline xlite::tensor<std::uint8_t> read_idx(const std::filesystem::path& path) {
  detail::idx_file file(path);

  std::array<unsigned char, 4> magic{};
  if (const auto got = file.read(magic.data(), magic.size()); got < magic.size()) {
    file.fail("truncated header: ", file.end_of_data(), " after ", got, " bytes, within the 4-byte magic number");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    const unsigned number = unsigned{magic[0]} << 24 | unsigned{magic[1]} << 16 | unsigned{magic[2]} << 8 | magic[3];
    file.fail("bad magic number ", detail::hex_text(number, 8),
              ": an IDX file starts with two zero bytes (is it an IDX file, or a gzip'd one?)");
  }
  const unsigned type = magic[2];
  const unsigned rank = magic[3];
  if (type != 0x08) {
    const char* name = detail::idx_type_name(type);
    if (name != nullptr) {
      file.fail("type code ", detail::hex_text(type, 2), " (", name,
                ") is not supported: read_idx reads unsigned bytes (0x08)");
    }
    file.fail("bad magic number: unknown type code ", detail::hex_text(type, 2),
              " (IDX's are 0x08, 0x09, 0x0b, 0x0c, 0x0d and 0x0e)");
  }
  if (rank > max_rank) file.fail("rank ", rank, " exceeds xlite's maximum rank ", max_rank);

  std::array<std::uint32_t, max_rank> dims{};
  for (unsigned axis = 0; axis < rank; ++axis) {
    std::array<unsigned char, 4> bytes{};
    if (file.read(bytes.data(), bytes.size()) < bytes.size()) {
      file.fail("truncated header: ", file.end_of_data(), " within the length of dimension ", axis, " of ", rank);
    }
    dims[axis] =
        std::uint32_t{bytes[0]} << 24 | std::uint32_t{bytes[1]} << 16 | std::uint32_t{bytes[2]} << 8 | bytes[3];
    if (dims[axis] > static_cast<std::uint32_t>(std::numeric_limits<std::int32_t>::max())) {
      file.fail("dimension ", axis, " is ", dims[axis], ", negative as the int32 that IDX lengths are");
    }
  }
  const std::span<const std::uint32_t> lengths(dims.data(), rank);
  const std::string claimed = detail::dims_text(lengths);

  // The element count, with overflow checked before the product is formed (a zero length
  // anywhere makes it zero).
  std::uint64_t count = 1;
  for (const auto length : lengths) {
    if (length == 0) count = 0;
  }
  for (const auto length : lengths) {
    if (count == 0) break;
    if (count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / length) {
      file.fail("dimensions ", claimed, " have more than 2^63 elements");
    }
    count *= length;
  }

  const std::uint64_t header_bytes = 4 + 4 * std::uint64_t{rank};
  if (!file.compressed()) {
    const std::uint64_t held = file.size() > header_bytes ? file.size() - header_bytes : 0;
    if (count > held) {
      file.fail("truncated data: dimensions ", claimed, " need ", count, " bytes, but the file has ", held,
                " after its ", header_bytes, "-byte header");
    }
    if (count < held) {
      file.fail("trailing data: ", held - count, " bytes after the ", count, " that dimensions ", claimed, " describe");
    }
  } else if (count / detail::max_deflate_expansion > file.size()) {
    file.fail("dimensions ", claimed, " need ", count, " bytes, more than a gzip'd file of ", file.size(),
              " bytes can hold");
  }

  std::optional<xlite::tensor<std::uint8_t>> result;
  try {
    result.emplace(xlite::tensor<std::uint8_t>::uninitialized, xlite::shape(lengths));
  } catch (const std::bad_alloc&) {
    file.fail<io_error>("cannot allocate the ", count, " bytes that dimensions ", claimed, " need");
  }
  if (const auto got = file.read(result->data(), count); got < count) {
    file.fail("truncated data: ", file.end_of_data(), " after ", got, " of the ", count, " bytes that dimensions ",
              claimed, " need");
  }
  unsigned char extra = 0;
  if (file.read(&extra, 1) != 0)
    file.fail("trailing data after the ", count, " bytes that dimensions ", claimed, " describe");
  if (file.cut_short()) file.fail("truncated gzip stream: its trailer is missing after all the data");
  return std::move(*result);
}

} // namespace xlite::data
