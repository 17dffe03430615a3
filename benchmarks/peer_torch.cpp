// libtorch (ATen): the triad as at::add_out(a, b, c, s), which computes a = b + s * c, and
// sgemm as at::mm_out. The tensors are views of our buffers (at::from_blob), so torch
// reads the same data as every other impl.

#include <dlfcn.h>

// First, so that c10::IValue is complete where ATen's List.h needs it: under C++20, clang
// rejects the headers below otherwise (libtorch 1.13 was written for C++17).
#include <ATen/core/ivalue.h>

#include <ATen/Parallel.h>
#include <ATen/ops/add.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>

#include <cstdint>

#include "bench_common.hpp"
#include "sgemm.hpp"
#include "triad.hpp"

namespace {

using namespace xlite::bench;

at::Tensor view(aligned_floats& buffer, at::IntArrayRef shape) {
  return at::from_blob(buffer.data(), shape, at::kFloat);
}

// at::set_num_threads sets torch's own (OpenMP) threads, but Debian's libtorch runs at::mm
// on OpenBLAS, whose threads it does not reach. So set those too when OpenBLAS is in the
// process, looked up by name so that this peer does not depend on the openblas one.
void set_torch_threads(int threads) {
  at::set_num_threads(threads);
  using set_threads_function = void (*)(int);
  if (void* symbol = dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) {
    reinterpret_cast<set_threads_function>(symbol)(threads);
  }
}

void run_triad_torch(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  set_torch_threads(threads_arg(state));
  triad_operands triad(n);
  at::Tensor a = view(triad.a, {n});
  const at::Tensor b = view(triad.b, {n});
  const at::Tensor c = view(triad.c, {n});
  for (auto _ : state) {
    at::add_out(a, b, c, triad_operands::s);
    benchmark::ClobberMemory();
  }
  report_bytes(state, triad_bytes(n));
}

void run_sgemm_torch(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  set_torch_threads(threads_arg(state));
  sgemm_operands gemm(n);
  at::Tensor c = view(gemm.c, {n, n});
  const at::Tensor a = view(gemm.a, {n, n});
  const at::Tensor b = view(gemm.b, {n, n});
  for (auto _ : state) {
    at::mm_out(c, a, b);
    benchmark::ClobberMemory();
  }
  report_flops(state, sgemm_flops(n));
}

} // namespace

void xlite::bench::register_torch() {
  register_sized("triad", "torch", run_triad_torch, triad_sizes);
  register_sized("sgemm", "torch", run_sgemm_torch, sgemm_sizes);
}
