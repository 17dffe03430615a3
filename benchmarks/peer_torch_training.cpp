// libtorch's training step for the models of xlite_training.cpp (and
// examples/train_fashion_mnist.cpp), eager as PyTorch runs it: zero_grad, forward,
// cross_entropy, backward, Adam's step (torch::optim::Adam, lr 1e-3), on the same fixed
// synthetic batch of 128 images (random values, labels in [0, 10), made once before the
// timed loop):
//   training_step/libtorch_fp32/<model>/threads:<t>   float32;
//   training_step/libtorch_bf16/<model>/threads:<t>   CPU autocast to bf16 around the forward
//                                                     pass and the loss (PyTorch's
//                                                     torch.autocast("cpu")), backward and
//                                                     step outside it, as PyTorch's recipe says.
// <model> is mlp (torch::nn::Linear 784-256-128-10 with ReLU; torch stores Linear weights
// (out, in), xlite's example (in, out)) or cnn (Conv2d 1->16 and 16->32, 3x3, padding 1,
// each with ReLU and MaxPool2d(2), then Linear 1568-128-10). items_per_second is images
// per second. The thread count is xlite's default pool's, so that both sides use the same
// cores (2 on the development VM).
//
// OpenBLAS: Debian's libtorch 1.13 runs its float matmuls (Linear's forward and backward)
// on Debian's OpenBLAS 0.3.21, whose kernels depend on the CPU it detects, or on
// OPENBLAS_CORETYPE when set: on a CPU it does not know it falls back to kernels without
// AVX-512 (the author measured 38k images/s on the MLP as shipped, 75k with
// OPENBLAS_CORETYPE=SkylakeX). The variable is read when OpenBLAS loads, so it takes a
// process of its own, whose rows are named libtorch_<precision>_<coretype> (the bench
// preset runs it with SkylakeX):
//   OPENBLAS_CORETYPE=SkylakeX xlite_benchmarks --benchmark_filter='training_step/libtorch'
// Each row's label shows the OpenBLAS configuration in use. docs/benchmarks.md has the
// command lines and measured numbers of both.

#include <dlfcn.h>

// First, so that c10::IValue is complete where ATen's List.h needs it: under C++20, clang
// rejects libtorch 1.13's headers otherwise (as in peer_torch.cpp).
#include <ATen/core/ivalue.h>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/nn.h>
#include <torch/optim/adam.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench_common.hpp"
#include "xlite/core/thread_pool.hpp"

namespace {

using namespace xlite::bench;

constexpr std::int64_t batch_size = 128;

// "libtorch_<precision>", or "libtorch_<precision>_<coretype>" when OPENBLAS_CORETYPE
// chooses OpenBLAS's kernels (as peer_openblas.cpp names its rows), so that both runs fit
// in one table.
std::string impl_name(const char* precision) {
  std::string name = std::string("libtorch_") + precision;
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  if (coretype == nullptr || *coretype == '\0') return name;
  name += '_';
  for (const char* p = coretype; *p != '\0'; ++p) name += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
  return name;
}

// The OpenBLAS libtorch runs on, as its configuration string says it ("OpenBLAS 0.3.21
// DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"), or "" without OpenBLAS.
std::string blas_config() {
  using get_config_function = char* (*)();
  if (void* symbol = dlsym(RTLD_DEFAULT, "openblas_get_config")) {
    return reinterpret_cast<get_config_function>(symbol)();
  }
  return "";
}

// As peer_torch.cpp: at::set_num_threads does not reach the OpenBLAS Debian's libtorch
// runs its matmuls on, so set OpenBLAS's threads too.
void set_torch_threads(int threads) {
  at::set_num_threads(threads);
  using set_threads_function = void (*)(int);
  if (void* symbol = dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) {
    reinterpret_cast<set_threads_function>(symbol)(threads);
  }
}

struct MlpImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};

  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 256));
    fc2 = register_module("fc2", torch::nn::Linear(256, 128));
    fc3 = register_module("fc3", torch::nn::Linear(128, 10));
  }

  torch::Tensor forward(const torch::Tensor& images) {
    torch::Tensor h = images.reshape({-1, 784});
    h = torch::relu(fc1(h));
    h = torch::relu(fc2(h));
    return fc3(h);
  }
};
TORCH_MODULE(Mlp);

struct CnnImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::MaxPool2d pool{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};

  CnnImpl() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    pool = register_module("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
    fc1 = register_module("fc1", torch::nn::Linear(32 * 7 * 7, 128));
    fc2 = register_module("fc2", torch::nn::Linear(128, 10));
  }

  torch::Tensor forward(const torch::Tensor& images) {
    torch::Tensor h = images.reshape({-1, 1, 28, 28});
    h = pool(torch::relu(conv1(h)));
    h = pool(torch::relu(conv2(h)));
    h = torch::relu(fc1(h.reshape({-1, 32 * 7 * 7})));
    return fc2(h);
  }
};
TORCH_MODULE(Cnn);

enum class precision { fp32, bf16 };

// CPU autocast to bf16 while alive, as torch.autocast("cpu", dtype=torch.bfloat16) in
// Python: its exit clears the cache of bf16 copies of the weights, which the optimizer's
// step makes stale.
class cpu_autocast {
public:
  cpu_autocast() : previous_dtype_(at::autocast::get_autocast_cpu_dtype()) {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
    at::autocast::increment_nesting();
  }
  ~cpu_autocast() {
    at::autocast::set_cpu_enabled(false);
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_cpu_dtype(previous_dtype_);
  }
  cpu_autocast(const cpu_autocast&) = delete;
  cpu_autocast& operator=(const cpu_autocast&) = delete;

private:
  at::ScalarType previous_dtype_;
};

template <class Model>
void training_step(benchmark::State& state, precision p) {
  set_torch_threads(static_cast<int>(state.range(0)));
  torch::manual_seed(1);
  Model model;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));

  torch::Tensor images = torch::empty({batch_size, 28, 28}, torch::kFloat);
  torch::Tensor labels = torch::empty({batch_size}, torch::kLong);
  for (std::int64_t i = 0; i < images.numel(); ++i) images.data_ptr<float>()[i] = deterministic_float(i, 11);
  for (std::int64_t i = 0; i < batch_size; ++i) {
    labels.data_ptr<std::int64_t>()[i] = static_cast<std::int64_t>((deterministic_float(i, 12) + 1.0f) * 5.0f) % 10;
  }

  const auto step = [&] {
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      std::optional<cpu_autocast> autocast;
      if (p == precision::bf16) autocast.emplace();
      loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
    }
    loss.backward();
    optimizer.step();
  };
  for (int i = 0; i < 3; ++i) step(); // warm-up: first allocations, oneDNN's primitives
  for (auto _ : state) step();        // eager: each step has finished when step() returns
  state.SetItemsProcessed(state.iterations() * batch_size);
  const std::string blas = blas_config();
  state.SetLabel(blas.empty() ? "images/s" : "images/s; " + blas);
}

} // namespace

namespace xlite::bench {

void register_torch_training() {
  const auto threads = static_cast<std::int64_t>(default_thread_pool().num_threads());
  const auto add = [&](const char* impl, const char* model, void (*run)(benchmark::State&, precision), precision p) {
    register_case("training_step", impl_name(impl) + "/" + model, [run, p](benchmark::State& state) { run(state, p); })
        ->Arg(threads)
        ->ArgName("threads");
  };
  add("fp32", "mlp", training_step<Mlp>, precision::fp32);
  add("bf16", "mlp", training_step<Mlp>, precision::bf16);
  add("fp32", "cnn", training_step<Cnn>, precision::fp32);
  add("bf16", "cnn", training_step<Cnn>, precision::bf16);
}

} // namespace xlite::bench
