// xlite's GEMMs, as a user calls them: xlite::kernels::gemm on the shared operands, with a
// thread pool of the row's thread count. bf16gemm rounds the operands to bfloat16 once,
// outside the timed loop (as a model stores its weights), and writes float.

#include <vector>

#include "bench_common.hpp"
#include "gemm.hpp"
#include "xlite/kernels/gemm.hpp"

namespace {

using namespace xlite::bench;
using xlite::kernels::gemm_args;

void run_sgemm_xlite(benchmark::State& state) {
  const gemm_shape s = gemm_shape_arg(state);
  gemm_operands g(s);
  xlite::thread_pool pool(static_cast<std::size_t>(gemm_threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  const gemm_args<float, float> args{.m = s.m, .n = s.n, .k = s.k, .a = g.a.data(), .lda = s.k, .b = g.b.data(),
                                     .ldb = s.n, .c = g.c.data(), .ldc = s.n};
  for (auto _ : state) {
    xlite::kernels::gemm(args);
    benchmark::ClobberMemory();
  }
  report_flops(state, gemm_flops(s));
  check_gemm(state, g, g.c.data(), as_is, 2e-6 * static_cast<double>(s.k));
  state.SetLabel(std::string(xlite::name(xlite::kernels::gemm_path(xlite::kernels::gemm_precision::fp32))));
}

void run_bf16gemm_xlite(benchmark::State& state) {
  const gemm_shape s = gemm_shape_arg(state);
  gemm_operands g(s);
  const std::vector<xlite::bfloat16> a(g.a.data(), g.a.data() + s.m * s.k);
  const std::vector<xlite::bfloat16> b(g.b.data(), g.b.data() + s.k * s.n);
  xlite::thread_pool pool(static_cast<std::size_t>(gemm_threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  const gemm_args<xlite::bfloat16, float> args{.m = s.m, .n = s.n, .k = s.k, .a = a.data(), .lda = s.k, .b = b.data(),
                                               .ldb = s.n, .c = g.c.data(), .ldc = s.n};
  for (auto _ : state) {
    xlite::kernels::gemm(args);
    benchmark::ClobberMemory();
  }
  report_flops(state, gemm_flops(s));
  check_gemm(state, g, g.c.data(), [](float x) { return static_cast<float>(xlite::bfloat16(x)); },
             2e-6 * static_cast<double>(s.k));
  state.SetLabel(std::string(xlite::name(xlite::kernels::gemm_path(xlite::kernels::gemm_precision::bf16))));
}

} // namespace

void xlite::bench::register_xlite_gemm() {
  register_gemm("sgemm", "xlite", run_sgemm_xlite);
  register_gemm("bf16gemm", "xlite", run_bf16gemm_xlite);
}
