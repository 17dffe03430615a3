// The systolic-array model's functional product (xlite::tpu::systolic_array::gemm) on the
// GEMM shapes: bf16 operands, fp32 sums in the dataflow's order, computed on the fp32 GEMM
// kernels. Output-stationary is one fp32 GEMM; weight-stationary adds one 128-deep row
// fold at a time, so it pays a pass over C per fold. Compare with sgemm/xlite and the FMA
// peak in the same run: the model's result runs at the CPU kernels' speed, not cell by cell.

#include "bench_common.hpp"
#include "gemm.hpp"
#include "xlite/core/bfloat16.hpp"
#include "xlite/tpu/systolic_array.hpp"

namespace {

using namespace xlite::bench;

float as_bf16(float x) { return static_cast<float>(xlite::bfloat16(x)); }

template <class Dataflow>
void run_tpu_gemm(benchmark::State& state) {
  const gemm_shape s = gemm_shape_arg(state);
  gemm_operands g(s);
  xlite::thread_pool pool(static_cast<std::size_t>(gemm_threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  const xlite::tpu::systolic_array<128, 128, Dataflow> mxu;
  const xlite::tpu::matrix_view<float> a(g.a.data(), s.m, s.k), b(g.b.data(), s.k, s.n);
  xlite::tpu::matrix<float> c(0, 0);
  for (auto _ : state) {
    c = mxu.gemm(a, b).first;
    benchmark::ClobberMemory();
  }
  report_flops(state, gemm_flops(s));
  check_gemm(state, g, c.data(), as_bf16, 2e-6 * static_cast<double>(s.k));
}

} // namespace

namespace xlite::bench {

void register_xlite_tpu() {
  register_gemm("tpu_gemm_os", "xlite", run_tpu_gemm<xlite::tpu::dataflow::output_stationary>);
  register_gemm("tpu_gemm_ws", "xlite", run_tpu_gemm<xlite::tpu::dataflow::weight_stationary>);
}

} // namespace xlite::bench
