// The sums of expr/reduce.hpp (sum, mean, prod) of float and double against naive loops in
// long double (max, min, argmax: reduce_max.cpp; integers: reduce_integer.cpp): random shapes of rank 0 to 5 (empty
// ones too), random axis subsets in any order and sign, keepdims, fused broadcast inputs (sum(x * y, {1}) with y
// broadcast), every path, outputs and reduced counts large enough for the thread pool and for several accumulation
// blocks; errors and special values.
//
// Error bounds. A floating-point sum of n terms in any order is within (n - 1) u sum|x_i|
// of the exact sum (u = eps / 2, Higham, Accuracy and Stability, 4.2); the tests allow
// n eps sum|x_i|. A mean adds one rounding: n eps sum|x_i| / n + eps |mean|. A product of n
// terms is within about n u of the exact one, relatively; the tests allow n eps |prod|.
// max, min and argmax are exact. On integer-valued data (and powers of two for prod) every
// partial result is exact, so the tests there demand the exact value: an element missed or
// counted twice cannot hide inside a bound.

#include "page_end.hpp"
#include "reduce_check.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;
using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

TEST_CASE("reduce: sum, mean and prod of float and double match a long double loop", "[reduce][accuracy]") {
  check_reduction<op::sum, float>(21, true);
  check_reduction<op::sum, double>(22, true);
  check_reduction<op::mean, float>(23, true);
  check_reduction<op::mean, double>(24, false);
  check_reduction<op::prod, float>(25, false);
  check_reduction<op::prod, double>(26, true);
}

// With no reduced axis longer than 1, every output is one element: sum(x, {0}) of shape
// (1, 9) once gave x[0][0] nine times. (max and min: reduce_max.cpp.)
TEST_CASE("reduce: reducing only axes of length 1 gives the elements themselves", "[reduce]") {
  check_reduction<op::sum, float>(61, true, selection::singleton_axes);
  check_reduction<op::mean, double>(62, false, selection::singleton_axes);
  check_reduction<op::prod, double>(63, true, selection::singleton_axes);
  const tensor<float> x{{1, 2, 3, 4, 5, 6, 7, 8, 9}};
  xlite_test::for_each_isa_path([&](xlite::isa) {
    CHECK(xlite::sum(x, {0}) == tensor<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  });
}

TEST_CASE("reduce: large sums and means match the loop and give the same bits for 1, 2, 3, 5 and 8 threads",
          "[reduce][threads]") {
  check_large_reductions<op::sum, op::mean>(51);
}

TEST_CASE("reduce: sums of infinities and NaN, empty axes, rank 0", "[reduce][special]") {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float inf = std::numeric_limits<float>::infinity();
  tensor<float> with_nan(shape{37}, 1.0f);
  with_nan(17) = nan;
  const tensor<float> opposite{1, inf, 2, -inf, 3}, infinities(shape{19}, inf);
  const tensor<double> zero_inf{0.0, inf};
  const tensor<float> empty(shape{3, 0});
  const tensor<double> scalar(shape{}, 2.5);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    CHECK(std::isnan(xlite::sum(with_nan)()));
    CHECK(std::isnan(xlite::sum(opposite)()));
    CHECK(xlite::sum(infinities)() == inf);
    CHECK(std::isnan(xlite::prod(zero_inf)())); // 0 * inf
    // Empty axes: sum 0, prod 1, mean NaN, with the reduced shape.
    CHECK(xlite::sum(empty, {1}) == tensor<float>(shape{3}, 0.0f));
    CHECK(xlite::prod(empty, {1}) == tensor<float>(shape{3}, 1.0f));
    CHECK(xlite::sum(empty, {1}, xlite::keepdims).shape() == shape{3, 1});
    const tensor<float> means = xlite::mean(empty, {-1});
    CHECK(means.shape() == shape{3});
    for (const float v : means) CHECK(std::isnan(v));
    CHECK(xlite::sum(empty)() == 0.0f);
    CHECK(std::isnan(xlite::mean(empty)()));
    // Reducing the non-empty axis of an empty tensor: an empty result.
    CHECK(xlite::sum(empty, {0}).shape() == shape{0});
    // Rank 0: a reduction over all axes is the element.
    CHECK(xlite::sum(scalar)() == 2.5);
    CHECK(xlite::prod(scalar, {}, xlite::keepdims).shape() == shape{});
  });
}

TEST_CASE("reduce: bad axes of sum, mean and prod are index_errors naming the op and the axis", "[reduce][errors]") {
  const tensor<float> x(shape{2, 3, 4}), scalar(shape{}, 1.0f);
  CHECK_THROWS_AS(xlite::sum(x, {1, 1}), xlite::index_error);
  CHECK_THROWS_WITH(xlite::sum(x, {1, 1}), Contains("sum: axis 1 is given twice") && Contains("(2, 3, 4)"));
  CHECK_THROWS_WITH(xlite::mean(x, {0, -3}), Contains("mean: axis -3 is given twice"));
  CHECK_THROWS_AS(xlite::prod(x, {3}), xlite::index_error);
  CHECK_THROWS_WITH(xlite::prod(x, {0, -4}), Contains("prod: axis -4 is out of range for rank 3"));
  CHECK_THROWS_WITH(xlite::sum(x * x, {7}), Contains("sum: axis 7 is out of range"));
  CHECK_THROWS_WITH(xlite::sum(scalar, {0}), Contains("sum: axis 0") && Contains("rank-0"));
  CHECK_THROWS_AS(xlite::sum(x, {0, 1, 2, 0, 1, 2, 0, 1, 2}), xlite::index_error); // more axes than any rank
}

// Row reductions of short rows combine the lanes of a group of outputs' batches at once;
// each lane must hold what combine_lanes gives that output alone, and that the tree it
// documents (lane l with lane l + n/2, ..., the lower first), written here on scalars:
// data over many binades, so a sum in another order gives other bits, with NaN, and
// rounds of signed zeros alone, and of negatives with one zero, for max and min. (Not NaNs
// of different payloads: x86 keeps the first operand's, and the compiler may swap the
// operands of an addition.)
TEST_CASE("reduce: a group of batches' lanes combine as each batch's lanes do alone", "[reduce]") {
  using arch = xlite::kernels::simd_arch;
  rng g(57);
  const auto check = [&]<class T, op O>() {
    using batch = xlite::kernels::batch_t<T, arch>;
    constexpr std::size_t n = xlite::kernels::lanes<T, arch>;
    for (int round = 0; round < 20; ++round) {
      std::array<batch, n> group;
      for (batch& b : group) {
        tensor<T> lanes = std::is_floating_point_v<T> && O != op::prod
                              ? random_tensor<T>(g, shape{std::int64_t{n}}, domain{{part::magnitude, -20, 20}})
                              : random_tensor<T>(g, shape{std::int64_t{n}}, -3, 3);
        if constexpr (std::is_floating_point_v<T>) {
          if (round % 5 == 1) lanes(integer(g, 0, n - 1)) = std::numeric_limits<T>::quiet_NaN();
          if (round % 5 == 2) { // signed zeros only: max and min must order -0 below +0
            for (T& v : lanes) v = chance(g, 0.5) ? T(-0.0) : T(0.0);
          }
          if (round % 5 == 3) { // negatives and one zero of either sign, the maximum
            for (T& v : lanes) v = -std::abs(v) - T(1);
            lanes(integer(g, 0, n - 1)) = chance(g, 0.5) ? T(-0.0) : T(0.0);
          }
        }
        if constexpr (std::is_same_v<arch, xlite::kernels::scalar_arch>) {
          b = lanes(0);
        } else {
          b = batch::load_unaligned(lanes.data());
        }
      }
      alignas(64) std::array<T, n> each;
      if constexpr (std::is_same_v<arch, xlite::kernels::scalar_arch>) {
        each[0] = xlite::kernels::combine_lanes_of_each<O, T, arch>(group);
      } else {
        xlite::kernels::combine_lanes_of_each<O, T, arch>(group).store_aligned(each.data());
      }
      for (std::size_t k = 0; k < n; ++k) {
        INFO(name(O) << " of " << xlite::dtype_of_v<T> << " on " << arch::name() << ", batch " << k);
        alignas(64) std::array<T, n> tree;
        if constexpr (std::is_same_v<arch, xlite::kernels::scalar_arch>) {
          tree[0] = group[k];
        } else {
          group[k].store_aligned(tree.data());
        }
        for (std::size_t distance = n / 2; distance > 0; distance /= 2) {
          for (std::size_t lane = 0; lane < distance; ++lane) {
            tree[lane] = xlite::kernels::reduction<O>::combine(tree[lane], tree[lane + distance]);
          }
        }
        const T alone = xlite::kernels::combine_lanes<O, T, arch>(group[k]);
        CHECK(bitwise_equal(tensor<T>(shape{}, each[k]), tensor<T>(shape{}, alone)));
        CHECK(bitwise_equal(tensor<T>(shape{}, tree[0]), tensor<T>(shape{}, alone)));
      }
    }
  };
  const auto every_op = [&]<class T>() {
    check.template operator()<T, op::sum>();
    check.template operator()<T, op::prod>();
    check.template operator()<T, op::max>();
    check.template operator()<T, op::min>();
  };
  every_op.template operator()<float>();
  every_op.template operator()<double>();
  every_op.template operator()<std::int32_t>();
  every_op.template operator()<std::int64_t>();
}

TEST_CASE("reduce: load_first reads a row's end under a mask and nothing past it", "[reduce]") {
  using arch = xlite::kernels::simd_arch;
  if constexpr (!std::is_same_v<arch, xlite::kernels::scalar_arch>) {
    const auto check = [&]<class T, class Batch>() {
      constexpr std::size_t n = Batch::size;
      for (std::size_t count = 1; count < n; ++count) {
        INFO(xlite::dtype_of_v<T> << " on " << arch::name() << ", " << count << " of " << n << " lanes");
        const at_page_end<T> memory(count);
        for (std::size_t i = 0; i < count; ++i) memory.data()[i] = static_cast<T>(i % 2 == 0 ? i + 1 : 0);
        std::array<T, n> lanes;
        xlite::kernels::load_first<Batch>(memory.data(), count).store_unaligned(lanes.data());
        for (std::size_t i = 0; i < n; ++i) CHECK(lanes[i] == (i < count ? memory.data()[i] : T{}));
      }
    };
    check.template operator()<float, xsimd::batch<float, arch>>();
    check.template operator()<double, xsimd::batch<double, arch>>();
    check.template operator()<std::int32_t, xsimd::batch<std::int32_t, arch>>();
    check.template operator()<std::int64_t, xsimd::batch<std::int64_t, arch>>();
    check.template operator()<bool, xsimd::batch_bool<float, arch>>(); // bool leaves: masks of the lanes' layout
    check.template operator()<bool, xsimd::batch_bool<double, arch>>();
  }
}

TEST_CASE("reduce: rows that end at an unreadable page reduce as a loop does", "[reduce]") {
  // Every row length up to past a round of four chains, one row (its end at the page) and a
  // group of a batch's lanes of rows and some more (the grouped path and the rows after it).
  // Small integers (sums exact, ties for argmax), some rows all the lowest value (where the
  // padding ties the maximum), some with NaN. sum(x + 1): padding that is not the identity
  // would count.
  rng g(58);
  const auto check = [&]<class T>() {
    constexpr T lowest = xlite::kernels::reduction<op::max>::identity<T>();
    for (const std::int64_t rows : {std::int64_t{1}, std::int64_t{37}}) {
      for (std::int64_t n = 1; n <= 100; ++n) {
        INFO(rows << " rows of " << n << " " << xlite::dtype_of_v<T>);
        const at_page_end<T> memory(static_cast<std::size_t>(rows * n));
        T* const x = memory.data();
        for (std::int64_t r = 0; r < rows; ++r) {
          T* row = x + r * n;
          for (std::int64_t i = 0; i < n; ++i) row[i] = r % 7 == 3 ? lowest : static_cast<T>(integer(g, -6, 6));
          if constexpr (std::is_floating_point_v<T>) {
            if (r % 7 == 5) row[integer(g, 0, n - 1)] = std::numeric_limits<T>::quiet_NaN();
          }
        }
        const shape s{rows, n};
        const xlite::expr::tensor_ref<T> leaf{x, xlite::expr::shape_ref::to(s)};
        const auto sums = xlite::sum(leaf + T(1), {1}); // of int32 in int64
        using S = typename decltype(sums)::value_type;
        const tensor<T> maxima = xlite::max(leaf, {1});
        const tensor<std::int64_t> first_max = xlite::argmax(leaf, {1});
        // (-x of the lowest int32 overflows)
        const tensor<std::int64_t> first_min = std::is_floating_point_v<T> ? xlite::argmax(-leaf, {1}) : first_max;
        const auto same = [](auto a, auto b) { return a == b || (a != a && b != b); };
        for (std::int64_t r = 0; r < rows; ++r) {
          const T* row = x + r * n;
          // The loops: the first maximum, NaN above all (the first NaN).
          const auto first_largest = [&](T sign) {
            std::int64_t at = 0;
            for (std::int64_t i = 1; i < n; ++i) {
              const T v = sign * row[i], best = sign * row[at];
              if (best != best) break;
              if (v != v || v > best) at = i;
            }
            return at;
          };
          S sum = 0;
          for (std::int64_t i = 0; i < n; ++i) sum += static_cast<S>(row[i] + T(1));
          const std::int64_t at = first_largest(T(1));
          CHECK(same(sums(r), sum));
          CHECK(same(maxima(r), row[at]));
          CHECK(first_max(r) == at);
          if constexpr (std::is_floating_point_v<T>) CHECK(first_min(r) == first_largest(T(-1)));
        }
      }
    }
  };
  check.template operator()<float>();
  check.template operator()<std::int32_t>();
}

TEST_CASE("reduce: columns that end at an unreadable page reduce as a loop does", "[reduce]") {
  // Down the columns: every count of columns up to past two batches (tiles of one batch and
  // a masked one, the last row's end at the page), every count of rows up to past two
  // rounds of four chains and a longer one; on every path. Small integers (sums exact,
  // ties for argmax), some columns all the lowest value, some with a NaN. int64 sums run
  // the SIMD loop (int32's widen to int64 and take the scalar one).
  rng g(59);
  const auto check = [&]<class T>() {
    // int64's lowest would overflow the sums
    constexpr T lowest = std::is_same_v<T, std::int64_t> ? T(-7) : xlite::kernels::reduction<op::max>::identity<T>();
    for (const std::int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 100}) {
      for (std::int64_t n = 1; n <= 33; ++n) {
        INFO(rows << " rows of " << n << " " << xlite::dtype_of_v<T>);
        const at_page_end<T> memory(static_cast<std::size_t>(rows * n));
        T* const x = memory.data();
        const auto at = [&](std::int64_t r, std::int64_t c) -> T& { return x[r * n + c]; };
        for (std::int64_t c = 0; c < n; ++c) {
          for (std::int64_t r = 0; r < rows; ++r) at(r, c) = c % 7 == 3 ? lowest : static_cast<T>(integer(g, -6, 6));
          if constexpr (std::is_floating_point_v<T>) {
            if (c % 7 == 5) at(integer(g, 0, rows - 1), c) = std::numeric_limits<T>::quiet_NaN();
          }
        }
        const shape s{rows, n};
        const xlite::expr::tensor_ref<T> leaf{x, xlite::expr::shape_ref::to(s)};
        xlite_test::for_each_isa_path([&](xlite::isa) {
          const auto sums = xlite::sum(leaf, {0});
          using S = typename decltype(sums)::value_type;
          const tensor<T> maxima = xlite::max(leaf, {0});
          const tensor<std::int64_t> first_max = xlite::argmax(leaf, {0});
          const auto same = [](auto a, auto b) { return a == b || (a != a && b != b); };
          for (std::int64_t c = 0; c < n; ++c) {
            // The loops: the first maximum, NaN above all (the first NaN).
            std::int64_t best = 0;
            for (std::int64_t r = 1; r < rows; ++r) {
              if (at(best, c) != at(best, c)) break;
              if (at(r, c) != at(r, c) || at(r, c) > at(best, c)) best = r;
            }
            S sum = 0;
            for (std::int64_t r = 0; r < rows; ++r) sum += static_cast<S>(at(r, c));
            CHECK(same(sums(c), sum));
            CHECK(same(maxima(c), at(best, c)));
            CHECK(first_max(c) == best);
          }
        });
      }
    }
  };
  check.template operator()<float>();
  check.template operator()<std::int32_t>();
  check.template operator()<std::int64_t>();
}

// Run by CTest with XLITE_NUM_THREADS=2, with the cases of the same tag in evaluate.cpp (see
// tests/expr/CMakeLists.txt): reductions on the default pool give the bits of one thread.
TEST_CASE("reduce: XLITE_NUM_THREADS=2 gives the bits of one thread", "[.xlite_num_threads_2]") {
  REQUIRE(xlite::default_thread_pool().num_threads() == 2);
  rng g(53);
  const tensor<float> x = random_tensor<float>(g, shape{5, 30011}, -3, 3),
                      y = random_tensor<float>(g, shape{30011}, -3, 3);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    const tensor<float> rows = xlite::sum(x * y, {1}), columns = xlite::mean(x * y, {0}), all = xlite::sum(x * y);
    xlite::thread_pool one(1);
    xlite::scoped_thread_pool use(one);
    CHECK(bitwise_equal(rows, tensor<float>(xlite::sum(x * y, {1}))));
    CHECK(bitwise_equal(columns, tensor<float>(xlite::mean(x * y, {0}))));
    CHECK(bitwise_equal(all, tensor<float>(xlite::sum(x * y))));
  });
}

// The column loop's harder layouts, fixed: two and three reduced axes that do not merge
// (the rows step along the last and are found again where it wraps, and each tile starts
// again from the first reduced row; runs of 7 along the last: a round of four chains and
// three steps more), and kept rows that a broadcast leaf keeps apart (several rows per
// task), with 213 columns a row: on AVX-512 a tile of eight batches, one of four, one of
// one and a masked batch of five columns; on AVX2 six tiles of four, two of one and a
// masked five. Integer-valued data: the sums are exact, argmax meets ties.
TEST_CASE("reduce: columns over reduced axes that do not merge and over broadcast rows", "[reduce]") {
  constexpr std::int64_t columns = 213;
  tensor<float> x(shape{3, 4, 5, columns});
  for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>((i * 37) % 23 - 11);
  const tensor<float> y = tensor<float>{1.0f, -2.0f, 3.0f, 0.5f}.reshaped(shape{4, 1}); // broadcast along the last axis
  tensor<float> x3(shape{3, 4, columns});
  std::copy_n(x.data(), x3.size(), x3.data());
  tensor<float> x6(shape{2, 2, 3, 2, 7, columns});
  for (std::int64_t i = 0; i < x6.size(); ++i) x6.data()[i] = static_cast<float>((i * 37) % 23 - 11);

  tensor<float> sum_02(shape{4, columns}, 0.0f), sum_xy_0(shape{4, columns}, 0.0f);
  tensor<std::int64_t> argmax_xy_0(shape{4, columns}, 0), argmax_2(shape{3, 4, columns}, 0);
  for (std::int64_t b = 0; b < 4; ++b) {
    for (std::int64_t d = 0; d < columns; ++d) {
      for (std::int64_t a = 0; a < 3; ++a) {
        for (std::int64_t c = 0; c < 5; ++c) sum_02(b, d) += x(a, b, c, d);
        sum_xy_0(b, d) += x3(a, b, d) + y(b, 0);
        if (x3(a, b, d) > x3(argmax_xy_0(b, d), b, d)) argmax_xy_0(b, d) = a; // + y(b, 0) on both sides
        for (std::int64_t c = 1; c < 5; ++c) {
          if (x(a, b, c, d) > x(a, b, argmax_2(a, b, d), d)) argmax_2(a, b, d) = c;
        }
      }
    }
  }
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    CHECK(xlite::sum(x, {0, 2}) == sum_02);
    // Reduced one axis at a time, each a single reduced axis: the same exact sums.
    CHECK(xlite::sum(x6, {0, 2, 4}) == tensor<float>(xlite::sum(xlite::sum(xlite::sum(x6, {4}), {2}), {0})));
    CHECK(xlite::sum(x3 + y, {0}) == sum_xy_0);
    CHECK(xlite::argmax(x3 + y, {0}) == argmax_xy_0);
    CHECK(xlite::argmax(x, {2}) == argmax_2);
  });
}

// Wide slices (streams_columns) fold by rows in blocks of rows, combined in block order:
// exact sums of integers and products of powers of two (of int64 too), NaN and signed
// zeros in max and min, the columns' end a masked batch, on every path and the same bits
// on one, two and three threads; sums of fractions bit for bit in the documented order
// (on the portable path, fold_columns: each column down all its rows). Rows of 133 columns; of 4133
// (grouped_row_bytes or more: groups of row_group rows, and the rows left over in each
// block of 63); of 16501 (longer than streamed_panel: panels of 16384 and 117 columns,
// blocks of 16 rows and one of 3).
TEST_CASE("reduce: wide column slices fold by rows in blocks combined in order", "[reduce][threads]") {
  static_assert(xlite::expr::grouped_row_bytes == 16 * 1024 && xlite::expr::row_group == 4);
  static_assert(xlite::expr::streamed_panel == 16384 && xlite::expr::panel_min_rows <= 67);
  // Equal values with equal signs, or both NaN.
  const auto same_values = []<class T>(const tensor<T>& a, const tensor<T>& b) {
    return a.shape() == b.shape() && std::equal(a.begin(), a.end(), b.begin(), [](T u, T v) {
             return (u == v && std::signbit(u) == std::signbit(v)) || (u != u && v != v);
           });
  };
  rng g(67);
  const auto check = [&]<class T>(std::int64_t rows, std::int64_t columns) {
    constexpr bool floating = std::is_floating_point_v<T>;
    const shape s{rows, columns};
    tensor<T> x(s), factors(s, T(1));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < columns; ++c) {
        x(r, c) = static_cast<T>(integer(g, -6, 6));
        // About 40 factors a column of -2 or 0.5 (exact in float); for int64 about 20 of -2.
        if (integer(g, 0, floating ? 99 : 199) == 0) {
          factors(r, c) = floating && integer(g, 0, 1) == 0 ? T(0.5) : T(-2);
        }
      }
    }
    if constexpr (floating) {
      // Signed zeros, in every block and block by block (the first of three -0 only).
      const std::int64_t first_block = xlite::expr::streamed_block / std::min(columns, xlite::expr::streamed_panel);
      for (std::int64_t r = 0; r < rows; ++r) {
        x(r, 7) = r % 3 == 0 ? T(-0.0) : T(0.0);
        x(r, 8) = r < first_block ? T(-0.0) : T(0.0);
      }
      x(integer(g, 0, rows - 1), 11) = std::numeric_limits<T>::quiet_NaN();
      x(rows - 1, columns - 1) = std::numeric_limits<T>::quiet_NaN(); // in the masked batch
    }
    REQUIRE(xlite::expr::streams_columns(xlite::expr::plan_reduction(x * T(1), xlite::axes{0}, false, op::sum)));
    tensor<T> sums(shape{columns}, T(0)), products(shape{columns}, T(1));
    tensor<T> maxima(shape{columns}, std::numeric_limits<T>::lowest()),
        minima(shape{columns}, std::numeric_limits<T>::max());
    for (std::int64_t c = 0; c < columns; ++c) {
      for (std::int64_t r = 0; r < rows; ++r) {
        sums(c) += x(r, c);
        products(c) *= factors(r, c);
        if (x(r, c) != x(r, c) || maxima(c) != maxima(c)) {
          maxima(c) = minima(c) = std::numeric_limits<T>::quiet_NaN();
        } else {
          maxima(c) = std::max(maxima(c), x(r, c));
          minima(c) = std::min(minima(c), x(r, c));
        }
      }
    }
    // Fractions, summed in the order the header gives: on the SIMD paths each column down
    // the rows of a block, the blocks' sums in order; on the portable path down all rows.
    tensor<T> fractions, ordered_sums, sequential_sums;
    if constexpr (floating) {
      fractions = tensor<T>(s);
      ordered_sums = tensor<T>(shape{columns});
      sequential_sums = tensor<T>(shape{columns});
      for (T& v : fractions) v = static_cast<T>(std::uniform_real_distribution<double>(-1, 1)(g));
      const std::int64_t rows_per_block = xlite::expr::streamed_block / std::min(columns, xlite::expr::streamed_panel);
      for (std::int64_t c = 0; c < columns; ++c) {
        for (std::int64_t first = 0; first < rows; first += rows_per_block) {
          T block = fractions(first, c);
          for (std::int64_t r = first + 1; r < std::min(rows, first + rows_per_block); ++r) block += fractions(r, c);
          ordered_sums(c) = first == 0 ? block : ordered_sums(c) + block;
        }
        sequential_sums(c) = fractions(0, c);
        for (std::int64_t r = 1; r < rows; ++r) sequential_sums(c) += fractions(r, c);
      }
    }
    if constexpr (floating) {
      maxima(7) = maxima(8) = T(0.0);
      minima(7) = minima(8) = T(-0.0);
    }
    const auto reduce_all = [&] {
      std::vector<tensor<T>> got = {xlite::sum(x, {0}), xlite::prod(factors, {0}), xlite::max(x, {0}),
                                    xlite::min(x, {0})};
      if constexpr (floating) {
        got.push_back(xlite::mean(x, {0}));
        got.push_back(xlite::sum(fractions, {0}));
      }
      return got;
    };
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO(xlite::dtype_of_v<T> << ", " << path_name());
      std::vector<tensor<T>> one_thread;
      for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
        xlite::thread_pool pool(n);
        xlite::scoped_thread_pool use(pool);
        INFO(n << " threads");
        const std::vector<tensor<T>> got = reduce_all();
        CHECK(same_values(got[0], sums));
        CHECK(same_values(got[1], products));
        CHECK(same_values(got[2], maxima));
        CHECK(same_values(got[3], minima));
        if constexpr (floating) {
          for (std::int64_t c = 0; c < columns; ++c) {
            INFO("column " << c);
            CHECK(std::isnan(got[4](c)) == std::isnan(sums(c)));
            if (!std::isnan(sums(c))) CHECK(got[4](c) == sums(c) / T(rows));
          }
          CHECK(bitwise_equal(got[5], xlite::kernels::simd_path_active() ? ordered_sums : sequential_sums));
        }
        if (n == 1) one_thread = got;
        for (std::size_t k = 0; k < got.size(); ++k) CHECK(bitwise_equal(got[k], one_thread[k]));
      }
    });
  };
  for (const auto& [rows, columns] : {std::pair<std::int64_t, std::int64_t>{4100, 133}, {137, 4133}, {67, 16501}}) {
    INFO(rows << " x " << columns);
    check.template operator()<float>(rows, columns);
    check.template operator()<double>(rows, columns);
    check.template operator()<std::int64_t>(rows, columns);
  }
}

// argmax down slices of streamed_argmax_slice elements or more streams them (stream_columns
// with streamed_argmax): the first maximum among many equal values, within a block, in a
// later block only, at a block's first and last row; the lowest value in every row; the
// first of NaNs in two blocks; on every path and on one to three threads. Rows of 4099
// columns (groups of four rows, blocks of 63) and of 16411 (panels of 16384 and 27
// columns, blocks of 16); two output rows of x * y, y broadcast along the columns.
TEST_CASE("reduce: argmax down large column slices streams, the first maximum across blocks", "[reduce][threads]") {
  static_assert(xlite::expr::streamed_argmax_slice == 1 << 22);
  rng g(71);
  // x (outer x rows x columns, or rows x columns) times y (rows x 1), or times 1.
  const auto check = [&]<class T>(std::int64_t outer, std::int64_t rows, std::int64_t columns, bool broadcast) {
    INFO(xlite::dtype_of_v<T> << ", " << outer << " x " << rows << " x " << columns);
    const shape xs = outer > 1 ? shape{outer, rows, columns} : shape{rows, columns};
    tensor<T> x(xs), y(shape{rows, 1});
    for (T& v : x) v = static_cast<T>(integer(g, -6, 6));
    for (T& v : y) v = broadcast ? static_cast<T>(integer(g, 1, 2)) : T(1);
    const xlite::axes reduced{outer > 1 ? 1 : 0};
    const auto argmax_of_product = [&] {
      return broadcast ? xlite::argmax(x * y, reduced) : xlite::argmax(x * T(1), reduced);
    };
    const std::int64_t block = xlite::expr::streamed_block / std::min(columns, xlite::expr::streamed_panel);
    for (std::int64_t o = 0; o < outer; ++o) {
      const auto at = [&](std::int64_t r, std::int64_t c) -> T& { return x.data()[(o * rows + r) * columns + c]; };
      at(rows - 1, 3) = T(20);                 // the last block only
      at(block, 5) = at(rows - 1, 5) = T(20);  // the second block's first row, and later
      at(block - 1, 6) = at(block, 6) = T(20); // the first block's last row, and the next
      for (std::int64_t r = 0; r < rows; ++r) at(r, 12) = std::numeric_limits<T>::lowest();
      if constexpr (std::is_floating_point_v<T>) {
        for (std::int64_t r = 0; r < rows; ++r) at(r, 12) = -std::numeric_limits<T>::infinity();
        at(integer(g, 0, rows - 1), 9) = std::numeric_limits<T>::quiet_NaN();
        at(block + 1, 10) = at(1, 10) = std::numeric_limits<T>::quiet_NaN(); // the first one wins
        at(rows - 1, columns - 1) = std::numeric_limits<T>::quiet_NaN();     // in the masked batch
      }
    }
    REQUIRE(
        (broadcast
             ? xlite::expr::streams_argmax_columns(xlite::expr::plan_reduction(x * y, reduced, false, op::argmax))
             : xlite::expr::streams_argmax_columns(xlite::expr::plan_reduction(x * T(1), reduced, false, op::argmax))));
    tensor<std::int64_t> first_maxima(shape{outer * columns}, 0);
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t c = 0; c < columns; ++c) {
        const auto value = [&](std::int64_t r) {
          return static_cast<T>(x.data()[(o * rows + r) * columns + c] * y.data()[r]);
        };
        std::int64_t& best = first_maxima.data()[o * columns + c];
        for (std::int64_t r = 1; r < rows; ++r) {
          if (value(r) > value(best) || (value(r) != value(r) && value(best) == value(best))) best = r;
        }
      }
    }
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO(path_name());
      for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
        xlite::thread_pool pool(n);
        xlite::scoped_thread_pool use(pool);
        INFO(n << " threads");
        const tensor<std::int64_t> got = argmax_of_product();
        CHECK(std::equal(got.begin(), got.end(), first_maxima.begin(), first_maxima.end()));
      }
    });
  };
  for (const auto& [rows, columns] : {std::pair<std::int64_t, std::int64_t>{1025, 4099}, {257, 16411}}) {
    check.template operator()<float>(1, rows, columns, false);
    check.template operator()<double>(1, rows, columns, false);
    check.template operator()<std::int32_t>(1, rows, columns, false);
    check.template operator()<std::int64_t>(1, rows, columns, false);
  }
  check.template operator()<float>(2, 1025, 4099, true);
}

// Row reductions step from one output's row to the next along the outputs' fastest
// dimension, and find the row from the index again only where that dimension wraps:
// outputs in a 6 x 5 grid that a broadcast leaf keeps from merging into one dimension
// (groups of a batch's lanes of rows cross wraps: on AVX-512 the first 16 rows cross
// three, and the 14 after them are not a group); the same with rows longer than the
// grouped ones (1500), a task per output, tasks of several outputs starting anywhere in
// the grid. And outputs whose reduced positions are two dimensions that do not merge,
// which walk_rows visits row by row. On one thread, where a task's index carries from
// group to group, and on three. Integer-valued data: the sums are exact, argmax meets
// ties.
TEST_CASE("reduce: row reductions over outputs and reduced axes that do not merge", "[reduce]") {
  const std::size_t threads = GENERATE(std::size_t{1}, std::size_t{3});
  xlite::thread_pool pool(threads);
  xlite::scoped_thread_pool use(pool);
  const auto value = [](std::int64_t i) { return static_cast<float>((i * 37) % 23 - 11); };
  const auto fill = [&](tensor<float>& t, std::int64_t seed) {
    for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = value(i * 5 + seed);
  };
  // sum(x + b, {2}) and argmax(x + b, {2}) by loops.
  const auto over_last_axis = [](const tensor<float>& x, const tensor<float>& b) {
    const std::int64_t outer = x.shape()[0], inner = x.shape()[1], length = x.shape()[2];
    std::pair<tensor<float>, tensor<std::int64_t>> want{tensor<float>(shape{outer, inner}, 0.0f),
                                                         tensor<std::int64_t>(shape{outer, inner}, 0)};
    auto& [sums, positions] = want;
    for (std::int64_t p = 0; p < outer; ++p) {
      for (std::int64_t q = 0; q < inner; ++q) {
        for (std::int64_t k = 0; k < length; ++k) {
          const float v = x(p, q, k) + b(p, 0, k);
          sums(p, q) += v;
          if (v > x(p, q, positions(p, q)) + b(p, 0, positions(p, q))) positions(p, q) = k;
        }
      }
    }
    return want;
  };
  tensor<float> x(shape{6, 5, 37}), b(shape{6, 1, 37}), long_x(shape{4, 5, 1500}), long_b(shape{4, 1, 1500});
  fill(x, 0);
  fill(b, 3);
  fill(long_x, 4);
  fill(long_b, 6);
  // (pairs, not structured bindings: clang 14 cannot capture those in a lambda)
  const auto want = over_last_axis(x, b), long_want = over_last_axis(long_x, long_b);
  tensor<float> y(shape{40, 5, 6}), w(shape{1, 5, 1});
  fill(y, 1);
  fill(w, 2);
  tensor<float> sum_12(shape{40}, 0.0f), max_12(shape{40}, -std::numeric_limits<float>::infinity());
  for (std::int64_t p = 0; p < 40; ++p) {
    for (std::int64_t q = 0; q < 5; ++q) {
      for (std::int64_t k = 0; k < 6; ++k) {
        sum_12(p) += y(p, q, k) + w(0, q, 0);
        max_12(p) = std::max(max_12(p), y(p, q, k) + w(0, q, 0));
      }
    }
  }
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name() << ", " << threads << " threads");
    CHECK(xlite::sum(x + b, {2}) == want.first);
    CHECK(xlite::argmax(x + b, {2}) == want.second);
    CHECK(xlite::sum(long_x + long_b, {2}) == long_want.first);
    CHECK(xlite::argmax(long_x + long_b, {2}) == long_want.second);
    CHECK(xlite::sum(y + w, {1, 2}) == sum_12);
    CHECK(xlite::max(y + w, {1, 2}) == max_12);
  });
}

// sum(e) with no axes compiles only the row loops (reduce_leaves' EveryAxis); naming the
// axes, or {}, takes the loops chosen at run time. Both must be the same loop, to the bit:
// flat and broadcast inputs (one reduced run, several that do not merge, rows with a leaf
// broadcast along them), over several accumulation blocks, on every path and thread count.
TEST_CASE("reduce: naming no axes gives the bits of naming every axis", "[reduce][threads]") {
  const std::size_t threads = GENERATE(std::size_t{1}, std::size_t{3});
  xlite::thread_pool pool(threads);
  xlite::scoped_thread_pool use(pool);
  const auto filled = [](shape s, std::int64_t seed) {
    tensor<float> t(s);
    for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = std::sin(static_cast<float>(i * 7 + seed)) * 3.0f;
    return t;
  };
  const tensor<float> x = filled(shape{7, 9000}, 1), y = filled(shape{7, 9000}, 2), column = filled(shape{7, 1}, 3),
                      row = filled(shape{1, 9000}, 4), one = filled(shape{1}, 5), flat = filled(shape{40001}, 6);
  const auto same_bits = [](const tensor<float>& a, const tensor<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
  };
  const auto check = [&](const auto& e, const char* what) {
    INFO(what << ", " << path_name() << ", " << threads << " threads");
    CHECK(same_bits(xlite::sum(e), xlite::sum(e, {})));
    CHECK(same_bits(xlite::sum(e), xlite::sum(e, {0, 1})));
    CHECK(same_bits(xlite::mean(e), xlite::mean(e, {})));
    CHECK(same_bits(xlite::prod(e * 1e-4f + 1.0f), xlite::prod(e * 1e-4f + 1.0f, {}))); // finite, not 1
    CHECK(same_bits(xlite::max(e), xlite::max(e, {})));
    CHECK(same_bits(xlite::min(e), xlite::min(e, {0, 1})));
    CHECK(xlite::argmax(e) == xlite::argmax(e, {}));
  };
  xlite_test::for_each_isa_path([&](xlite::isa) {
    check(x * y, "x * y, one flat run");
    check(x * column + row, "x * column + row, reduced axes that do not merge");
    check(x * one, "x * a one-element leaf, a leaf broadcast along the rows");
    INFO("flat, " << path_name());
    CHECK(same_bits(xlite::sum(flat * flat), xlite::sum(flat * flat, {0})));
    CHECK(xlite::argmax(flat * one) == xlite::argmax(flat * one, {}));
  });
}
