// Compile-time properties of expression types: node count, depth, signature, the
// simplification rules, and the common subexpressions. Most checks are static_asserts:
// this file failing to compile is the failure.
#include <xlite/expr.hpp>

#include <boost/hana/equal.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <type_traits>

using xlite::c;
using xlite::tensor;
using xlite::expr::depth_v;
using xlite::expr::node_count_v;
using xlite::expr::signature;

namespace {

// Leaves to build expression types from; evaluation is not the point here.
const tensor<float> a{1, 2, 3}, x{4, 5, 6}, b{7, 8, 9};
const tensor<std::int32_t> i{1, 2, 3};

template <class A, class B>
constexpr bool same_type = std::is_same_v<std::remove_cvref_t<A>, std::remove_cvref_t<B>>;

} // namespace

TEST_CASE("node_count and depth count leaves and ops", "[graph]") {
  using e = decltype(a * x + b);
  static_assert(node_count_v<e> == 5);
  static_assert(depth_v<e> == 3);
  static_assert(node_count_v<decltype(xlite::exp(-x * x) * b + xlite::tanh(a))> == 10);
  static_assert(depth_v<decltype(xlite::relu(a * x + b))> == 4);
  static_assert(node_count_v<xlite::expr::tensor_ref<float>> == 1);
  SUCCEED();
}

TEST_CASE("post_order and repeated_subexpressions list nodes in evaluation order", "[graph][cse]") {
  namespace hana = boost::hana;
  const auto ax = a * x;
  const auto e = (ax + b) * xlite::exp(ax + b) + ax;
  using T = xlite::expr::tensor_ref<float>;
  using M = std::remove_cvref_t<decltype(ax)>;
  using S = std::remove_cvref_t<decltype(ax + b)>;
  using X = std::remove_cvref_t<decltype(xlite::exp(ax + b))>;
  using P = std::remove_cvref_t<decltype((ax + b) * xlite::exp(ax + b))>;
  using E = std::remove_cvref_t<decltype(e)>;
  static_assert(xlite::expr::post_order(hana::type_c<E>) ==
                hana::tuple_t<T, T, M, T, S, T, T, M, T, S, X, P, T, T, M, E>);
  // Nodes met more than once, by their first occurrence; leaves are never listed.
  static_assert(xlite::expr::repeated_subexpressions(hana::type_c<E>) == hana::tuple_t<M, S>);
  static_assert(xlite::expr::repeated_subexpressions(hana::type_c<M>) == hana::tuple_t<>);
  static_assert(xlite::expr::repeated_count_v<decltype(e)> == 2);
  // A const or reference type is the expression it names, for every walk.
  static_assert(xlite::expr::post_order(hana::type_c<const E&>) == xlite::expr::post_order(hana::type_c<E>));
  static_assert(xlite::expr::depth(hana::type_c<const E&>) == xlite::expr::depth_v<E>);
  CHECK(xlite::expr::shared_subexpression_count(e) == 2);
}

TEST_CASE("the lane type is the first element type that is not bool", "[graph]") {
  const tensor<bool> m{true, false, true};
  static_assert(std::is_same_v<xlite::expr::lane_type_t<decltype(m && (i > 1))>, std::int32_t>);
  static_assert(std::is_same_v<xlite::expr::lane_type_t<decltype((a > x) && m)>, float>);
  static_assert(std::is_same_v<xlite::expr::lane_type_t<decltype(!m)>, std::int32_t>); // all bool
  static_assert(xlite::expr::simd_evaluable_v<decltype((a > x) && m)>);
  static_assert(!xlite::expr::simd_evaluable_v<decltype(xlite::cast<double>(a) + 1.0)>);
  SUCCEED();
}

TEST_CASE("signature spells the structure", "[graph]") {
  static_assert(signature<decltype(a * x + b)>() == "add(mul(tensor<float32>,tensor<float32>),tensor<float32>)");
  static_assert(signature<decltype(xlite::where(a > 0.0f, a, 2.0f))>() ==
                "where(greater(tensor<float32>,scalar<float32>),tensor<float32>,scalar<float32>)");
  static_assert(signature<decltype(xlite::cast<double>(i))>() == "cast<float64>(tensor<int32>)");
  static_assert(signature<decltype(c<-42>)>() == "c<-42>");
  CHECK(signature<decltype(xlite::sqrt(a))>() == "sqrt(tensor<float32>)");
}

TEST_CASE("simplification: x * 1, 1 * x and x / 1 are x", "[graph][simplify]") {
  static_assert(same_type<decltype(a * c<1>), xlite::expr::tensor_ref<float>>);
  static_assert(same_type<decltype(c<1> * a), xlite::expr::tensor_ref<float>>);
  static_assert(same_type<decltype(a / c<1>), xlite::expr::tensor_ref<float>>);
  static_assert(same_type<decltype((a + b) * c<1>), decltype(a + b)>);
  // Only the constant 1: a run-time 1 is not known to the type.
  static_assert(!same_type<decltype(a * 1.0f), xlite::expr::tensor_ref<float>>);
  static_assert(!same_type<decltype(a * c<2>), xlite::expr::tensor_ref<float>>);
  const tensor<float> r = (a + b) * c<1>;
  CHECK(r == tensor<float>{8, 10, 12});
}

TEST_CASE("simplification: x - 0 and x + 0 are x where IEEE says so for every x, signed zeros included",
          "[graph][simplify]") {
  static_assert(same_type<decltype(a - c<0>), xlite::expr::tensor_ref<float>>);
  static_assert(same_type<decltype(i + c<0>), xlite::expr::tensor_ref<std::int32_t>>);
  static_assert(same_type<decltype(c<0> + i), xlite::expr::tensor_ref<std::int32_t>>);
  static_assert(same_type<decltype(i - c<0>), xlite::expr::tensor_ref<std::int32_t>>);
  static_assert(!same_type<decltype(a + c<0>), xlite::expr::tensor_ref<float>>);
  const tensor<float> minus_zero{-0.0f};
  const tensor<float> kept = minus_zero + c<0>;
  CHECK_FALSE(std::signbit(kept(0))); // computed, as IEEE says: +0.0
  const tensor<float> simplified = minus_zero - c<0>;
  CHECK(std::signbit(simplified(0)));
#if __cpp_nontype_template_args >= 201911L // floating-point constants (not clang 14)
  // x + (-0.0) is x; x - (-0.0) and x + (+0.0) are not, as -0.0 + +0.0 is +0.0.
  static_assert(same_type<decltype(a + c<-0.0f>), xlite::expr::tensor_ref<float>>);
  static_assert(same_type<decltype(c<-0.0f> + a), xlite::expr::tensor_ref<float>>);
  static_assert(!same_type<decltype(c<0.0f> + a), xlite::expr::tensor_ref<float>>);
  static_assert(!same_type<decltype(a - c<-0.0f>), xlite::expr::tensor_ref<float>>);
  const tensor<float> computed = minus_zero - c<-0.0f>;
  CHECK_FALSE(std::signbit(computed(0)));
  const tensor<float> dropped = minus_zero + c<-0.0f>;
  CHECK(std::signbit(dropped(0)));
#endif
}

TEST_CASE("simplification: x * 0 is not 0 for floating point", "[graph][simplify]") {
  static_assert(xlite::expr::is_node_v<decltype(a * c<0>)>);
  const tensor<float> special{std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  const tensor<float> r = special * c<0>;
  CHECK(std::isnan(r(0)));
  CHECK(std::isnan(r(1)));
}

TEST_CASE("simplification: -(-x) is x, cast to the same type is the operand", "[graph][simplify]") {
  static_assert(same_type<decltype(-(-a)), xlite::expr::tensor_ref<float>>);
  static_assert(same_type<decltype(-(-(a * x))), decltype(a * x)>);
  static_assert(same_type<decltype(xlite::cast<float>(a * x)), decltype(a * x)>);
  static_assert(!same_type<decltype(xlite::cast<double>(a)), xlite::expr::tensor_ref<float>>);
  SUCCEED();
}

TEST_CASE("constant folding: scalar-only subexpressions are computed when the expression is built",
          "[graph][simplify]") {
  static_assert(same_type<decltype(c<2> * c<3>), xlite::expr::scalar<int>>);
  CHECK((c<2> * c<3>).value == 6);
  const auto e = a * xlite::exp(xlite::scalar(0.0f));
  static_assert(same_type<decltype(e), decltype(a * xlite::scalar(1.0f))>);
  CHECK(std::get<1>(e.operands).value == 1.0f);
  CHECK(xlite::expr::signature<decltype(e)>() == "mul(tensor<float32>,scalar<float32>)");
  // A cast of a scalar is the converted scalar.
  const auto half = xlite::cast<float>(xlite::scalar(0.5));
  static_assert(same_type<decltype(half), xlite::expr::scalar<float>>);
  CHECK(half.value == 0.5f);
  static_assert(same_type<decltype(xlite::cast<double>(c<3>)), xlite::expr::scalar<double>>);
  CHECK(xlite::cast<bool>(c<2>).value);
}

TEST_CASE("common subexpressions: a repeated term over the same leaves is computed once", "[graph][cse]") {
  const auto shared = (a * x) + xlite::exp(a * x);
  const auto distinct = (a * x) + xlite::exp(b * x); // same type, other leaves
  static_assert(xlite::expr::repeated_count_v<decltype(shared)> == 1);
  static_assert(xlite::expr::repeated_count_v<decltype(distinct)> == 1);
  CHECK(xlite::expr::shared_subexpression_count(shared) == 1);
  CHECK(xlite::expr::shared_subexpression_count(distinct) == 0);
  // Sharing does not change values: both agree with the terms computed apart.
  const tensor<float> ax = a * x;
  const tensor<float> bx = b * x;
  const tensor<float> expected_shared = ax + xlite::exp(ax);
  const tensor<float> expected_distinct = ax + xlite::exp(bx);
  CHECK(tensor<float>(shared) == expected_shared);
  CHECK(tensor<float>(distinct) == expected_distinct);
  const auto nested = xlite::sqrt(a * x) + xlite::sqrt(a * x) * (a * x);
  CHECK(xlite::expr::shared_subexpression_count(nested) == 2);
  const tensor<float> sqrt_ax = xlite::sqrt(ax);
  const tensor<float> expected_nested = sqrt_ax + sqrt_ax * ax;
  CHECK(tensor<float>(nested) == expected_nested);
}
