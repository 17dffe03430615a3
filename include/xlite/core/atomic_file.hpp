#pragma once

// A file that appears whole or not at all. atomic_file writes under a temporary name beside
// the final one; commit() syncs the data, renames it over the final name and syncs the
// directory, so a crash or a power cut at any moment leaves either the previous file or
// the new one under that name, never half of one. Destroyed without commit() (an exception,
// a failed write), it removes the temporary file and the final name is untouched.

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "xlite/core/error.hpp"

namespace xlite {

class atomic_file {
public:
  // `what` names the operation in error messages ("save", "save_npy", ...).
  atomic_file(std::filesystem::path path, std::string_view what)
      : path_(std::move(path)), temporary_(temporary_beside(path_)), what_(what) {
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create a temporary file beside it", errno);
  }
  atomic_file(const atomic_file&) = delete;
  atomic_file& operator=(const atomic_file&) = delete;
  ~atomic_file() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) {
      std::error_code ignored;
      std::filesystem::remove(temporary_, ignored);
    }
  }

  const std::filesystem::path& path() const noexcept { return path_; }
  const std::filesystem::path& temporary_path() const noexcept { return temporary_; }

  void write(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("cannot write", n < 0 ? errno : ENOSPC);
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
  }
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }

  // Makes the file the one under path(): sync, rename, sync the directory.
  void commit() {
    if (::fsync(fd_) != 0) fail("cannot sync", errno);
    const int closed = ::close(fd_);
    fd_ = -1;
    if (closed != 0) fail("cannot close", errno);
    std::error_code failure;
    std::filesystem::rename(temporary_, path_, failure);
    if (failure) fail("cannot rename the finished file over it", failure.value());
    committed_ = true;
    sync_directory(path_.parent_path());
  }

  // So that a rename survives a power cut. Best effort: some file systems refuse it.
  static void sync_directory(const std::filesystem::path& directory) {
    const int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
  }

private:
  // "<name>.tmp.<pid>.<counter>.<salt>": unique across threads, processes and containers
  // sharing the directory (whose process ids may coincide). Readers of a directory (the
  // compilation cache) recognise and clean up the ".tmp." files a crashed writer leaves.
  static std::filesystem::path temporary_beside(const std::filesystem::path& path) {
    static std::atomic<std::uint64_t> counter{0};
    static const std::uint64_t salt = [] {
      std::random_device entropy;
      return (std::uint64_t{entropy()} << 32) ^ entropy();
    }();
    return path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
           std::to_string(salt);
  }

  [[noreturn]] void fail(std::string_view problem, int error) const {
    throw io_error(detail::message(what_, "('", path_.string(), "'): ", problem, " (",
                                   std::generic_category().message(error), ")"));
  }

  std::filesystem::path path_;
  std::filesystem::path temporary_;
  std::string what_;
  int fd_ = -1;
  bool committed_ = false;
};

} // namespace xlite
