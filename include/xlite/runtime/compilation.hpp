#pragma once

// From a barrier's trace to its executable: the in-memory cache (the numbered trace hashed
// and compared in place), then the persistent cache (if initialize_cache() or
// XLITE_CACHE_DIR named one), then the compiler. Each outcome is
// counted as PyTorch/XLA counts it:
//
//   CachedCompile          found in memory
//   PersistentCacheHit     found on disk (no compilation)
//   PersistentCacheMiss    not on disk (or damaged there), compiled
//   PersistentCacheBadEntry a damaged entry on disk, compiled again and replaced
//   UncachedCompile        compiled; CompileTime has the time it took
//
// A new executable's element-wise kernels are then built to native code in the background
// (runtime/native_kernels.hpp).
//
// The cache key hashes the graph with the context it is compiled in: the xlite version,
// the compiler's revision, the device kind, the ISA the kernels run with and the
// mixed-precision policy (amp/policy.hpp). Everything else that changes an executable (the ops, shapes, dtypes and
// constants) is in the graph.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "xlite/amp/policy.hpp"
#include "xlite/compile/cache.hpp"
#include "xlite/compile/compiler.hpp"
#include "xlite/compile/disk_cache.hpp"
#include "xlite/core/cpu_features.hpp"
#include "xlite/core/env.hpp"
#include "xlite/core/separate_compilation.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/kernels/simd.hpp"
#include "xlite/runtime/compile_analysis.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/metrics.hpp"
#include "xlite/runtime/native_kernels.hpp"
#include "xlite/runtime/profiler.hpp"
#include "xlite/version.hpp"

// What compiling a graph needs, only where find_or_compile() is defined (see executor.hpp).
#if XLITE_BACKEND_DEFINITIONS
#include "xlite/runtime/elementwise.hpp"
#include "xlite/runtime/graph_dump.hpp"
#endif

namespace xlite::runtime {

// Everything besides the graph that decides what the compiler produces, as text (stored
// in a disk entry and compared on a hit) and hashed (mixed into the key).
struct compile_context {
  std::string text;
  std::uint64_t hash = 0;
};

// The context for the ISA the kernels run with now and the mixed-precision policy, made
// once per pair: a cache hit must stay a hash and a lookup.
inline const compile_context& current_compile_context(amp::policy precision = amp::current_policy()) {
  constexpr amp::mode modes[] = {amp::mode::fp32, amp::mode::autocast, amp::mode::use_bf16, amp::mode::downcast_bf16};
  static const auto contexts = [&] {
    std::array<std::array<compile_context, std::size(modes)>, std::size(all_isas)> made;
    for (std::size_t k = 0; k < made.size(); ++k) {
      for (std::size_t m = 0; m < std::size(modes); ++m) {
        compile_context& c = made[k][m];
        c.text = "xlite " + std::to_string(XLITE_VERSION) + "; compiler " + std::to_string(compile::compiler_revision) +
                 "; device " + device_type() + "; isa " + std::string(name(all_isas[k])) + "; simd " +
                 kernels::simd_arch::name() + "; precision " + std::string(amp::name(modes[m]));
        ir::hasher h;
        for (const char ch : c.text) h.add(static_cast<unsigned char>(ch));
        c.hash = h.state;
      }
    }
    return made;
  }();
  const auto isa = static_cast<std::size_t>(std::ranges::find(all_isas, active_isa()) - std::begin(all_isas));
  return contexts[isa][static_cast<std::size_t>(precision.mode)];
}

namespace detail {

struct persistent_cache_state {
  std::mutex mutex;
  std::shared_ptr<compile::disk_cache> cache;
  bool from_environment_read = false;
};

inline persistent_cache_state& persistent_state() {
  static persistent_cache_state state;
  return state;
}

// The persistent cache in use, or null. XLITE_CACHE_DIR (and XLITE_CACHE_READONLY=1,
// XLITE_CACHE_MAX_BYTES) set one up on first use unless initialize_cache() came first.
inline std::shared_ptr<compile::disk_cache> persistent_cache() {
  auto& state = persistent_state();
  std::scoped_lock lock(state.mutex);
  if (!state.from_environment_read) {
    // A malformed variable throws here at every step, rather than once and then never.
    if (const auto dir = env_string("XLITE_CACHE_DIR")) {
      const auto max_bytes = env_integer("XLITE_CACHE_MAX_BYTES", 1, std::numeric_limits<std::int64_t>::max());
      const bool readonly = env_integer("XLITE_CACHE_READONLY", 0, 1).value_or(0) == 1;
      state.cache = std::make_shared<compile::disk_cache>(
          *dir, readonly, max_bytes ? static_cast<std::uintmax_t>(*max_bytes) : compile::disk_cache::default_max_bytes);
    }
    state.from_environment_read = true;
  }
  return state.cache;
}

// Where native kernels' libraries go: beside the persistent cache's entries, unless nothing
// may be written there (then runtime/native_kernels.hpp picks a temporary directory).
inline std::filesystem::path native_library_directory(const compile::disk_cache& disk) {
  return disk.readonly() ? std::filesystem::path{} : disk.directory();
}

inline std::uint64_t cache_key(std::uint64_t graph_hash, const compile_context& context) {
  ir::hasher h;
  h.add(graph_hash);
  h.add(context.hash);
  return h.state;
}

// Counters of the lookup, found once.
struct lookup_counters {
  std::atomic<std::int64_t>& cached = metrics::counter("CachedCompile");
  std::atomic<std::int64_t>& uncached = metrics::counter("UncachedCompile");
  std::atomic<std::int64_t>& persistent_hit = metrics::counter("PersistentCacheHit");
  std::atomic<std::int64_t>& persistent_miss = metrics::counter("PersistentCacheMiss");
  std::atomic<std::int64_t>& persistent_bad_entry = metrics::counter("PersistentCacheBadEntry");
};

inline lookup_counters& counters() {
  static lookup_counters c;
  return c;
}

} // namespace detail

// Stores compiled graphs in `directory` and looks for them there, across processes, as
// torch_xla.runtime.initialize_cache does. Call it before the first computation: graphs
// compiled earlier stay in memory only. `readonly` never writes (for a shared cache that
// one writer fills). Calling it again switches to another directory.
inline void initialize_cache(const std::filesystem::path& directory, bool readonly = false,
                             std::uintmax_t max_bytes = compile::disk_cache::default_max_bytes) {
  if (directory.empty()) throw value_error("initialize_cache: the directory is empty");
  if (max_bytes == 0) throw value_error("initialize_cache: max_bytes must be positive");
  auto& state = detail::persistent_state();
  std::scoped_lock lock(state.mutex);
  state.from_environment_read = true;
  state.cache = std::make_shared<compile::disk_cache>(directory, readonly, max_bytes);
}

// Stops using a persistent cache (the files stay).
inline void disable_persistent_cache() {
  auto& state = detail::persistent_state();
  std::scoped_lock lock(state.mutex);
  state.from_environment_read = true;
  state.cache = nullptr;
}

// The in-memory cache's capacity in executables: XLITE_COMPILATION_CACHE_SIZE, or this.
inline std::size_t compilation_cache_capacity() { return compile::default_cache().capacity(); }
inline void set_compilation_cache_capacity(std::size_t capacity) {
  if (capacity == 0) throw value_error("set_compilation_cache_capacity: the capacity must be positive");
  compile::default_cache().set_capacity(capacity);
}
// Empties the in-memory cache; the persistent one keeps its entries.
inline void clear_compilation_cache() { compile::default_cache().clear(); }

// The executable for the trace's graph, from a cache or compiled now. A hit in memory
// compares the trace with the cached graph and builds no graph of its own.
XLITE_BACKEND_FUNCTION compile::executable_ptr find_or_compile(const ir::numbered_trace& trace,
                                                               const debug::step_cause& cause);

#if XLITE_BACKEND_DEFINITIONS
XLITE_BACKEND_FUNCTION compile::executable_ptr find_or_compile(const ir::numbered_trace& trace,
                                                               const debug::step_cause& cause) {
  const std::uint64_t graph_hash = trace.hash();
  const amp::policy precision = amp::current_policy();
  const compile_context& context = current_compile_context(precision);
  const std::uint64_t key = detail::cache_key(graph_hash, context);
  std::optional<ir::captured_graph> built;
  const auto captured = [&]() -> const ir::captured_graph& {
    if (!built) built = trace.to_graph();
    return *built;
  };
  if (debug::saving_graphs()) debug::save_graph_if_requested(captured().program, graph_hash, cause, captured().origins);
  if (debug::debug_level() >= 2) debug::analyse_execution(captured().program, graph_hash, cause);
  auto& counters = detail::counters();
  if (auto found = compile::default_cache().find(key, trace)) {
    counters.cached.fetch_add(1, std::memory_order_relaxed);
    return found;
  }
  const auto disk = detail::persistent_cache();
  if (disk) {
    auto found = disk->find(key, context.text, captured().program);
    if (found.result == compile::disk_cache::outcome::hit) {
      counters.persistent_hit.fetch_add(1, std::memory_order_relaxed);
      request_native_kernels(*found.compiled, detail::native_library_directory(*disk));
      compile::default_cache().insert(key, captured().program, found.compiled);
      return std::move(found.compiled);
    }
    counters.persistent_miss.fetch_add(1, std::memory_order_relaxed);
    if (found.result == compile::disk_cache::outcome::damaged) {
      counters.persistent_bad_entry.fetch_add(1, std::memory_order_relaxed);
    }
  }
  compile::executable_ptr compiled;
  {
    profiler::scope compiling(profiler::track::host_compile(), "compile", {{"graph hash", debug::detail::hex(graph_hash)}});
    metrics::timer timing("CompileTime");
    compiled = compile::compile_graph(captured().program, precision, evaluate_constant);
  }
  counters.uncached.fetch_add(1, std::memory_order_relaxed);
  debug::analyse_compilation(captured().program, graph_hash, cause);
  compile::default_cache().insert(key, captured().program, compiled);
  if (disk) disk->store(key, {context.text, captured().program, compiled});
  request_native_kernels(*compiled, disk ? detail::native_library_directory(*disk) : std::filesystem::path{});
  return compiled;
}
#endif

} // namespace xlite::runtime
