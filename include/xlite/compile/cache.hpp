#pragma once

// The in-memory compilation cache: executables by graph hash, least recently used first out
// when full. The key is the structural hash of the graph as captured, so a step traced
// again with the same ops, shapes and dtypes (and other parameter values) is a hit.

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "xlite/compile/executable.hpp"
#include "xlite/core/env.hpp"

namespace xlite::compile {

class compilation_cache {
public:
  explicit compilation_cache(std::size_t capacity) : capacity_(capacity) {}

  // The executable compiled for `hash`, or null; a hit becomes the most recently used.
  executable_ptr find(std::uint64_t hash) {
    std::scoped_lock lock(mutex_);
    const auto it = index_.find(hash);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  void insert(std::uint64_t hash, executable_ptr exe) {
    std::scoped_lock lock(mutex_);
    if (const auto it = index_.find(hash); it != index_.end()) {
      it->second->second = std::move(exe);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(hash, std::move(exe));
    index_.emplace(hash, order_.begin());
    evict_beyond(capacity_);
  }

  std::size_t size() const {
    std::scoped_lock lock(mutex_);
    return order_.size();
  }
  std::size_t capacity() const {
    std::scoped_lock lock(mutex_);
    return capacity_;
  }
  void set_capacity(std::size_t capacity) {
    std::scoped_lock lock(mutex_);
    capacity_ = capacity;
    evict_beyond(capacity_);
  }
  void clear() {
    std::scoped_lock lock(mutex_);
    order_.clear();
    index_.clear();
  }

private:
  void evict_beyond(std::size_t capacity) {
    while (order_.size() > capacity) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::list<std::pair<std::uint64_t, executable_ptr>> order_; // most recently used first
  std::unordered_map<std::uint64_t, std::list<std::pair<std::uint64_t, executable_ptr>>::iterator> index_;
};

// The process's cache; XLITE_COMPILATION_CACHE_SIZE sets its capacity (default 1024, as
// PyTorch/XLA's).
inline compilation_cache& default_cache() {
  static compilation_cache cache(
      static_cast<std::size_t>(env_integer("XLITE_COMPILATION_CACHE_SIZE", 1, std::int64_t{1} << 30).value_or(1024)));
  return cache;
}

} // namespace xlite::compile
