#pragma once

// The two models of the Fashion-MNIST example, shared with the training benchmarks
// (benchmarks/xlite_training.cpp) so both measure the same step: parameters made on the
// device by lazy::rand_uniform (set the device's RNG state first), and a forward function
// from images (B, 28, 28) to logits (B, 10).

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include <xlite/lazy.hpp>

namespace fashion_mnist {

namespace lazy = xlite::lazy;
using xlite::shape;
using parameters = std::vector<lazy::tensor>;

// PyTorch's default initialisation of Linear and Conv2d: uniform in +-1/sqrt(fan_in).
inline lazy::tensor initial(const shape& s, std::int64_t fan_in, const xlite::device& d) {
  const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
  return lazy::rand_uniform(s, -bound, bound, xlite::dtype::f32, d);
}

struct model {
  parameters params;
  std::function<lazy::tensor(const parameters&, const lazy::tensor&)> forward; // images (B, 28, 28) -> logits (B, 10)
};

// 784-256-128-10 with ReLU. Weights are (in, out), so a layer is x @ w + b with no transpose.
inline model mlp(const xlite::device& d = xlite::device()) {
  const std::int64_t sizes[] = {784, 256, 128, 10};
  model m;
  for (int layer = 0; layer < 3; ++layer) {
    m.params.push_back(initial(shape{sizes[layer], sizes[layer + 1]}, sizes[layer], d));
    m.params.push_back(initial(shape{sizes[layer + 1]}, sizes[layer], d));
  }
  m.forward = [](const parameters& p, const lazy::tensor& images) {
    lazy::tensor h = lazy::reshape(images, {-1, 784});
    for (std::size_t layer = 0; layer < 3; ++layer) {
      h = lazy::matmul(h, p[2 * layer]) + p[2 * layer + 1];
      if (layer < 2) h = lazy::relu(h);
    }
    return h;
  };
  return m;
}

// Two 3x3 convolutions (16 and 32 channels), each with ReLU and 2x2 max pooling, then
// 1568-128-10.
inline model cnn(const xlite::device& d = xlite::device()) {
  model m;
  m.params = {initial(shape{16, 1, 3, 3}, 9, d),        initial(shape{16}, 9, d),
              initial(shape{32, 16, 3, 3}, 16 * 9, d),  initial(shape{32}, 16 * 9, d),
              initial(shape{32 * 7 * 7, 128}, 1568, d), initial(shape{128}, 1568, d),
              initial(shape{128, 10}, 128, d),          initial(shape{10}, 128, d)};
  m.forward = [](const parameters& p, const lazy::tensor& images) {
    lazy::tensor h = lazy::reshape(images, {-1, 1, 28, 28});
    h = lazy::max_pool2d(lazy::relu(lazy::conv2d(h, p[0], p[1], 1, 1)), 2);
    h = lazy::max_pool2d(lazy::relu(lazy::conv2d(h, p[2], p[3], 1, 1)), 2);
    h = lazy::relu(lazy::matmul(lazy::reshape(h, {-1, 32 * 7 * 7}), p[4]) + p[5]);
    return lazy::matmul(h, p[6]) + p[7];
  };
  return m;
}

} // namespace fashion_mnist
