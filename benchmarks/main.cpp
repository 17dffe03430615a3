// The benchmark program: registers the benchmarks of xlite, the machine's limits and the
// peers CMake found (it defines XLITE_BENCH_HAVE_<PEER> for each), and runs them with three
// context entries in the output for scripts/bench_table.py: the ISA xlite's kernels run,
// the peers this build compares with, and the time a cache line takes between two cores.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "bench_common.hpp"
#include "xlite/core/cpu_features.hpp"
#include "xlite/core/spin_wait.hpp"

namespace {

// Registers the peers' benchmarks and returns their names, e.g. "eigen openblas".
std::string register_peers() {
  std::string peers;
#ifdef XLITE_BENCH_HAVE_XSIMD
  xlite::bench::register_xsimd();
  peers += " xsimd";
#endif
#ifdef XLITE_BENCH_HAVE_XTENSOR
  xlite::bench::register_xtensor();
  peers += " xtensor";
#endif
#ifdef XLITE_BENCH_HAVE_EIGEN
  xlite::bench::register_eigen();
  peers += " eigen";
#endif
#ifdef XLITE_BENCH_HAVE_OPENBLAS
  xlite::bench::register_openblas();
  peers += " openblas";
#endif
#ifdef XLITE_BENCH_HAVE_ONEDNN
  xlite::bench::register_onednn();
  peers += " onednn";
#endif
#ifdef XLITE_BENCH_HAVE_TORCH
  xlite::bench::register_torch();
  xlite::bench::register_torch_training();
  peers += " torch";
#endif
  return peers.empty() ? "none" : peers.substr(1);
}

// Whether CPUID leaf 0x1D, the AMX tile geometry, is missing or reads as zeros on an x86
// CPU (a needless cap where there is no AMX costs nothing).
bool amx_leaf_hidden() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return !__get_cpuid_count(0x1d, 1, &eax, &ebx, &ecx, &edx) || (eax == 0 && ebx == 0 && ecx == 0);
#else
  return false;
#endif
}

// The median time for a cache line to go from one thread to another and back, in ns, or
// "-" on one CPU. On a VM it depends on where the host places the vCPUs (on the Zen 5 VM
// 70-90 ns or about 500, changing during a run), and it sets what the rows on two threads
// at small sizes pay per job: the table's first line shows it, as measured at the start.
std::string core_round_trip_ns() {
  if (std::thread::hardware_concurrency() < 2) return "-";
  constexpr int trips = 20000;
  alignas(128) std::atomic<int> ball{0};
  std::thread other([&] {
    for (int i = 0; i < trips; ++i) {
      while (ball.load(std::memory_order_acquire) != 2 * i + 1) xlite::detail::cpu_relax();
      ball.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::vector<double> ns;
  ns.reserve(trips / 100);
  for (int i = 0; i < trips; i += 100) {
    const auto start = std::chrono::steady_clock::now();
    for (int j = i; j < i + 100; ++j) {
      ball.store(2 * j + 1, std::memory_order_release);
      while (ball.load(std::memory_order_acquire) != 2 * j + 2) xlite::detail::cpu_relax();
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / 100);
  }
  other.join();
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(ns.size() / 2), ns.end());
  return std::to_string(static_cast<int>(ns[ns.size() / 2]));
}

} // namespace

int main(int argc, char** argv) {
  // oneDNN 2.6 builds its AMX tile setup from CPUID leaf 0x1D and dies where a hypervisor
  // hides the leaf; there, cap it below AMX unless the user chose otherwise (peer_onednn.cpp).
  if (amx_leaf_hidden()) setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", 0);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  xlite::bench::register_machine_limits();
  xlite::bench::register_xlite_thread_pool();
  xlite::bench::register_xlite_expressions();
  xlite::bench::register_paired_expressions();
  xlite::bench::register_xlite_gemm();
  xlite::bench::register_xlite_lazy();
  xlite::bench::register_xlite_training();
  xlite::bench::register_xlite_tpu();
  benchmark::AddCustomContext("peers", register_peers());
  benchmark::AddCustomContext("xlite_isa", std::string(xlite::name(xlite::active_isa())));
  benchmark::AddCustomContext("core_round_trip_ns", core_round_trip_ns());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
