#pragma once

// Device memory is reused, as PyTorch's caching allocator and XLA's BFC allocator reuse it:
// a freed buffer's block is kept, by byte size, for the next buffer of that size. A
// training step frees and makes buffers of the same sizes every time, so after the first
// step no memory is requested from the system, and no page is faulted in again (a fresh
// 64 MiB block costs more page faults than a memory-bound kernel's pass over it).
// At most `limit` bytes are kept; XLITE_DEVICE_CACHE_BYTES sets it (default 4 GiB).

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "xlite/core/aligned_memory.hpp"
#include "xlite/core/env.hpp"

namespace xlite::runtime {

class block_cache {
public:
  explicit block_cache(std::size_t limit) : limit_(limit) {}
  ~block_cache() { trim(0); }
  block_cache(const block_cache&) = delete;
  block_cache& operator=(const block_cache&) = delete;

  // A cache-line aligned block of `bytes` (> 0) bytes: a kept one if there is one.
  void* take(std::size_t bytes) {
    {
      std::scoped_lock lock(mutex_);
      if (const auto it = free_.find(bytes); it != free_.end()) {
        void* block = it->second;
        free_.erase(it);
        kept_bytes_ -= bytes;
        return block;
      }
    }
    return xlite::detail::allocate_aligned_bytes(bytes);
  }

  void give(void* block, std::size_t bytes) noexcept {
    std::scoped_lock lock(mutex_);
    if (bytes > limit_) {
      xlite::detail::free_aligned_bytes(block);
      return;
    }
    free_.emplace(bytes, block);
    kept_bytes_ += bytes;
    trim_locked(limit_);
  }

  // Returns kept blocks to the system until at most `bytes` are kept.
  void trim(std::size_t bytes) noexcept {
    std::scoped_lock lock(mutex_);
    trim_locked(bytes);
  }

  std::size_t kept_bytes() const {
    std::scoped_lock lock(mutex_);
    return kept_bytes_;
  }

private:
  void trim_locked(std::size_t bytes) noexcept {
    for (auto it = free_.begin(); kept_bytes_ > bytes && it != free_.end();) {
      xlite::detail::free_aligned_bytes(it->second);
      kept_bytes_ -= it->first;
      it = free_.erase(it);
    }
  }

  mutable std::mutex mutex_;
  std::unordered_multimap<std::size_t, void*> free_;
  std::size_t kept_bytes_ = 0;
  std::size_t limit_;
};

// Never destroyed: buffers held by static objects may outlive any destruction order.
inline block_cache& device_block_cache() {
  static auto* cache = new block_cache(static_cast<std::size_t>(
      env_integer("XLITE_DEVICE_CACHE_BYTES", 0, std::int64_t{1} << 50).value_or(std::int64_t{4} << 30)));
  return *cache;
}

} // namespace xlite::runtime
