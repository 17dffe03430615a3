// The lazy path's costs, against the static path and against its targets (issue 5):
//   chain10/xlite      ten element-wise ops on 2^20 and 2^24 floats traced, compiled (a cache hit
//                      after the first step) and run, against chain10/static, the same
//                      expression on the static path: the "peer" row; the kernel runs as
//                      native code (runtime/native_kernels.hpp), and chain10/interpreted runs
//                      it in the register-program interpreter;
//   lazy_trace/xlite   tracing cost per op (target: under 200 ns);
//   lazy_dispatch/xlite a cache-hit step of a 100-node graph on small tensors, trace
//                      excluded (target: under 20 us): numbering the trace, hash, lookup,
//                      launch, run, release;
//   lazy_compile/xlite compiling a 1,000-node graph (the passes and lowering), against
//                      lazy_compile/persistent_hit, finding it in the persistent cache
//                      (read, checksum, decode, compare with the traced graph);
//   matmul_epilogue/xlite relu(matmul(a, b) + bias), 1024 x 64 x 1024, the epilogue fused
//                      into the GEMM, against matmul_epilogue/unfused, the same with the
//                      product stored and read back by a separate kernel;
//   adam_update/xlite  Adam's update of a 2^22-float weight (m, v, the weight) as one graph,
//                      which multi-output fusion makes one pass (4 streams read, 3 written),
//                      against adam_update/one_kernel_per_result, each result in a step of its
//                      own (what the kernels were before: 6 read, 3 written, and 1 more read).
// Lazy rows time steps after the first, with the native kernels built.
// The lazy rows run their kernels on the default pool (all cores) on the device's worker,
// so they are registered at that thread count only.

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "bench_common.hpp"
#include "expressions.hpp"
#include "xlite/compile/compiler.hpp"
#include "xlite/compile/disk_cache.hpp"
#include "xlite/expr.hpp"
#include "xlite/lazy.hpp"

namespace {

using namespace xlite::bench;

xlite::tensor<float> tensor_of(const aligned_floats& values) {
  xlite::tensor<float> t(xlite::tensor<float>::uninitialized, xlite::shape{values.size()});
  std::copy_n(values.data(), values.size(), t.data());
  return t;
}

// The chain, written once for both front ends: mul, add, abs, mul, sub, max, mul, sqrt,
// neg, add.
template <class X, class Max>
auto chain10(const X& x, const X& y, const X& w, Max maximum) {
  return -sqrt(maximum(abs(x * y + w) * 0.5f - y, w) * x) + w;
}

void chain_static(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  const auto& inputs = expression_inputs::of_size(n);
  const auto x = tensor_of(inputs.x), y = tensor_of(inputs.y), w = tensor_of(inputs.w);
  xlite::tensor<float> z(xlite::shape{n});
  xlite::thread_pool pool(static_cast<std::size_t>(threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  const auto maximum = [](const auto& a, const auto& b) { return xlite::max(a, b); };
  for (auto _ : state) {
    z = chain10(x, y, w, maximum);
    benchmark::ClobberMemory();
  }
  report_bytes(state, 4 * n * static_cast<std::int64_t>(sizeof(float)));
}

// Runs one step, so that the step's graph is compiled, and waits for its native kernels.
template <class Step>
void warm_up(Step step) {
  step();
  xlite::runtime::wait_native_kernels();
}

template <bool Native>
void chain_lazy(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  const auto& inputs = expression_inputs::of_size(n);
  const auto x = xlite::lazy::tensor::from(tensor_of(inputs.x));
  const auto y = xlite::lazy::tensor::from(tensor_of(inputs.y));
  const auto w = xlite::lazy::tensor::from(tensor_of(inputs.w));
  const auto maximum = [](const auto& a, const auto& b) { return xlite::lazy::maximum(a, b); };
  const auto step = [&] {
    const auto z = chain10(x, y, w, maximum);
    xlite::mark_step();
    xlite::wait_device_ops();
  };
  xlite::runtime::set_native_kernels(Native);
  warm_up(step);
  for (auto _ : state) step();
  xlite::runtime::set_native_kernels(true);
  report_bytes(state, 4 * n * static_cast<std::int64_t>(sizeof(float)));
}

// 100 ops on a small tensor, alternating so that no op simplifies away.
xlite::lazy::tensor trace_100(const xlite::lazy::tensor& x) {
  auto y = x;
  for (int i = 0; i < 50; ++i) y = y * x + x;
  return y;
}

void trace_cost(benchmark::State& state) {
  const auto x = xlite::lazy::tensor::from(xlite::tensor<float>(xlite::shape{16}, 1.0f));
  for (auto _ : state) benchmark::DoNotOptimize(trace_100(x));
  state.counters["per_op"] =
      benchmark::Counter(100, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  xlite::mark_step();
  xlite::wait_device_ops();
}

// Timed by hand: PauseTiming around the trace reads the thread's CPU clock, a system call
// on a virtual machine, and would add its cost to the step's.
void dispatch_cost(benchmark::State& state) {
  const auto x = xlite::lazy::tensor::from(xlite::tensor<float>(xlite::shape{16}, 0.5f));
  for (auto _ : state) {
    std::optional<xlite::lazy::tensor> y = trace_100(x);
    const auto begin = std::chrono::steady_clock::now();
    xlite::mark_step();
    xlite::wait_device_ops();
    y.reset(); // the trace's last tensor goes with its step
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  }
}

// 1,000 nodes: element-wise chains broken by reductions and matmuls, so every pass and
// every kind of kernel has work.
xlite::ir::graph thousand_node_graph() {
  const auto x = xlite::lazy::tensor::from(xlite::tensor<float>(xlite::shape{64, 64}, 0.5f));
  auto y = x;
  for (int block = 0; block < 100; ++block) {
    y = xlite::lazy::exp(y * 0.5f) + x;                                  // 4 nodes (two scalars)
    y = xlite::lazy::relu(y - xlite::lazy::amax(y, {1}, true));           // 3
    y = xlite::lazy::matmul(y, x) / 64.0f;                                // 3
  }
  const xlite::ir::node_ptr outputs[] = {y.node()};
  return xlite::ir::capture(outputs).program;
}

void compile_cost(benchmark::State& state) {
  const auto graph = thousand_node_graph();
  state.counters["nodes"] = static_cast<double>(graph.instructions.size());
  for (auto _ : state) benchmark::DoNotOptimize(xlite::compile::compile_graph(graph));
}

// The same graph found in the persistent cache, as a second process finds it: read the
// entry, verify its checksum, decode it and compare the stored graph with the traced one.
void persistent_hit_cost(benchmark::State& state) {
  const auto graph = thousand_node_graph();
  const auto dir = std::filesystem::temp_directory_path() / ("xlite-bench-cache-" + std::to_string(::getpid()));
  {
    xlite::compile::disk_cache cache(dir, false);
    cache.store(1, {"bench", graph, xlite::compile::compile_graph(graph)});
    state.counters["entry_bytes"] = static_cast<double>(cache.size_bytes());
    for (auto _ : state) {
      auto found = cache.find(1, "bench", graph);
      if (found.result != xlite::compile::disk_cache::outcome::hit) state.SkipWithError("no cache hit");
      benchmark::DoNotOptimize(found.compiled);
    }
  }
  std::filesystem::remove_all(dir);
}
// relu(a b + bias) for a (1024, 64), b (64, 1024): a product short in k, so the pass over
// the 4 MiB result the epilogue saves is a fair share of the time.
template <bool Fused>
void matmul_epilogue(benchmark::State& state) {
  using xlite::lazy::tensor;
  const auto a = tensor::from(xlite::tensor<float>(xlite::shape{1024, 64}, 0.25f));
  const auto b = tensor::from(xlite::tensor<float>(xlite::shape{64, 1024}, -0.5f));
  const auto bias = tensor::from(xlite::tensor<float>(xlite::shape{1024}, 3.0f));
  for (auto _ : state) {
    tensor product = xlite::lazy::matmul(a, b);
    if (!Fused) xlite::mark_step();
    const auto y = xlite::lazy::relu(product + bias);
    xlite::mark_step();
    xlite::wait_device_ops();
  }
  report_bytes(state, 1024 * 1024 * static_cast<std::int64_t>(sizeof(float)));
}

// Adam's formulas (optim/adam.hpp) on one weight, the scalars as graph parameters.
template <bool OneGraph>
void adam_update(benchmark::State& state) {
  using xlite::lazy::tensor;
  const xlite::shape s{std::int64_t{1} << 22};
  const auto g = tensor::from(xlite::tensor<float>(s, 0.01f));
  auto m = tensor::from(xlite::tensor<float>(s, 0.0f)), v = m, w = tensor::from(xlite::tensor<float>(s, 1.0f));
  const auto step = [&] {
    m = m * 0.9f + g * 0.1f;
    if (!OneGraph) xlite::mark_step();
    v = v * 0.999f + g * g * 0.001f;
    if (!OneGraph) xlite::mark_step();
    w = w - 0.001f * (m / (xlite::lazy::sqrt(v) / 0.5f + 1e-8f));
    xlite::mark_step();
    xlite::wait_device_ops();
  };
  warm_up(step);
  for (auto _ : state) step();
  report_bytes(state, 7 * s.numel() * static_cast<std::int64_t>(sizeof(float)));
}

} // namespace

namespace xlite::bench {

void register_xlite_lazy() {
  const std::vector<std::int64_t> sizes = {std::int64_t{1} << 20, std::int64_t{1} << 24};
  const std::vector<std::int64_t> pool_threads = {static_cast<std::int64_t>(default_thread_pool().num_threads())};
  register_sized("chain10", "static", chain_static, sizes, pool_threads);
  register_sized("chain10", "xlite", chain_lazy<true>, sizes, pool_threads);
  register_sized("chain10", "interpreted", chain_lazy<false>, sizes, pool_threads);
  register_case("lazy_trace", "xlite", trace_cost)->Arg(100)->ArgName("ops");
  benchmark::RegisterBenchmark("lazy_dispatch/xlite", dispatch_cost)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Arg(100)
      ->ArgName("nodes");
  register_case("lazy_compile", "xlite", compile_cost)->Arg(1000)->ArgName("nodes")->Unit(benchmark::kMillisecond);
  register_case("lazy_compile", "persistent_hit", persistent_hit_cost)
      ->Arg(1000)
      ->ArgName("nodes")
      ->Unit(benchmark::kMillisecond);
  register_case("matmul_epilogue", "xlite", matmul_epilogue<true>)->Unit(benchmark::kMicrosecond);
  register_case("matmul_epilogue", "unfused", matmul_epilogue<false>)->Unit(benchmark::kMicrosecond);
  register_case("adam_update", "xlite", adam_update<true>)->Unit(benchmark::kMicrosecond);
  register_case("adam_update", "one_kernel_per_result", adam_update<false>)->Unit(benchmark::kMicrosecond);
}

} // namespace xlite::bench
