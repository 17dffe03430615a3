// libtorch (ATen): the triad as at::add_out(a, b, c, s), which computes a = b + s * c, and
// sgemm as at::mm_out. The tensors are views of our buffers (at::from_blob), so torch
// reads the same data as every other impl.
//
// The expression cases in eager ATen at its best: one op per pass, each written into an
// existing tensor (the _out and in-place forms, so nothing is allocated in the timed loop),
// fused ops where ATen has them (add with alpha, addcmul), and at::dot_out for the sum.
// Every op is a pass over memory, so the label counts them.

#include <dlfcn.h>

// First, so that c10::IValue is complete where ATen's List.h needs it: under C++20, clang
// rejects the headers below otherwise (libtorch 1.13 was written for C++17).
#include <ATen/core/ivalue.h>

#include <ATen/Parallel.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>

#include <cstdint>

#include "bench_common.hpp"
#include "expressions.hpp"
#include "gemm.hpp"
#include "row_broadcasts.hpp"
#include "row_reductions.hpp"
#include "triad.hpp"

namespace {

using namespace xlite::bench;

at::Tensor view(aligned_floats& buffer, at::IntArrayRef shape) {
  return at::from_blob(buffer.data(), shape, at::kFloat);
}

// A view of a buffer torch only reads (the shared inputs of the expression cases): ATen has
// no read-only tensors, hence the cast.
at::Tensor input_view(const aligned_floats& buffer, at::IntArrayRef shape) {
  return at::from_blob(const_cast<float*>(buffer.data()), shape, at::kFloat);
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
  const gemm_shape s = gemm_shape_arg(state);
  set_torch_threads(gemm_threads_arg(state));
  gemm_operands g(s);
  at::Tensor c = view(g.c, {s.m, s.n});
  const at::Tensor a = view(g.a, {s.m, s.k});
  const at::Tensor b = view(g.b, {s.k, s.n});
  for (auto _ : state) {
    at::mm_out(c, a, b);
    benchmark::ClobberMemory();
  }
  report_flops(state, gemm_flops(s));
  check_gemm(state, g, g.c.data(), as_is, 2e-6 * static_cast<double>(s.k));
}

void run_expression_torch(benchmark::State& state, const expression_case& c) {
  const std::int64_t n = size_arg(state);
  set_torch_threads(threads_arg(state));
  expression_operands operands(n);
  const at::Tensor x = input_view(operands.x, {n});
  const at::Tensor y = input_view(operands.y, {n});
  const at::Tensor w = input_view(operands.w, {n});
  at::Tensor z = view(operands.z, {n});
  const auto time_passes = [&](const char* passes, auto evaluate) {
    time_elementwise(state, c, evaluate);
    check_elements(state, c.which, operands.z.data(), n);
    state.SetLabel(passes);
  };
  using in = expression_inputs;
  switch (c.which) {
  case expression::e1:
    time_passes("1 pass: add_out with alpha", [&] { at::add_out(z, y, x, in::a); });
    break;
  case expression::e2:
    time_passes("3 passes: mul_out, add_out, sub_out with alpha", [&] {
      at::mul_out(z, x, in::a);
      at::add_out(z, z, y, in::b);
      at::sub_out(z, z, w, in::c);
    });
    break;
  case expression::e3: {
    at::Tensor tanh_w = at::empty({n}, at::kFloat);
    time_passes("5 passes: mul_out, neg_, exp_, tanh_out, addcmul_out", [&] {
      at::mul_out(z, x, x);
      at::neg_(z);
      at::exp_(z);
      at::tanh_out(tanh_w, w);
      at::addcmul_out(z, tanh_w, z, y);
    });
    break;
  }
  case expression::e4:
    time_passes("2 passes: addcmul_out, relu_", [&] {
      at::addcmul_out(z, w, x, y);
      at::relu_(z);
    });
    break;
  case expression::sum_xy: {
    at::Tensor sum = at::empty({}, at::kFloat);
    time_sum(state, c, [&] {
      at::dot_out(sum, x, y);
      return *sum.data_ptr<float>();
    });
    check_sum(state, *sum.data_ptr<float>(), n);
    state.SetLabel("1 pass: dot_out");
    break;
  }
  }
}

// argmax_xy in two passes: the product into a tensor, then at::argmax_out into a 0-d one.
void run_argmax_torch(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  set_torch_threads(threads_arg(state));
  const expression_inputs& in = expression_inputs::of_size(n);
  const at::Tensor x = input_view(in.x, {n});
  const at::Tensor y = input_view(in.y, {n});
  at::Tensor product = at::empty({n}, at::kFloat);
  at::Tensor index = at::empty({}, at::kLong);
  time_argmax(state, [&] {
    at::mul_out(product, x, y);
    at::argmax_out(index, product);
    return *index.data_ptr<std::int64_t>();
  });
  state.SetLabel("2 passes: mul_out, argmax_out");
}

// row_sum and row_argmax as at::sum_out and at::argmax_out over dimension 1, into existing
// tensors.
template <bool Argmax>
void run_rows_torch(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  set_torch_threads(row_threads_arg(state));
  const at::Tensor x = input_view(row_input(s, Argmax), {s.rows, s.cols});
  if constexpr (Argmax) {
    at::Tensor out = at::empty({s.rows}, at::kLong);
    time_rows<std::int64_t>(state, [&] {
      at::argmax_out(out, x, 1);
      return out.data_ptr<std::int64_t>();
    });
  } else {
    at::Tensor out = at::empty({s.rows}, at::kFloat);
    time_rows<float>(state, [&] {
      at::sum_out(out, x, {1});
      return out.data_ptr<float>();
    });
  }
}

// col_sum as at::sum_out over dimension 0, into an existing tensor.
void run_columns_torch(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  set_torch_threads(row_threads_arg(state));
  const at::Tensor x = input_view(row_input(s, false), {s.rows, s.cols});
  at::Tensor out = at::empty({s.cols}, at::kFloat);
  time_columns(state, [&] {
    at::sum_out(out, x, {0});
    return out.data_ptr<float>();
  });
}

// row_bias as at::add_out(y, x, b); row_sigmoid as that and at::sigmoid_out(y, y) (eager
// torch makes two passes); row_center as at::sub_out(y, x, m).
template <row_broadcast Case>
void run_row_broadcast_torch(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  set_torch_threads(row_threads_arg(state));
  const at::Tensor x = input_view(row_input(s, false), {s.rows, s.cols});
  const at::Tensor b = input_view(row_bias_input(s), {s.cols});
  const at::Tensor m = input_view(row_center_input(s), {s.rows, 1});
  aligned_floats buffer(s.rows * s.cols);
  at::Tensor y = view(buffer, {s.rows, s.cols});
  time_row_broadcast(state, Case, buffer.data(), [&] {
    if constexpr (Case == row_broadcast::center) {
      at::sub_out(y, x, m);
    } else {
      at::add_out(y, x, b);
      if constexpr (Case == row_broadcast::sigmoid) at::sigmoid_out(y, y);
    }
  });
  if (Case == row_broadcast::sigmoid) state.SetLabel("2 passes: add_out, sigmoid_out");
}

} // namespace

void xlite::bench::register_torch() {
  register_sized("triad", "torch", run_triad_torch, triad_sizes);
  register_gemm("sgemm", "torch", run_sgemm_torch);
  register_expressions("torch", run_expression_torch);
  register_sized("argmax_xy", "torch", run_argmax_torch, expression_sizes)->MinTime(expression_min_time);
  register_rows("row_sum", "torch", run_rows_torch<false>);
  register_rows("row_argmax", "torch", run_rows_torch<true>);
  register_rows("col_sum", "torch", run_columns_torch, thread_counts, column_shapes);
  register_rows("row_bias", "torch", run_row_broadcast_torch<row_broadcast::bias>);
  register_rows("row_sigmoid", "torch", run_row_broadcast_torch<row_broadcast::sigmoid>);
  register_rows("row_center", "torch", run_row_broadcast_torch<row_broadcast::center>);
}
