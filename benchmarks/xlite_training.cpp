// One training step of examples/train_fashion_mnist.cpp's models, against libtorch's
// (peer_torch_training.cpp):
//   training_step/xlite_fp32/<model>/threads:<t>   as traced, in float32;
//   training_step/xlite_bf16/<model>/threads:<t>   under amp autocast: bf16 products with
//                                                  fp32 sums (the example's --bf16);
//   training_step/xlite_tpu/<model>/threads:<t>    on tpu:0, a 128x128 weight-stationary
//                                                  systolic array (the example's --device
//                                                  tpu): the array's numerics, each step
//                                                  priced; what the model costs on this CPU;
// for <model> mlp (784-256-128-10, ReLU, weights stored (in, out)) and cnn (conv 1->16 3x3
// pad 1, ReLU, max-pool 2, conv 16->32 3x3 pad 1, ReLU, max-pool 2, 1568-128-10), batch 128,
// Adam with lr 1e-3. An iteration traces the forward pass, cross_entropy, xlite::grad and
// Adam's update, then calls mark_step(). mark_step() only queues the step, so the host
// traces the next step while the device runs this one, as in the example's training loop;
// the last iteration waits for the device (wait_device_ops), so the time per iteration is
// the pipeline's throughput in steady state: the first steps (tracing, compilation) run
// before the timed loop.
//
// The batch is synthetic and fixed: random images of Fashion-MNIST's shape (128, 28, 28),
// standardised-like values in [-1, 1), and labels in [0, 10), uploaded once before the
// timed loop, so no data loading or host-to-device copy is measured (the example's loader
// prefetches its batches on threads of its own). Every step trains on the same batch; the
// work per step does not depend on the values.
//
// items_per_second is images per second (128 per step). The lazy rows run their kernels
// on the default pool (XLITE_NUM_THREADS, else one thread per core), on the device's
// worker, so they are registered at that thread count only; the libtorch rows use the same.

#include <cstdint>
#include <string>

#include "bench_common.hpp"
#include "xlite/amp.hpp"
#include "xlite/autodiff.hpp"
#include "xlite/lazy.hpp"
#include "xlite/optim.hpp"
#include "xlite/tpu/device.hpp"
#include "xlite/tpu/systolic_array.hpp"

#include "../examples/fashion_mnist_models.hpp"

namespace {

using namespace xlite::bench;
namespace lazy = xlite::lazy;

constexpr std::int64_t batch_size = 128;

enum class model_kind { mlp, cnn };

// The fixed synthetic batch, on the device: images from bench_common's deterministic data,
// labels hashed from the same into [0, 10).
struct synthetic_batch {
  lazy::tensor images, labels;
};

synthetic_batch make_batch(const xlite::device& d) {
  xlite::tensor<float> images(xlite::tensor<float>::uninitialized, xlite::shape{batch_size, 28, 28});
  for (std::int64_t i = 0; i < images.size(); ++i) images.data()[i] = deterministic_float(i, 11);
  xlite::tensor<std::int64_t> labels(xlite::shape{batch_size});
  for (std::int64_t i = 0; i < batch_size; ++i) {
    labels.data()[i] = static_cast<std::int64_t>((deterministic_float(i, 12) + 1.0f) * 5.0f) % 10;
  }
  return {lazy::tensor::from(images, d), lazy::tensor::from(labels, d)};
}

enum class on_device { cpu, tpu };

void training_step(benchmark::State& state, model_kind kind, xlite::amp::mode precision, on_device where) {
  // The example's --bf16 sets the policy for the whole run; here for this case only.
  const xlite::amp::policy_scope amp({precision});
  if (where == on_device::tpu) {
    using array = xlite::tpu::systolic_array<128, 128, xlite::tpu::dataflow::weight_stationary>;
    xlite::tpu::configure<array>(xlite::tpu::memory_config::tpu_v1());
  }
  const xlite::device d(where == on_device::tpu ? "tpu:0" : "cpu:0");
  lazy::set_rng_state(1, d);
  fashion_mnist::model m = kind == model_kind::mlp ? fashion_mnist::mlp(d) : fashion_mnist::cnn(d);
  xlite::optim::adam optimizer(m.params, {.lr = 1e-3});
  const synthetic_batch batch = make_batch(d);
  const auto step = [&] {
    const lazy::tensor logits = m.forward(m.params, batch.images);
    const lazy::tensor loss = lazy::cross_entropy(logits, batch.labels);
    optimizer.step(m.params, xlite::grad(loss, m.params));
    xlite::mark_step();
  };
  // Warm-up: the initial parameters, the first step (compiled, unless the graph is in the
  // compilation cache from an earlier repetition), and a few cache-hit steps.
  xlite::mark_step();
  for (int i = 0; i < 3; ++i) step();
  xlite::wait_device_ops();

  const benchmark::IterationCount iterations = state.max_iterations;
  benchmark::IterationCount done = 0;
  for (auto _ : state) {
    step();
    if (++done == iterations) xlite::wait_device_ops(); // the pipeline drained inside the timed loop
  }
  xlite::wait_device_ops(); // in case the loop ended early (an error)
  state.SetItemsProcessed(state.iterations() * batch_size);
  state.SetLabel("images/s");
}

} // namespace

namespace xlite::bench {

void register_xlite_training() {
  const auto threads = static_cast<std::int64_t>(default_thread_pool().num_threads());
  const struct {
    const char* impl;
    xlite::amp::mode precision;
    on_device where;
  } precisions[] = {{"xlite_fp32", xlite::amp::mode::fp32, on_device::cpu},
                    {"xlite_bf16", xlite::amp::mode::autocast, on_device::cpu},
                    {"xlite_tpu", xlite::amp::mode::fp32, on_device::tpu}};
  const struct {
    const char* name;
    model_kind kind;
  } models[] = {{"mlp", model_kind::mlp}, {"cnn", model_kind::cnn}};
  for (const auto& m : models) {
    for (const auto& p : precisions) {
      // "<model>" is an arg without a value: the rows of one model are compared.
      register_case("training_step", std::string(p.impl) + "/" + m.name,
                    [kind = m.kind, precision = p.precision, where = p.where](benchmark::State& state) {
                      training_step(state, kind, precision, where);
                    })
          ->Arg(threads)
          ->ArgName("threads");
    }
  }
}

} // namespace xlite::bench
