// clip_grad_norm against torch.nn.utils.clip_grad_norm_'s rule in double precision, and
// without any execution before the barrier.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "helpers.hpp"
#include "xlite/optim/clip.hpp"

using namespace xlite;
using namespace optim_test;

namespace {

struct reference_clip {
  std::vector<values> grads;
  double total_norm;
};

// torch.nn.utils.clip_grad_norm_: the L2 norm of all gradients together, and every
// gradient scaled by min(1, max_norm / (norm + 1e-6)).
reference_clip clip_reference(std::vector<values> grads, double max_norm) {
  double squares = 0;
  for (const values& g : grads) {
    for (double x : g) squares += x * x;
  }
  const double norm = std::sqrt(squares);
  const double scale = std::min(1.0, max_norm / (norm + 1e-6));
  for (values& g : grads) {
    for (double& x : g) x *= scale;
  }
  return {grads, norm};
}

} // namespace

TEST_CASE("clip_grad_norm scales by min(1, max_norm / (norm + 1e-6)), above and below max_norm", "[optim][clip]") {
  std::mt19937_64 gen(29);
  for (int trial = 0; trial < 6; ++trial) {
    const auto shapes = random_shapes(gen);
    std::vector<values> grads;
    std::vector<lazy::tensor> device_grads;
    for (const auto& s : shapes) {
      grads.push_back(random_values(gen, s.numel(), 2));
      device_grads.push_back(to_device(s, grads.back()));
    }
    const double norm = clip_reference(grads, 0).total_norm;
    // Even trials clip (max_norm below the norm), odd ones leave the gradients alone.
    const double max_norm = trial % 2 == 0 ? norm * 0.3 : norm * 1.7;
    INFO("trial " << trial << ": norm " << norm << ", max_norm " << max_norm);
    const reference_clip expected = clip_reference(grads, max_norm);
    const optim::clipped_gradients clipped = optim::clip_grad_norm(device_grads, max_norm);
    CHECK(clipped.total_norm.shape() == shape{});
    CHECK(clipped.total_norm.item<float>() == Approx(expected.total_norm).epsilon(1e-6));
    REQUIRE(clipped.grads.size() == grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i) {
      CHECK(clipped.grads[i].shape() == shapes[i]);
      check_close(to_values(clipped.grads[i]), expected.grads[i], 1e-6);
    }
  }
}

TEST_CASE("clip_grad_norm runs nothing until the barrier, and a new max_norm does not recompile", "[optim][clip]") {
  const std::vector shapes{shape{41, 2}, shape{3}};
  std::mt19937_64 gen(31);
  const auto executions = [] {
    return metrics::counter_value("UncachedCompile") + metrics::counter_value("CachedCompile") +
           metrics::counter_value("TransferFromDevice");
  };
  std::int64_t compiled = 0;
  // 0 and 1 included: as plain scalars they would be graph constants.
  for (double max_norm : {0.5, 1.0, 0.0, 2.5, 1e3}) {
    std::vector<values> grads;
    std::vector<lazy::tensor> device_grads;
    for (const auto& s : shapes) {
      grads.push_back(random_values(gen, s.numel()));
      device_grads.push_back(to_device(s, grads.back()));
    }
    const auto before = executions();
    const auto compiles_before = compiles();
    const optim::clipped_gradients clipped = optim::clip_grad_norm(device_grads, max_norm);
    CHECK(executions() == before); // no host branch on the norm's value
    CHECK(clipped.total_norm.has_pending_trace());
    mark_step();
    compiled += compiles() - compiles_before;
    const reference_clip expected = clip_reference(grads, max_norm);
    for (std::size_t i = 0; i < grads.size(); ++i) check_close(to_values(clipped.grads[i]), expected.grads[i], 1e-6);
  }
  CHECK(compiled == 1);
}

TEST_CASE("clip_grad_norm keeps each gradient's dtype and rejects a negative max_norm", "[optim][clip]") {
  const std::vector grads{lazy::full(shape{4}, 3.0, dtype::f64), lazy::full(shape{2, 2}, 4.0, dtype::f32)};
  const optim::clipped_gradients clipped = optim::clip_grad_norm(grads, 1.0);
  CHECK(clipped.grads[0].type() == dtype::f64);
  CHECK(clipped.grads[1].type() == dtype::f32);
  CHECK(clipped.total_norm.item<double>() == Approx(10.0)); // sqrt(4 * 9 + 4 * 16)
  CHECK(clipped.grads[0].to_host<double>().data()[0] == Approx(3.0 / (10.0 + 1e-6)));
  CHECK_THROWS_WITH(optim::clip_grad_norm(grads, -1), Catch::Contains("clip_grad_norm: max_norm must be >= 0"));
  CHECK(optim::clip_grad_norm(std::vector<lazy::tensor>{}, 1.0).grads.empty());
}
