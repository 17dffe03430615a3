#pragma once

// The persistent compilation cache: one file per compiled graph in a directory that several
// processes may share, so a second run of a program compiles nothing.
//
//   <dir>/<key as 16 hex digits>.xlc    header (32 bytes) + serialize(cache_record)
//
// The header holds a magic string, the format version, the payload's size and a checksum
// of it. A file is written under a temporary name, synced, and renamed over the final name
// (core/atomic_file.hpp): rename is atomic, so a reader (or a crash) never sees half an entry, and two processes
// storing the same key leave one whole entry. An entry that is truncated, damaged or of
// another format version is reported once, as a warning, and treated as a miss; the
// recompiled program then replaces it. (What decoding checks, and what the checksum is
// for: compile/serialize.hpp.) Reads refresh an entry's modification time, and a
// store past the size bound removes the entries read least recently.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "xlite/compile/serialize.hpp"
#include "xlite/core/atomic_file.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::compile {

class disk_cache {
public:
  // Bump when the encoding of a cache_record changes: entries of other versions are misses.
  static constexpr std::uint32_t format_version = 1;
  static constexpr std::uintmax_t default_max_bytes = std::uintmax_t{1} << 30;

  enum class outcome { hit, miss, damaged };
  struct lookup {
    outcome result = outcome::miss;
    executable_ptr compiled; // set on a hit
  };

  disk_cache(std::filesystem::path directory, bool readonly, std::uintmax_t max_bytes = default_max_bytes)
      : directory_(std::move(directory)), readonly_(readonly), max_bytes_(max_bytes) {
    if (readonly_) return;
    std::error_code failure;
    std::filesystem::create_directories(directory_, failure);
    if (failure) warn_unwritable(failure.message());
  }

  const std::filesystem::path& directory() const noexcept { return directory_; }
  bool readonly() const noexcept { return readonly_; }
  std::uintmax_t max_bytes() const noexcept { return max_bytes_; }

  std::filesystem::path entry_path(std::uint64_t key) const {
    std::array<char, 17> hex{};
    std::snprintf(hex.data(), hex.size(), "%016llx", static_cast<unsigned long long>(key));
    return directory_ / (std::string(hex.data()) + ".xlc");
  }

  // The executable stored for `source` compiled in `context` under `key`. A stored record for
  // another graph or context (a key collision) is a miss, not damage.
  lookup find(std::uint64_t key, const std::string& context, const ir::graph& source) {
    const std::filesystem::path path = entry_path(key);
    // The size of the file opened, not of the path: a writer may rename a new one over it.
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return {};
    const auto size = static_cast<std::uintmax_t>(in.tellg());
    if (size > max_bytes_) return damaged(path, "it is larger than the cache's bound");
    std::string bytes(static_cast<std::size_t>(size), '\0');
    in.seekg(0);
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (!in) return damaged(path, "it could not be read");
    if (bytes.size() < header_bytes) return damaged(path, "it is truncated");
    if (std::memcmp(bytes.data(), magic, sizeof magic) != 0) return damaged(path, "it is not an xlite cache entry");
    const auto version = read_word<std::uint32_t>(bytes, 8);
    if (version != format_version) {
      return damaged(path, xlite::detail::message("it has format version ", version, ", this xlite reads version ",
                                                  format_version));
    }
    const auto payload_bytes = read_word<std::uint64_t>(bytes, 16);
    if (payload_bytes != bytes.size() - header_bytes) return damaged(path, "it is truncated");
    const std::span<const char> payload(bytes.data() + header_bytes, bytes.size() - header_bytes);
    if (read_word<std::uint64_t>(bytes, 24) != checksum(payload)) return damaged(path, "its checksum does not match");
    cache_record record;
    try {
      record = deserialize(payload);
    } catch (const format_error& e) {
      return damaged(path, e.what());
    }
    if (record.context != context || !(record.source == source)) return {}; // a key collision
    if (!readonly_) {
      std::error_code ignored; // only the eviction order depends on it
      std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ignored);
    }
    return {outcome::hit, std::move(record.compiled)};
  }

  // Stores `record` under `key` unless the cache is read-only. Returns whether it was
  // written; a failure (a full disk, no permission) is warned about once and is not an error.
  bool store(std::uint64_t key, const cache_record& record) {
    if (readonly_) return false;
    const std::string payload = serialize(record);
    std::string bytes(header_bytes, '\0');
    std::memcpy(bytes.data(), magic, sizeof magic);
    write_word(bytes, 8, format_version);
    write_word(bytes, 12, std::uint32_t{0});
    write_word(bytes, 16, static_cast<std::uint64_t>(payload.size()));
    write_word(bytes, 24, checksum(payload));
    bytes += payload;
    if (bytes.size() > max_bytes_) return false; // it would evict everything, itself included
    const std::filesystem::path path = entry_path(key);
    try {
      atomic_file file(path, "compilation cache: store");
      file.write(bytes);
      file.commit();
    } catch (const io_error& e) {
      warn_unwritable(e.what());
      return false;
    }
    evict_beyond_bound(path);
    return true;
  }

  // The bytes the entries take.
  std::uintmax_t size_bytes() const {
    std::uintmax_t total = 0;
    for (const auto& e : entries()) total += e.bytes;
    return total;
  }

private:
  static constexpr char magic[8] = {'x', 'l', 'i', 't', 'e', 'c', 'c', '\0'};
  static constexpr std::size_t header_bytes = 32;

  template <class Word>
  static Word read_word(const std::string& bytes, std::size_t at) {
    Word w;
    std::memcpy(&w, bytes.data() + at, sizeof w);
    return w;
  }
  template <class Word>
  static void write_word(std::string& bytes, std::size_t at, Word w) {
    std::memcpy(bytes.data() + at, &w, sizeof w);
  }

  static std::uint64_t checksum(std::span<const char> bytes) {
    ir::hasher h;
    h.add(bytes.size());
    std::size_t at = 0;
    for (; at + 8 <= bytes.size(); at += 8) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + at, 8);
      h.add(word);
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, bytes.data() + at, bytes.size() - at);
    h.add(tail);
    return h.state;
  }

  lookup damaged(const std::filesystem::path& path, const std::string& why) {
    warn_once(path.string(), "compilation cache entry " + path.string() + " is unusable (" + why + "); recompiling");
    return {outcome::damaged, nullptr};
  }

  void warn_unwritable(const std::string& why) {
    warn_once(directory_.string(),
              "cannot write to the compilation cache " + directory_.string() + " (" + why + "); compiling without it");
  }

  // One warning per entry or directory, not one per step.
  void warn_once(const std::string& about, const std::string& text) {
    std::scoped_lock lock(mutex_);
    if (warned_.insert(about).second) std::cerr << "xlite: warning: " << text << '\n';
  }

  struct entry {
    std::filesystem::path path;
    std::uintmax_t bytes;
    std::filesystem::file_time_type used;
  };

  // The entries. With `remove_stale`, also removes the temporary files a crashed writer
  // left behind more than an hour ago: nobody will rename them.
  std::vector<entry> entries(bool remove_stale = false) const {
    std::vector<entry> found;
    std::error_code failure;
    const auto stale = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
    for (const auto& item : std::filesystem::directory_iterator(directory_, failure)) {
      std::error_code ignored;
      const auto used = item.last_write_time(ignored);
      if (ignored) continue; // removed meanwhile by another process
      if (item.path().filename().string().find(".xlc.tmp.") != std::string::npos) {
        if (remove_stale && used < stale) std::filesystem::remove(item.path(), ignored);
        continue;
      }
      if (item.path().extension() != ".xlc") continue;
      const auto bytes = item.file_size(ignored);
      if (!ignored) found.push_back({item.path(), bytes, used});
    }
    return found;
  }

  // Removes the least recently used entries, other than the one just stored, until the
  // cache fits its bound. Only stores call it: a read-only cache never removes anything.
  void evict_beyond_bound(const std::filesystem::path& kept) {
    std::vector<entry> all = entries(/*remove_stale=*/true);
    std::uintmax_t total = 0;
    for (const entry& e : all) total += e.bytes;
    if (total <= max_bytes_) return;
    std::ranges::sort(all, {}, &entry::used);
    for (const entry& e : all) {
      if (total <= max_bytes_) break;
      if (e.path == kept) continue;
      std::error_code ignored; // another process may have removed it first
      if (std::filesystem::remove(e.path, ignored)) total -= e.bytes;
    }
  }

  std::filesystem::path directory_;
  bool readonly_;
  std::uintmax_t max_bytes_;
  std::mutex mutex_;
  std::set<std::string> warned_;
};

} // namespace xlite::compile
