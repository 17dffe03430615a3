#pragma once

// What the optimizer tests share: random shapes and values, moving values between the
// host (as doubles, for the references) and lazy tensors, and the compile counter.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "xlite/lazy.hpp"

namespace optim_test {

using values = std::vector<double>;

inline std::int64_t compiles() { return xlite::metrics::counter_value("UncachedCompile"); }

// Rank 0 to 3, dimensions 1 to 5.
inline xlite::shape random_shape(std::mt19937_64& gen) {
  std::uniform_int_distribution<std::int64_t> rank(0, 3), dim(1, 5);
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank(gen)));
  for (auto& d : dims) d = dim(gen);
  return xlite::shape(dims);
}

inline std::vector<xlite::shape> random_shapes(std::mt19937_64& gen) {
  std::vector<xlite::shape> shapes(std::uniform_int_distribution<std::size_t>(1, 4)(gen));
  for (auto& s : shapes) s = random_shape(gen);
  return shapes;
}

// Normal values rounded to float, so that the reference starts from what the device holds.
inline values random_values(std::mt19937_64& gen, std::int64_t count, double stddev = 1) {
  std::normal_distribution<double> normal(0, stddev);
  values v(static_cast<std::size_t>(count));
  for (auto& x : v) x = static_cast<float>(normal(gen));
  return v;
}

inline xlite::lazy::tensor to_device(const xlite::shape& s, const values& v) {
  xlite::tensor<float> host(s);
  for (std::size_t k = 0; k < v.size(); ++k) host.data()[k] = static_cast<float>(v[k]);
  return xlite::lazy::tensor::from(host);
}

inline values to_values(const xlite::lazy::tensor& t) {
  const xlite::tensor<float> host = t.to_host<float>();
  return values(host.begin(), host.end());
}

// Within float rounding of a double-precision reference, after a few dozen operations.
inline void check_close(const values& actual, const values& expected, double tolerance = 2e-5) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t k = 0; k < actual.size(); ++k) {
    INFO("element " << k);
    CHECK(actual[k] == Approx(expected[k]).margin(tolerance).epsilon(tolerance));
  }
}

} // namespace optim_test
