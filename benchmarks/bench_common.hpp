#pragma once

// What every xlite benchmark shares: the naming convention, registration, buffers, rates.
//
// Names are "<case>/<impl>/<args>", e.g. "triad/xlite/n:67108864/threads:2":
//   case    what is computed, the same work for every impl ("triad", "sgemm", ...);
//   impl    who computes it: "xlite", a peer ("eigen", "openblas", "onednn", "torch"), or
//           "limit", the machine-limit reference for the case, measured in the same run;
//   args    "name:value" pairs; rows of one case with equal args are compared with one
//           another. Cases over a size name it "n"; every case names its thread count
//           "threads", whether it is an argument (register_sized) or Google Benchmark's
//           own threads (->Threads(), used by the limits).
// Google Benchmark appends run settings of its own ("real_time", "min_time:0.5", ...), and
// its threads after them ("triad/limit/n:65536/real_time/threads:2"); scripts/bench_table.py
// drops the settings and keeps the args. To select rows by args, leave room for the
// settings between them: --benchmark_filter='n:65536.*threads:2'.
//
// Rates: a memory-bound case reports bytes (report_bytes), a compute-bound case reports
// FLOPs as items (report_flops); exactly one of the two, so the table knows which it is.
// A FLOP-rated case without a limit row of its own is compared with "peak_fma/limit" at
// the same thread count (bf16gemm: with the fastest bf16 peak measured, see gemm.hpp).

#include <benchmark/benchmark.h>

#include "xlite/core/aligned_memory.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xlite::bench {

// Each benchmark file registers its benchmarks in one function; main.cpp calls them in
// this order, which is the order they run in: the limits and xlite before the peers, whose
// thread pools keep spinning for a while after each call and would slow down what follows.
void register_machine_limits();
void register_xlite_thread_pool();
void register_xlite_expressions();
void register_paired_expressions();
void register_xlite_gemm();
void register_xlite_lazy();
void register_xlite_training();
void register_xlite_tpu();
void register_xsimd();
void register_xtensor();
void register_eigen();
void register_openblas();
void register_onednn();
void register_torch();
void register_torch_training();

// The thread counts every multi-threaded case runs with: one core, then two, so the
// table shows both the single-thread rate and how it scales.
inline const std::vector<std::int64_t> thread_counts = {1, 2};

// What a row's time is: the wall-clock time of its iterations (a multi-threaded impl's CPU
// time says nothing about its speed), or what fn reports with state.SetIterationTime (a
// row that times only part of each iteration, as the paired rows do).
enum class timing { wall_clock, manual };

// Registers fn as "<case_name>/<impl>" and returns it for args and settings.
template <class Function>
benchmark::internal::Benchmark* register_case(std::string_view case_name, std::string_view impl, Function fn,
                                              timing t = timing::wall_clock) {
  const std::string name = std::string(case_name) + "/" + std::string(impl);
  benchmark::internal::Benchmark* const b = benchmark::RegisterBenchmark(name.c_str(), fn);
  return (t == timing::manual ? b->UseManualTime() : b->UseRealTime())->Unit(benchmark::kMicrosecond);
}

// Registers fn as "<case_name>/<impl>/n:<n>/threads:<t>" for every n in sizes and t in
// threads; fn reads them back with size_arg and threads_arg.
template <class Function>
benchmark::internal::Benchmark*
register_sized(std::string_view case_name, std::string_view impl, Function fn, const std::vector<std::int64_t>& sizes,
               const std::vector<std::int64_t>& threads = thread_counts, timing t = timing::wall_clock) {
  return register_case(case_name, impl, fn, t)->ArgNames({"n", "threads"})->ArgsProduct({sizes, threads});
}

inline std::int64_t size_arg(const benchmark::State& state) { return state.range(0); }
inline int threads_arg(const benchmark::State& state) { return static_cast<int>(state.range(1)); }

// Call after the timed loop: per-iteration work times the iterations, as Google Benchmark
// expects. Bytes follow STREAM's counting: each array read or written once per element.
inline void report_bytes(benchmark::State& state, std::int64_t bytes_per_iteration) {
  state.SetBytesProcessed(state.iterations() * bytes_per_iteration);
}
inline void report_flops(benchmark::State& state, std::int64_t flops_per_iteration) {
  state.SetItemsProcessed(state.iterations() * flops_per_iteration);
}

// n floats on a cache line (64 bytes, one AVX-512 register; on a page from 32 KiB on, in
// huge pages from 32 MiB on), zeroed so that the first touch of every page happens here
// and not in a timed loop. They come from the allocator of xlite's tensors, so that xlite
// and its peers draw their operands from the heap alike, with the same layout.
class aligned_floats {
public:
  static constexpr std::size_t alignment = xlite::cache_line;

  explicit aligned_floats(std::int64_t n) : data_(xlite::allocate_aligned<float>(n)), size_(n) {
    std::fill_n(data_.get(), n, 0.0f);
  }

  float* data() noexcept { return data_.get(); }
  const float* data() const noexcept { return data_.get(); }
  std::int64_t size() const noexcept { return size_; }

private:
  xlite::aligned_array<float> data_;
  std::int64_t size_;
};

// The value at index i of the deterministic data of `seed`: a float in [-1, 1) hashed from
// (seed, index), so the data are the same on every run and machine, differ between seeds,
// and have no pattern a library could exploit. Checks recompute inputs with it.
inline float deterministic_float(std::int64_t i, std::uint32_t seed) noexcept {
  std::uint32_t h = (static_cast<std::uint32_t>(i) * 0x9e3779b1u) ^ (seed * 0x85ebca77u);
  h = (h ^ (h >> 15)) * 0x2c1b3c6du;
  h ^= h >> 12;
  return static_cast<float>(h >> 8) * 0x1p-23f - 1.0f; // 24 random bits -> [-1, 1)
}

// n floats of the deterministic data of `seed`.
inline aligned_floats deterministic_floats(std::int64_t n, std::uint32_t seed) {
  aligned_floats values(n);
  float* out = values.data();
  for (std::int64_t i = 0; i < n; ++i) out[i] = deterministic_float(i, seed);
  return values;
}

} // namespace xlite::bench
