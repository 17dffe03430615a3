#pragma once

// Named counters, as PyTorch/XLA's metrics report has them (MarkStep, CachedCompile,
// UncachedCompile, ...): `metrics::counter_value("UncachedCompile")` says how often a graph
// was compiled. Counters are created on first use and only grow; clear_counters() resets
// them, for tests and for measuring one part of a program.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace xlite::metrics {

namespace detail {

struct counter_registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<std::atomic<std::int64_t>>, std::less<>> counters;

  std::atomic<std::int64_t>& get(std::string_view name) {
    std::scoped_lock lock(mutex);
    auto it = counters.find(name);
    if (it == counters.end()) {
      it = counters.emplace(std::string(name), std::make_unique<std::atomic<std::int64_t>>(0)).first;
    }
    return *it->second;
  }
};

inline counter_registry& counters() {
  static counter_registry registry;
  return registry;
}

} // namespace detail

// A counter by name: look it up once and keep the reference where it is hot.
inline std::atomic<std::int64_t>& counter(std::string_view name) { return detail::counters().get(name); }

inline void increment(std::string_view name, std::int64_t by = 1) {
  counter(name).fetch_add(by, std::memory_order_relaxed);
}

// 0 for a counter never incremented.
inline std::int64_t counter_value(std::string_view name) {
  auto& registry = detail::counters();
  std::scoped_lock lock(registry.mutex);
  const auto it = registry.counters.find(name);
  return it == registry.counters.end() ? 0 : it->second->load(std::memory_order_relaxed);
}

inline std::vector<std::string> counter_names() {
  auto& registry = detail::counters();
  std::scoped_lock lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& [name, value] : registry.counters) {
    if (value->load(std::memory_order_relaxed) != 0) names.push_back(name);
  }
  return names;
}

inline void clear_counters() {
  auto& registry = detail::counters();
  std::scoped_lock lock(registry.mutex);
  for (auto& [name, value] : registry.counters) value->store(0, std::memory_order_relaxed);
}

} // namespace xlite::metrics
