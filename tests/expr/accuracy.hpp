#pragma once

// The accuracy table of the floating-point element-wise ops: for each op, the largest error
// allowed on every path (the program's SIMD arch and the scalar path),
// in ULPs of the result type, against the long double reference of elementwise_check.hpp;
// and the domain the operands are drawn from. 0 ULP means correctly rounded. Every domain
// also mixes in 3 % special values (NaN, +-Inf, +-0) unless it says otherwise; results for
// them must match the C library's (within the bound, NaN for NaN, Inf for Inf).
//
// The bounds are what xsimd 8.1 (SIMD; xlite's own for float tanh) and glibc 2.36 (scalar)
// achieve on these domains, measured with the hidden test cases "[.ulp_report]" of
// functions.cpp, functions_round.cpp and functions_math.cpp, which print the worst error per
// op, type and path:
//
//   expr_tests "[.ulp_report]"; expr_tests_avx2 "[.ulp_report]"; expr_tests_avx512 "[.ulp_report]"
//
// Measured worst errors, float / double, in ULPs (sse2 | fma3+avx2 | avx512bw | scalar):
//   + - * / fma neg abs min max clamp relu floor ceil round sqrt: 0 everywhere
//   log, log1p, rsqrt, sin, cos: 1 / 1 everywhere
//   exp      1 / 1 everywhere on these domains; float batches take exp_float of
//            kernels/elementwise.hpp, whose worst case over all 2^32 floats is 2 ULP
//            (xsimd's polynomial; right down to subnormal results and up to inf)
//   tanh     7 / 1 | 5 / 1 | 5 / 1 | 2 / 2: float batches take the rational
//            approximation of kernels/elementwise.hpp, whose worst case over all 2^32
//            floats is 5 ULP with g++ on fma paths and 7 on sse2 (no fma) and with clang 14
//   (all_floats_math.cpp checks the float bounds of exp and tanh on all 2^32 floats.)
//   sigmoid  2 / 2 everywhere
//   gelu     6 / 25 | 4 / 25 | 4 / 25 | 5 / 5 (1 + erf cancels towards -1.5)
//   pow      1 / 743 | 1 / 662 | 1 / 662 | 1 / 1 (exp(y log x): the error grows with
//            |y log x|, up to 624 ULP in double on these domains; float batches compute it
//            in double, where it was 55 ULP in float)

#include "elementwise_check.hpp"

#include <algorithm>

namespace xlite_test {

// Shorthands for the domains below.
inline constexpr double special_rate = 0.03;
inline domain uniform_in(double lo, double hi, double specials = special_rate) {
  return {{part::uniform, lo, hi}, {part::uniform, lo, hi}, specials};
}
// +-2^[lo, hi]: many binades, both signs.
inline domain binades(double lo, double hi, double specials = special_rate) {
  return {{part::magnitude, lo, hi}, {part::magnitude, lo, hi}, specials};
}
inline domain positive_binades(double lo, double hi, double specials = special_rate) {
  return {{part::magnitude, lo, hi, false}, {part::magnitude, lo, hi, false}, specials};
}
inline domain mixed(part a, part b, double specials = special_rate) { return {a, b, specials}; }
inline part u(double lo, double hi) { return {part::uniform, lo, hi}; }
inline part m(double lo, double hi) { return {part::magnitude, lo, hi}; }
inline part mp(double lo, double hi) { return {part::magnitude, lo, hi, false}; }
inline part ints(double lo, double hi) { return {part::integers, lo, hi}; }
inline part q(double lo, double hi) { return {part::quarters, lo, hi}; }

inline const std::vector<op_row>& accuracy_table() {
  // The domains below use shorthands: m(a, b) is +-2^[a, b], mp(a, b) the same positive,
  // ints(a, b) integers, q(a, b) quarters (k / 4), u(a, b) uniform; binades(a, b) is m(a, b)
  // alone. The last argument of mixed() and uniform_in() is the rate of special values.
  // clang-format off
  static const std::vector<op_row> table = {
    // op        ULP f32, f64, zero sign checked,
    //           operands (float),                       operands (double),                       in words
    // Correctly rounded IEEE operations.
    {op::add,    0, 0, true,
                 {mixed(m(-20, 20), ints(-50, 50)), mixed(m(-20, 20), ints(-50, 50))},
                 {mixed(m(-20, 20), ints(-50, 50)), mixed(m(-20, 20), ints(-50, 50))},
                 "+-2^[-20,20] and integers in [-50,50] (exact cancellation)"},
    {op::sub,    0, 0, true,
                 {mixed(m(-20, 20), ints(-50, 50)), mixed(m(-20, 20), ints(-50, 50))},
                 {mixed(m(-20, 20), ints(-50, 50)), mixed(m(-20, 20), ints(-50, 50))},
                 "+-2^[-20,20] and integers in [-50,50] (exact cancellation)"},
    {op::mul,    0, 0, true, {binades(-30, 30), binades(-30, 30)}, {binades(-200, 200), binades(-200, 200)},
                 "+-2^[-30,30] (float), +-2^[-200,200] (double)"},
    {op::div,    0, 0, true, {binades(-30, 30), binades(-30, 30)}, {binades(-200, 200), binades(-200, 200)},
                 "+-2^[-30,30] (float), +-2^[-200,200] (double), zeros from the specials"},
    {op::neg,    0, 0, true, {binades(-60, 60)}, {binades(-500, 500)},
                 "+-2^[-60,60] (float), +-2^[-500,500] (double)"},
    // abs: the zero sign has its own test case (abs(-0.0) is +0.0) in functions.cpp.
    {op::abs,    0, 0, false, {binades(-60, 60)}, {binades(-500, 500)},
                 "+-2^[-60,60] (float), +-2^[-500,500] (double)"},
    {op::sqrt,   0, 0, true, {mixed(mp(-120, 120), u(-4, 4))}, {mixed(mp(-1000, 1000), u(-4, 4))},
                 "2^[-120,120] (float), 2^[-1000,1000] (double), and [-4,4] (NaN below 0)"},
    {op::fma,    0, 0, true,
                 {mixed(m(-10, 10), ints(-8, 8)), mixed(m(-10, 10), ints(-8, 8)), mixed(m(-20, 20), ints(-64, 64))},
                 {mixed(m(-10, 10), ints(-8, 8)), mixed(m(-10, 10), ints(-8, 8)), mixed(m(-20, 20), ints(-64, 64))},
                 "+-2^[-10,10] and small integers, c +-2^[-20,20] and integers (exact cancellation)"},
    // Exact selections and roundings. min, max, clamp, relu: the sign of a zero result is
    // not specified (as in PyTorch).
    {op::minimum, 0, 0, false,
                 {mixed(ints(-20, 20), m(-5, 5), 0.1), mixed(ints(-20, 20), m(-5, 5), 0.1)},
                 {mixed(ints(-20, 20), m(-5, 5), 0.1), mixed(ints(-20, 20), m(-5, 5), 0.1)},
                 "integers in [-20,20] (ties) and +-2^[-5,5], 10 % specials"},
    {op::maximum, 0, 0, false,
                 {mixed(ints(-20, 20), m(-5, 5), 0.1), mixed(ints(-20, 20), m(-5, 5), 0.1)},
                 {mixed(ints(-20, 20), m(-5, 5), 0.1), mixed(ints(-20, 20), m(-5, 5), 0.1)},
                 "integers in [-20,20] (ties) and +-2^[-5,5], 10 % specials"},
    {op::clamp,  0, 0, false,
                 {mixed(ints(-30, 30), m(-5, 5), 0.05), mixed(ints(-20, 0), u(-20, 0), 0.02), mixed(ints(0, 20), u(0, 20), 0.02)},
                 {mixed(ints(-30, 30), m(-5, 5), 0.05), mixed(ints(-20, 0), u(-20, 0), 0.02), mixed(ints(0, 20), u(0, 20), 0.02)},
                 "x: integers in [-30,30] and +-2^[-5,5]; lo in [-20,0]; hi in [0,20]"},
    {op::relu,   0, 0, false, {binades(-30, 30)}, {binades(-300, 300)},
                 "+-2^[-30,30] (float), +-2^[-300,300] (double)"},
    {op::floor,  0, 0, true, {mixed(q(-1000, 1000), m(-3, 30))}, {mixed(q(-1000, 1000), m(-3, 60))},
                 "quarters in [-1000,1000] and +-2^[-3,30] (float; 2^[-3,60] double), past 2^23 and 2^52"},
    {op::ceil,   0, 0, true, {mixed(q(-1000, 1000), m(-3, 30))}, {mixed(q(-1000, 1000), m(-3, 60))},
                 "quarters in [-1000,1000] and +-2^[-3,30] (float; 2^[-3,60] double), past 2^23 and 2^52"},
    {op::round,  0, 0, true, {mixed(q(-1000, 1000), m(-3, 30))}, {mixed(q(-1000, 1000), m(-3, 60))},
                 "quarters in [-1000,1000] (exact halves) and +-2^[-3,30] (float; 2^[-3,60] double)"},
    // Math functions, not correctly rounded.
    {op::rsqrt,  1, 1, true, {mixed(mp(-120, 120), u(-4, 4))}, {mixed(mp(-1000, 1000), u(-4, 4))},
                 "2^[-120,120] (float), 2^[-1000,1000] (double), and [-4,4]"},
    {op::exp,    2, 1, true, {mixed(u(-87, 88), u(-104, 89))}, {uniform_in(-708, 709)},
                 "[-87,88] and [-104,89] (float: subnormal results, and inf from 88.72), [-708,709] (double)"},
    {op::log,    1, 1, true, {mixed(mp(-120, 120), u(0.5, 2))}, {mixed(mp(-1000, 1000), u(0.5, 2))},
                 "2^[-120,120] (float), 2^[-1000,1000] (double), and [0.5,2] (around 1)"},
    // log1p: the zero sign has its own test case (log1p(-0.0) is -0.0) in functions_math.cpp.
    {op::log1p,  1, 1, false, {mixed(u(-0.999, 10), m(-40, -1))}, {mixed(u(-0.999, 10), m(-60, -1))},
                 "[-0.999,10] and +-2^[-40,-1] (float; 2^[-60,-1] double)"},
    {op::tanh,   7, 2, true, {mixed(u(-10, 10), m(-30, 3))}, {mixed(u(-20, 20), m(-60, 3))},
                 "[-10,10] and +-2^[-30,3] (float); [-20,20] and +-2^[-60,3] (double)"},
    {op::sigmoid, 2, 2, true, {mixed(u(-80, 80), m(-30, 3))}, {mixed(u(-700, 700), m(-60, 3))},
                 "[-80,80] and +-2^[-30,3] (float); [-700,700] and +-2^[-60,3] (double)"},
    {op::gelu,   8, 32, true, {mixed(u(-1.5, 10), m(-30, 0))}, {mixed(u(-1.5, 10), m(-60, 0))},
                 "[-1.5,10] and +-2^[-30,0] (float; 2^[-60,0] double); below -1.5 an absolute bound, functions_math.cpp"},
    {op::sin,    1, 1, true, {mixed(u(-100, 100), m(-30, 3))}, {mixed(u(-100, 100), m(-60, 3))},
                 "[-100,100] and +-2^[-30,3] (float; 2^[-60,3] double)"},
    {op::cos,    1, 1, true, {mixed(u(-100, 100), m(-30, 3))}, {mixed(u(-100, 100), m(-60, 3))},
                 "[-100,100] and +-2^[-30,3] (float; 2^[-60,3] double)"},
    {op::pow,    1, 1024, true, {positive_binades(-8, 8, 0), uniform_in(-10, 10, 0)},
                 {positive_binades(-30, 30, 0), uniform_in(-30, 30, 0)},
                 "base 2^[-8,8], exponent [-10,10] (float); base 2^[-30,30], exponent [-30,30] (double); "
                 "no specials (their own test case)"},
  };
  // clang-format on
  return table;
}

inline const op_row& row_of(op o) {
  const auto& table = accuracy_table();
  const auto it = std::find_if(table.begin(), table.end(), [&](const op_row& r) { return r.o == o; });
  REQUIRE(it != table.end());
  return *it;
}

// Checks op O on T against its row of the table, on every path.
template <op O, class T>
std::vector<path_result> check_row(std::uint64_t seed) {
  const op_row& row = row_of(O);
  const bool f64 = std::is_same_v<T, double>;
  using R = typename decltype(evaluate_op<O, T>({}, as_is))::value_type;
  return check_op<R, T>(O, info(O).arity, f64 ? row.f64 : row.f32, f64 ? row.ulps_f64 : row.ulps_f32, row.signed_zero,
                        seed, [](const std::vector<tensor<T>>& in) { return evaluate_op<O>(in, as_is); });
}

} // namespace xlite_test
