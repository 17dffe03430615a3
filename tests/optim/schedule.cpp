// The learning-rate schedules against their formulas, written out at chosen steps.

#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "xlite/core/error.hpp"
#include "xlite/optim/schedule.hpp"

using namespace xlite;

TEST_CASE("constant and step_decay", "[optim][schedule]") {
  const optim::constant constant(0.3);
  CHECK(constant(0) == 0.3);
  CHECK(constant(1000) == 0.3);
  const optim::step_decay decay(0.1, 3, 0.5);
  CHECK(decay(0) == Approx(0.1));
  CHECK(decay(2) == Approx(0.1));
  CHECK(decay(3) == Approx(0.05));
  CHECK(decay(8) == Approx(0.025));
  CHECK(decay(9) == Approx(0.0125));
  CHECK_THROWS_AS(optim::step_decay(0.1, 0, 0.5), value_error);
}

TEST_CASE("cosine anneals from lr to min_lr over total_steps, then holds", "[optim][schedule]") {
  const optim::cosine schedule(1.0, 10, 0.1);
  CHECK(schedule(0) == Approx(1.0));
  CHECK(schedule(5) == Approx(0.55));
  CHECK(schedule(2) == Approx(0.1 + 0.9 * (1 + std::cos(std::numbers::pi * 0.2)) / 2));
  CHECK(schedule(10) == Approx(0.1));
  CHECK(schedule(25) == Approx(0.1));
  CHECK(optim::cosine(0.5, 4)(4) == 0.0); // exactly: min_lr defaults to 0
  CHECK_THROWS_AS(optim::cosine(1.0, 0), value_error);
}

TEST_CASE("linear_warmup ramps from 0 to then(0), then follows then from its own start", "[optim][schedule]") {
  const optim::linear_warmup constant(4, optim::constant(0.2));
  CHECK(constant(0) == 0.0);
  CHECK(constant(1) == Approx(0.05));
  CHECK(constant(3) == Approx(0.15));
  CHECK(constant(4) == Approx(0.2));
  CHECK(constant(100) == Approx(0.2));
  const optim::linear_warmup cosine(2, optim::cosine(1.0, 10));
  CHECK(cosine(1) == Approx(0.5));
  CHECK(cosine(2) == Approx(1.0));
  CHECK(cosine(7) == Approx(optim::cosine(1.0, 10)(5)));
  CHECK(optim::linear_warmup(0, optim::constant(0.2))(0) == 0.2);
  CHECK_THROWS_AS(optim::linear_warmup(-1, optim::constant(0.2)), value_error);
  static_assert(optim::schedule<optim::linear_warmup<optim::cosine>>);
  static_assert(!optim::schedule<int>);
}
