// The logical ops and where of expr/functions.hpp against a naive loop, exact, with
// broadcasting, on every path: && || ! on bool tensors, where with a tensor<bool> condition
// on float, double, int32 and int64, and masks that change element type on the way (a
// comparison of one type selecting or combining with data of another).

#include "elementwise_check.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

using xlite::op;
using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

namespace {

const domain float_values{{part::integers, -6, 6}, {part::magnitude, -20, 20}, 0.1}; // NaN, +-0, +-Inf too
const domain int32_values{{part::integers, -6, 6}, {part::integers, -2147483648.0, 2147483647.0}};
const domain int64_values{{part::integers, -6, 6}, {part::integers, -9.2e18, 9.2e18}};

// where(condition, a, b) with a tensor<bool> condition: every element is a's or b's, bit for
// bit (NaN payloads and zero signs included).
template <class T>
void check_where(std::uint64_t seed, const domain& d) {
  rng g(seed);
  for (const auto& shapes : shape_cases(3, g)) {
    const tensor<bool> c = random_mask(g, shapes[0]);
    const tensor<T> a = random_tensor<T>(g, shapes[1], d), b = random_tensor<T>(g, shapes[2], d);
    const shape out = broadcast({shapes[0], shapes[1], shapes[2]});
    const auto ci = broadcast_index(out, c.shape()), ai = broadcast_index(out, a.shape());
    const auto bi = broadcast_index(out, b.shape());
    tensor<T> want(out);
    for (std::size_t i = 0; i < ci.size(); ++i) want.data()[i] = c.data()[ci[i]] ? a.data()[ai[i]] : b.data()[bi[i]];
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO(path_name() << ": where on " << describe(shapes));
      CHECK(bitwise_equal(tensor<T>(xlite::where(c, a, b)), want));
    });
  }
}

} // namespace

TEST_CASE("functions: logical and, or, not on bool tensors", "[functions][logical]") {
  const domain bools{{part::integers, 0, 1}};
  check_exact_op<op::logical_and, bool>(211, bools);
  check_exact_op<op::logical_or, bool>(212, bools);
  check_exact_op<op::logical_not, bool>(213, bools);
}

TEST_CASE("functions: bool tensors are ordered, false before true", "[functions][logical][compare]") {
  const domain bools{{part::integers, 0, 1}};
  check_exact_op<op::less, bool>(214, bools);
  check_exact_op<op::less_equal, bool>(215, bools);
  check_exact_op<op::greater, bool>(216, bools);
  check_exact_op<op::greater_equal, bool>(217, bools);
  const tensor<bool> b{true, false};
  CHECK(bitwise_equal(tensor<bool>(b < true), tensor<bool>{false, true}));
  CHECK(bitwise_equal(tensor<bool>(false >= b), tensor<bool>{false, true}));
}

TEST_CASE("functions: where with two numbers takes their type", "[functions][where]") {
  const tensor<float> x{1.0f, 5.0f, 9.0f};
  const auto picked = xlite::where(x > 4.0f, 100.0f, 7.0f);
  static_assert(std::is_same_v<decltype(picked)::value_type, float>);
  static_assert(std::is_same_v<decltype(xlite::where(x > 4.0f, 1, 2))::value_type, int>);
  static_assert(std::is_same_v<decltype(xlite::where(x > 4.0f, 1, 2.0))::value_type, double>);
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    CHECK(bitwise_equal(tensor<float>(picked), tensor<float>{7.0f, 100.0f, 100.0f}));
    CHECK(bitwise_equal(tensor<float>(x * xlite::where(x > 4.0f, 2.0f, -1.0f)), tensor<float>{-1.0f, 10.0f, 18.0f}));
  });
}

TEST_CASE("functions: where with a tensor<bool> condition picks bit for bit", "[functions][where]") {
  check_where<float>(221, float_values);
  check_where<double>(222, float_values);
  check_where<std::int32_t>(223, int32_values);
  check_where<std::int64_t>(224, int64_values);
}

namespace {

struct mask_inputs {
  tensor<float> f, h;
  tensor<double> d;
  tensor<std::int32_t> i, j;
  tensor<std::int64_t> k;
  tensor<bool> p, q;
};

mask_inputs make_mask_inputs() {
  rng g(16);
  return {random_tensor<float>(g, shape{3, 45}, -3, 3),
          random_tensor<float>(g, shape{45}, -3, 3),
          random_tensor<double>(g, shape{3, 45}, -3, 3),
          random_tensor<std::int32_t>(g, shape{3, 1}, -3, 3),
          random_tensor<std::int32_t>(g, shape{45}, -3, 3),
          random_tensor<std::int64_t>(g, shape{3, 45}, -3, 3),
          random_mask(g, shape{45}),
          random_mask(g, shape{3, 1})};
}

// Element e of a (3, 45) broadcast of t.
template <class T>
T at(const tensor<T>& t, std::size_t e) {
  return t.data()[broadcast_index(shape{3, 45}, t.shape())[e]];
}

} // namespace

TEST_CASE("functions: masks of mixed element types and bool outputs", "[functions][logical][where]") {
  const mask_inputs in = make_mask_inputs();
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    // A double comparison selects float data: different widths, the scalar loop.
    const tensor<float> b = xlite::where(in.d > 0.0, in.f, -in.f);
    // Only bool leaves: the loop has no element type of its own.
    const tensor<bool> c = (in.p || in.q) && !(in.p && in.q);
    // Comparisons of three element types combined (the scalar loop: mixed widths).
    const tensor<bool> m = ((in.f > in.h) && (in.d < 1.0)) || xlite::equal(in.k, std::int64_t{2});
    const tensor<float> counts = xlite::cast<float>(m) + xlite::cast<float>(c);
    // Comparisons of one width: double data and int64 data, in SIMD batches.
    const tensor<std::int64_t> n = xlite::where(in.d > 0.0, in.k, std::int64_t{-1});
    for (std::size_t e = 0; e < 135; ++e) {
      const float fv = at(in.f, e), hv = at(in.h, e);
      const double dv = in.d.data()[e];
      CHECK(b.data()[e] == (dv > 0 ? fv : -fv));
      const bool pv = at(in.p, e), qv = at(in.q, e);
      CHECK(c.data()[e] == (pv != qv));
      const bool mv = (fv > hv && dv < 1.0) || in.k.data()[e] == 2;
      CHECK(m.data()[e] == mv);
      CHECK(counts.data()[e] == static_cast<float>(mv) + static_cast<float>(pv != qv));
      CHECK(n.data()[e] == (dv > 0 ? in.k.data()[e] : -1));
    }
  });
}

// A mask of one element type becomes a mask of another of the same width (convert_mask in
// expr/evaluate.hpp); for float, an all-ones lane is a NaN, which comparisons must not see.
TEST_CASE("functions: an int32 comparison selects and combines with float data", "[functions][where]") {
  const mask_inputs in = make_mask_inputs();
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    const tensor<float> a = xlite::where(in.i < in.j, in.f, in.h);
    const tensor<bool> m = (in.f > in.h) && (in.i < in.j);
    for (std::size_t e = 0; e < 135; ++e) {
      const bool less = at(in.i, e) < at(in.j, e);
      CHECK(a.data()[e] == (less ? at(in.f, e) : at(in.h, e)));
      CHECK(m.data()[e] == (at(in.f, e) > at(in.h, e) && less));
    }
  });
}
