// xlite across processes, against Open MPI in the same run: a program of its own, run under
// mpirun (target run_mpi_benchmarks: 2 processes, and the training step also in 1).
//
//   all_reduce/mpi/bytes:<n>/processes:<p>    MPI_Allreduce of n bytes of floats (sum), as
//                                             osu_allreduce measures it;
//   all_reduce/xlite/bytes:<n>/processes:<p>  xlite's all_reduce of the same buffer, each
//                                             process's cpu:0 a member (runtime/collectives.hpp
//                                             over runtime/mpi.hpp);
//   training_step/xlite_<p>_process(es)/mlp   (p: 1 or 2) a data-parallel training step of the example's
//                                             MLP (batch 128, split over the devices of all
//                                             processes in SPMD mode, gradients summed by the
//                                             partitioner's all_reduce), one device per process.
//
// Every process runs the same iterations (fixed counts; no random interleaving), starts
// each collective after a barrier, and reports the slowest process's time, so a row is the
// time until every process has its result. Bytes per second is n over that time (osu's
// "algorithm bandwidth"). Process 0 prints and writes the JSON; the others are silent.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "xlite/autodiff.hpp"
#include "xlite/lazy.hpp"
#include "xlite/optim.hpp"
#include "xlite/runtime/mpi.hpp"

#include "../examples/fashion_mnist_models.hpp"

namespace {

using namespace xlite::bench;
namespace lazy = xlite::lazy;

// The slowest process's time for `op`, started together after a barrier.
template <class Op>
double timed_together(Op&& op) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto begin = std::chrono::steady_clock::now();
  op();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return seconds;
}

void all_reduce_mpi(benchmark::State& state) {
  const std::int64_t n = state.range(0) / 4;
  const aligned_floats in = deterministic_floats(n, 1);
  aligned_floats out(n);
  for (auto _ : state) {
    state.SetIterationTime(timed_together(
        [&] { MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }));
  }
  report_bytes(state, state.range(0));
}

void all_reduce_xlite(benchmark::State& state) {
  const std::int64_t n = state.range(0) / 4;
  const xlite::runtime::buffer_ptr in = xlite::runtime::make_buffer(xlite::dtype::f32, xlite::shape{n});
  const aligned_floats values = deterministic_floats(n, 1);
  std::copy_n(values.data(), n, in->as<float>());
  const std::int64_t me = xlite::runtime::global_device(xlite::device("cpu:0"));
  std::vector<std::int64_t> firsts; // each process's cpu:0
  for (std::int64_t p = 0; p < xlite::runtime::process_count(); ++p) firsts.push_back(p * xlite::device_count());
  for (auto _ : state) {
    state.SetIterationTime(timed_together([&] {
      benchmark::DoNotOptimize(
          xlite::runtime::collectives().all_reduce(me, in, xlite::runtime::reduce_type::sum, 1.0, {firsts}));
    }));
  }
  report_bytes(state, state.range(0));
}

constexpr std::int64_t batch_size = 128;

void training_step(benchmark::State& state) {
  const xlite::device d; // SPMD's virtual device
  const std::int64_t devices = xlite::runtime::global_runtime_device_count();
  std::vector<std::int64_t> ids(static_cast<std::size_t>(devices));
  for (std::int64_t k = 0; k < devices; ++k) ids[static_cast<std::size_t>(k)] = k;
  const xlite::spmd::mesh mesh(ids, {devices}, {"data"});
  lazy::set_rng_state(1, d);
  fashion_mnist::model m = fashion_mnist::mlp(d);
  xlite::optim::adam optimizer(m.params, {.lr = 1e-3});
  xlite::tensor<float> images(xlite::shape{batch_size, 28, 28});
  for (std::int64_t i = 0; i < images.size(); ++i) images.data()[i] = deterministic_float(i, 11);
  xlite::tensor<std::int64_t> labels(xlite::shape{batch_size});
  for (std::int64_t i = 0; i < batch_size; ++i) {
    labels.data()[i] = static_cast<std::int64_t>((deterministic_float(i, 12) + 1.0f) * 5.0f) % 10;
  }
  const lazy::tensor x = lazy::tensor::from(images, d), y = lazy::tensor::from(labels, d);
  xlite::spmd::mark_sharding(x, mesh, {"data"});
  xlite::spmd::mark_sharding(y, mesh, {"data"});
  const auto step = [&] {
    const lazy::tensor loss = lazy::cross_entropy(m.forward(m.params, x), y);
    optimizer.step(m.params, xlite::grad(loss, m.params));
    xlite::mark_step();
  };
  xlite::mark_step();
  for (int i = 0; i < 3; ++i) step(); // compiled, then cache hits
  xlite::wait_device_ops();
  for (auto _ : state) { // ten pipelined steps per iteration, drained at its end
    state.SetIterationTime(timed_together([&] {
                             for (int i = 0; i < 10; ++i) step();
                             xlite::wait_device_ops();
                           }) /
                           10);
  }
  state.SetItemsProcessed(state.iterations() * batch_size);
  state.SetLabel("images/s");
}

// "<case_name>/<impl>" timed by the slowest process (manual time), as bench_common's
// register_case names its cases.
template <class Function>
benchmark::internal::Benchmark* register_together(std::string_view case_name, std::string_view impl, Function fn) {
  const std::string name = std::string(case_name) + "/" + std::string(impl);
  return benchmark::RegisterBenchmark(name.c_str(), fn)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

// A reporter for the processes other than 0.
class silent_reporter : public benchmark::BenchmarkReporter {
public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

} // namespace

int main(int argc, char** argv) {
  return xlite::mpi::run(argc, argv, [&] {
    const std::int64_t processes = xlite::runtime::process_count();
    // Process 0 alone writes --benchmark_out: the others drop it before Google Benchmark sees it.
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
      if (xlite::runtime::process_index() == 0 || !std::string_view(argv[i]).starts_with("--benchmark_out")) {
        args.push_back(argv[i]);
      }
    }
    int count = static_cast<int>(args.size());
    benchmark::Initialize(&count, args.data());
    for (const std::int64_t bytes :
         {std::int64_t{1} << 12, std::int64_t{1} << 18, std::int64_t{1} << 24, std::int64_t{1} << 26}) {
      const benchmark::IterationCount iterations = bytes >= (1 << 24) ? 20 : 400;
      for (const auto& [impl, fn] : {std::pair{"mpi", &all_reduce_mpi}, std::pair{"xlite", &all_reduce_xlite}}) {
        register_together("all_reduce", impl, fn)
            ->ArgNames({"bytes", "processes"})
            ->Args({bytes, processes})
            ->Iterations(iterations);
      }
    }
    xlite::runtime::use_spmd();
    register_together("training_step", std::string(processes == 1 ? "xlite_1_process" : "xlite_2_processes") + "/mlp",
                      training_step)
        ->Iterations(10);
    if (xlite::runtime::process_index() == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      silent_reporter silent;
      benchmark::RunSpecifiedBenchmarks(&silent);
    }
    benchmark::Shutdown();
  });
}
