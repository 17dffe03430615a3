// The reductions of expr/reduce.hpp on integers and bools, exactly: int32 and int64 data
// with values of all sizes, sum and prod accumulating in int64 (as torch.sum), counts of
// bool tensors and comparisons, uint8 on the scalar path. The check is reduce_check.hpp's.

#include "reduce_check.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>

using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

TEST_CASE("reduce: integer reductions are exact; sum and prod accumulate in int64", "[reduce][integer]") {
  check_reduction<op::sum, std::int32_t>(41, false);
  check_reduction<op::prod, std::int32_t>(42, false);
  check_reduction<op::max, std::int32_t>(43, false);
  check_reduction<op::min, std::int64_t>(44, false);
  check_reduction<op::argmax, std::int64_t>(45, false);
  check_reduction<op::argmax, std::int32_t>(147, true);
  check_reduction<op::sum, std::int64_t>(46, true);
  static_assert(
      std::is_same_v<decltype(xlite::sum(std::declval<const tensor<std::int32_t>&>())), tensor<std::int64_t>>);
  static_assert(std::is_same_v<decltype(xlite::prod(std::declval<const tensor<bool>&>())), tensor<std::int64_t>>);
  static_assert(
      std::is_same_v<decltype(xlite::max(std::declval<const tensor<std::int32_t>&>(), {0})), tensor<std::int32_t>>);
  // A sum past the range of int32, and one of uint8 (the scalar path: no uint8 batches).
  // Down the columns of `big`, the scalar path folds tiles of 256 columns over the rows.
  tensor<std::int32_t> big(shape{3, 50001});
  tensor<std::int64_t> big_columns(shape{50001});
  for (std::int64_t j = 0; j < 50001; ++j) {
    for (std::int64_t i = 0; i < 3; ++i) big(i, j) = static_cast<std::int32_t>(100000 * (i + 1) + j);
    big_columns(j) = 600000 + 3 * j;
  }
  const tensor<std::uint8_t> bytes(shape{1000}, 250);
  const tensor<bool> mask{true, false, true, true};
  const tensor<std::int32_t> none(shape{0}), no_columns(shape{2, 0});
  xlite_test::for_each_isa_path([&](xlite::isa) {
    CHECK(xlite::sum(big)() == std::int64_t{6} * 50001 * 100000 + std::int64_t{3} * 50000 * 50001 / 2);
    CHECK(xlite::sum(big, {0}) == big_columns);
    CHECK(xlite::sum(bytes)() == 250000);
    CHECK(xlite::max(bytes)() == 250);
    CHECK(xlite::sum(mask)() == 3);
    CHECK(xlite::prod(mask)() == 0);
    CHECK(xlite::sum(big > 0)() == 3 * 50001); // a count of a comparison, fused
    CHECK(xlite::sum(none)() == 0);            // empty: 0 and 1
    CHECK(xlite::prod(no_columns, {1}) == tensor<std::int64_t>{1, 1});
  });
}

// The integer cases of the tests of reduce.cpp and reduce_max.cpp for these two layouts.
TEST_CASE("reduce: integer reductions over axes of length 1, and argmax over outer axes", "[reduce][integer]") {
  check_reduction<op::sum, std::int32_t>(47, false, selection::singleton_axes);
  check_reduction<op::argmax, std::int64_t>(48, false, selection::strided_argmax);
}
