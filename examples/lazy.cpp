// Lazy tensors: a training loop traced step by step and compiled once, a loop whose trip
// count the device decides, and a look at the graph and the metrics.
//
// Build and run: cmake --workflow --preset demo (or ./build/dev/examples/lazy).

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <xlite/lazy.hpp>

namespace lazy = xlite::lazy;
using xlite::shape;

int main() {
  // Linear regression by gradient descent: y = x w_true, w learned from zeros. Each step
  // is traced, cut by mark_step(), and run on the device while the next one is traced.
  lazy::set_rng_state(2026);
  const auto x = lazy::rand_normal(shape{256, 8});
  const auto w_true = lazy::rand_uniform(shape{8, 1}, -1, 1);
  const auto y = lazy::matmul(x, w_true);
  auto w = lazy::zeros(shape{8, 1});
  xlite::mark_step(); // the data exists on the device from here on

  xlite::metrics::clear_counters();
  for (int step = 0; step < 60; ++step) {
    const float learning_rate = 0.5f / (1.0f + 0.05f * static_cast<float>(step)); // a graph parameter: no recompile
    const auto error = lazy::matmul(x, w) - y;
    const auto gradient = lazy::matmul(lazy::transpose(x), error) / 256.0f;
    w = w - gradient * learning_rate;
    xlite::mark_step();
  }
  const auto compilations = xlite::metrics::counter_value("UncachedCompile");
  const float distance = lazy::sqrt(lazy::sum((w - w_true) * (w - w_true))).item<float>();
  std::printf("gradient descent: |w - w_true| = %.2e after 60 steps, %lld compilation(s)\n", distance,
              static_cast<long long>(compilations));

  // Newton's iteration for sqrt(2), run until it converges: the device decides how many
  // trips; the loop is one node of the graph.
  const auto two = lazy::full(shape{}, 2.0, xlite::dtype::f64);
  const auto newton = lazy::while_loop(
      [&](const auto& s) { return lazy::abs(s[0] * s[0] - two) > 1e-12; },
      [&](const auto& s) { return std::vector{(s[0] + two / s[0]) * 0.5, s[1] + 1}; },
      {lazy::full(shape{}, 1.0, xlite::dtype::f64), lazy::zeros(shape{}, xlite::dtype::i64)});
  const double root = newton[0].item<double>();
  std::printf("Newton: sqrt(2) = %.15f in %lld iterations\n", root, static_cast<long long>(newton[1].item<std::int64_t>()));

  // The graph of a softmax over a one-hot-masked batch, as the compiler sees it.
  const auto labels = lazy::tensor::from(xlite::tensor<std::int32_t>({2, 0, 1}));
  const auto logits = lazy::rand_normal(shape{3, 4});
  const auto picked = lazy::sum(lazy::log_softmax(logits) * lazy::one_hot(labels, 4, xlite::dtype::f32), {1});
  std::printf("\nthe graph of a cross-entropy term:\n%s", xlite::debug::ir_text({picked}).c_str());
  const auto values = picked.to_host<float>();
  std::printf("its value: %.4f %.4f %.4f\n", values(0), values(1), values(2));

  // What it all cost, as PyTorch/XLA's metrics report says it (docs/debugging.md).
  xlite::wait_device_ops();
  std::printf("\n%s", xlite::metrics::short_report().c_str());

  const bool ok = distance < 1e-3f && compilations == 1 &&
                  std::abs(root - std::sqrt(2.0)) < 1e-12;
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
