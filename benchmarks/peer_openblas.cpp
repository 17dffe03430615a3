// OpenBLAS: the triad in BLAS level 1, and sgemm. Threads are set per benchmark with
// openblas_set_num_threads. Debian's OpenBLAS 0.3.21 does not know Zen 4/5 and falls back
// to older kernels; OPENBLAS_CORETYPE=SkylakeX makes it use its AVX-512 ones. The bench
// preset runs OpenBLAS a second time with that setting, and the impl's name says which
// ("openblas" or "openblas_skylakex").

#include <cblas.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bench_common.hpp"
#include "gemm.hpp"
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
  const gemm_shape s = gemm_shape_arg(state);
  openblas_set_num_threads(gemm_threads_arg(state));
  gemm_operands g(s);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(s.m), static_cast<blasint>(s.n),
                static_cast<blasint>(s.k), 1.0f, g.a.data(), static_cast<blasint>(s.k), g.b.data(),
                static_cast<blasint>(s.n), 0.0f, g.c.data(), static_cast<blasint>(s.n));
    benchmark::ClobberMemory();
  }
  report_flops(state, gemm_flops(s));
  check_gemm(state, g, g.c.data(), as_is, 2e-6 * static_cast<double>(s.k));
  state.SetLabel(openblas_get_config());
}

// "openblas", or "openblas_<coretype>" when OPENBLAS_CORETYPE chooses the kernels.
std::string impl_name() {
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  if (coretype == nullptr || *coretype == '\0') return "openblas";
  std::string name = "openblas_";
  for (const char* p = coretype; *p != '\0'; ++p) name += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
  return name;
}

} // namespace

void xlite::bench::register_openblas() {
  const std::string impl = impl_name();
  register_sized("triad", impl, run_triad_openblas, triad_sizes);
  register_gemm("sgemm", impl, run_sgemm_openblas);
}
