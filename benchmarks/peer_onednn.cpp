// oneDNN: sgemm through its C API, dnnl_sgemm (row-major, like our operands), and the bf16
// GEMM as its matmul primitive (bfloat16 source and weights, float destination). oneDNN
// parallelises with OpenMP here, so the thread count is OpenMP's.
//
// On machines whose hypervisor hides CPUID leaf 0x1D (AMX tile geometry), oneDNN 2.6 dies
// with SIGILL when it sets up AMX tiles; there main.cpp caps it with
// ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 unless the variable is already set. Elsewhere it
// runs its own AMX kernels, the peer xlite's AMX path is measured against.

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "gemm.hpp"

namespace {

using namespace xlite::bench;

bool use_threads(benchmark::State& state, int threads) {
  if (dnnl_version()->cpu_runtime != DNNL_RUNTIME_OMP) {
    state.SkipWithError("this oneDNN does not run on OpenMP, so its thread count cannot be set");
    return false;
  }
  omp_set_num_threads(threads);
  return true;
}

void run_sgemm_onednn(benchmark::State& state) {
  const gemm_shape s = gemm_shape_arg(state);
  if (!use_threads(state, gemm_threads_arg(state))) return;
  gemm_operands g(s);
  for (auto _ : state) {
    const dnnl_status_t status =
        dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, g.a.data(), s.k, g.b.data(), s.n, 0.0f, g.c.data(), s.n);
    if (status != dnnl_success) {
      state.SkipWithError("dnnl_sgemm failed");
      return;
    }
    benchmark::ClobberMemory();
  }
  report_flops(state, gemm_flops(s));
  check_gemm(state, g, g.c.data(), as_is, 2e-6 * static_cast<double>(s.k));
}

// The operand's floats rounded to bfloat16 (round to nearest even), as oneDNN stores them.
std::vector<std::uint16_t> to_bf16(const aligned_floats& values) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(values.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, values.data() + i, 4);
    out[i] = static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
  return out;
}

float round_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = ((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16) << 16;
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}

void run_bf16gemm_onednn(benchmark::State& state) {
  const gemm_shape s = gemm_shape_arg(state);
  if (!use_threads(state, gemm_threads_arg(state))) return;
  gemm_operands g(s);
  std::vector<std::uint16_t> a = to_bf16(g.a);
  std::vector<std::uint16_t> b = to_bf16(g.b);
  try {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const dnnl::memory::desc a_desc({s.m, s.k}, dt::bf16, tag::ab);
    const dnnl::memory::desc b_desc({s.k, s.n}, dt::bf16, tag::ab);
    const dnnl::memory::desc c_desc({s.m, s.n}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc), engine);
    const dnnl::matmul matmul(pd);
    dnnl::memory a_mem(a_desc, engine, a.data());
    dnnl::memory b_mem(b_desc, engine, b.data());
    dnnl::memory c_mem(c_desc, engine, g.c.data());
    for (auto _ : state) {
      matmul.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
      stream.wait();
    }
    state.SetLabel(std::string("oneDNN matmul: ") + pd.impl_info_str());
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  report_flops(state, gemm_flops(s));
  check_gemm(state, g, g.c.data(), round_bf16, 2e-6 * static_cast<double>(s.k));
}

} // namespace

void xlite::bench::register_onednn() {
  register_gemm("sgemm", "onednn", run_sgemm_onednn);
  register_gemm("bf16gemm", "onednn", run_bf16gemm_onednn);
}
