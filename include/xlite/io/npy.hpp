#pragma once

// NumPy's .npy files: save_npy(path, t) and load_npy(path) -> any_tensor.
//
// The header (magic, version, the Python dict with 'descr', 'fortran_order' and 'shape',
// padding) is written by xtensor's own npy writer. Reading does not go through xtensor:
// its reader trusts the file (a header of length 0 reads header.back() of an empty string,
// header lengths whose low byte is 128 or more are sign-extended into nonsense, a short
// file leaves the data silently half read, and it requires numpy's key order), and load()
// must report a malformed file, not crash on it. So xlite parses the header itself and
// checks it against the file's size; a Fortran-ordered array is transposed with xtensor.
//
// dtypes: bool, uint8, int8, int32, int64, float16, float32, float64, little-endian, and
// bfloat16, which NumPy lacks, as the 2-byte void '<V2': what np.save writes for
// ml_dtypes' bfloat16. NumPy reads it as raw bytes (`.view(ml_dtypes.bfloat16)` restores
// it); xlite reads a 2-byte void back as bfloat16.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xnpy.hpp>

#include "xlite/core/atomic_file.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/io/any_tensor.hpp"

namespace xlite {

namespace io::detail {

inline constexpr std::array<std::pair<dtype, std::string_view>, 9> npy_descrs{{
    {dtype::boolean, "|b1"},
    {dtype::u8, "|u1"},
    {dtype::i8, "|i1"},
    {dtype::i32, "<i4"},
    {dtype::i64, "<i8"},
    {dtype::f16, "<f2"},
    {dtype::f32, "<f4"},
    {dtype::f64, "<f8"},
    {dtype::bf16, "<V2"},
}};

// Generous for any rank-8 shape, small enough that a hostile length allocates little.
inline constexpr std::uint32_t max_npy_header_bytes = 1 << 16;

struct npy_header {
  dtype type;
  bool fortran_order;
  xlite::shape shape;
};

// Reads the Python dict literal of an .npy header, in any key order.
class npy_header_reader {
public:
  npy_header_reader(std::string_view text, std::string context) : text_(text), context_(std::move(context)) {}

  npy_header read() {
    std::optional<dtype> type;
    std::optional<bool> fortran_order;
    std::optional<std::vector<std::int64_t>> dims;
    expect('{');
    while (!consume('}')) {
      const std::string key = quoted();
      expect(':');
      if (key == "descr" && !type) {
        type = descr(quoted());
      } else if (key == "fortran_order" && !fortran_order) {
        fortran_order = boolean();
      } else if (key == "shape" && !dims) {
        dims = tuple();
      } else {
        fail("an unknown or repeated key '" + key + "'");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (at_ != text_.size()) fail("text after the dict");
    if (!type || !fortran_order || !dims) fail("the dict needs 'descr', 'fortran_order' and 'shape'");
    try {
      return {*type, *fortran_order, file_shape(*dims)};
    } catch (const shape_error& e) {
      fail(e.what());
    }
  }

  [[noreturn]] void fail(std::string_view problem) const {
    throw io_error(xlite::detail::message(context_, ": the header: ", problem, " at byte ", at_));
  }

private:
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t')) ++at_;
  }
  bool consume(char c) {
    skip_space();
    if (at_ == text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) fail(xlite::detail::message("expected '", c, "'"));
  }
  bool starts_with(std::string_view word) {
    skip_space();
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  std::string quoted() {
    skip_space();
    if (at_ == text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) fail("expected a quoted string");
    const char quote = text_[at_++];
    const std::size_t close = text_.find(quote, at_);
    if (close == std::string_view::npos) fail("a string without its closing quote");
    std::string out(text_.substr(at_, close - at_));
    at_ = close + 1;
    return out;
  }

  bool boolean() {
    if (starts_with("True")) return true;
    if (starts_with("False")) return false;
    fail("expected True or False");
  }

  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> dims;
    expect('(');
    while (!consume(')')) {
      if (dims.size() == max_rank) fail(xlite::detail::message("more than ", max_rank, " dimensions"));
      dims.push_back(integer());
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }

  std::int64_t integer() {
    skip_space();
    if (at_ == text_.size() || text_[at_] < '0' || text_[at_] > '9') fail("expected a dimension");
    std::int64_t value = 0;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      const int digit = text_[at_++] - '0';
      if (value > (INT64_MAX - digit) / 10) fail("a dimension too large");
      value = value * 10 + digit;
    }
    return value;
  }

  dtype descr(const std::string& d) {
    // NumPy writes '|' for one-byte types and '<' for little-endian; '=' is the machine's.
    std::string normal = d;
    if (!normal.empty() && normal[0] == '=') normal[0] = '<';
    if (normal == "<b1" || normal == "<u1" || normal == "<i1") normal[0] = '|';
    if (normal == "|V2") normal[0] = '<'; // a void has no byte order
    const auto* found =
        std::ranges::find(npy_descrs, std::string_view(normal), &std::pair<dtype, std::string_view>::second);
    if (found == npy_descrs.end()) {
      fail("descr '" + d +
           "' is not one xlite holds (it reads |b1, |u1, |i1, <i4, <i8, <f2, <f4, <f8 and <V2: "
           "little-endian bool, uint8, int8, int32, int64, float16, float32, float64, and bfloat16 as a "
           "2-byte void)");
    }
    return found->first;
  }

  std::string_view text_;
  std::string context_;
  std::size_t at_ = 0;
};

// Transposes the row-major elements of `from` (whose shape is t's reversed) into t: what
// a Fortran-ordered file holds, in C order.
inline void from_fortran_order(const any_tensor& from, any_tensor& t) {
  visit_dtype(t.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto& source = from.get<T>();
    auto& target = t.get<T>();
    std::vector<std::size_t> reversed(source.shape().begin(), source.shape().end());
    std::vector<std::size_t> dims(target.shape().begin(), target.shape().end());
    const auto in = xt::adapt(source.data(), static_cast<std::size_t>(source.size()), xt::no_ownership(), reversed);
    auto out = xt::adapt(target.data(), static_cast<std::size_t>(target.size()), xt::no_ownership(), dims);
    out = xt::transpose(in);
  });
}

// The .npy header (magic, version, dict, padding) for an array of `type` and `s`, as
// xtensor writes it.
inline std::string npy_header_bytes(dtype type, const xlite::shape& s) {
  const auto* found = std::ranges::find(npy_descrs, type, &std::pair<dtype, std::string_view>::first);
  std::ostringstream header;
  xt::detail::write_header(header, std::string(found->second), false, std::vector<std::size_t>(s.begin(), s.end()));
  return std::move(header).str();
}

inline void write_npy(const std::filesystem::path& path, dtype type, const xlite::shape& s,
                      std::span<const std::byte> bytes) {
  atomic_file file(path, "save_npy");
  file.write(npy_header_bytes(type, s));
  file.write(bytes);
  file.commit();
}

} // namespace io::detail

// Writes t to `path` as an .npy file (C order), replacing any file there only once the
// new one is whole.
template <element_type T>
void save_npy(const std::filesystem::path& path, const tensor<T>& t) {
  io::detail::write_npy(path, dtype_of_v<T>, t.shape(),
                        std::as_bytes(std::span(t.data(), static_cast<std::size_t>(t.size()))));
}
inline void save_npy(const std::filesystem::path& path, const any_tensor& t) {
  io::detail::write_npy(path, t.type(), t.shape(), t.bytes());
}

namespace io::detail {

// The array in the `size` bytes of .npy data at `in`'s position (a file, or an entry of an
// .npz archive); `context` starts every error's message.
inline any_tensor read_npy(std::istream& in, std::int64_t size, const std::string& context) {
  const auto fail = [&](auto&&... parts) {
    throw io_error(xlite::detail::message(context, ": ", std::forward<decltype(parts)>(parts)...));
  };
  std::array<char, 8> magic{};
  if (size >= 8) in.read(magic.data(), magic.size());
  if (size < 8 || !in || std::memcmp(magic.data(), "\x93NUMPY", 6) != 0) fail("not an .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  if (major < 1 || major > 3) fail("format version ", major, ".", static_cast<int>(magic[7]), " is not 1, 2 or 3");
  // Version 1 has a 2-byte header length, versions 2 and 3 a 4-byte one; little-endian.
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::array<unsigned char, 4> length_le{};
  if (size >= static_cast<std::int64_t>(8 + length_bytes)) {
    in.read(reinterpret_cast<char*>(length_le.data()), static_cast<std::streamsize>(length_bytes));
  }
  if (size < static_cast<std::int64_t>(8 + length_bytes) || !in) fail("the data ends inside the header's length");
  std::uint32_t header_length = 0;
  for (std::size_t i = length_bytes; i-- > 0;) header_length = header_length << 8 | length_le[i];
  const auto data_start = static_cast<std::int64_t>(8 + length_bytes + header_length);
  if (header_length > max_npy_header_bytes || data_start > size) {
    fail("the header's length, ", header_length, " bytes, runs past the end of the data (", size, " bytes)");
  }
  std::string text(header_length, '\0');
  in.read(text.data(), header_length);
  if (!in) fail("cannot read the header");
  const npy_header header = npy_header_reader(text, context).read();

  const std::int64_t data_bytes = size - data_start;
  const auto width = static_cast<std::int64_t>(size_of(header.type));
  if (header.shape.numel() > data_bytes / width) {
    fail(name(header.type), " of shape ", header.shape, " needs more than the ", data_bytes,
         " bytes that follow the header");
  }
  if (header.shape.numel() * width != data_bytes) {
    fail(name(header.type), " of shape ", header.shape, " needs ", header.shape.numel() * width, " bytes, but ",
         data_bytes, " follow the header");
  }
  std::vector<std::int64_t> stored_dims(header.shape.begin(), header.shape.end());
  if (header.fortran_order) std::ranges::reverse(stored_dims);
  any_tensor stored(header.type, xlite::shape(stored_dims));
  const std::span<std::byte> bytes = stored.bytes();
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) fail("cannot read the data");
  if (const auto bad = non_boolean(stored)) {
    fail("bool element ", *bad, " is ", static_cast<int>(bytes[*bad]), ", not 0 or 1");
  }
  if (!header.fortran_order || header.shape.rank() < 2) return stored;
  any_tensor t(header.type, header.shape);
  from_fortran_order(stored, t);
  return t;
}

} // namespace io::detail

// The array in the .npy file at `path`. A malformed or truncated file is an io_error
// naming it and what is wrong.
inline any_tensor load_npy(const std::filesystem::path& path) {
  const std::string context = "load_npy('" + path.string() + "')";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw io_error(context + ": cannot open the file");
  const auto size = static_cast<std::int64_t>(in.tellg());
  in.seekg(0);
  return io::detail::read_npy(in, size, context);
}

} // namespace xlite
