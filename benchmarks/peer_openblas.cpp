// OpenBLAS: the triad in BLAS level 1, and sgemm. Threads are set per benchmark with
// openblas_set_num_threads.

#include <cblas.h>

#include <cstdint>

#include "bench_common.hpp"
#include "sgemm.hpp"
#include "triad.hpp"

namespace {

using namespace xlite::bench;

// BLAS has no triad; the closest is a = b (scopy), then a += s c (saxpy). That is two
// passes over a, 20 bytes moved per element where a fused loop moves 12. The rate counts
// the triad's 12 bytes, like every triad row, so the table shows what the second pass costs.
void run_triad_openblas(benchmark::State& state) {
  const auto n = static_cast<blasint>(size_arg(state));
  openblas_set_num_threads(threads_arg(state));
  triad_operands triad(n);
  for (auto _ : state) {
    cblas_scopy(n, triad.b.data(), 1, triad.a.data(), 1);
    cblas_saxpy(n, triad_operands::s, triad.c.data(), 1, triad.a.data(), 1);
    benchmark::ClobberMemory();
  }
  report_bytes(state, triad_bytes(n));
  state.SetLabel("scopy + saxpy: two passes");
}

void run_sgemm_openblas(benchmark::State& state) {
  const auto n = static_cast<blasint>(size_arg(state));
  openblas_set_num_threads(threads_arg(state));
  sgemm_operands gemm(n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, gemm.a.data(), n, gemm.b.data(), n, 0.0f,
                gemm.c.data(), n);
    benchmark::ClobberMemory();
  }
  report_flops(state, sgemm_flops(n));
}

} // namespace

void xlite::bench::register_openblas() {
  register_sized("triad", "openblas", run_triad_openblas, triad_sizes);
  register_sized("sgemm", "openblas", run_sgemm_openblas, sgemm_sizes);
}
