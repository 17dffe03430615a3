// optim::adam and optim::adamw against a double-precision loop of torch.optim.Adam's and
// torch.optim.AdamW's documented updates, and a long run as one graph.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "xlite/optim/adam.hpp"
#include "xlite/optim/schedule.hpp"

using namespace xlite;
using namespace optim_test;

namespace {

struct adam_configuration {
  bool decoupled = false; // AdamW
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false;
};

// torch.optim.Adam (L2 weight decay) and torch.optim.AdamW (decoupled), as their
// documentation writes them, in double precision.
struct reference_adam {
  adam_configuration o;
  std::vector<values> m, v, v_max;
  std::int64_t t = 0;

  void step(std::vector<values>& params, const std::vector<values>& grads, double lr) {
    ++t;
    m.resize(params.size());
    v.resize(params.size());
    v_max.resize(params.size());
    const double bias_correction1 = 1 - std::pow(o.beta1, static_cast<double>(t));
    const double bias_correction2 = 1 - std::pow(o.beta2, static_cast<double>(t));
    for (std::size_t i = 0; i < params.size(); ++i) {
      m[i].resize(params[i].size());
      v[i].resize(params[i].size());
      v_max[i].resize(params[i].size());
      for (std::size_t k = 0; k < params[i].size(); ++k) {
        double& p = params[i][k];
        double g = grads[i][k];
        if (o.decoupled) {
          p *= 1 - lr * o.weight_decay;
        } else {
          g += o.weight_decay * p;
        }
        m[i][k] = o.beta1 * m[i][k] + (1 - o.beta1) * g;
        v[i][k] = o.beta2 * v[i][k] + (1 - o.beta2) * g * g;
        v_max[i][k] = std::max(v_max[i][k], v[i][k]);
        const double second = o.amsgrad ? v_max[i][k] : v[i][k];
        const double m_hat = m[i][k] / bias_correction1;
        const double v_hat = second / bias_correction2;
        p -= lr * m_hat / (std::sqrt(v_hat) + o.eps);
      }
    }
  }
};

// Runs the optimizer and the reference side by side over random gradients, each step with
// a rate from `rate(step)`, and checks parameters and state at the end.
template <class Optimizer, class Options>
void check_against_reference(const adam_configuration& c, const Options& options, std::mt19937_64& gen,
                             const std::vector<shape>& shapes, int steps, const auto& rate) {
  std::vector<values> expected;
  std::vector<lazy::tensor> params;
  for (const auto& s : shapes) {
    expected.push_back(random_values(gen, s.numel()));
    params.push_back(to_device(s, expected.back()));
  }
  Optimizer opt(params, options);
  reference_adam reference{c, {}, {}, {}, 0};
  for (int step = 0; step < steps; ++step) {
    std::vector<values> grads;
    std::vector<lazy::tensor> device_grads;
    for (const auto& s : shapes) {
      grads.push_back(random_values(gen, s.numel()));
      device_grads.push_back(to_device(s, grads.back()));
    }
    opt.set_lr(rate(step));
    opt.step(params, device_grads);
    reference.step(expected, grads, rate(step));
    mark_step();
  }
  const optim::optimizer_state state = opt.state();
  CHECK(state.step == steps);
  CHECK(state.tensors.size() == params.size() * (c.amsgrad ? 3 : 2));
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i << " of shape " << shapes[i]);
    check_close(to_values(params[i]), expected[i]);
    check_close(to_values(state.tensors.at("exp_avg." + std::to_string(i))), reference.m[i]);
    check_close(to_values(state.tensors.at("exp_avg_sq." + std::to_string(i))), reference.v[i]);
    if (c.amsgrad) check_close(to_values(state.tensors.at("max_exp_avg_sq." + std::to_string(i))), reference.v_max[i]);
  }
}

void check_configuration(const adam_configuration& c, std::mt19937_64& gen, const std::vector<shape>& shapes, int steps,
                         const auto& rate) {
  if (c.decoupled) {
    check_against_reference<optim::adamw>(
        c, optim::adamw_options{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.amsgrad}, gen, shapes, steps, rate);
  } else {
    check_against_reference<optim::adam>(
        c, optim::adam_options{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.amsgrad}, gen, shapes, steps, rate);
  }
}

} // namespace

TEST_CASE("adam and adamw follow PyTorch's updates on random shapes and gradients", "[optim][adam]") {
  const std::vector<adam_configuration> configurations = {
      {.lr = 1e-2},
      {.lr = 5e-2, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1},
      {.lr = 2e-2, .weight_decay = 0.05, .amsgrad = true},
      {.decoupled = true, .lr = 1e-2, .weight_decay = 1e-2},
      {.decoupled = true, .lr = 5e-2, .beta1 = 0.5, .beta2 = 0.9, .weight_decay = 0.2, .amsgrad = true},
      {.decoupled = true, .lr = 1e-2, .beta1 = 0, .weight_decay = 0}, // beta1 = 0: RMSprop-like
  };
  std::mt19937_64 gen(5);
  for (std::size_t k = 0; k < configurations.size(); ++k) {
    const adam_configuration& c = configurations[k];
    const auto shapes = random_shapes(gen);
    const int steps = std::uniform_int_distribution<int>(5, 20)(gen);
    INFO("configuration " << k << ", " << shapes.size() << " parameters, " << steps << " steps");
    std::vector<double> rates(static_cast<std::size_t>(steps));
    for (auto& r : rates) r = std::uniform_real_distribution<double>(0.5, 1.5)(gen) * c.lr;
    check_configuration(c, gen, shapes, steps, [&](int step) { return rates[static_cast<std::size_t>(step)]; });
  }
}

TEST_CASE("adamw's defaults are PyTorch's: weight_decay 1e-2 for adamw, 0 for adam", "[optim][adam]") {
  CHECK(optim::adam_options{}.weight_decay == 0);
  CHECK(optim::adamw_options{}.weight_decay == 1e-2);
  CHECK(optim::adamw_options{}.lr == 1e-3);
  CHECK(optim::adamw_options{}.beta1 == 0.9);
  CHECK(optim::adamw_options{}.beta2 == 0.999);
  CHECK(optim::adamw_options{}.eps == 1e-8);
}

TEST_CASE("a long adam run is one graph while the bias corrections reach 1 and the rate 0", "[optim][adam]") {
  // With beta2 = 0.9, 1 - beta2^t rounds to exactly 1 after about 350 steps (and 1 - beta1^t
  // after about 54): as plain scalars they would become graph constants.
  const int steps = 400;
  REQUIRE(1 - std::pow(0.9, steps - 1.0) == 1.0);
  REQUIRE(1 - std::pow(0.5, 60.0) == 1.0);
  const adam_configuration c{.lr = 0.05, .beta1 = 0.5, .beta2 = 0.9, .weight_decay = 0.01, .amsgrad = true};
  // 0 at the first step and at the cosine's end, and 1 at one step in between.
  const optim::linear_warmup schedule(10, optim::cosine(c.lr, steps - 20));
  const auto rate = [&](int step) { return step == 200 ? 1.0 : schedule(step); };
  REQUIRE(rate(0) == 0.0);
  REQUIRE(rate(steps - 1) == 0.0);

  std::mt19937_64 gen(17);
  const shape s{3, 11}; // a shape no other test uses: the graph is new to the cache
  std::vector<values> expected{random_values(gen, s.numel())};
  std::vector<lazy::tensor> params{to_device(s, expected[0])};
  optim::adam opt(params, {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.amsgrad});
  reference_adam reference{c, {}, {}, {}, 0};
  mark_step(); // the moments, made as zeros, become device values: every step is one graph
  const auto before = compiles();
  for (int step = 0; step < steps; ++step) {
    const values g = random_values(gen, s.numel());
    opt.set_lr(rate(opt.steps()));
    opt.step(params, std::vector{to_device(s, g)});
    reference.step(expected, {g}, rate(step));
    mark_step();
  }
  CHECK(compiles() - before == 1);
  check_close(to_values(params[0]), expected[0], 1e-4);
}

TEST_CASE("without a barrier after it is made, an optimizer's first step compiles once more", "[optim][adam]") {
  // The state starts as zeros traced into the first step; from the second step on it is a
  // device value, so every later step is one other graph.
  const shape s{2, 13};
  std::mt19937_64 gen(19);
  std::vector<lazy::tensor> params{to_device(s, random_values(gen, s.numel()))};
  optim::adamw opt(params);
  const auto before = compiles();
  for (int step = 0; step < 10; ++step) {
    opt.step(params, std::vector{to_device(s, random_values(gen, s.numel()))});
    mark_step();
  }
  CHECK(compiles() - before == 2);
}

TEST_CASE("adam and adamw minimise a quadratic", "[optim][adam]") {
  // f(p) = sum(a (p - c)^2) / 2, its gradient a (p - c) traced in the same step; the rate
  // anneals to 0 so that Adam settles instead of hovering at the scale of the rate.
  const shape s{5, 3};
  std::mt19937_64 gen(23);
  values a = random_values(gen, s.numel());
  for (auto& x : a) x = 0.5 + std::abs(x);
  const values c = random_values(gen, s.numel(), 2);
  const lazy::tensor curvature = to_device(s, a), optimum = to_device(s, c);
  const int steps = 600;
  const optim::cosine schedule(0.1, steps);
  const auto minimise = [&](auto opt, std::vector<lazy::tensor> params) {
    for (int step = 0; step < steps; ++step) {
      opt.set_lr(schedule(opt.steps()));
      opt.step(params, std::vector{curvature * (params[0] - optimum)});
      mark_step();
    }
    return to_values(params[0]);
  };
  const std::vector start{lazy::zeros(s)};
  check_close(minimise(optim::adam(start), start), c, 1e-3);
  check_close(minimise(optim::adamw(start, {.weight_decay = 0}), start), c, 1e-3);
}

TEST_CASE("adam rejects options torch.optim.Adam rejects", "[optim][adam]") {
  const std::vector params{lazy::zeros(shape{2})};
  CHECK_THROWS_WITH(optim::adam(params, {.beta1 = 1}), Catch::Contains("adam: beta1 must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(optim::adamw(params, {.beta2 = -0.1}), Catch::Contains("adamw: beta2 must be in [0, 1)"));
  CHECK_THROWS_AS(optim::adam(params, {.eps = -1}), value_error);
  CHECK_THROWS_AS(optim::adamw(params, {.weight_decay = -1e-2}), value_error);
  CHECK_THROWS_WITH(optim::adam(params, {.lr = std::nan("")}),
                    Catch::Contains("adam: the learning rate must be finite and >= 0"));
  CHECK_THROWS_WITH(optim::adam(std::vector{lazy::zeros(shape{2}, dtype::i32)}),
                    Catch::Contains("adam: parameter 0 is int32"));
}
