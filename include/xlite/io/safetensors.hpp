#pragma once

// save() and load() in the safetensors format, which PyTorch, JAX and Hugging Face read:
//
//   8 bytes   N, the header's length, little-endian
//   N bytes   a JSON object: {"__metadata__": {string: string}, (optional)
//                             name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...}
//             padded with spaces so the data starts 8-byte aligned
//   the rest  each tensor's elements, row-major, little-endian, at [b, e) from the data's start
//
// save() writes one tensor at a time: a lazy tensor is computed with the others (one launch
// for all that are pending), then copied straight from its device buffer to the file, so
// the host holds no second copy (the seed's xser.save streams for the same reason). The
// file is written under a temporary name and renamed when whole (core/atomic_file.hpp).
// load() trusts nothing in the file: it checks the header's length against the file's,
// every dtype, shape and offset, that the tensors tile the data with no gap or overlap
// (safetensors' own rule), and that booleans are 0 or 1, and reports the first problem as
// an io_error naming the file and the tensor.

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <ranges>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/atomic_file.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/core/source_location.hpp"
#include "xlite/io/any_tensor.hpp"
#include "xlite/io/json.hpp"
#include "xlite/io/saved_tensor.hpp"
#include "xlite/lazy/step.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite {

static_assert(std::endian::native == std::endian::little, "xlite's files are little-endian, as the machine must be");

// Free-form string pairs stored with the tensors (safetensors' "__metadata__").
using tensor_metadata = std::map<std::string, std::string, std::less<>>;

// Named tensors as load() returns them.
using tensor_map = std::map<std::string, any_tensor, std::less<>>;

namespace io::detail {

// safetensors' limit on the header, which keeps a hostile length from allocating gigabytes.
inline constexpr std::int64_t max_header_bytes = 100'000'000;

inline constexpr std::array<std::pair<dtype, std::string_view>, 9> safetensors_dtypes{{
    {dtype::boolean, "BOOL"},
    {dtype::u8, "U8"},
    {dtype::i8, "I8"},
    {dtype::i32, "I32"},
    {dtype::i64, "I64"},
    {dtype::f16, "F16"},
    {dtype::bf16, "BF16"},
    {dtype::f32, "F32"},
    {dtype::f64, "F64"},
}};

inline std::string_view safetensors_name(dtype t) {
  return std::ranges::find(safetensors_dtypes, t, &std::pair<dtype, std::string_view>::first)->second;
}

inline std::optional<dtype> safetensors_dtype(std::string_view name) {
  const auto* found = std::ranges::find(safetensors_dtypes, name, &std::pair<dtype, std::string_view>::second);
  if (found == safetensors_dtypes.end()) return std::nullopt;
  return found->first;
}

// Where a tensor's bytes are, relative to the data's start.
struct stored_tensor {
  std::string name;
  dtype type;
  xlite::shape shape;
  std::int64_t begin;
  std::int64_t end;
};

struct safetensors_header {
  std::vector<stored_tensor> tensors; // in the order of their data
  tensor_metadata metadata;
  std::int64_t data_start; // the file offset of the data
};

inline std::string json_integers(std::span<const std::int64_t> values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

// The header for `tensors` laid out in this order, padded so the data is 8-byte aligned.
inline std::string header_json(const named_tensors& tensors, const tensor_metadata& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      json += (json.back() == '{' ? "" : ",") + json_string(key) + ":" + json_string(value);
    }
    json += "}";
  }
  std::int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::array<std::int64_t, 2> offsets{offset, offset + t.byte_size()};
    offset = offsets[1];
    json += (json.size() == 1 ? "" : ",") + json_string(name) + ":{\"dtype\":\"" +
            std::string(safetensors_name(t.type())) + "\",\"shape\":" + json_integers(t.shape().dims()) +
            ",\"data_offsets\":" + json_integers(offsets) + "}";
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

inline void save_entries(const std::filesystem::path& path, named_tensors tensors, const tensor_metadata& metadata,
                         source_location where) {
  check_names(tensors, path, "save");
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") {
      throw value_error(xlite::detail::message("save('", path.string(),
                                               "'): '__metadata__' is the format's own key, not a tensor name"));
    }
  }
  // Widest elements first, then by name, as safetensors writes them: every tensor starts
  // aligned to its element size.
  std::ranges::sort(tensors, [](const auto& a, const auto& b) {
    const auto wa = size_of(a.second.type()), wb = size_of(b.second.type());
    return wa != wb ? wa > wb : a.first < b.first;
  });
  compute_pending(tensors, where);
  const std::string header = header_json(tensors, metadata);
  atomic_file file(path, "save");
  std::array<std::byte, 8> length{};
  const auto header_length = static_cast<std::uint64_t>(header.size());
  std::memcpy(length.data(), &header_length, length.size());
  file.write(length);
  file.write(header);
  for (const auto& [name, t] : tensors) {
    write_elements(
        name, t, [&](std::span<const std::byte> bytes) { file.write(bytes); }, path, where);
  }
  file.commit();
}

// Reads and checks the header of the safetensors file `in` (of `file_size` bytes).
inline safetensors_header read_header(std::istream& in, std::int64_t file_size, const std::string& context) {
  const auto fail = [&](auto&&... parts) {
    throw io_error(xlite::detail::message(context, ": ", std::forward<decltype(parts)>(parts)...));
  };
  if (file_size < 8) fail("the file has ", file_size, " bytes, fewer than the 8 of the header's length");
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  if (!in) fail("cannot read the header's length");
  if (length > static_cast<std::uint64_t>(max_header_bytes)) {
    fail("the header's length, ", length, " bytes, is over the format's limit of ", max_header_bytes);
  }
  const auto header_length = static_cast<std::int64_t>(length);
  if (8 + header_length > file_size) {
    fail("the header's length, ", header_length, " bytes, runs past the end of the file (", file_size, " bytes)");
  }
  std::string text(static_cast<std::size_t>(header_length), '\0');
  in.read(text.data(), header_length);
  if (!in) fail("cannot read the header");

  safetensors_header header{{}, {}, 8 + header_length};
  const std::int64_t data_bytes = file_size - header.data_start;
  io::detail::json_reader json(text, context + ": the header");
  if (text.empty() || text[0] != '{') json.fail("the header must start with '{'");
  std::set<std::string, std::less<>> names;
  json.object([&](const std::string& name) {
    if (!names.insert(name).second) json.fail(xlite::detail::message("the key '", name, "' appears twice"));
    if (name == "__metadata__") {
      json.object([&](const std::string& key) { header.metadata[key] = json.string(); });
      return;
    }
    std::optional<dtype> type;
    std::vector<std::int64_t> dims;
    std::vector<std::int64_t> offsets;
    std::set<std::string, std::less<>> fields;
    json.object([&](const std::string& field) {
      if (!fields.insert(field).second) json.fail(xlite::detail::message("tensor '", name, "' has two '", field, "'"));
      if (field == "dtype") {
        const std::string type_name = json.string();
        type = safetensors_dtype(type_name);
        if (!type) {
          fail("tensor '", name, "' has dtype '", type_name,
               "', which xlite does not hold (it reads BOOL, U8, I8, I32, I64, F16, BF16, F32 and F64)");
        }
      } else if (field == "shape") {
        json.array([&] {
          if (dims.size() == max_rank) fail("tensor '", name, "' has more than ", max_rank, " dimensions");
          dims.push_back(json.integer());
        });
      } else if (field == "data_offsets") {
        json.array([&] {
          if (offsets.size() == 2) fail("tensor '", name, "' has more than 2 data_offsets");
          offsets.push_back(json.integer());
        });
      } else {
        json.fail(xlite::detail::message("tensor '", name, "' has an unknown field '", field, "'"));
      }
    });
    if (!type || fields.size() != 3 || offsets.size() != 2) {
      fail("tensor '", name, "' needs a dtype, a shape and two data_offsets");
    }
    std::optional<xlite::shape> s;
    try {
      s = io::detail::file_shape(dims);
    } catch (const shape_error& e) {
      fail("tensor '", name, "': ", e.what());
    }
    const auto width = static_cast<std::int64_t>(size_of(*type));
    if (s->numel() > data_bytes / width) {
      fail("tensor '", name, "' of shape ", *s, " needs more bytes than the file's data holds (", data_bytes, ")");
    }
    if (offsets[1] - offsets[0] != s->numel() * width) {
      fail("tensor '", name, "' has data_offsets [", offsets[0], ", ", offsets[1], "], but ", safetensors_name(*type),
           " of shape ", *s, " takes ", s->numel() * width, " bytes");
    }
    header.tensors.push_back({name, *type, *s, offsets[0], offsets[1]});
  });
  json.end();

  // The tensors must tile the data exactly: no gap, no overlap, nothing after.
  std::ranges::sort(header.tensors, {}, [](const stored_tensor& t) { return std::pair(t.begin, t.end); });
  std::int64_t expected = 0;
  for (const stored_tensor& t : header.tensors) {
    if (t.begin != expected) {
      fail("tensor '", t.name, "' starts at data byte ", t.begin, ", where ", expected,
           t.begin < expected ? " was expected (it overlaps the tensor before)" : " was expected (a gap)");
    }
    expected = t.end;
  }
  if (expected != data_bytes) {
    fail("the tensors take ", expected, " bytes of data, but the file holds ", data_bytes, " after the header");
  }
  return header;
}

} // namespace io::detail

// Writes `tensors` (name and tensor pairs: a map, a vector of pairs, ...) and `metadata`
// to `path` in the safetensors format, replacing any file there only once the new one is
// whole. Names must be distinct and not "__metadata__".
template <named_tensor_range Named>
void save(const std::filesystem::path& path, const Named& tensors, const tensor_metadata& metadata = {},
          source_location where = source_location::current()) {
  io::detail::named_tensors entries = io::detail::named(tensors);
  io::detail::save_entries(path, std::move(entries), metadata, where);
}

// save(path, {{"w", w}, {"b", b}}): mixed dtypes, host and lazy tensors alike.
inline void save(const std::filesystem::path& path,
                 std::initializer_list<std::pair<std::string_view, saved_tensor>> tensors,
                 const tensor_metadata& metadata = {}, source_location where = source_location::current()) {
  save<std::initializer_list<std::pair<std::string_view, saved_tensor>>>(path, tensors, metadata, where);
}

namespace io::detail {

inline std::ifstream open_for_reading(const std::filesystem::path& path, std::string_view what,
                                      std::int64_t& file_size) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw io_error(xlite::detail::message(what, "('", path.string(), "'): cannot open the file"));
  file_size = static_cast<std::int64_t>(in.tellg());
  in.seekg(0);
  return in;
}

// The elements of `stored`, a tensor of the file `in` whose header is `header`.
inline any_tensor read_tensor(std::istream& in, const safetensors_header& header, const stored_tensor& stored,
                              const std::string& context) {
  any_tensor t(stored.type, stored.shape);
  const std::span<std::byte> bytes = t.bytes();
  in.seekg(header.data_start + stored.begin);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw io_error(xlite::detail::message(context, ": cannot read tensor '", stored.name, "'"));
  if (const auto bad = non_boolean(t)) {
    throw io_error(xlite::detail::message(context, ": tensor '", stored.name, "' is BOOL but its element ", *bad,
                                          " is ", static_cast<int>(bytes[*bad]), ", not 0 or 1"));
  }
  return t;
}

} // namespace io::detail

// The tensors of the safetensors file at `path`, by name, each read straight into its
// place. Any problem with the file is an io_error naming it; nothing is returned half-read.
inline tensor_map load(const std::filesystem::path& path) {
  const std::string context = "load('" + path.string() + "')";
  std::int64_t file_size = 0;
  std::ifstream in = io::detail::open_for_reading(path, "load", file_size);
  const io::detail::safetensors_header header = io::detail::read_header(in, file_size, context);
  tensor_map tensors;
  for (const io::detail::stored_tensor& stored : header.tensors) {
    tensors.emplace(stored.name, io::detail::read_tensor(in, header, stored, context));
  }
  return tensors;
}

// What a file holds of one tensor, as its header says.
struct tensor_info {
  std::string name;
  dtype type;
  xlite::shape shape;
};

// The tensors of the safetensors file at `path`, by name, reading only its header (checked
// as load() checks it).
inline std::vector<tensor_info> describe(const std::filesystem::path& path) {
  std::int64_t file_size = 0;
  std::ifstream in = io::detail::open_for_reading(path, "describe", file_size);
  std::vector<tensor_info> infos;
  for (const auto& t : io::detail::read_header(in, file_size, "describe('" + path.string() + "')").tensors) {
    infos.push_back({t.name, t.type, t.shape});
  }
  std::ranges::sort(infos, {}, &tensor_info::name);
  return infos;
}

// The "__metadata__" of the safetensors file at `path`, reading only its header.
inline tensor_metadata load_metadata(const std::filesystem::path& path) {
  std::int64_t file_size = 0;
  std::ifstream in = io::detail::open_for_reading(path, "load_metadata", file_size);
  return io::detail::read_header(in, file_size, "load_metadata('" + path.string() + "')").metadata;
}

} // namespace xlite
