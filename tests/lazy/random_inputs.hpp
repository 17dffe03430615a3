#pragma once

// Random test inputs from one fixed seed, so a failure reproduces: integers for shapes and
// window geometries, host tensors of uniform values.

#include <cstdint>
#include <random>
#include <vector>

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

// A shape of `rank` dimensions, each in [1, max_dim].
inline xlite::shape random_shape(std::size_t rank, std::int64_t max_dim) {
  std::vector<std::int64_t> dims;
  for (std::size_t a = 0; a < rank; ++a) dims.push_back(uniform(1, max_dim));
  return xlite::shape(dims);
}

// A tensor of integers uniform in [lo, hi], as T.
template <class T>
xlite::tensor<T> random_integers(const xlite::shape& s, std::int64_t lo, std::int64_t hi) {
  xlite::tensor<T> t(s);
  for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(uniform(lo, hi));
  return t;
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
