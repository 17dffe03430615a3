#pragma once

// NumPy's .npz archives (np.savez, np.savez_compressed): a zip file of .npy files, one per
// named array. save_npz writes them stored (uncompressed, as np.savez does), one tensor at
// a time: each entry's CRC-32 and sizes follow its data in a data descriptor, so a lazy
// tensor streams from its device buffer as in save(). load_npz reads stored entries and,
// with the xlite::zlib component, deflated ones (np.savez_compressed).
//
// The zip structure is read from the central directory (zip64 fields included, which
// np.savez writes in its local headers) and checked as load() checks safetensors: every
// offset and size against the file, names ending in ".npy", a bound on how far a deflated
// entry may expand, and each entry's CRC-32. Writing without zip64 keeps the writer small:
// an archive of 4 GiB or more is an io_error that points to save().

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <ranges>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(XLITE_HAS_ZLIB)
#include <zlib.h>
#endif

#include "xlite/core/atomic_file.hpp"
#include "xlite/core/error.hpp"
#include "xlite/io/any_tensor.hpp"
#include "xlite/io/npy.hpp"
#include "xlite/io/safetensors.hpp"
#include "xlite/io/saved_tensor.hpp"

namespace xlite {

namespace io::detail {

// CRC-32 (ISO-HDLC, the zip one), updated with `bytes`.
inline std::uint32_t crc32(std::uint32_t crc, std::span<const std::byte> bytes) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (const std::byte b : bytes) crc = table[(crc ^ static_cast<std::uint32_t>(b)) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// Little-endian fields of zip records.
class zip_record {
public:
  template <std::unsigned_integral Word>
  zip_record& put(Word value) {
    for (std::size_t i = 0; i < sizeof(Word); ++i)
      bytes_ += static_cast<char>((std::uint64_t{value} >> (8 * i)) & 0xFF);
    return *this;
  }
  zip_record& put(std::string_view text) {
    bytes_ += text;
    return *this;
  }
  const std::string& bytes() const noexcept { return bytes_; }

private:
  std::string bytes_;
};

template <class Word>
Word get(std::string_view bytes, std::size_t at) {
  std::uint64_t value = 0;
  for (std::size_t i = sizeof(Word); i-- > 0;) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
  return static_cast<Word>(value);
}

struct zip_entry {
  std::string name;
  std::uint16_t method = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0;
  std::uint64_t size = 0;
  std::uint64_t local_header = 0;
};

inline constexpr std::uint32_t local_header_signature = 0x04034b50;
inline constexpr std::uint32_t central_header_signature = 0x02014b50;
inline constexpr std::uint32_t end_signature = 0x06054b50;
inline constexpr std::uint32_t descriptor_signature = 0x08074b50;
inline constexpr std::uint16_t data_descriptor_flag = 0x0008;

inline void save_npz_entries(const std::filesystem::path& path, named_tensors tensors, source_location where) {
  check_names(tensors, path, "save_npz");
  const auto fail = [&](auto&&... parts) {
    throw io_error(
        xlite::detail::message("save_npz('", path.string(), "'): ", std::forward<decltype(parts)>(parts)...));
  };
  if (tensors.size() >= 0xFFFF) fail(tensors.size(), " arrays; a zip without zip64 holds fewer than 65535");
  // Every header first, so an archive too large fails before a byte is written.
  std::vector<std::string> headers;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.size() + 4 > 0xFFFF)
      fail("the name of '", name.substr(0, 32), "...' is longer than a zip entry's 65535 bytes");
    headers.push_back(npy_header_bytes(t.type(), t.shape()));
    offset += 30 + name.size() + 4 + headers.back().size() + static_cast<std::uint64_t>(t.byte_size()) + 16;
  }
  for (const auto& [name, t] : tensors) offset += 46 + name.size() + 4;
  if (offset >= 0xFFFFFFFFu)
    fail("the archive would take ", offset, " bytes; without zip64 it must stay under 4 GiB; save() has no such limit");
  compute_pending(tensors, where);

  atomic_file file(path, "save_npz");
  std::vector<zip_entry> written;
  std::uint64_t at = 0;
  const auto write = [&](std::string_view bytes) {
    file.write(bytes);
    at += bytes.size();
  };
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const auto& [name, t] = tensors[k];
    zip_entry entry{name + ".npy", 0, 0, 0, 0, at};
    // Version 2.0, data descriptor, stored; no time (1980-01-01), CRC and sizes after the data.
    write(zip_record()
              .put(local_header_signature)
              .put(std::uint16_t{20})
              .put(data_descriptor_flag)
              .put(std::uint16_t{0})
              .put(std::uint16_t{0})
              .put(std::uint16_t{0x21})
              .put(std::uint32_t{0})
              .put(std::uint32_t{0})
              .put(std::uint32_t{0})
              .put(static_cast<std::uint16_t>(entry.name.size()))
              .put(std::uint16_t{0})
              .put(entry.name)
              .bytes());
    const auto element_sink = [&](std::span<const std::byte> bytes) {
      entry.crc = crc32(entry.crc, bytes);
      entry.size += bytes.size();
      file.write(bytes);
    };
    element_sink(std::as_bytes(std::span(headers[k].data(), headers[k].size())));
    write_elements(name, t, element_sink, path, where);
    at += entry.size;
    entry.compressed = entry.size;
    write(zip_record()
              .put(descriptor_signature)
              .put(entry.crc)
              .put(static_cast<std::uint32_t>(entry.compressed))
              .put(static_cast<std::uint32_t>(entry.size))
              .bytes());
    written.push_back(std::move(entry));
  }
  const std::uint64_t directory = at;
  for (const zip_entry& entry : written) {
    write(zip_record()
              .put(central_header_signature)
              .put(std::uint16_t{20})
              .put(std::uint16_t{20})
              .put(data_descriptor_flag)
              .put(std::uint16_t{0})
              .put(std::uint16_t{0})
              .put(std::uint16_t{0x21})
              .put(entry.crc)
              .put(static_cast<std::uint32_t>(entry.compressed))
              .put(static_cast<std::uint32_t>(entry.size))
              .put(static_cast<std::uint16_t>(entry.name.size()))
              .put(std::uint16_t{0})
              .put(std::uint16_t{0})
              .put(std::uint16_t{0})
              .put(std::uint16_t{0})
              .put(std::uint32_t{0})
              .put(static_cast<std::uint32_t>(entry.local_header))
              .put(entry.name)
              .bytes());
  }
  write(zip_record()
            .put(end_signature)
            .put(std::uint16_t{0})
            .put(std::uint16_t{0})
            .put(static_cast<std::uint16_t>(written.size()))
            .put(static_cast<std::uint16_t>(written.size()))
            .put(static_cast<std::uint32_t>(at - directory))
            .put(static_cast<std::uint32_t>(directory))
            .put(std::uint16_t{0})
            .bytes());
  file.commit();
}

// Reads `count` bytes at `offset` of `in`, which has `size` bytes.
inline std::string read_at(std::istream& in, std::uint64_t size, std::uint64_t offset, std::uint64_t count,
                           const std::string& context, std::string_view what) {
  if (offset > size || count > size - offset) {
    throw io_error(xlite::detail::message(context, ": ", what, " at byte ", offset, " (", count,
                                          " bytes) runs past the end of the file (", size, " bytes)"));
  }
  std::string bytes(static_cast<std::size_t>(count), '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(count));
  if (!in) throw io_error(xlite::detail::message(context, ": cannot read ", what));
  return bytes;
}

// The central directory of the zip file `in` of `size` bytes, checked against it.
inline std::vector<zip_entry> read_central_directory(std::istream& in, std::uint64_t size, const std::string& context) {
  const auto fail = [&](auto&&... parts) {
    throw io_error(xlite::detail::message(context, ": ", std::forward<decltype(parts)>(parts)...));
  };
  // The end record is the last 22 bytes, before a comment of at most 65535.
  const std::uint64_t tail_size = std::min<std::uint64_t>(size, 22 + 0xFFFF);
  const std::string tail = read_at(in, size, size - tail_size, tail_size, context, "the end of the archive");
  std::size_t end = std::string::npos;
  for (std::size_t at = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; at-- > 0;) {
    if (get<std::uint32_t>(tail, at) == end_signature && at + 22 + get<std::uint16_t>(tail, at + 20) == tail.size()) {
      end = at;
      break;
    }
  }
  if (end == std::string::npos) fail("not a zip archive (no end of central directory record)");
  std::uint64_t count = get<std::uint16_t>(tail, end + 10);
  std::uint64_t directory_size = get<std::uint32_t>(tail, end + 12);
  std::uint64_t directory = get<std::uint32_t>(tail, end + 16);
  if (count == 0xFFFF || directory_size == 0xFFFFFFFF || directory == 0xFFFFFFFF) {
    // Zip64: a locator 20 bytes before the end record points to the zip64 end record.
    const std::uint64_t end_offset = size - tail_size + end;
    if (end_offset < 20) fail("a zip64 archive without its locator");
    const std::string locator = read_at(in, size, end_offset - 20, 20, context, "the zip64 locator");
    if (get<std::uint32_t>(locator, 0) != 0x07064b50) fail("a zip64 archive without its locator");
    const std::string record =
        read_at(in, size, get<std::uint64_t>(locator, 8), 56, context, "the zip64 end of central directory");
    if (get<std::uint32_t>(record, 0) != 0x06064b50) fail("a bad zip64 end of central directory record");
    count = get<std::uint64_t>(record, 32);
    directory_size = get<std::uint64_t>(record, 40);
    directory = get<std::uint64_t>(record, 48);
  }
  const std::string bytes = read_at(in, size, directory, directory_size, context, "the central directory");
  std::vector<zip_entry> entries;
  std::size_t at = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    if (bytes.size() - at < 46 || get<std::uint32_t>(bytes, at) != central_header_signature) {
      fail("the central directory's entry ", k, " is damaged");
    }
    zip_entry entry;
    entry.method = get<std::uint16_t>(bytes, at + 10);
    entry.crc = get<std::uint32_t>(bytes, at + 16);
    entry.compressed = get<std::uint32_t>(bytes, at + 20);
    entry.size = get<std::uint32_t>(bytes, at + 24);
    const std::size_t name_length = get<std::uint16_t>(bytes, at + 28);
    const std::size_t extra_length = get<std::uint16_t>(bytes, at + 30);
    const std::size_t comment_length = get<std::uint16_t>(bytes, at + 32);
    entry.local_header = get<std::uint32_t>(bytes, at + 42);
    if (bytes.size() - at - 46 < name_length + extra_length + comment_length) {
      fail("the central directory's entry ", k, " runs past its end");
    }
    entry.name = bytes.substr(at + 46, name_length);
    // A zip64 extra field holds, in order, those of the sizes and offset that read as 0xFFFFFFFF.
    for (std::size_t e = at + 46 + name_length; e + 4 <= at + 46 + name_length + extra_length;) {
      const auto id = get<std::uint16_t>(bytes, e);
      const std::size_t length = get<std::uint16_t>(bytes, e + 2);
      if (e + 4 + length > at + 46 + name_length + extra_length)
        fail("entry '", entry.name, "' has a damaged extra field");
      if (id == 0x0001) {
        std::size_t field = e + 4;
        for (std::uint64_t* value : {&entry.size, &entry.compressed, &entry.local_header}) {
          if (*value != 0xFFFFFFFF) continue;
          if (field + 8 > e + 4 + length) fail("entry '", entry.name, "' has a short zip64 field");
          *value = get<std::uint64_t>(bytes, field);
          field += 8;
        }
      }
      e += 4 + length;
    }
    at += 46 + name_length + extra_length + comment_length;
    entries.push_back(std::move(entry));
  }
  return entries;
}

// The .npy bytes of `entry`, inflated if need be and checked against its CRC-32.
inline std::string entry_bytes(std::istream& in, std::uint64_t size, const zip_entry& entry,
                               const std::string& context) {
  const auto fail = [&](auto&&... parts) {
    throw io_error(
        xlite::detail::message(context, ": entry '", entry.name, "': ", std::forward<decltype(parts)>(parts)...));
  };
  const std::string local = read_at(in, size, entry.local_header, 30, context, "a local header");
  if (get<std::uint32_t>(local, 0) != local_header_signature) fail("no local header at byte ", entry.local_header);
  const std::uint64_t data = entry.local_header + 30 + get<std::uint16_t>(local, 26) + get<std::uint16_t>(local, 28);
  std::string stored = read_at(in, size, data, entry.compressed, context, "an entry's data");
  std::string bytes;
  if (entry.method == 0) {
    if (entry.size != entry.compressed) fail("stored, but its sizes differ");
    bytes = std::move(stored);
  } else if (entry.method == 8) {
#if defined(XLITE_HAS_ZLIB)
    // Deflate expands at most about 1032 to 1: a larger claim is a zip bomb or damage.
    if (entry.size > 1032 * entry.compressed + 1024 || entry.size > 0xFFFFFFFFu) {
      fail("claims ", entry.size, " bytes from ", entry.compressed);
    }
    bytes.assign(static_cast<std::size_t>(entry.size), '\0');
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail("zlib cannot start inflating");
    z.next_in = reinterpret_cast<Bytef*>(stored.data());
    z.avail_in = static_cast<uInt>(stored.size());
    z.next_out = reinterpret_cast<Bytef*>(bytes.data());
    z.avail_out = static_cast<uInt>(bytes.size());
    const int status = inflate(&z, Z_FINISH);
    const auto produced = z.total_out;
    inflateEnd(&z);
    if (status != Z_STREAM_END || produced != bytes.size()) fail("its deflated data is damaged");
#else
    fail("deflated (np.savez_compressed); reading it needs the xlite::zlib component");
#endif
  } else {
    fail("compression method ", entry.method, " is neither stored (0) nor deflated (8)");
  }
  if (crc32(0, std::as_bytes(std::span(bytes.data(), bytes.size()))) != entry.crc) fail("its CRC-32 does not match");
  return bytes;
}

} // namespace io::detail

// Writes `tensors` (name and tensor pairs, as for save()) to `path` as an .npz archive
// that np.load reads; "w" is stored as "w.npy". Atomic, as every writer here.
template <named_tensor_range Named>
void save_npz(const std::filesystem::path& path, const Named& tensors,
              source_location where = source_location::current()) {
  io::detail::named_tensors entries = io::detail::named(tensors);
  io::detail::save_npz_entries(path, std::move(entries), where);
}

inline void save_npz(const std::filesystem::path& path,
                     std::initializer_list<std::pair<std::string_view, saved_tensor>> tensors,
                     source_location where = source_location::current()) {
  save_npz<std::initializer_list<std::pair<std::string_view, saved_tensor>>>(path, tensors, where);
}

// The arrays of the .npz archive at `path`, by name (without ".npy").
inline tensor_map load_npz(const std::filesystem::path& path) {
  const std::string context = "load_npz('" + path.string() + "')";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw io_error(context + ": cannot open the file");
  const auto size = static_cast<std::uint64_t>(in.tellg());
  tensor_map tensors;
  for (const io::detail::zip_entry& entry : io::detail::read_central_directory(in, size, context)) {
    if (!entry.name.ends_with(".npy")) {
      throw io_error(xlite::detail::message(context, ": entry '", entry.name, "' is not an .npy file"));
    }
    std::istringstream npy(io::detail::entry_bytes(in, size, entry, context));
    const std::string name = entry.name.substr(0, entry.name.size() - 4);
    any_tensor t =
        io::detail::read_npy(npy, static_cast<std::int64_t>(entry.size), context + ": entry '" + entry.name + "'");
    if (!tensors.emplace(name, std::move(t)).second) {
      throw io_error(xlite::detail::message(context, ": the archive holds '", entry.name, "' twice"));
    }
  }
  return tensors;
}

} // namespace xlite
