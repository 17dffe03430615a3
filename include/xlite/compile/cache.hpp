#pragma once

// The in-memory compilation cache: executables by key, least recently used first out when
// full. The key (runtime/compilation.hpp) hashes the graph as captured with everything else
// that changes the compiled result, so a step traced again with the same ops, shapes and
// dtypes is a hit.

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>

#include "xlite/compile/executable.hpp"
#include "xlite/core/env.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::compile {

class compilation_cache {
public:
  explicit compilation_cache(std::size_t capacity) : capacity_(capacity) {}

  // The executable compiled from `source` under `key`, or null; a hit becomes the most
  // recently used. The graph is compared, not only its key: two graphs whose 64-bit keys
  // collide never share an executable. A barrier looks up its trace, whose graph is not
  // built unless it misses.
  executable_ptr find(std::uint64_t key, const ir::graph& source) {
    return find_if(key, [&](const ir::graph& cached) { return cached == source; });
  }
  executable_ptr find(std::uint64_t key, const ir::numbered_trace& source) {
    return find_if(key, [&](const ir::graph& cached) { return source.equals(cached); });
  }

  void insert(std::uint64_t key, ir::graph source, executable_ptr compiled) {
    std::scoped_lock lock(mutex_);
    if (const auto it = index_.find(key); it != index_.end()) {
      it->second->source = std::move(source);
      it->second->compiled = std::move(compiled);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.push_front({key, std::move(source), std::move(compiled)});
    index_.emplace(key, order_.begin());
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
  template <class Matches>
  executable_ptr find_if(std::uint64_t key, Matches&& matches) {
    std::scoped_lock lock(mutex_);
    const auto it = index_.find(key);
    if (it == index_.end() || !matches(it->second->source)) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->compiled;
  }

  struct entry {
    std::uint64_t key;
    ir::graph source;
    executable_ptr compiled;
  };

  void evict_beyond(std::size_t capacity) {
    while (order_.size() > capacity) {
      index_.erase(order_.back().key);
      order_.pop_back();
    }
  }

  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::list<entry> order_; // most recently used first
  std::unordered_map<std::uint64_t, std::list<entry>::iterator> index_;
};

// The process's cache; XLITE_COMPILATION_CACHE_SIZE sets its capacity (default 1024, as
// PyTorch/XLA's).
inline compilation_cache& default_cache() {
  static compilation_cache cache(
      static_cast<std::size_t>(env_integer("XLITE_COMPILATION_CACHE_SIZE", 1, std::int64_t{1} << 30).value_or(1024)));
  return cache;
}

} // namespace xlite::compile
