#pragma once

// Random test inputs from one fixed seed, so a failure reproduces: integers for shapes and
// window geometries, host tensors of uniform values.

#include <cstdint>
#include <random>

#include "xlite/core/shape.hpp"
#include "xlite/expr/tensor.hpp"

namespace random_inputs {

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(20261124);
  return g;
}

// An integer in [lo, hi].
inline std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng());
}

// A tensor of values uniform in [lo, hi), rounded to T.
template <class T = float>
xlite::tensor<T> random_tensor(const xlite::shape& s, double lo = -1, double hi = 1) {
  xlite::tensor<T> t(s);
  std::uniform_real_distribution<double> d(lo, hi);
  for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(d(rng()));
  return t;
}

} // namespace random_inputs
