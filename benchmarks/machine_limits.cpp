// The machine's limits, measured in the same run as the benchmarks they bound:
//   triad/limit     STREAM triad bandwidth. Every Google Benchmark thread runs the triad over
//                   arrays of its own and nothing synchronises the threads between
//                   iterations: the most a parallel loop over the same data could reach,
//                   with the stores that are fastest at that size.
//   sum_xy/limit    read bandwidth, for the cases that only read (argmax_xy/limit is the same
//                   measurement under that case's name): every thread sums x * y
//                   over two arrays of its own, unsynchronised, as triad/limit does. A core
//                   may read faster or slower than it runs a triad (0.79 of the triad's
//                   rate on one VM here, 1.2 on another), so triad/limit does not bound it.
//   peak_fma/limit  peak fp32 FLOP/s: independent FMA chains in the widest vector ISA the
//                   CPU has, the limit of every FLOP-rated case (sgemm, ...).
//   peak_bf16/limit peak bf16 FLOP/s of VDPBF16PS (AVX512_BF16) chains, where the CPU has it.
//   peak_amx/limit  peak bf16 FLOP/s of TDPBF16PS on four independent accumulator tiles,
//                   where AMX is usable (xlite's probe passed).
// Both run on Google Benchmark's threads, so their args name the thread count as
// "threads:<t>" like the cases that take it as an argument.

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "bench_common.hpp"
#include "expressions.hpp"
#include "simd_dot.hpp"
#include "triad.hpp"
#include "xlite/core/cpu_features.hpp"
#include "xlite/kernels/amx.hpp"

namespace {

using namespace xlite::bench;

benchmark::internal::Benchmark* on_each_thread_count(benchmark::internal::Benchmark* family) {
  for (const std::int64_t threads : thread_counts) family->Threads(static_cast<int>(threads));
  return family;
}

// The largest cache: arrays bigger than it stream from DRAM.
std::int64_t last_level_cache_bytes() {
  std::int64_t largest = 0;
  for (const auto& cache : benchmark::CPUInfo::Get().caches) largest = std::max<std::int64_t>(largest, cache.size);
  return largest;
}

// Beyond the last-level cache, a plain store first reads the line it overwrites
// (write-allocate): 16 bytes move per element where STREAM counts 12. Streaming stores skip
// that read, so there the limit uses them; SSE ones, which every x86-64 has, since wider
// stores gain nothing once DRAM is the bottleneck. In cache, plain stores are faster.
void triad_streaming(triad_operands& triad) {
  const __m128 s = _mm_set1_ps(triad_operands::s);
  float* a = triad.a.data();
  const float* b = triad.b.data();
  const float* c = triad.c.data();
  std::int64_t i = 0;
  for (; i + 4 <= triad.size(); i += 4) {
    _mm_stream_ps(a + i, _mm_add_ps(_mm_load_ps(b + i), _mm_mul_ps(s, _mm_load_ps(c + i))));
  }
  triad.run(i, triad.size()); // the last size % 4 elements
  _mm_sfence();               // the iteration ends when its stores have reached memory
}

void run_triad_limit(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const bool streaming = triad_bytes(n) > last_level_cache_bytes();
  triad_operands triad(n / state.threads()); // this thread's share
  for (auto _ : state) {
    if (streaming) {
      triad_streaming(triad);
    } else {
      triad.run(0, triad.size());
    }
    benchmark::ClobberMemory();
  }
  report_bytes(state, triad_bytes(triad.size()));
  state.SetLabel(streaming ? "streaming stores" : "plain stores");
}

void run_sum_xy_limit(benchmark::State& state) {
  const std::int64_t part = state.range(0) / state.threads(); // this thread's share
  const aligned_floats x = deterministic_floats(part, 1);
  const aligned_floats y = deterministic_floats(part, 2);
  for (auto _ : state) {
    float sum = simd_dot(x.data(), y.data(), 0, part);
    benchmark::DoNotOptimize(sum);
  }
  report_bytes(state, 2 * static_cast<std::int64_t>(sizeof(float)) * part);
}

// Independent accumulators hide the FMA latency: a core needs latency x FMA ports of them
// in flight (4 cycles x 2 ports = 8 on current x86 cores); 12 leave a margin and, with the
// two constants, still fit in AVX2's 16 registers.
constexpr int fma_chains = 12;
constexpr std::int64_t fma_rounds = 1 << 14;
// acc = acc * multiplier + addend settles at addend / (1 - multiplier) = 0.1: no overflow,
// no denormals to slow the loop down.
constexpr float fma_multiplier = 0.999f;
constexpr float fma_addend = 1e-4f;

// One loop per ISA, chosen at run time. Chain j starts from j, so that the compiler cannot
// merge chains that would otherwise compute the same values.

[[gnu::target("avx512f")]] void fma_chains_avx512(std::int64_t rounds) {
  __m512 acc[fma_chains];
  for (int j = 0; j < fma_chains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 multiplier = _mm512_set1_ps(fma_multiplier);
  const __m512 addend = _mm512_set1_ps(fma_addend);
  for (std::int64_t r = 0; r < rounds; ++r) {
    for (__m512& a : acc) a = _mm512_fmadd_ps(a, multiplier, addend);
  }
  benchmark::DoNotOptimize(acc);
}

[[gnu::target("avx2,fma")]] void fma_chains_avx2(std::int64_t rounds) {
  __m256 acc[fma_chains];
  for (int j = 0; j < fma_chains; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 multiplier = _mm256_set1_ps(fma_multiplier);
  const __m256 addend = _mm256_set1_ps(fma_addend);
  for (std::int64_t r = 0; r < rounds; ++r) {
    for (__m256& a : acc) a = _mm256_fmadd_ps(a, multiplier, addend);
  }
  benchmark::DoNotOptimize(acc);
}

// Plain C++ for CPUs without AVX2: a multiply and an add, the same 2 FLOPs.
void fma_chains_portable(std::int64_t rounds) {
  float acc[fma_chains];
  for (int j = 0; j < fma_chains; ++j) acc[j] = static_cast<float>(j);
  for (std::int64_t r = 0; r < rounds; ++r) {
    for (float& a : acc) a = a * fma_multiplier + fma_addend;
  }
  benchmark::DoNotOptimize(acc);
}

struct fma_loop {
  const char* isa;
  std::int64_t lanes;
  void (*run)(std::int64_t rounds);

  std::int64_t flops(std::int64_t rounds) const { return 2 * fma_chains * lanes * rounds; }
};

fma_loop widest_fma_loop() {
  const xlite::cpu_features& cpu = xlite::detected_cpu_features();
  if (cpu.avx512f) return {"avx512", 16, fma_chains_avx512};
  if (cpu.avx2 && cpu.fma) return {"avx2", 8, fma_chains_avx2};
  return {"portable", 1, fma_chains_portable};
}

void run_peak_fma(benchmark::State& state) {
  const fma_loop loop = widest_fma_loop();
  for (auto _ : state) loop.run(fma_rounds);
  report_flops(state, loop.flops(fma_rounds));
  state.SetLabel(loop.isa);
}

// VDPBF16PS: 32 bf16 products (64 FLOPs) per zmm instruction.
[[gnu::target("avx512f,avx512bf16")]] void bf16_chains(std::int64_t rounds) {
  __m512 acc[fma_chains];
  for (int j = 0; j < fma_chains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f80'3f80); // 1.0, 1.0
  const __m512bh y = (__m512bh)_mm512_set1_epi32(0x3a80'3a80); // 2^-10, 2^-10: no overflow
  for (std::int64_t r = 0; r < rounds; ++r) {
    for (__m512& a : acc) a = _mm512_dpbf16_ps(a, x, y);
  }
  benchmark::DoNotOptimize(acc);
}

void run_peak_bf16(benchmark::State& state) {
  if (!xlite::detected_cpu_features().avx512_bf16) return state.SkipWithError("no AVX512_BF16 on this CPU");
  for (auto _ : state) bf16_chains(fma_rounds);
  report_flops(state, std::int64_t{4} * 16 * fma_chains * fma_rounds);
  state.SetLabel("vdpbf16ps");
}

// TDPBF16PS: a 16 x 16 tile of float accumulators takes 16 x 16 x 32 products per
// instruction; four accumulator tiles (0-3) from two A tiles (4, 5) and two B tiles (6, 7),
// as xlite's micro-kernel issues them.
[[gnu::target("amx-tile,amx-bf16")]] void amx_rounds(std::int64_t rounds) {
  alignas(64) static std::uint32_t operands[16 * 16] = {};
  const xlite::kernels::amx::tile_config config = xlite::kernels::amx::kernel_config();
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operands, 64);
  _tile_loadd(5, operands, 64);
  _tile_loadd(6, operands, 64);
  _tile_loadd(7, operands, 64);
  for (std::int64_t r = 0; r < rounds; ++r) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_release();
}

void run_peak_amx(benchmark::State& state) {
  if (!xlite::kernels::amx::usable()) return state.SkipWithError("no usable AMX on this machine");
  constexpr std::int64_t rounds = 1 << 12;
  for (auto _ : state) amx_rounds(rounds);
  report_flops(state, std::int64_t{4} * 2 * 16 * 16 * 32 * rounds);
  state.SetLabel("tdpbf16ps, 4 accumulator tiles");
}

} // namespace

void xlite::bench::register_machine_limits() {
  on_each_thread_count(register_case("triad", "limit", run_triad_limit)->ArgName("n")->ArgsProduct({triad_sizes}));
  on_each_thread_count(
      register_case("sum_xy", "limit", run_sum_xy_limit)->ArgName("n")->ArgsProduct({expression_sizes}));
  on_each_thread_count( // argmax_xy reads what sum_xy reads: its limit is the same measurement
      register_case("argmax_xy", "limit", run_sum_xy_limit)->ArgName("n")->ArgsProduct({expression_sizes}));
  on_each_thread_count(register_case("peak_fma", "limit", run_peak_fma));
  if (xlite::detected_cpu_features().avx512_bf16) on_each_thread_count(register_case("peak_bf16", "limit", run_peak_bf16));
  if (xlite::kernels::amx::usable()) on_each_thread_count(register_case("peak_amx", "limit", run_peak_amx));
}
