// The Fashion-MNIST MLP of examples/train_fashion_mnist.cpp trained on the tpu device and
// on the CPU under bf16 autocast: the same loss curve within bf16's precision, and the
// step's price counts the MLP's products. Needs zlib and the installed dataset.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "xlite/amp.hpp"
#include "xlite/autodiff.hpp"
#include "xlite/data/fashion_mnist.hpp"
#include "xlite/data/loader.hpp"
#include "xlite/lazy.hpp"
#include "xlite/optim/adam.hpp"
#include "xlite/tpu/device.hpp"
#include "xlite/tpu/systolic_array.hpp"

#include "../../examples/fashion_mnist_models.hpp"

using namespace xlite;

TEST_CASE("tpu device: the Fashion-MNIST MLP trains on tpu:0 along the CPU's bf16 loss curve") {
  if (!std::filesystem::exists(data::fashion_mnist_directory)) {
    WARN("skipped: " << data::fashion_mnist_directory
                     << " does not exist (install dataset-fashion-mnist: scripts/install-deps.sh)");
    return;
  }
  tpu::configure<tpu::systolic_array<128, 128, tpu::dataflow::weight_stationary>>(tpu::memory_config::tpu_v1());
  auto train = data::load_fashion_mnist(data::split::train);
  for (std::int64_t i = 0; i < train.images.size(); ++i)
    train.images.data()[i] = (train.images.data()[i] - 0.2860f) / 0.3530f;
  constexpr std::int64_t batch = 128, steps = 30;
  const auto losses_on = [&](const xlite::device& d) {
    lazy::set_rng_state(1, d);
    fashion_mnist::model m = fashion_mnist::mlp(d);
    optim::adam adam(m.params, {.lr = 1e-3});
    data::loader batches(train.images, train.labels, {.batch_size = batch, .device = d});
    std::vector<lazy::tensor> losses;
    for (const auto& b : batches) {
      if (b.index == steps) break;
      const lazy::tensor loss = lazy::cross_entropy(m.forward(m.params, b.features), b.labels);
      adam.step(m.params, grad(loss, m.params));
      losses.push_back(loss);
    }
    mark_step();
    std::vector<float> curve;
    for (const lazy::tensor& l : losses) curve.push_back(l.item<float>());
    return curve;
  };
  const std::vector<float> on_tpu = losses_on(xlite::device("tpu:0"));
  std::vector<float> on_cpu;
  {
    const amp::policy_scope autocast({amp::mode::autocast});
    on_cpu = losses_on(xlite::device("cpu:0"));
  }
  // The two differ only in the order of the products' sums: the curves agree far within
  // bf16's 2^-8, and the loss falls.
  REQUIRE(on_tpu.size() == steps);
  float worst = 0;
  for (std::size_t s = 0; s < on_tpu.size(); ++s) {
    CAPTURE(s, on_tpu[s], on_cpu[s]);
    worst = std::max(worst, std::abs(on_tpu[s] - on_cpu[s]) / on_cpu[s]);
    CHECK(std::abs(on_tpu[s] - on_cpu[s]) <= 0x1p-8f * on_cpu[s]);
  }
  WARN("largest relative difference of the loss: " << worst);
  CHECK(on_tpu.back() < 0.5f * on_tpu.front());
  wait_device_ops();
  const tpu::step_report r = tpu::last_step_report(xlite::device("tpu:0"));
  // Three layers: the forward products, and backward each weight's gradient and each
  // input's but the images'.
  const std::int64_t forward = batch * (784 * 256 + 256 * 128 + 128 * 10);
  CHECK(r.macs == 2 * forward + batch * (256 * 128 + 128 * 10));
  CHECK(r.mfu > 0);
}
