// cast<To>(x) (expr/functions.hpp) against static_cast, its definition, for every pair of
// element types the SIMD loop converts in batches (same width: float <-> int32,
// double <-> int64, bool <-> anything) and a set of pairs that take the scalar loop
// (different widths, int8, uint8), with values over each type's range: truncation toward
// zero, rounding to nearest even of wide integers, subnormal floats, NaN and -0.0 to bool.
// (Values outside the target's range are undefined behaviour for static_cast, so none.)

#include "reference.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

namespace {

template <class T>
bool same_bits(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) && std::isnan(b)) return true;
  }
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// cast<To> of random From values drawn from d, on the shape cases of a unary op, on every
// path.
template <class From, class To>
void check_cast(std::uint64_t seed, const domain& d) {
  rng g(seed);
  for (const auto& shapes : shape_cases(1, g)) {
    const tensor<From> x = random_tensor<From>(g, shapes[0], d);
    const auto check = [&](const tensor<To>& got, const std::string& path) {
      REQUIRE(got.shape() == x.shape());
      std::int64_t wrong = 0, first = -1;
      for (std::int64_t i = 0; i < x.size(); ++i) {
        if (!same_bits(got.data()[i], static_cast<To>(x.data()[i])) && wrong++ == 0) first = i;
      }
      INFO(path << ": cast on " << x.shape() << ", " << wrong << " elements differ"
                << (first >= 0 ? ", first " + bits_text(x.data()[first]) + " -> " + bits_text(got.data()[first]) +
                                     ", want " + bits_text(static_cast<To>(x.data()[first]))
                               : std::string()));
      CHECK(wrong == 0);
    };
    xlite_test::for_each_isa_path([&](xlite::isa) { check(xlite::cast<To>(x), path_name()); });
  }
}

const domain bools{{part::integers, 0, 1}};
// Integers of every size within float's int32 range, with fractions below 2^23.
const domain float_to_int32{{part::magnitude, -3, 30.99}, {part::uniform, -3, 3}, 0};
const domain double_to_int64{{part::magnitude, -3, 62.99}, {part::uniform, -3, 3}, 0};
const domain all_int32{{part::integers, -2147483648.0, 2147483647.0}, {part::integers, -20000000, 20000000}};
const domain all_int64{{part::integers, -9.2e18, 9.2e18}, {part::integers, -1e17, 1e17}};
const domain with_zeros{{part::integers, -1, 1}, {part::magnitude, -200, 200}, 0.2}; // NaN, +-0, +-Inf
const domain zeros_no_nan{{part::integers, -1, 1}, {part::magnitude, -200, 200}, 0};
const domain double_wide{{part::magnitude, -140, 127.9}, {part::uniform, -1, 1}, 0.05}; // subnormal floats, Inf

} // namespace

TEST_CASE("functions: casts between types of one width run in SIMD batches as static_cast", "[functions][cast]") {
  static_assert(
      xlite::expr::simd_evaluable_v<decltype(xlite::cast<std::int32_t>(std::declval<const tensor<float>&>()))>);
  static_assert(
      xlite::expr::simd_evaluable_v<decltype(xlite::cast<double>(std::declval<const tensor<std::int64_t>&>()))>);
  check_cast<float, std::int32_t>(401, float_to_int32);
  check_cast<std::int32_t, float>(402, all_int32);
  check_cast<double, std::int64_t>(403, double_to_int64);
  check_cast<std::int64_t, double>(404, all_int64);
  check_cast<bool, float>(405, bools);
  check_cast<bool, double>(406, bools);
  check_cast<bool, std::int32_t>(407, bools);
  check_cast<bool, std::int64_t>(408, bools);
  check_cast<float, bool>(409, zeros_no_nan); // NaN: the test below
  check_cast<double, bool>(410, zeros_no_nan);
  check_cast<std::int32_t, bool>(411, domain{{part::integers, -2, 2}});
  check_cast<std::int64_t, bool>(412, all_int64);
}

TEST_CASE("functions: casts between types of different widths take the scalar loop as static_cast",
          "[functions][cast][scalar]") {
  static_assert(!xlite::expr::simd_evaluable_v<decltype(xlite::cast<double>(std::declval<const tensor<float>&>()))>);
  check_cast<float, double>(421, with_zeros);
  check_cast<double, float>(422, double_wide);
  check_cast<std::int32_t, std::int64_t>(423, all_int32);
  check_cast<std::int64_t, std::int32_t>(424, all_int64); // modulo 2^32, as C++20 defines
  check_cast<std::int8_t, float>(425, domain{{part::integers, -128, 127}});
  check_cast<std::uint8_t, double>(426, domain{{part::integers, 0, 255}});
  check_cast<float, std::uint8_t>(427, domain{{part::uniform, 0, 255.99}});
  check_cast<std::int32_t, std::int8_t>(428, domain{{part::integers, -1000, 1000}});
  check_cast<std::uint8_t, bool>(429, domain{{part::integers, 0, 3}});
}

TEST_CASE("functions: cast of a cast, and casts inside larger expressions", "[functions][cast]") {
  const tensor<float> x{-2.5f, -0.5f, 0.0f, 0.5f, 1.5f, 2.5f, 3.75f, -7.25f, 1e9f};
  const tensor<std::int32_t> i{-2, 0, 0, 0, 1, 2, 3, -7, 1000000000};
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    CHECK(tensor<std::int32_t>(xlite::cast<std::int32_t>(x)) == i); // toward zero
    CHECK(tensor<std::int32_t>(xlite::cast<std::int32_t>(xlite::round(x))) ==
          tensor<std::int32_t>{-2, -0, 0, 0, 2, 2, 4, -7, 1000000000}); // half to even first
    CHECK(tensor<float>(xlite::cast<float>(xlite::cast<std::int32_t>(x)) * 2.0f) ==
          tensor<float>{-4, 0, 0, 0, 2, 4, 6, -14, 2e9f});
    CHECK(tensor<double>(xlite::cast<double>(x) + xlite::cast<double>(i)) ==
          tensor<double>{-4.5, -0.5, 0, 0.5, 2.5, 4.5, 6.75, -14.25, 2e9});
    CHECK(tensor<float>(xlite::cast<float>(x > 0.0f) * x) ==
          tensor<float>{-0.0f, -0.0f, 0, 0.5f, 1.5f, 2.5f, 3.75f, -0.0f, 1e9f});
  });
}

namespace {

// Each value 9 times (in whole SIMD batches and in a row's masked end on every path), cast to bool.
template <class T>
tensor<bool> to_bool(std::initializer_list<T> values) {
  tensor<T> x(shape{9 * static_cast<std::int64_t>(values.size())});
  for (std::size_t i = 0; i < static_cast<std::size_t>(x.size()); ++i) x.data()[i] = values.begin()[i / 9];
  return xlite::cast<bool>(x);
}

tensor<bool> nines(std::initializer_list<bool> values) {
  tensor<bool> t(shape{9 * static_cast<std::int64_t>(values.size())});
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.size()); ++i) t.data()[i] = values.begin()[i / 9];
  return t;
}

} // namespace

TEST_CASE("functions: cast<bool> of zeros, infinities and subnormals", "[functions][cast][special]") {
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    constexpr float inf = std::numeric_limits<float>::infinity();
    CHECK(to_bool<float>({-0.0f, 0.0f, inf, -inf, 1e-45f, 0.5f}) == nines({false, false, true, true, true, true}));
    CHECK(to_bool<double>({-0.0, 0.0, -1e300, 5e-324}) == nines({false, false, true, true}));
  });
}

// NaN is not zero: true, as static_cast<bool> and torch do. (xsimd's != on AVX and AVX-512
// float batches is the ordered comparison, false for NaN.)
TEST_CASE("functions: cast<bool> of NaN is true on every path", "[functions][cast][special]") {
  check_cast<float, bool>(431, with_zeros);
  check_cast<double, bool>(432, with_zeros);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    CHECK(to_bool<float>({std::numeric_limits<float>::quiet_NaN()}) == nines({true}));
    CHECK(to_bool<double>({-std::numeric_limits<double>::quiet_NaN()}) == nines({true}));
  });
}
