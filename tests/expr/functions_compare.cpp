// The comparisons of expr/functions.hpp against a naive loop: exact, on float, double, int32
// and int64, with broadcasting, on every path. Comparisons with NaN are false except
// not_equal, which is true; -0.0 equals 0.0.

#include "elementwise_check.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>

using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

namespace {

template <class F>
void comparison_ops(F&& f) {
  for_ops<op::equal, op::not_equal, op::less, op::less_equal, op::greater, op::greater_equal>(f);
}

// Small integers, so that equal values are common, and wide values; 10 % specials (NaN,
// +-Inf, +-0) for floating point.
const domain float_values{{part::integers, -6, 6}, {part::magnitude, -20, 20}, 0.1};
// int64 values beyond 32 bits, so a lane handled as two halves shows.
const domain int32_values{{part::integers, -6, 6}, {part::integers, -2147483648.0, 2147483647.0}};
const domain int64_values{{part::integers, -6, 6}, {part::integers, -9.2e18, 9.2e18}};

} // namespace

TEST_CASE("functions: comparisons of float, double, int32 and int64 are exact", "[functions][compare]") {
  comparison_ops([](auto o) {
    constexpr op O = decltype(o)::value;
    check_exact_op<O, float>(201, float_values);
    check_exact_op<O, double>(202, float_values);
    check_exact_op<O, std::int32_t>(203, int32_values);
    check_exact_op<O, std::int64_t>(204, int64_values);
  });
}

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

// A pattern repeated 6 times (42 elements): every element lands in a whole SIMD batch and
// some in a row's masked end, on every path.
template <class T>
tensor<T> repeated(std::initializer_list<T> pattern) {
  tensor<T> t(shape{6 * static_cast<std::int64_t>(pattern.size())});
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.size()); ++i)
    t.data()[i] = pattern.begin()[i % pattern.size()];
  return t;
}

// Operands that pair NaN with numbers and NaN, -0.0 with 0.0, and infinities.
template <class T>
struct special_pairs {
  tensor<T> a = repeated<T>({T(qnan), T(qnan), T(1), T(-0.0), T(inf), T(-inf), T(inf)});
  tensor<T> b = repeated<T>({T(qnan), T(1), T(qnan), T(0.0), T(inf), T(inf), T(std::numeric_limits<T>::max())});
};

} // namespace

TEST_CASE("functions: comparisons of NaN, infinities and signed zeros", "[functions][compare][special]") {
  const auto run = [&](auto type) {
    const special_pairs<decltype(type)> p;
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO(path_name());
      CHECK(tensor<bool>(xlite::equal(p.a, p.b)) == repeated<bool>({false, false, false, true, true, false, false}));
      CHECK(tensor<bool>(p.a < p.b) == repeated<bool>({false, false, false, false, false, true, false}));
      CHECK(tensor<bool>(p.a <= p.b) == repeated<bool>({false, false, false, true, true, true, false}));
      CHECK(tensor<bool>(p.a > p.b) == repeated<bool>({false, false, false, false, false, false, true}));
      CHECK(tensor<bool>(p.a >= p.b) == repeated<bool>({false, false, false, true, true, false, true}));
      // True for NaN (xsimd 8.1's AVX and AVX-512 != is ordered, false for NaN: xlite uses ~(a == b)).
      CHECK(tensor<bool>(xlite::not_equal(p.a, p.b)) == repeated<bool>({true, true, true, false, false, true, true}));
    });
  };
  run(float{});
  run(double{});
}
