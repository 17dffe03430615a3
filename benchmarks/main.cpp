// The benchmark program: registers the benchmarks of xlite, the machine's limits and the
// peers CMake found (it defines XLITE_BENCH_HAVE_<PEER> for each), and runs them with two
// context entries in the output for scripts/bench_table.py: the ISA xlite's kernels run,
// and the peers this build compares with.

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "bench_common.hpp"
#include "xlite/core/cpu_features.hpp"

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
  xlite::bench::register_xlite_gemm();
  xlite::bench::register_xlite_lazy();
  xlite::bench::register_xlite_training();
  xlite::bench::register_xlite_tpu();
  benchmark::AddCustomContext("peers", register_peers());
  benchmark::AddCustomContext("xlite_isa", std::string(xlite::name(xlite::active_isa())));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
