// The gradients of the neural-network ops (composites of the op set and the window ops,
// differentiated through their parts) against central finite differences in float64.

#include "gradient_check.hpp"

using namespace gradient_check;
using xlite::dtype;
using L = lazy::tensor;
using V = std::vector<L>;

TEST_CASE("grad of conv2d: weight, input and bias, with stride, padding and dilation", "[autodiff][nn]") {
  struct geometry {
    shape input, weight;
    lazy::size2 stride, padding, dilation;
  };
  for (const geometry& g : {geometry{shape{2, 3, 6, 5}, shape{4, 3, 3, 3}, 1, 1, 1},
                            geometry{shape{1, 2, 7, 7}, shape{3, 2, 3, 2}, {2, 1}, {1, 0}, 1},
                            geometry{shape{2, 1, 7, 6}, shape{2, 1, 2, 2}, 1, 2, 2},
                            geometry{shape{1, 2, 4, 4}, shape{3, 2, 1, 1}, 1, 0, 1}}) {
    INFO("input " << g.input << ", weight " << g.weight << ", stride " << g.stride << ", padding " << g.padding
                  << ", dilation " << g.dilation);
    check("conv2d",
          [&](const V& t) { return lazy::conv2d(t[0], t[1], t[2], g.stride, g.padding, g.dilation); },
          {random_host(g.input), random_host(g.weight), random_host(shape{g.weight[0]})});
  }
}

TEST_CASE("grad of max_pool2d and avg_pool2d, tiled and overlapping", "[autodiff][nn]") {
  // Distinct values 1/n apart (n elements), so no window has a tie a finite difference crosses.
  const auto distinct = [](const shape& s) {
    host t = random_host(s, 0, 1);
    for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = (static_cast<double>((i * 7919) % t.size()) + 0.1 * t.data()[i]) / static_cast<double>(t.size());
    return t;
  };
  const host x = distinct(shape{2, 2, 6, 6});
  check("max_pool2d 2x2", [](const L& t) { return lazy::max_pool2d(t, 2); }, x);
  check("max_pool2d 3x3 stride 2 padding 1", [](const L& t) { return lazy::max_pool2d(t, 3, 2, 1); }, x);
  check("avg_pool2d 2x2", [](const L& t) { return lazy::avg_pool2d(t, 2); }, x);
  check("avg_pool2d 3x2 stride 1 padding 1, excluding padding",
        [](const L& t) { return lazy::avg_pool2d(t, {3, 2}, 1, 1, false); }, x);
}

TEST_CASE("grad of unfold and fold, and of max pooling's gradient in its output gradient", "[autodiff][nn]") {
  const host x = random_host(shape{2, 2, 6, 5});
  check("unfold 3x2 stride (2, 1) padding 1 dilation (1, 2)", [](const L& t) { return lazy::unfold(t, {3, 2}, {1, 2}, 1, {2, 1}); },
        x);
  check("fold", [](const L& t) { return lazy::fold(t, {6, 5}, 3, 1, 1, 2); }, random_host(shape{2, 2 * 9, 9}));
  // max_pool2d's gradient is linear in the output gradient g: its gradient in g is the
  // selection again (scatter_window_max's rule), in x zero almost everywhere.
  const host distinct = [] {
    host t = random_host(shape{1, 2, 6, 6}, 0, 1);
    for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<double>((i * 37) % t.size()) / static_cast<double>(t.size());
    return t;
  }();
  check("grad of max_pool2d 3x3 stride 2 padding 1",
        [](const V& t) { return xlite::grad(lazy::max_pool2d(t[0], 3, 2, 1), {t[0]}, t[1])[0]; },
        {distinct, random_host(shape{1, 2, 3, 3})});
}

TEST_CASE("grad of the losses and of linear", "[autodiff][nn]") {
  const L targets = L::from(xlite::tensor<std::int64_t>{3, 0, 4, 4});
  const host logits = random_host(shape{4, 5}, -3, 3);
  check("cross_entropy, mean", [&](const L& t) { return lazy::cross_entropy(t, targets); }, logits);
  check("cross_entropy, none, label smoothing 0.1",
        [&](const L& t) { return lazy::cross_entropy(t, targets, lazy::reduction::none, 0.1); }, logits);
  check("mse_loss", [](const V& t) { return lazy::mse_loss(t[0], t[1]); },
        {random_host(shape{3, 4}), random_host(shape{3, 4})});
  check("linear", [](const V& t) { return lazy::linear(t[0], t[1], t[2]); },
        {random_host(shape{5, 3}), random_host(shape{4, 3}), random_host(shape{4})});
}
