#pragma once

// Gradient checks: xlite::grad against central finite differences, both in float64.
//
// For f(x0, x1, ...) with any output shape, the checked scalar is L = sum(f(x) * r) for a
// fixed random r, so every output element counts with its own weight. The analytic
// gradient dL/dx comes from one traced backward pass; the numerical one from
// (L(x + h e_i) - L(x - h e_i)) / 2h for each element i of each input, each evaluation a
// run of the same compiled graph with other parameter values.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "xlite/autodiff.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/lazy.hpp"

namespace gradient_check {

using xlite::shape;
namespace lazy = xlite::lazy;
using host = xlite::tensor<double>;
using function = std::function<lazy::tensor(const std::vector<lazy::tensor>&)>;

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(20261123);
  return g;
}

// Values in [lo, hi], at least `margin` away from 0 when margin > 0 (away from a kink).
inline host random_host(const shape& s, double lo = -2, double hi = 2, double margin = 0) {
  host t(s);
  std::uniform_real_distribution<double> d(lo, hi);
  for (std::int64_t i = 0; i < t.size(); ++i) {
    double v = d(rng());
    while (margin > 0 && std::abs(v) < margin) v = d(rng());
    t.data()[i] = v;
  }
  return t;
}

inline std::vector<lazy::tensor> upload(const std::vector<host>& values) {
  std::vector<lazy::tensor> tensors;
  for (const host& v : values) tensors.push_back(lazy::tensor::from(v));
  return tensors;
}

inline lazy::tensor weighted_sum(const lazy::tensor& out, const host& weights) {
  return lazy::sum(lazy::cast(out, xlite::dtype::f64) * lazy::tensor::from(weights));
}

struct tolerance {
  double step = 1e-6;     // the finite-difference step
  double relative = 1e-6; // |analytic - numerical| <= relative * max(1, |numerical|)
};

// Checks the gradient of every input of f at `inputs`.
inline void check(const std::string& what, const function& f, const std::vector<host>& inputs, tolerance tol = {}) {
  INFO(what);
  const lazy::tensor probe = f(upload(inputs));
  const host weights = random_host(probe.shape(), 0.5, 1.5);

  const std::vector<lazy::tensor> leaves = upload(inputs);
  const std::vector<lazy::tensor> analytic = xlite::grad(weighted_sum(f(leaves), weights), leaves);
  REQUIRE(analytic.size() == inputs.size());

  const auto loss_at = [&](const std::vector<host>& values) {
    return weighted_sum(f(upload(values)), weights).item<double>();
  };
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    INFO("input " << k << " of shape " << inputs[k].shape());
    REQUIRE(analytic[k].shape() == inputs[k].shape());
    const host got = analytic[k].to_host<double>();
    for (std::int64_t i = 0; i < inputs[k].size(); ++i) {
      std::vector<host> plus = inputs, minus = inputs;
      plus[k].data()[i] += tol.step;
      minus[k].data()[i] -= tol.step;
      const double numerical = (loss_at(plus) - loss_at(minus)) / (2 * tol.step);
      INFO("element " << i << ": analytic " << got.data()[i] << ", numerical " << numerical);
      CHECK(std::abs(got.data()[i] - numerical) <= tol.relative * std::max(1.0, std::abs(numerical)));
    }
  }
}

// The one-input form.
inline void check(const std::string& what, const std::function<lazy::tensor(const lazy::tensor&)>& f,
                  const host& input, tolerance tol = {}) {
  check(what, [&](const std::vector<lazy::tensor>& x) { return f(x[0]); }, std::vector<host>{input}, tol);
}

} // namespace gradient_check
