// exp and tanh, the two math functions whose float SIMD code is xlite's own
// (kernels/elementwise.hpp), checked on every one of the 2^32 floats against the bound of
// their row in accuracy.hpp, which the other tests check on sampled domains only.
//
// Each float goes through `y = xlite::exp(x)` on this program's SIMD path, in blocks that
// are a whole number of batches, so none is masked. The reference is the
// C library's double exp and tanh rounded to float: their error, under a double ULP, moves
// the rounded reference only where the exact value lies within it of a float midpoint.
// Where the rounded result is plain (0, 1, inf; x, +-1), the reference is that value
// without a call: a call for every float made the sweep of exp take 21 s instead of 3.

#include "accuracy.hpp"

#include <catch2/catch.hpp>
#include <xlite/core/thread_pool.hpp>
#include <xlite/expr.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>

namespace {

using namespace xlite_test;
using xlite::op;

// The worst float of a sweep: its error in ULPs (infinite_ulps: a NaN on one side only or
// a zero of the wrong sign), the input, and what xlite and the reference gave.
struct worst_float {
  std::uint64_t ulps = 0;
  float x = 0.0f;
  float got = 0.0f;
  float want = 0.0f;
};

// Runs evaluate(in, out) (out = f(in) through xlite) on every float, in blocks below the
// expressions' parallel threshold spread over the default pool, and compares each result
// with expected(x), the reference rounded to float. Of equally bad floats it reports the
// one nearest 0, whichever thread met it first.
template <class Evaluate, class Expected>
worst_float worst_over_all_floats(Evaluate evaluate, Expected expected) {
  constexpr std::int64_t block = std::int64_t{1} << 14; // < xlite::expr::parallel_threshold
  constexpr std::int64_t chunk = std::int64_t{1} << 22;
  static_assert(block < xlite::expr::parallel_threshold);
  worst_float worst;
  std::mutex worst_lock;
  xlite::default_thread_pool().parallel_for(std::int64_t{1} << 32, chunk, [&](std::int64_t begin, std::int64_t end) {
    xlite::tensor<float> in(xlite::tensor<float>::uninitialized, xlite::shape{block});
    xlite::tensor<float> out(xlite::shape{block});
    worst_float local;
    for (std::int64_t first = begin; first < end; first += block) {
      for (std::int64_t i = 0; i < block; ++i)
        in.data()[i] = std::bit_cast<float>(static_cast<std::uint32_t>(first + i));
      evaluate(in, out);
      for (std::int64_t i = 0; i < block; ++i) {
        const float x = in.data()[i];
        const float got = out.data()[i];
        const float want = expected(x);
        if (std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want)) continue; // most are exact
        std::uint64_t ulps = ulp_distance(got, want);
        if (zero_signs_differ(got, want)) ulps = infinite_ulps;
        if (ulps > local.ulps) local = {ulps, x, got, want};
      }
    }
    const std::lock_guard hold(worst_lock);
    if (local.ulps > worst.ulps ||
        (local.ulps == worst.ulps && local.ulps > 0 && std::abs(local.x) < std::abs(worst.x))) {
      worst = local;
    }
  });
  return worst;
}

void report(const char* name, const worst_float& w, std::uint64_t bound) {
  INFO(name << " on the " << path_name() << " path: worst error " << w.ulps << " ULP (bound " << bound
            << ") at x = " << bits_text(w.x) << ": xlite " << bits_text(w.got) << ", reference " << bits_text(w.want));
  CHECK(w.ulps <= bound);
}

// The correctly rounded exp(x): 1 below 2^-26 in magnitude (e^x is within 2^-26 of 1, under
// half an ULP of 1 either side), 0 from -104 down (e^-104 is under 2^-150, half the least
// subnormal), inf from 89 on (e^89 is past the largest float); elsewhere the C library's.
float exp_reference(float x) {
  if (std::abs(x) < 0x1p-26f) return 1.0f;
  if (x <= -104.0f) return 0.0f;
  if (x >= 89.0f) return std::numeric_limits<float>::infinity();
  return static_cast<float>(std::exp(static_cast<double>(x)));
}

// The correctly rounded tanh(x): x below 2^-12 in magnitude (x^3 / 3 is under half an ULP of
// x), +-1 from 9.02 on (1 - tanh(x) = 2 / (e^2x + 1) is under 2^-25, half an ULP of 1 from
// below); elsewhere the C library's.
float tanh_reference(float x) {
  const float a = std::abs(x);
  if (a < 0x1p-12f) return x;
  if (a >= 9.02f) return std::copysign(1.0f, x); // false for NaN
  return static_cast<float>(std::tanh(static_cast<double>(x)));
}

} // namespace

TEST_CASE("all floats: the references' shortcuts are the C library's results", "[all_floats]") {
  const auto c_exp = [](float x) { return static_cast<float>(std::exp(static_cast<double>(x))); };
  const auto c_tanh = [](float x) { return static_cast<float>(std::tanh(static_cast<double>(x))); };
  // The shortcuts' edges, each side, and far beyond.
  for (const float x : {std::nextafter(0x1p-26f, 0.0f), -std::nextafter(0x1p-26f, 0.0f), 0x1p-60f, -0.0f, -104.0f,
                        -150.0f, 89.0f, 1e30f, -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    INFO("exp at x = " << bits_text(x));
    CHECK(ulp_distance(exp_reference(x), c_exp(x)) == 0);
  }
  for (const float x : {std::nextafter(0x1p-12f, 0.0f), -std::nextafter(0x1p-12f, 0.0f), 0x1p-20f, 0x1p-149f, -0.0f,
                        9.02f, -9.02f, 9.5f, 1e30f, -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    INFO("tanh at x = " << bits_text(x));
    CHECK(ulp_distance(tanh_reference(x), c_tanh(x)) == 0);
    CHECK(!zero_signs_differ(tanh_reference(x), c_tanh(x)));
  }
}

TEST_CASE("all floats: exp is within its accuracy bound on every float", "[all_floats]") {
  REQUIRE(xlite::kernels::simd_path_active()); // else the sweep checks the C library
  const worst_float w = worst_over_all_floats(
      [](const xlite::tensor<float>& x, xlite::tensor<float>& y) { y = xlite::exp(x); }, exp_reference);
  report("exp", w, row_of(op::exp).ulps_f32);
}

TEST_CASE("all floats: tanh is within its accuracy bound on every float", "[all_floats]") {
  REQUIRE(xlite::kernels::simd_path_active());
  const worst_float w = worst_over_all_floats(
      [](const xlite::tensor<float>& x, xlite::tensor<float>& y) { y = xlite::tanh(x); }, tanh_reference);
  report("tanh", w, row_of(op::tanh).ulps_f32);
}
