#pragma once

// The element-wise check shared by the functions*.cpp tests: an op evaluated through the
// expression layer on every shape case (reference.hpp) and every ISA path, compared element
// by element with a naive loop in long double.
//
// How each result is compared:
// - floating point: in ULPs of the result type, against the reference rounded to that type;
//   0 ULP means correctly rounded. Both NaN counts as equal; a NaN on one side only is a
//   failure. Where the op defines the sign of a zero result (`signed_zero`), a zero must
//   carry the reference's sign.
// - integers and bool: exactly.
//
// The reference is independent of xsimd and of the kernels: ops that IEEE rounds correctly
// (+ - * / sqrt fma) are computed so that they round once (in double, or exactly in long
// double), the others in long double (64-bit significand on x86-64), at least 11 bits more
// than the double results they check.

#include "reference.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace xlite_test {

using xlite::op;

// One row of an accuracy table.
struct op_row {
  op o;
  std::uint64_t ulps_f32 = 0;   // bound, in ULPs of float, on every path
  std::uint64_t ulps_f64 = 0;   // bound, in ULPs of double, on every path
  bool signed_zero = true;      // a zero result must have the reference's sign
  std::array<domain, 3> f32{};  // where the operands are drawn from, float
  std::array<domain, 3> f64{};  // and double
  const char* domain_text = ""; // the same, in words
};

enum class number_kind { f32, f64, integer };

template <class T>
constexpr number_kind kind_of() {
  if constexpr (std::is_same_v<T, float>) {
    return number_kind::f32;
  } else if constexpr (std::is_same_v<T, double>) {
    return number_kind::f64;
  } else {
    return number_kind::integer;
  }
}

// The exact value of op o on x (in long double), for operands of kind `kind`.
inline long double reference(op o, const std::array<long double, 3>& x, number_kind kind) {
  using L = long double;
  const L nan = std::numeric_limits<L>::quiet_NaN();
  const bool integer = kind == number_kind::integer;
  // Correctly rounded ops: in double, which is exact for double results and, for float
  // results, rounds to the same float as one rounding would (double has > 2*24 + 2 bits).
  // Integers: long double holds every int64 exactly.
  const auto d = [](L v) { return static_cast<double>(v); };
  const auto minimum = [&](L a, L b) { return std::isnan(a) || std::isnan(b) ? nan : (b < a ? b : a); };
  const auto maximum = [&](L a, L b) { return std::isnan(a) || std::isnan(b) ? nan : (a < b ? b : a); };
  switch (o) {
  case op::add:
    return integer ? x[0] + x[1] : L(d(x[0]) + d(x[1]));
  case op::sub:
    return integer ? x[0] - x[1] : L(d(x[0]) - d(x[1]));
  case op::mul:
    return integer ? x[0] * x[1] : L(d(x[0]) * d(x[1]));
  case op::div:
    return L(d(x[0]) / d(x[1]));
  case op::neg:
    return -x[0];
  case op::abs:
    return std::fabs(x[0]);
  case op::fma:
    if (integer) return x[0] * x[1] + x[2];
    // double: fma in double rounds once. float: the product of two floats is exact in
    // long double and the sum rounds to 64 bits, then to 24 (a double rounding that can
    // differ from one rounding only at a 2^-40 chance).
    return kind == number_kind::f64 ? L(std::fma(d(x[0]), d(x[1]), d(x[2]))) : std::fma(x[0], x[1], x[2]);
  case op::minimum:
    return minimum(x[0], x[1]);
  case op::maximum:
    return maximum(x[0], x[1]);
  case op::clamp:
    return minimum(maximum(x[0], x[1]), x[2]);
  case op::relu:
    return std::isnan(x[0]) ? x[0] : (x[0] < 0 ? L(0) : x[0]);
  case op::floor:
    return std::floor(x[0]);
  case op::ceil:
    return std::ceil(x[0]);
  case op::round:
    return std::nearbyint(x[0]); // the default rounding mode: half to even
  case op::sqrt:
    return L(std::sqrt(d(x[0])));
  case op::rsqrt:
    return 1 / std::sqrt(x[0]);
  case op::exp:
    return std::exp(x[0]);
  case op::log:
    return std::log(x[0]);
  case op::log1p:
    return std::log1p(x[0]);
  case op::tanh:
    return std::tanh(x[0]);
  case op::sigmoid:
    return 1 / (1 + std::exp(-x[0]));
  case op::gelu:
    return x[0] / 2 * std::erfc(-x[0] / std::sqrt(L(2))); // 1 + erf(z) = erfc(-z), no cancellation
  case op::sin:
    return std::sin(x[0]);
  case op::cos:
    return std::cos(x[0]);
  case op::pow:
    return std::pow(x[0], x[1]);
  case op::equal:
    return x[0] == x[1];
  case op::not_equal:
    return x[0] != x[1];
  case op::less:
    return x[0] < x[1];
  case op::less_equal:
    return x[0] <= x[1];
  case op::greater:
    return x[0] > x[1];
  case op::greater_equal:
    return x[0] >= x[1];
  case op::logical_and:
    return x[0] != 0 && x[1] != 0;
  case op::logical_or:
    return x[0] != 0 || x[1] != 0;
  case op::logical_not:
    return x[0] == 0;
  case op::where:
    return x[0] != 0 ? x[1] : x[2];
  default:
    break;
  }
  FAIL("no reference for op " << o);
  return nan;
}

// The worst error seen on one path.
struct path_result {
  std::string path; // the arch name, e.g. "sse2", "fma3+avx2", "avx512bw", or "scalar"
  std::uint64_t worst_ulps = 0;
  std::int64_t elements = 0;
};

template <class R>
bool zero_signs_differ(R got, R want) {
  if constexpr (std::is_floating_point_v<R>) {
    return got == 0 && want == 0 && std::signbit(got) != std::signbit(want);
  } else {
    return false;
  }
}

// Compares `got` with the reference of `o` over `in` (broadcast to got's shape) and returns
// the worst distance; a failure message names the first element that is off by the worst.
template <class R, class T>
std::uint64_t compare_with_reference(op o, const std::vector<tensor<T>>& in, const tensor<R>& got, bool signed_zero,
                                     std::uint64_t bound, const std::string& where) {
  std::vector<shape> shapes;
  for (const auto& t : in) shapes.push_back(t.shape());
  const shape out = broadcast(shapes);
  REQUIRE(got.shape() == out);
  std::vector<std::vector<std::int64_t>> maps;
  for (const shape& s : shapes) maps.push_back(broadcast_index(out, s));
  std::uint64_t worst = 0;
  std::string worst_text;
  for (std::int64_t i = 0; i < got.size(); ++i) {
    std::array<long double, 3> x{};
    for (std::size_t k = 0; k < in.size(); ++k)
      x[k] = static_cast<long double>(in[k].data()[maps[k][static_cast<std::size_t>(i)]]);
    const long double exact = reference(o, x, kind_of<T>());
    const R want = static_cast<R>(exact);
    const R have = got.data()[i];
    std::uint64_t distance = 0;
    if constexpr (std::is_floating_point_v<R>) {
      distance = ulp_distance(have, want);
      if (signed_zero && zero_signs_differ(have, want)) distance = infinite_ulps;
    } else {
      distance = have == want ? 0 : infinite_ulps;
    }
    if (distance > worst) {
      worst = distance;
      if (distance > bound) {
        std::ostringstream text;
        text << "element " << i << " of " << out << ": inputs";
        for (std::size_t k = 0; k < in.size(); ++k) text << ' ' << bits_text(x[k]);
        text << " gave " << bits_text(have) << ", reference " << bits_text(want) << " (" << bits_text(exact)
             << "), off by " << (distance == infinite_ulps ? std::string("NaN/sign") : std::to_string(distance))
             << " ULP";
        worst_text = text.str();
      }
    }
  }
  INFO(where << ": " << name(o) << " on " << describe(shapes));
  INFO(worst_text);
  CHECK(worst <= bound);
  return worst;
}

// Runs `evaluate(inputs)` (which builds the expression under test and evaluates it) on
// every shape case for the op's arity, on every ISA path, and compares with the reference.
//
// Each row whose length is not a multiple of the batch width ends in a masked batch, and
// most shape cases have such rows. The scalar form of the op runs on the scalar path, which
// the ISA cap selects in every program.
template <class R, class T, class Evaluate>
std::vector<path_result> check_op(op o, std::size_t arity, const std::array<domain, 3>& domains, std::uint64_t bound,
                                  bool signed_zero, std::uint64_t seed, Evaluate&& evaluate) {
  rng g(seed);
  std::vector<path_result> results;
  const auto result_for = [&](const std::string& path) -> path_result& {
    for (auto& r : results) {
      if (r.path == path) return r;
    }
    return results.emplace_back(path_result{path});
  };
  for (const auto& shapes : shape_cases(arity, g)) {
    std::vector<tensor<T>> in;
    for (std::size_t k = 0; k < arity; ++k) in.push_back(random_tensor<T>(g, shapes[k], domains[k]));
    xlite_test::for_each_isa_path([&](xlite::isa) {
      const tensor<R> got = evaluate(in);
      path_result& r = result_for(path_name());
      r.worst_ulps = std::max(r.worst_ulps, compare_with_reference(o, in, got, signed_zero, bound, path_name()));
      r.elements += got.size();
    });
  }
  return results;
}

// The expression for op O over operands a, b, c (as many as O takes), built with the
// public functions and operators a user writes.
template <op O, class A, class B = std::nullptr_t, class C = std::nullptr_t>
auto build(const A& a, const B& b = nullptr, const C& c = nullptr) {
  if constexpr (O == op::add)
    return a + b;
  else if constexpr (O == op::sub)
    return a - b;
  else if constexpr (O == op::mul)
    return a * b;
  else if constexpr (O == op::div)
    return a / b;
  else if constexpr (O == op::neg)
    return -a;
  else if constexpr (O == op::equal)
    return xlite::equal(a, b);
  else if constexpr (O == op::not_equal)
    return xlite::not_equal(a, b);
  else if constexpr (O == op::less)
    return a < b;
  else if constexpr (O == op::less_equal)
    return a <= b;
  else if constexpr (O == op::greater)
    return a > b;
  else if constexpr (O == op::greater_equal)
    return a >= b;
  else if constexpr (O == op::logical_and)
    return a && b;
  else if constexpr (O == op::logical_or)
    return a || b;
  else if constexpr (O == op::logical_not)
    return !a;
  else if constexpr (O == op::where)
    return xlite::where(a, b, c);
  else if constexpr (O == op::fma)
    return xlite::fma(a, b, c);
  else if constexpr (O == op::minimum)
    return xlite::min(a, b);
  else if constexpr (O == op::maximum)
    return xlite::max(a, b);
  else if constexpr (O == op::clamp)
    return xlite::clamp(a, b, c);
  else if constexpr (O == op::pow)
    return xlite::pow(a, b);
  else if constexpr (O == op::abs)
    return xlite::abs(a);
  else if constexpr (O == op::exp)
    return xlite::exp(a);
  else if constexpr (O == op::log)
    return xlite::log(a);
  else if constexpr (O == op::log1p)
    return xlite::log1p(a);
  else if constexpr (O == op::sqrt)
    return xlite::sqrt(a);
  else if constexpr (O == op::rsqrt)
    return xlite::rsqrt(a);
  else if constexpr (O == op::tanh)
    return xlite::tanh(a);
  else if constexpr (O == op::sigmoid)
    return xlite::sigmoid(a);
  else if constexpr (O == op::relu)
    return xlite::relu(a);
  else if constexpr (O == op::gelu)
    return xlite::gelu(a);
  else if constexpr (O == op::sin)
    return xlite::sin(a);
  else if constexpr (O == op::cos)
    return xlite::cos(a);
  else if constexpr (O == op::floor)
    return xlite::floor(a);
  else if constexpr (O == op::ceil)
    return xlite::ceil(a);
  else if constexpr (O == op::round)
    return xlite::round(a);
  else
    static_assert(O == op::add, "build: not an element-wise op with a fixed result type");
}

// The operand as it is: the first operand of evaluate_op on the SIMD paths.
inline constexpr auto as_is = [](const auto& x) -> const auto& { return x; };

// Evaluates op O over the first `arity` tensors of `in`, first operand passed through f.
template <op O, class T, class F>
auto evaluate_op(const std::vector<tensor<T>>& in, F&& f) {
  constexpr std::size_t arity = info(O).arity;
  if constexpr (arity == 1) {
    return xlite::eval(build<O>(f(in[0])));
  } else if constexpr (arity == 2) {
    return xlite::eval(build<O>(f(in[0]), in[1]));
  } else {
    return xlite::eval(build<O>(f(in[0]), in[1], in[2]));
  }
}

// Calls f(std::integral_constant<op, O>{}) for each O.
template <op... O, class F>
void for_ops(F&& f) {
  (f(std::integral_constant<op, O>{}), ...);
}

// Checks op O on T, all operands drawn from `d`, for exact results (integers, bools,
// comparisons) on every ISA path.
template <op O, class T>
std::vector<path_result> check_exact_op(std::uint64_t seed, const domain& d) {
  using R = typename decltype(evaluate_op<O, T>({}, as_is))::value_type;
  return check_op<R, T>(O, info(O).arity, {d, d, d}, 0, false, seed,
                        [](const std::vector<tensor<T>>& in) { return evaluate_op<O>(in, as_is); });
}

// An input of an op and the result it must give (C library and PyTorch semantics).
struct special_case {
  std::array<double, 3> x{};
  double want = 0;
  bool double_only = false; // an input is not a float
};

template <class T>
bool same_value(T got, T want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

// Evaluates op O on tensors filled with each case's inputs, 37 elements (SIMD batches and a
// tail on every path), on every ISA path. Every element must be the
// wanted value with its sign (a zero's too); any NaN matches a NaN.
template <op O, class T>
void check_special_values(std::initializer_list<special_case> cases) {
  constexpr std::size_t arity = info(O).arity;
  for (const special_case& c : cases) {
    if (c.double_only && !std::is_same_v<T, double>) continue;
    std::vector<tensor<T>> in;
    for (std::size_t k = 0; k < arity; ++k) in.emplace_back(shape{37}, static_cast<T>(c.x[k]));
    const auto check = [&](const auto& got, const char* path) {
      INFO(path << ": " << name(O) << " of " << bits_text(c.x[0]) << (arity > 1 ? ", " + bits_text(c.x[1]) : "")
                << (arity > 2 ? ", " + bits_text(c.x[2]) : "") << " should be " << bits_text(c.want));
      std::int64_t wrong = 0;
      T example = 0;
      for (const auto v : got) {
        if (!same_value<T>(v, static_cast<T>(c.want))) {
          if (wrong++ == 0) example = v;
        }
      }
      INFO(wrong << " of 37 elements differ, e.g. " << bits_text(example));
      CHECK(wrong == 0);
    };
    xlite_test::for_each_isa_path([&](xlite::isa) { check(evaluate_op<O>(in, as_is), path_name().c_str()); });
  }
}

inline std::string results_text(op o, const char* type, const std::vector<path_result>& results) {
  std::ostringstream out;
  out << name(o) << " " << type << ":";
  for (const auto& r : results) out << "  " << r.path << " " << r.worst_ulps;
  return out.str();
}

} // namespace xlite_test
