// The extrema of expr/reduce.hpp (max, min, argmax) of float and double against naive loops:
// random shapes of rank 0 to 5 (empty ones too), random axes, keepdims, fused broadcast
// inputs, every path, large inputs on 1 to 8 threads; NaN (max and min propagate it, argmax
// points at the first), ties (the first index), empty axes (a value_error), bad axes. All
// exact. The check is reduce_check.hpp's.

#include "reduce_check.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

using Catch::Matchers::Contains;
using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

TEST_CASE("reduce: max, min and argmax of float and double match the loop", "[reduce][accuracy]") {
  check_reduction<op::max, float>(27, true);
  check_reduction<op::max, double>(28, false);
  check_reduction<op::min, float>(29, false);
  check_reduction<op::min, double>(30, true);
  check_reduction<op::argmax, float>(31, true);
  check_reduction<op::argmax, double>(32, false);
}

// reduce.cpp's test of the same name, for max and min.
TEST_CASE("reduce: max and min over only axes of length 1 give the elements themselves", "[reduce]") {
  check_reduction<op::max, float>(64, true, selection::singleton_axes);
  check_reduction<op::min, double>(65, false, selection::singleton_axes);
}

// argmax walks the reduced axis innermost in its loop plan, with that axis's stride:
// argmax(x, {0}) of shape (3, 4) once read x's first row and the start of the second.
TEST_CASE("reduce: argmax over an axis followed by longer axes", "[reduce]") {
  check_reduction<op::argmax, float>(71, true, selection::strided_argmax);
  check_reduction<op::argmax, double>(72, false, selection::strided_argmax);
  const tensor<float> m{{1, 5, 5, 2}, {5, 5, 5, 5}, {0, 0, 0, 9}};
  xlite_test::for_each_isa_path([&](xlite::isa) {
    CHECK(xlite::argmax(m, {0}) == tensor<std::int64_t>{1, 0, 0, 2});
    CHECK(xlite::argmax(m, {-2}, xlite::keepdims) == tensor<std::int64_t>{{1, 0, 0, 2}});
  });
}

TEST_CASE("reduce: large max, min and argmax match the loop and give the same bits for 1, 2, 3, 5 and 8 threads",
          "[reduce][threads]") {
  check_large_reductions<op::max, op::min, op::argmax>(52);
}

TEST_CASE("reduce: NaN, infinities, ties and empty axes in max, min and argmax", "[reduce][special]") {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float inf = std::numeric_limits<float>::infinity();
  const tensor<float> ties{{1, 5, 5, 2}, {5, 5, 5, 5}, {0, 0, 0, 5}};
  const tensor<double> equal(shape{3, 41}, -2.0);
  const tensor<float> opposite{1, inf, 2, -inf, 3}, minus_infinities(shape{19}, -inf);
  const tensor<float> empty(shape{3, 0});
  const tensor<double> scalar(shape{}, 2.5);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    // NaN in a SIMD batch or in a row's end: max and min propagate it, argmax points at the
    // first NaN (NaN counts as the largest, as in torch.argmax).
    for (const std::int64_t at : {0, 5, 17, 35, 36}) {
      tensor<float> x(shape{37}, 1.0f);
      x(at) = nan;
      x(20) = 7.0f;
      INFO("NaN at " << at);
      CHECK(std::isnan(xlite::max(x)()));
      CHECK(std::isnan(xlite::min(x)()));
      CHECK(xlite::argmax(x)() == at);
      x(36) = nan;
      CHECK(xlite::argmax(x)() == at);
    }
    // Signed zeros, one of them in a SIMD batch or in a row's end: max is +0 and min -0 (IEEE
    // 754-2019 orders -0 below +0), whatever the order of the lanes and blocks.
    for (const std::int64_t at : {0, 17, 36}) {
      INFO("the odd zero at " << at);
      tensor<float> negative_zeros(shape{37}, -0.0f);
      negative_zeros(at) = 0.0f;
      CHECK_FALSE(std::signbit(xlite::max(negative_zeros)()));
      CHECK(std::signbit(xlite::min(negative_zeros)()));
      tensor<double> positive_zeros(shape{37}, 0.0);
      positive_zeros(at) = -0.0;
      CHECK(std::signbit(xlite::min(positive_zeros)()));
      CHECK_FALSE(std::signbit(xlite::max(positive_zeros)()));
    }
    // Ties: the first index, in the flattened order and along either axis.
    CHECK(xlite::argmax(ties)() == 1);
    CHECK(xlite::argmax(ties, {0}) == tensor<std::int64_t>{1, 0, 0, 1});
    CHECK(xlite::argmax(ties, {1}) == tensor<std::int64_t>{1, 0, 3});
    CHECK(xlite::argmax(ties, {-1}, xlite::keepdims) == tensor<std::int64_t>{1, 0, 3}.reshaped(shape{3, 1}));
    CHECK(xlite::argmax(equal, {1}) == tensor<std::int64_t>(shape{3}, 0));
    // Infinities.
    CHECK(xlite::max(opposite)() == inf);
    CHECK(xlite::min(opposite)() == -inf);
    CHECK(xlite::max(minus_infinities)() == -inf);
    CHECK(xlite::argmax(minus_infinities)() == 0);
    // Empty axes: a value_error naming the op; the non-empty axis: an empty result.
    CHECK_THROWS_AS(xlite::max(empty), xlite::value_error);
    CHECK_THROWS_WITH(xlite::max(empty, {1}), Contains("max: cannot reduce over an empty axis") && Contains("(3, 0)"));
    CHECK_THROWS_WITH(xlite::min(empty), Contains("min: cannot reduce over an empty axis"));
    CHECK_THROWS_WITH(xlite::argmax(empty, {1}), Contains("argmax: cannot reduce over an empty axis"));
    CHECK(xlite::max(empty, {0}).shape() == shape{0});
    // Rank 0.
    CHECK(xlite::max(scalar, {}, xlite::keepdims).shape() == shape{});
    CHECK(xlite::argmax(scalar)() == 0);
  });
}

TEST_CASE("reduce: bad axes of max, min and argmax are index_errors naming the op and the axis", "[reduce][errors]") {
  const tensor<float> x(shape{2, 3, 4});
  CHECK_THROWS_AS(xlite::max(x, {3}), xlite::index_error);
  CHECK_THROWS_WITH(xlite::max(x, {3}), Contains("max: axis 3 is out of range for rank 3"));
  CHECK_THROWS_WITH(xlite::min(x, {2, -1}), Contains("min: axis -1 is given twice"));
  CHECK_THROWS_WITH(xlite::min(x * x, {7}), Contains("min: axis 7"));
  CHECK_THROWS_WITH(xlite::argmax(x, {5}), Contains("argmax: axis 5"));
  CHECK_THROWS_AS(xlite::argmax(x, {0, 1}), xlite::index_error);
  CHECK_THROWS_WITH(xlite::argmax(x, {0, 1}), Contains("argmax") && Contains("one axis"));
}

// Where argmax's SIMD loop holds a candidate (which chain, lane, group of four batches, the
// row's masked end, which block) must not change the answer. For every pair of positions i < j
// (of a row of 85: on AVX-512 a group of four batches of 16, a batch, a masked end; and a few
// pairs across two blocks): equal maxima give i, a maximum then a NaN j, NaN at both i; in a
// row, and down columns that SIMD runs across (one batch of 16 and a masked one). On one
// thread and on three, so that the two blocks also run on threads of their own, whatever
// the machine's core count.
TEST_CASE("reduce: argmax finds the first maximum or NaN at every pair of positions", "[reduce][special]") {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr std::int64_t block = xlite::expr::reduction_block;
  struct layout {
    std::int64_t n;
    std::vector<std::int64_t> positions;
  };
  std::vector<std::int64_t> all(85);
  std::iota(all.begin(), all.end(), std::int64_t{0});
  const std::vector<layout> layouts = {{85, all}, {block + 40, {0, 5, 63, block - 1, block, block + 17, block + 39}}};
  const std::size_t threads = GENERATE(std::size_t{1}, std::size_t{3});
  xlite::thread_pool pool(threads);
  xlite::scoped_thread_pool use(pool);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    for (const layout& l : layouts) {
      constexpr float background = -3.0f; // below every value placed: no lane may start from 0
      tensor<float> row(shape{l.n}, background);
      tensor<float> columns(shape{l.n, 17}, background);
      for (std::size_t a = 0; a < l.positions.size(); ++a) {
        for (std::size_t b = a + 1; b < l.positions.size(); ++b) {
          const std::int64_t i = l.positions[a], j = l.positions[b];
          const auto check = [&](float at_i, float at_j, std::int64_t want) {
            row(i) = at_i;
            row(j) = at_j;
            for (const std::int64_t c : {3, 16}) {
              columns(i, c) = at_i;
              columns(j, c) = at_j;
            }
            INFO(path_name() << ", " << threads << " threads, " << l.n << " positions, " << at_i << " at " << i << ", "
                             << at_j << " at " << j);
            CHECK(xlite::argmax(row)() == want);
            const tensor<std::int64_t> down = xlite::argmax(columns, {0});
            CHECK((down(3) == want && down(16) == want && down(0) == 0));
            row(i) = row(j) = background;
            for (const std::int64_t c : {3, 16}) columns(i, c) = columns(j, c) = background;
          };
          check(2.0f, 2.0f, i);
          check(2.0f, nan, j);
          check(nan, nan, i);
          check(nan, 2.0f, i);
          check(1.0f, 2.0f, j);
        }
      }
    }
  });
}

// Row argmax over short rows finds the winners of a group of rows at once, from a batch of
// candidates (values and their positions) per row, through a tree across the batches; and
// the winner of one row by a tree across its lanes. Each must be what a loop over the row
// finds: values drawn from a few (ties everywhere), with NaN, signed zeros and the lowest
// value (what the lanes past a row's end hold), at distinct positions in random order.
TEST_CASE("reduce: a group of argmax candidate batches gives each batch's first maximum", "[reduce][special]") {
  using arch = xlite::kernels::simd_arch;
  if constexpr (!std::is_same_v<arch, xlite::kernels::scalar_arch>) {
    rng g(61);
    const auto check = [&]<class T>() {
      using batch = xlite::kernels::batch_t<T, arch>;
      using candidates = xlite::kernels::argmax_lanes<T, arch>;
      constexpr std::size_t n = xlite::kernels::lanes<T, arch>;
      std::vector<T> values = {std::numeric_limits<T>::lowest(), T(-1), T(0), T(2)};
      if constexpr (std::is_floating_point_v<T>) {
        values.insert(values.end(), {-std::numeric_limits<T>::infinity(), T(-0.0), std::numeric_limits<T>::quiet_NaN()});
      }
      for (int round = 0; round < 300; ++round) {
        std::array<candidates, n> group;
        std::array<std::int64_t, n> want;
        for (std::size_t k = 0; k < n; ++k) {
          std::vector<std::int64_t> positions(4 * n);
          std::iota(positions.begin(), positions.end(), std::int64_t{0});
          std::shuffle(positions.begin(), positions.end(), g);
          positions.resize(n);
          alignas(64) std::array<T, n> value_lanes, position_lanes;
          std::int64_t best = -1;
          T best_value{};
          for (std::size_t lane = 0; lane < n; ++lane) {
            value_lanes[lane] = values[static_cast<std::size_t>(integer(g, 0, std::ssize(values) - 1))];
            position_lanes[lane] = static_cast<T>(positions[lane]);
          }
          for (std::int64_t at = 0; at < 4 * std::int64_t{n}; ++at) { // the loop, in the order of positions
            const auto lane = std::find(positions.begin(), positions.end(), at) - positions.begin();
            if (lane == std::ssize(positions)) continue;
            const T v = value_lanes[static_cast<std::size_t>(lane)];
            if (best < 0 || v > best_value || (v != v && best_value == best_value)) {
              best = at;
              best_value = v;
            }
          }
          group[k] = {batch::load_aligned(value_lanes.data()), batch::load_aligned(position_lanes.data())};
          want[k] = best;
          INFO(xlite::dtype_of_v<T> << " on " << arch::name() << ", round " << round << ", batch " << k);
          CHECK(xlite::kernels::best_in_lanes(group[k]).at == best);
        }
        alignas(64) std::array<T, n> got;
        xlite::kernels::best_positions_of_each(group).store_aligned(got.data());
        for (std::size_t k = 0; k < n; ++k) {
          INFO(xlite::dtype_of_v<T> << " on " << arch::name() << ", round " << round << ", batch " << k);
          CHECK(static_cast<std::int64_t>(got[k]) == want[k]);
        }
      }
    };
    check.template operator()<float>();
    check.template operator()<double>();
    check.template operator()<std::int32_t>();
    check.template operator()<std::int64_t>();
  }
}

// Row argmax merges only the chains of four that a row's length reached (chain k's first
// batch starts at k batches): every length from 1 to four batches and one, with the row's
// one maximum at its last position, where leaving out a chain the row reached loses it, and
// rows all of the lowest value (the padding's), where a chain never reached must not win
// over position 0. 20 rows: a group of a batch's lanes of rows on every path, and rows
// after it.
TEST_CASE("reduce: argmax finds a row's maximum in every chain a row of any length reaches", "[reduce][special]") {
  const auto check = [&]<class T>() {
    constexpr std::int64_t rows = 20, longest = 4 * 16 + 1;
    for (std::int64_t length = 1; length <= longest; ++length) {
      tensor<T> at_end(shape{rows, length}), at_start(shape{rows, length}, std::numeric_limits<T>::lowest());
      for (std::int64_t i = 0; i < at_end.size(); ++i) at_end.data()[i] = static_cast<T>(i % length % 7);
      tensor<std::int64_t> ends(shape{rows}, length - 1), starts(shape{rows}, 0);
      for (std::int64_t r = 0; r < rows; ++r) at_end(r, length - 1) = T(100);
      xlite_test::for_each_isa_path([&](xlite::isa) {
        INFO(path_name() << ", " << xlite::dtype_of_v<T> << ", rows of " << length);
        CHECK(xlite::argmax(at_end, {1}) == ends);
        CHECK(xlite::argmax(at_start, {1}) == starts);
      });
    }
  };
  check.template operator()<float>();
  check.template operator()<double>();
  check.template operator()<std::int32_t>();
  check.template operator()<std::int64_t>();
}

// A float lane counts positions exactly only to 2^24: argmax down more rows than that takes
// the scalar path, which counts in int64, rather than round a row to a float.
TEST_CASE("reduce: argmax down more than 2^24 rows of float columns", "[reduce]") {
  constexpr std::int64_t rows = (std::int64_t{1} << 24) + 3;
  tensor<float> x(shape{rows, 2}, 0.0f);
  x(5, 0) = 1.0f;
  x(rows - 2, 1) = 1.0f; // 2^24 + 1, not a float
  CHECK(xlite::argmax(x, {0}) == tensor<std::int64_t>{5, rows - 2});
}

// The element types argmax takes besides float and double: bool (the scalar path), int32
// (SIMD), a cast between them; and signed zeros, which compare equal: the first one wins.
TEST_CASE("reduce: argmax of bool, int32 and cast expressions, and of signed zeros", "[reduce][special]") {
  tensor<float> x(shape{5, 41});
  for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>((i * 37) % 101) / 10.0f;
  const auto naive = [&](auto value, std::int64_t row) { // the first maximum of value(row, k) over k
    std::int64_t best = 0;
    for (std::int64_t k = 1; k < x.shape()[1]; ++k) {
      if (value(row, k) > value(row, best)) best = k;
    }
    return best;
  };
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    const tensor<std::int64_t> over_bool = xlite::argmax(x > 5.0f, {1});
    const tensor<std::int64_t> over_int = xlite::argmax(xlite::cast<std::int32_t>(x), {1});
    for (std::int64_t r = 0; r < 5; ++r) {
      CHECK(over_bool(r) == naive([&](std::int64_t i, std::int64_t k) { return x(i, k) > 5.0f; }, r));
      CHECK(over_int(r) ==
            naive([&](std::int64_t i, std::int64_t k) { return static_cast<std::int32_t>(x(i, k)); }, r));
    }
    CHECK(xlite::argmax(x > 20.0f)() == 0); // every element ties at false
    CHECK(xlite::argmax(x > 5.0f, {0}) ==
          tensor<std::int64_t>(xlite::argmax(xlite::cast<std::int32_t>(x > 5.0f), {0})));
    const tensor<std::int32_t> integers = xlite::cast<std::int32_t>(x * 3.0f);
    CHECK(xlite::argmax(integers)() == xlite::argmax(x)());
    for (const std::int64_t at : {0, 17, 40}) {
      INFO("the odd zero at " << at);
      tensor<float> zeros(shape{41}, -0.0f);
      zeros(at) = 0.0f;
      CHECK(xlite::argmax(zeros)() == 0);
      CHECK(xlite::argmax(-zeros)() == 0);
    }
  });
}
