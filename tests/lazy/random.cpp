// Random tensors: Philox4x32-10 against the known-answer vectors of its authors' Random123
// library; draws against their definition element by element (so chunking and threads
// cannot change them); the distributions against their CDFs (Kolmogorov-Smirnov); the RNG
// state; and a training-shaped step that draws a new mask each step without recompiling.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "xlite/kernels/random.hpp"
#include "xlite/lazy.hpp"

using namespace xlite;

namespace {

// The largest distance between the empirical CDF of `sample` and `cdf`.
template <class F>
double kolmogorov_smirnov(std::vector<double> sample, F cdf) {
  std::sort(sample.begin(), sample.end());
  const double n = static_cast<double>(sample.size());
  double distance = 0;
  for (std::size_t i = 0; i < sample.size(); ++i) {
    const double f = cdf(sample[i]);
    distance = std::max({distance, static_cast<double>(i + 1) / n - f, f - static_cast<double>(i) / n});
  }
  return distance;
}

template <class T>
std::vector<double> as_doubles(const xlite::tensor<T>& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

// The key rand_* takes for draw `draw` after set_rng_state(seed): lazy/random.hpp's rule.
std::uint64_t key_of(std::uint64_t seed, std::uint64_t draw) {
  const auto bits = kernels::random_bits(seed, draw);
  return std::uint64_t{bits[0]} << 32 | bits[1];
}

} // namespace

TEST_CASE("Philox4x32-10 gives Random123's known answers", "[lazy][random]") {
  using kernels::philox4x32_10, kernels::philox_block;
  CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == philox_block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        philox_block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        philox_block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("each element of a draw is a function of its key and its index alone", "[lazy][random]") {
  // Many chunks and parallel tasks; a fused scale on top.
  const std::int64_t n = 300001;
  lazy::set_rng_state(42);
  const auto uniform = lazy::rand_uniform(shape{n}).to_host<float>();
  const auto normal = lazy::rand_normal(shape{n}, 0, 1, dtype::f64).to_host<double>();
  const auto scaled = lazy::rand_uniform(shape{n}, -2, 6).to_host<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::uint64_t>(i);
    REQUIRE(uniform.data()[i] == static_cast<float>(kernels::uniform_from_bits(kernels::random_bits(key_of(42, 0), u), 24)));
    REQUIRE(normal.data()[i] == kernels::normal_from_bits(kernels::random_bits(key_of(42, 1), u)));
    const float unit = static_cast<float>(kernels::uniform_from_bits(kernels::random_bits(key_of(42, 2), u), 24));
    REQUIRE(scaled.data()[i] == unit * 8.0f + -2.0f);
  }
  CHECK(lazy::get_rng_state() == lazy::rng_state{42, 3});
}

TEST_CASE("draws follow their distributions", "[lazy][random]") {
  const std::int64_t n = 1 << 16;
  const double critical = 1.95 / std::sqrt(static_cast<double>(n)); // KS at the 0.1% level
  lazy::set_rng_state(7);
  const auto uniform = as_doubles(lazy::rand_uniform(shape{n}).to_host<float>());
  CHECK(std::ranges::all_of(uniform, [](double u) { return u >= 0 && u < 1; }));
  CHECK(kolmogorov_smirnov(uniform, [](double u) { return u; }) < critical);

  const auto normal = as_doubles(lazy::rand_normal(shape{256, 256}, 3, 2).to_host<float>());
  CHECK(kolmogorov_smirnov(normal, [](double x) { return 0.5 * std::erfc(-(x - 3) / (2 * std::sqrt(2.0))); }) <
        critical);

  // bfloat16 draws have bfloat16's 8 digits: multiples of 2^-8 below 1, every one of them seen.
  const auto coarse = lazy::rand_uniform(shape{n}, 0, 1, dtype::bf16).to_host<bfloat16>();
  std::vector<int> seen(256, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = static_cast<float>(coarse.data()[i]) * 256.0;
    REQUIRE(v == std::floor(v));
    REQUIRE(v < 256);
    ++seen[static_cast<std::size_t>(v)];
  }
  CHECK(std::ranges::all_of(seen, [](int count) { return count > 0; }));
}

TEST_CASE("the RNG state: a seed replays its draws, and a step draws anew without recompiling", "[lazy][random]") {
  lazy::set_rng_state(3);
  const auto first = lazy::rand_normal(shape{5}).to_host<float>();
  const auto second = lazy::rand_normal(shape{5}).to_host<float>();
  CHECK_FALSE(std::equal(first.data(), first.data() + 5, second.data()));
  lazy::set_rng_state(3);
  const auto replay = lazy::rand_normal(shape{5}).to_host<float>();
  CHECK(std::equal(first.data(), first.data() + 5, replay.data()));

  // Dropout-shaped: each step masks with a new draw; one compilation.
  const auto x = lazy::ones(shape{64, 64});
  mark_step(); // x is data from here on, as in every later step
  metrics::clear_counters();
  std::vector<float> kept;
  for (int step = 0; step < 5; ++step) {
    const auto dropped = lazy::where(lazy::rand_uniform(shape{64, 64}) < 0.5, x * 2.0f, lazy::zeros(shape{64, 64}));
    const auto total = lazy::sum(dropped);
    mark_step();
    kept.push_back(total.item<float>());
  }
  CHECK(metrics::counter_value("UncachedCompile") == 1);
  CHECK(std::ranges::adjacent_find(kept) == kept.end()); // five different masks
  for (const float k : kept) CHECK(std::abs(k - 4096.0f) < 5 * std::sqrt(4096.0f) * 2); // 2 * Binomial(4096, 1/2)

  CHECK_THROWS_AS(lazy::rand_uniform(shape{2}, 0, 1, dtype::i32), dtype_error);
  CHECK_THROWS_AS(lazy::rand_uniform(shape{2}, 1, 1), value_error);
  CHECK_THROWS_AS(lazy::rand_normal(shape{2}, 0, -1), value_error);
}
