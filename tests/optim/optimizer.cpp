// What every optimizer shares: the state for checkpoints (a round trip through the host
// continues exactly as an uninterrupted run), and clear errors for params, grads and
// state that do not fit.

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "xlite/optim/adam.hpp"
#include "xlite/optim/clip.hpp"
#include "xlite/optim/sgd.hpp"

using namespace xlite;
using namespace optim_test;

namespace {

const std::vector<shape> shapes{shape{3, 4}, shape{}, shape{5}};

std::vector<lazy::tensor> initial_params() {
  std::mt19937_64 gen(37);
  std::vector<lazy::tensor> params;
  for (const auto& s : shapes) params.push_back(to_device(s, random_values(gen, s.numel())));
  return params;
}

// The gradients of step `step`, the same in every run.
std::vector<lazy::tensor> gradients(int step) {
  std::mt19937_64 gen(41 + static_cast<unsigned>(step));
  std::vector<lazy::tensor> grads;
  for (const auto& s : shapes) grads.push_back(to_device(s, random_values(gen, s.numel())));
  return grads;
}

// A checkpoint as a file would hold it: host copies, loaded back onto the device.
optim::optimizer_state through_host(const optim::optimizer_state& state) {
  optim::optimizer_state copy{state.step, {}};
  for (const auto& [name, t] : state.tensors) copy.tensors.emplace(name, lazy::tensor::from(t.to_host<float>()));
  return copy;
}

// Runs `total` steps in one go, and again with a checkpoint after `k`: the state saved,
// loaded into a new optimizer (made from the checkpoint's parameters), and the run
// continued. Both must end bitwise equal.
template <class Optimizer, class Options>
void check_round_trip(const Options& options, int k, int total) {
  std::vector<lazy::tensor> straight = initial_params();
  Optimizer uninterrupted(straight, options);
  for (int step = 0; step < total; ++step) {
    uninterrupted.step(straight, gradients(step));
    mark_step();
  }

  std::vector<lazy::tensor> params = initial_params();
  optim::optimizer_state checkpoint;
  {
    Optimizer first(params, options);
    for (int step = 0; step < k; ++step) {
      first.step(params, gradients(step));
      mark_step();
    }
    checkpoint = through_host(first.state());
  }
  for (auto& p : params) p = lazy::tensor::from(p.to_host<float>());
  Optimizer resumed(params, options);
  resumed.load_state(checkpoint);
  CHECK(resumed.steps() == k);
  for (int step = k; step < total; ++step) {
    resumed.step(params, gradients(step));
    mark_step();
  }

  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    CHECK(to_values(params[i]) == to_values(straight[i]));
  }
  const optim::optimizer_state a = uninterrupted.state(), b = resumed.state();
  CHECK(a.step == b.step);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    INFO(name);
    CHECK(to_values(t) == to_values(b.tensors.at(name)));
  }
}

} // namespace

TEST_CASE("saving the state after k steps and loading it into a new optimizer continues the run exactly",
          "[optim][state]") {
  check_round_trip<optim::sgd>(optim::sgd_options{.lr = 0.05, .momentum = 0.9, .dampening = 0.2}, 4, 10);
  check_round_trip<optim::adam>(optim::adam_options{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true}, 3, 9);
  check_round_trip<optim::adamw>(optim::adamw_options{.lr = 0.01}, 5, 8);
}

TEST_CASE("state names each tensor after its slot and parameter", "[optim][state]") {
  const auto params = initial_params();
  const optim::optimizer_state state = optim::adam(params, {.amsgrad = true}).state();
  CHECK(state.step == 0);
  CHECK(state.tensors.size() == 9);
  CHECK(state.tensors.at("max_exp_avg_sq.2").shape() == shape{5});
  CHECK(state.tensors.at("exp_avg.1").shape() == shape{});
  CHECK(optim::sgd(params, {.lr = 0.1}).state().tensors.empty()); // no momentum, no buffer
}

TEST_CASE("load_state names the optimizer, the entry, and what was expected and given", "[optim][state]") {
  const auto params = initial_params();
  optim::adam opt(params);
  const optim::optimizer_state good = opt.state();

  optim::optimizer_state wrong_shape = good;
  wrong_shape.tensors.at("exp_avg_sq.0") = lazy::zeros(shape{4, 3});
  CHECK_THROWS_AS(opt.load_state(wrong_shape), shape_error);
  CHECK_THROWS_WITH(opt.load_state(wrong_shape),
                    "adam.load_state: entry \"exp_avg_sq.0\" has shape (4, 3), expected (3, 4)");

  optim::optimizer_state wrong_dtype = good;
  wrong_dtype.tensors.at("exp_avg.2") = lazy::zeros(shape{5}, dtype::f64);
  CHECK_THROWS_AS(opt.load_state(wrong_dtype), dtype_error);
  CHECK_THROWS_WITH(opt.load_state(wrong_dtype), "adam.load_state: entry \"exp_avg.2\" is float64, expected float32");

  optim::optimizer_state missing = good;
  missing.tensors.erase("exp_avg.1");
  CHECK_THROWS_WITH(opt.load_state(missing), "adam.load_state: entry \"exp_avg.1\" is missing");

  optim::optimizer_state unknown = good;
  unknown.tensors.emplace("max_exp_avg_sq.0", lazy::zeros(shape{3, 4}));
  CHECK_THROWS_WITH(opt.load_state(unknown), "adam.load_state: unknown entry \"max_exp_avg_sq.0\"");

  optim::optimizer_state negative = good;
  negative.step = -1;
  CHECK_THROWS_AS(opt.load_state(negative), value_error);

  // A failed load changes nothing.
  CHECK(opt.steps() == 0);
  CHECK(opt.state().tensors.at("exp_avg_sq.0").shape() == shape{3, 4});
}

TEST_CASE("step names the optimizer and the index of a parameter or gradient that does not fit", "[optim][state]") {
  auto params = initial_params();
  optim::sgd opt(params, {.lr = 0.1, .momentum = 0.9});
  auto grads = gradients(0);

  std::vector<lazy::tensor> two(params.begin(), params.begin() + 2);
  CHECK_THROWS_WITH(opt.step(two, grads), "sgd.step: 2 parameters, but the optimizer was made for 3");
  CHECK_THROWS_WITH(opt.step(params, std::vector(grads.begin(), grads.begin() + 2)),
                    "sgd.step: 2 gradients for 3 parameters");

  auto transposed = grads;
  transposed[0] = lazy::zeros(shape{4, 3});
  CHECK_THROWS_AS(opt.step(params, transposed), shape_error);
  CHECK_THROWS_WITH(opt.step(params, transposed), "sgd.step: gradient 0 has shape (4, 3), expected (3, 4)");

  auto wide = grads;
  wide[2] = lazy::zeros(shape{5}, dtype::f64);
  CHECK_THROWS_AS(opt.step(params, wide), dtype_error);
  CHECK_THROWS_WITH(opt.step(params, wide), "sgd.step: gradient 2 is float64, expected float32");

  auto reshaped = params;
  reshaped[1] = lazy::zeros(shape{1});
  CHECK_THROWS_WITH(opt.step(reshaped, grads), "sgd.step: parameter 1 has shape (1,), expected ()");

  // Nothing was traced or counted: the next step is the first.
  CHECK(opt.steps() == 0);
  opt.step(params, grads);
  CHECK(opt.steps() == 1);
}

// Run with XLITE_NUM_DEVICES=2 (tests/optim/CMakeLists.txt).
TEST_CASE("a parameter or gradient on another device is an error naming both devices", "[.xlite_two_devices]") {
  REQUIRE(device_count() >= 2);
  const xlite::device second("cpu:1");
  std::vector params{lazy::zeros(shape{2})};
  optim::adamw opt(params);
  CHECK_THROWS_WITH(opt.step(params, std::vector{lazy::zeros(shape{2}, dtype::f32, second)}),
                    "adamw.step: gradient 0 is on cpu:1, expected cpu:0");
  std::vector moved{lazy::zeros(shape{2}, dtype::f32, second)};
  CHECK_THROWS_WITH(opt.step(moved, moved), "adamw.step: parameter 0 is on cpu:1, expected cpu:0");
  // State made on the parameter's device.
  optim::adamw on_second(moved);
  CHECK(on_second.state().tensors.at("exp_avg.0").device() == second);
  CHECK_THROWS_WITH(optim::clip_grad_norm(std::vector{params[0], moved[0]}, 1.0),
                    "clip_grad_norm: gradient 1 is on cpu:1, gradient 0 on cpu:0");
}
