// optim::sgd against a double-precision loop of torch.optim.SGD's documented update, on
// random shapes and gradients, and as one graph per step.

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "helpers.hpp"
#include "xlite/optim/schedule.hpp"
#include "xlite/optim/sgd.hpp"

using namespace xlite;
using namespace optim_test;

namespace {

// torch.optim.SGD, as its documentation writes it, in double precision.
struct reference_sgd {
  optim::sgd_options o;
  std::vector<values> buffers;
  std::int64_t t = 0;

  void step(std::vector<values>& params, const std::vector<values>& grads, double lr) {
    ++t;
    buffers.resize(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      buffers[i].resize(params[i].size());
      for (std::size_t k = 0; k < params[i].size(); ++k) {
        double g = grads[i][k];
        if (o.weight_decay != 0) g += o.weight_decay * params[i][k];
        if (o.momentum != 0) {
          double& b = buffers[i][k];
          b = t == 1 ? g : o.momentum * b + (1 - o.dampening) * g;
          g = o.nesterov ? g + o.momentum * b : b;
        }
        params[i][k] -= lr * g;
      }
    }
  }
};

} // namespace

TEST_CASE("sgd follows torch.optim.SGD's update on random shapes and gradients", "[optim][sgd]") {
  const std::vector<optim::sgd_options> configurations = {
      {.lr = 0.1},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 0.02, .momentum = 0.8, .weight_decay = 0.05, .nesterov = true},
  };
  std::mt19937_64 gen(7);
  for (std::size_t c = 0; c < configurations.size(); ++c) {
    const optim::sgd_options& options = configurations[c];
    const auto shapes = random_shapes(gen);
    const int steps = std::uniform_int_distribution<int>(5, 20)(gen);
    INFO("configuration " << c << ", " << shapes.size() << " parameters, " << steps << " steps");

    std::vector<values> expected;
    std::vector<lazy::tensor> params;
    for (const auto& s : shapes) {
      expected.push_back(random_values(gen, s.numel()));
      params.push_back(to_device(s, expected.back()));
    }
    optim::sgd opt(params, options);
    reference_sgd reference{options, {}, 0};
    for (int step = 0; step < steps; ++step) {
      std::vector<values> grads;
      std::vector<lazy::tensor> device_grads;
      for (const auto& s : shapes) {
        grads.push_back(random_values(gen, s.numel()));
        device_grads.push_back(to_device(s, grads.back()));
      }
      const double lr = std::uniform_real_distribution<double>(0.5, 1.5)(gen) * options.lr;
      opt.set_lr(lr);
      opt.step(params, device_grads);
      reference.step(expected, grads, lr);
      mark_step();
    }
    CHECK(opt.steps() == steps);
    for (std::size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << i << " of shape " << shapes[i]);
      check_close(to_values(params[i]), expected[i]);
      if (options.momentum != 0) {
        check_close(to_values(opt.state().tensors.at("momentum_buffer." + std::to_string(i))), reference.buffers[i]);
      }
    }
  }
}

TEST_CASE("sgd's first step is the same graph as the others, and a new rate never recompiles", "[optim][sgd]") {
  // Shapes no other test uses, so that the graph is new to the compilation cache.
  const shape s{37, 3};
  std::mt19937_64 gen(11);
  std::vector<lazy::tensor> params{to_device(s, random_values(gen, s.numel()))};
  optim::sgd opt(params, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  mark_step(); // the momentum buffer, made as zeros, becomes a device value
  const auto before = compiles();
  // The first step's rate is 0 and a later one 1, which as plain scalars would be graph
  // constants.
  const optim::linear_warmup schedule(5, optim::cosine(0.1, 15));
  for (int step = 0; step < 20; ++step) {
    opt.set_lr(step == 12 ? 1.0 : schedule(opt.steps()));
    opt.step(params, std::vector{to_device(s, random_values(gen, s.numel()))});
    mark_step();
  }
  CHECK(compiles() - before == 1);
}

TEST_CASE("sgd with momentum minimises a quadratic", "[optim][sgd]") {
  // f(p) = sum(a (p - c)^2) / 2, its gradient a (p - c) traced in the same step.
  const shape s{4, 6};
  std::mt19937_64 gen(3);
  values a = random_values(gen, s.numel());
  for (auto& x : a) x = 0.5 + std::abs(x);
  const values c = random_values(gen, s.numel(), 3);
  const lazy::tensor curvature = to_device(s, a), optimum = to_device(s, c);
  std::vector<lazy::tensor> params{lazy::zeros(s)};
  optim::sgd opt(params, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  for (int step = 0; step < 300; ++step) {
    opt.step(params, std::vector{curvature * (params[0] - optimum)});
    mark_step();
  }
  check_close(to_values(params[0]), c, 1e-4);
}

TEST_CASE("sgd rejects options torch.optim.SGD rejects", "[optim][sgd]") {
  const std::vector params{lazy::zeros(shape{2})};
  CHECK_THROWS_AS(optim::sgd(params, {.lr = -0.1}), value_error);
  CHECK_THROWS_AS(optim::sgd(params, {.momentum = -0.5}), value_error);
  CHECK_THROWS_AS(optim::sgd(params, {.weight_decay = -1}), value_error);
  CHECK_THROWS_WITH(optim::sgd(params, {.nesterov = true}), Catch::Contains("sgd: momentum must be > 0 with nesterov"));
  CHECK_THROWS_WITH(optim::sgd(params, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    Catch::Contains("sgd: dampening must be 0 with nesterov"));
  optim::sgd opt(params, {.lr = 0.1});
  CHECK_THROWS_AS(opt.set_lr(std::nan("")), value_error);
  CHECK(opt.lr() == 0.1);
}
