#pragma once

// A small training-shaped program for the compilation cache's tests: a few steps of a
// linear layer with relu and a softmax loss, plus a data-dependent while_loop, so the
// cached executables hold matmul epilogues, reductions and subprograms. Returns every
// value the program computes, for bitwise comparison across processes.

#include <cstdint>
#include <vector>

#include "xlite/lazy.hpp"

namespace xlite_test {

inline std::vector<float> run_cache_program(std::int64_t batch = 16) {
  using namespace xlite;
  xlite::tensor<float> x_host(shape{batch, 8});
  for (std::int64_t i = 0; i < x_host.size(); ++i) x_host.data()[i] = static_cast<float>((i * 7919) % 23) / 11.0f - 1.0f;
  xlite::tensor<float> w_host(shape{8, 4});
  for (std::int64_t i = 0; i < w_host.size(); ++i) w_host.data()[i] = static_cast<float>((i * 31) % 17) / 16.0f - 0.5f;
  const auto x = lazy::tensor::from(x_host);
  auto w = lazy::tensor::from(w_host);
  std::vector<float> values;
  for (int step = 0; step < 3; ++step) {
    const auto hidden = lazy::relu(lazy::matmul(x, w) + 0.125f);
    const auto loss = lazy::mean(-lazy::log_softmax(hidden));
    w = w - lazy::matmul(lazy::transpose(x), hidden) * 0.01f;
    mark_step();
    values.push_back(loss.item<float>());
  }
  const auto limit = lazy::tensor::from(xlite::tensor<std::int64_t>(shape{}, 5));
  const auto looped = lazy::while_loop([&](const auto& s) { return s[0] < limit; },
                                       [&](const auto& s) { return std::vector{s[0] + 1, s[1] * 0.5f + 1.0f}; },
                                       {lazy::zeros(shape{}, dtype::i64), w});
  mark_step();
  const auto final_w = looped[1].to_host<float>();
  values.insert(values.end(), final_w.data(), final_w.data() + final_w.size());
  return values;
}

} // namespace xlite_test
