// oneDNN's sgemm through its C API, dnnl_sgemm (row-major, like our operands). oneDNN
// parallelises with OpenMP here, so the thread count is OpenMP's.

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>

#include "bench_common.hpp"
#include "sgemm.hpp"

namespace {

using namespace xlite::bench;

void run_sgemm_onednn(benchmark::State& state) {
  if (dnnl_version()->cpu_runtime != DNNL_RUNTIME_OMP) {
    state.SkipWithError("this oneDNN does not run on OpenMP, so its thread count cannot be set");
    return;
  }
  omp_set_num_threads(threads_arg(state));
  const std::int64_t n = size_arg(state);
  sgemm_operands gemm(n);
  for (auto _ : state) {
    const dnnl_status_t status =
        dnnl_sgemm('N', 'N', n, n, n, 1.0f, gemm.a.data(), n, gemm.b.data(), n, 0.0f, gemm.c.data(), n);
    if (status != dnnl_success) {
      state.SkipWithError("dnnl_sgemm failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  report_flops(state, sgemm_flops(n));
}

} // namespace

void xlite::bench::register_onednn() {
  register_sized("sgemm", "onednn", run_sgemm_onednn, sgemm_sizes);
}
