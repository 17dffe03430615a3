#pragma once

// The functions and operators that build static expressions: a + b, exp(x), where(c, a, b),
// cast<float>(x), ... Each one turns its arguments into operands, works out the element
// type (expr/element_type.hpp) and the broadcast shape, applies the simplification rules
// that keep IEEE semantics, folds scalar-only subexpressions, and returns a node. Nothing
// is computed on tensors here.

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/expr/element_type.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/kernels/elementwise.hpp"

namespace xlite::expr {

template <class T>
inline constexpr bool is_tensor_v = false;
template <class T>
inline constexpr bool is_tensor_v<tensor<T>> = true;

// What the builders accept: expressions, tensors and plain C++ numbers; at least one
// argument of a call must be an expression or a tensor, so that xlite::exp(2.0) is not
// an xlite function (std::exp is).
template <class A>
concept tensor_like = expression<A> || is_tensor_v<std::remove_cvref_t<A>>;
template <class A>
concept operand = tensor_like<A> || is_plain_scalar_v<A>;
template <class... A>
concept builds_expression = (operand<A> && ...) && (tensor_like<A> || ...);

template <class T>
tensor_ref<T> to_operand(const tensor<T>& t) {
  return {t.data(), shape_ref::to(t.shape())};
}
template <class T>
tensor_owner<T> to_operand(tensor<T>&& t) {
  return tensor_owner<T>(std::move(t));
}
// A named leaf over memory (`auto x = xlite::adapt(c);`) is referred to, as a named tensor
// is, and as xtensor's expressions refer to a named adaptor: a node over it points to the
// leaf's shape instead of copying 72 bytes into itself and every node above. A temporary
// leaf is copied. (Cold, on 256 floats, e2 and e3 took 50-140 ns less a call.)
template <class E>
inline constexpr bool is_named_tensor_ref_v = false;
template <class T>
inline constexpr bool is_named_tensor_ref_v<tensor_ref<T>&> = true;
template <class T>
inline constexpr bool is_named_tensor_ref_v<const tensor_ref<T>&> = true;

template <expression E>
std::remove_cvref_t<E> to_operand(E&& e) {
  if constexpr (is_named_tensor_ref_v<E>) {
    return {e.data, shape_ref::to(e.shape)};
  } else {
    return std::forward<E>(e);
  }
}
template <class S>
requires is_plain_scalar_v<S> scalar<S> to_operand(S s) { return {s}; }

// Within one call of a builder: an expression argument itself, by reference, else the
// operand a tensor, a named leaf or a number makes. Builders pass operands on by reference,
// so that a node copies each operand once, into itself: every copy of a subexpression copies
// each of its shapes (expr/shape_ref.hpp), which made most of the code that builds E3.
template <class A>
decltype(auto) operand_of(A&& a) {
  if constexpr (expression<A> && !is_named_tensor_ref_v<A>) {
    return std::forward<A>(a);
  } else {
    return to_operand(std::forward<A>(a));
  }
}

// A scalar operand takes the element type T of the expression it joins; any other is
// passed on as it is.
template <class T, class E>
decltype(auto) adopt(E&& operand) {
  using O = std::remove_cvref_t<E>;
  if constexpr (is_scalar_leaf_v<O> && !std::is_void_v<T>) {
    if constexpr (is_constant_v<O>) {
      return scalar<T>{static_cast<T>(O::value)};
    } else {
      return scalar<T>{static_cast<T>(operand.value)};
    }
  } else if constexpr (!std::is_void_v<T> && !std::is_same_v<typename O::value_type, T>) {
    // Only where check_operand_type has failed, and the program with it: the operand read
    // as T keeps that sentence the only error (the loop over a float and an int batch added
    // six more, 130 lines).
    shape_ref s = carried_shape(operand);
    return cast_node<T, O>{std::forward<E>(operand), std::move(s)};
  } else {
    return std::forward<E>(operand);
  }
}

template <class T, class E>
using adopted_t = std::remove_cvref_t<decltype(adopt<T>(std::declval<E>()))>;

template <class E>
constexpr bool is_constant_equal(double v) {
  if constexpr (is_constant_v<E>) {
    return static_cast<double>(E::value) == v;
  } else {
    return false;
  }
}

// Whether E is a constant c with x + c == x (Subtracted: x - c == x) for every x of type T,
// signed zeros included: 0 for integers; for floating point only -0.0 (x - c: +0.0), as
// -0.0 + +0.0 is +0.0.
template <class E, class T, bool Subtracted>
constexpr bool adds_nothing() {
  if constexpr (!is_constant_v<E>) {
    return false;
  } else if constexpr (std::is_floating_point_v<T>) {
    const auto c = static_cast<double>(E::value);
    const bool negative = std::bit_cast<std::uint64_t>(c) >> 63 != 0;
    return c == 0 && negative != Subtracted;
  } else {
    return static_cast<double>(E::value) == 0;
  }
}

// Whether op O on an expression E and a constant C makes a valid node of E's element type,
// so that a rule may give back E: its type a number (not bool, not bfloat16) that the
// constant does not promote (c<1.0> on integers does), and floating point for a division.
// Where not, the node is built, and its check says what is wrong (i / c<1> as i / c<2>).
template <op O, class E, class C>
constexpr bool rule_keeps_type() {
  if constexpr (is_scalar_leaf_v<E> || !is_constant_v<C>) {
    return false;
  } else {
    using T = typename E::value_type;
    return !std::is_same_v<T, bool> && dtype_of_v<T> != dtype::bf16 &&
           promote_with_scalar(dtype_of_v<T>, scalar_category_v<typename C::value_type>) == dtype_of_v<T> &&
           (O != op::div || std::is_floating_point_v<T>);
  }
}

template <class E>
auto scalar_value(const E& e) {
  if constexpr (is_constant_v<E>) {
    return E::value;
  } else {
    return e.value;
  }
}

// Whether the operand shapes (at least one) are all the first, the common case. Out of
// line, as broadcast_shapes_of: compiled once per file rather than in every node's builder.
[[gnu::noinline]] inline bool all_same_shape(std::span<const xlite::shape* const> shapes) {
  for (const xlite::shape* s : shapes.subspan(1)) {
    if (!(*s == *shapes[0])) return false;
  }
  return true;
}

// The broadcast shape of operand shapes that differ.
[[gnu::noinline]] inline shape_ref broadcast_shapes_of(op o, std::span<const xlite::shape* const> shapes) {
  return shape_ref(broadcast_shapes(shapes, name(o)));
}

// The operands' broadcast shape; scalars (rank 0) change nothing. Where the shapes agree, the
// node carries the first operand's shape as that operand does: a node over tensors refers
// to the shape they refer to (expr/shape_ref.hpp). The shape_ref is copied here, inline: a
// shape_ref returned from a call was stored there and copied here in loads of other
// widths, each waiting for the stores (building and evaluating e3 on 16 floats took 89 ns
// that way, 67 this way).
template <class... E>
shape_ref broadcast_all(op o, const E&... operands) {
  constexpr std::size_t count = (std::size_t{!is_scalar_leaf_v<E>} + ... + 0);
  if constexpr (count == 0) {
    return shape_ref(xlite::shape());
  } else {
    std::array<const xlite::shape*, count> shapes{};
    const shape_ref* carried = nullptr;
    std::size_t k = 0;
    const auto add = [&]<class S>(const S& operand) {
      if constexpr (!is_scalar_leaf_v<S>) {
        if constexpr (std::is_same_v<decltype(operand.shape), shape_ref>) {
          if (k == 0) carried = &operand.shape;
        }
        shapes[k++] = &shape_of(operand);
      }
    };
    (add(operands), ...);
    if (count > 1 && !all_same_shape(shapes)) return broadcast_shapes_of(o, shapes);
    return carried != nullptr ? *carried : shape_ref(*shapes[0]);
  }
}

// Throws unless an integer scalar operand fits the integer element type T it takes on: u8 < 256
// would otherwise compare with 0 (256 wrapped), and clamp(u8, -1, 100) clamp to 255. PyTorch
// refuses such a number too ("value cannot be converted to type uint8_t without overflow").
template <op O, class T, class E>
void check_scalar_fits(const E& operand) {
  using S = std::remove_cvref_t<E>;
  if constexpr (is_scalar_leaf_v<S> && std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using V = typename S::value_type;
    if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
      // Widened first: in_range takes no character types, and a char would print as a letter.
      using wide = std::conditional_t<std::is_signed_v<V>, std::int64_t, std::uint64_t>;
      const auto value = static_cast<wide>(scalar_value(operand));
      if (!std::in_range<T>(value)) {
        throw value_error(xlite::detail::message(name(O), ": the number ", value, " does not fit ", name(dtype_of_v<T>),
                                                 ", the element type of the expression it joins: cast the expression "
                                                 "first, e.g. xlite::cast<std::int64_t>(x)"));
      }
    }
  }
}

template <op O, class... A>
auto make_node(A&&... operands);

// a < b and the other orderings of two bool operands, where false < true as in C++, NumPy
// and PyTorch: written with the logical ops, whose operands are masks as theirs are.
template <op O, class A, class B>
auto ordered_booleans(A&& a, B&& b) {
  if constexpr (O == op::less) {
    return make_node<op::logical_and>(make_node<op::logical_not>(std::forward<A>(a)), std::forward<B>(b));
  } else if constexpr (O == op::greater) {
    return make_node<op::logical_and>(std::forward<A>(a), make_node<op::logical_not>(std::forward<B>(b)));
  } else if constexpr (O == op::less_equal) {
    return make_node<op::logical_or>(make_node<op::logical_not>(std::forward<A>(a)), std::forward<B>(b));
  } else {
    return make_node<op::logical_or>(std::forward<A>(a), make_node<op::logical_not>(std::forward<B>(b)));
  }
}

template <op O>
inline constexpr bool is_ordering_v =
    O == op::less || O == op::less_equal || O == op::greater || O == op::greater_equal;

// The node for op O over operands that are already xlite operands.
template <op O, class... A>
auto make_node(A&&... operands) {
  constexpr dtype_rule rule = info(O).rule;
  if constexpr ((is_scalar_leaf_v<std::remove_cvref_t<A>> && ...)) {
    // Constant folding: a scalar-only subexpression is computed once, here.
    using common = std::common_type_t<typename std::remove_cvref_t<A>::value_type...>;
    using computed =
        std::conditional_t<rule == dtype_rule::to_floating && !std::is_floating_point_v<common>, double, common>;
    const auto value = kernels::elementwise<O>{}(static_cast<computed>(scalar_value(operands))...);
    return scalar<std::remove_cvref_t<decltype(value)>>{value};
  } else if constexpr (rule == dtype_rule::promote_data) { // where(condition, a, b)
    return make_where(std::forward<A>(operands)...);
  } else if constexpr (is_ordering_v<O> &&
                       std::is_same_v<typename common_element<O, std::remove_cvref_t<A>...>::type, bool>) {
    // A mistake (mask < x) is reported under O; the operands, read as bool, then add no error.
    (check_operand_type<O, bool, std::remove_cvref_t<A>>(), ...);
    return ordered_booleans<O>(adopt<bool>(std::forward<A>(operands))...);
  } else {
    using T = typename common_element<O, std::remove_cvref_t<A>...>::type;
    (check_operand_type<O, T, std::remove_cvref_t<A>>(), ...);
    (check_scalar_fits<O, T>(operands), ...);
    static_cast<void>(sizeof(checks::not_bfloat16<O, T>));
    if constexpr (rule == dtype_rule::to_boolean &&
                  (O == op::logical_and || O == op::logical_or || O == op::logical_not)) {
      static_cast<void>(sizeof(checks::needs_booleans<O, T>));
    } else if constexpr (rule == dtype_rule::to_floating) {
      static_cast<void>(sizeof(checks::needs_floating_point<O, T>));
    } else if constexpr (rule == dtype_rule::promote) {
      static_cast<void>(sizeof(checks::needs_numbers<O, T>));
    }
    using R = std::conditional_t<rule == dtype_rule::to_boolean, bool, T>;
    shape_ref s = broadcast_all(O, operands...);
    return node<O, R, adopted_t<T, A>...>{{adopt<T>(std::forward<A>(operands))...}, std::move(s)};
  }
}

// where's element type: the branches' own, or with two numbers (where(c, 1.0f, 0.0f)) theirs
// as C++ combines them.
template <class A, class B>
using where_element_t = typename std::conditional_t<std::is_void_v<typename common_element<op::where, A, B>::type>,
                                                    std::common_type<typename A::value_type, typename B::value_type>,
                                                    common_element<op::where, A, B>>::type;

template <class C, class A, class B>
auto make_where(C&& condition, A&& a, B&& b) {
  using T = where_element_t<std::remove_cvref_t<A>, std::remove_cvref_t<B>>;
  static_cast<void>(sizeof(checks::supported_element<T>)); // where(c, 1u, 2u): no unsigned int tensors
  using Condition = std::remove_cvref_t<C>;
  check_operand_type<op::where, T, std::remove_cvref_t<A>>();
  check_operand_type<op::where, T, std::remove_cvref_t<B>>();
  check_scalar_fits<op::where, T>(a);
  check_scalar_fits<op::where, T>(b);
  static_cast<void>(sizeof(checks::needs_booleans<op::where, typename Condition::value_type>));
  shape_ref s = broadcast_all(op::where, condition, a, b);
  return node<op::where, T, Condition, adopted_t<T, A>, adopted_t<T, B>>{
      {std::forward<C>(condition), adopt<T>(std::forward<A>(a)), adopt<T>(std::forward<B>(b))}, std::move(s)};
}

// x * 1, x / 1, x - 0 and x + 0 are x, where IEEE gives x for every x: for floating point,
// x - (+0.0) and x + (-0.0) only (-0.0 + +0.0 is +0.0). No rule drops an operand that could
// be NaN or Inf (x * 0 stays), nor turns an error into a program (rule_keeps_type).
template <op O, class A, class B>
auto binary(A&& a, B&& b) {
  decltype(auto) x = operand_of(std::forward<A>(a));
  decltype(auto) y = operand_of(std::forward<B>(b));
  using X = std::remove_cvref_t<decltype(x)>;
  using Y = std::remove_cvref_t<decltype(y)>;
  if constexpr (rule_keeps_type<O, X, Y>()) {
    using T = typename X::value_type;
    if constexpr ((O == op::mul || O == op::div) && is_constant_equal<Y>(1)) {
      return x;
    } else if constexpr ((O == op::add || O == op::sub) && adds_nothing<Y, T, O == op::sub>()) {
      return x;
    } else {
      return make_node<O>(std::forward<decltype(x)>(x), std::forward<decltype(y)>(y));
    }
  } else if constexpr (rule_keeps_type<O, Y, X>() && O != op::div && O != op::sub) {
    using T = typename Y::value_type;
    if constexpr ((O == op::mul && is_constant_equal<X>(1)) || (O == op::add && adds_nothing<X, T, false>())) {
      return y;
    } else {
      return make_node<O>(std::forward<decltype(x)>(x), std::forward<decltype(y)>(y));
    }
  } else {
    return make_node<O>(std::forward<decltype(x)>(x), std::forward<decltype(y)>(y));
  }
}

template <op O, class A>
auto unary(A&& a) {
  decltype(auto) x = operand_of(std::forward<A>(a));
  using X = std::remove_cvref_t<decltype(x)>;
  if constexpr (O == op::neg && is_node_v<X>) {
    if constexpr (X::kind == op::neg) {
      return std::get<0>(x.operands); // -(-x) is x
    } else {
      return make_node<O>(std::forward<decltype(x)>(x));
    }
  } else {
    return make_node<O>(std::forward<decltype(x)>(x));
  }
}

template <op O, class... A>
auto nary(A&&... a) {
  return make_node<O>(operand_of(std::forward<A>(a))...);
}

} // namespace xlite::expr

namespace xlite {

// Compile-time constants, which the simplification rules can see: x * xlite::c<1> is x.
template <auto V>
inline constexpr expr::constant<V> c{};

// A run-time scalar as an expression leaf (plain numbers work too: x * 2.0f).
template <class T>
requires std::is_arithmetic_v<T> expr::scalar<T> scalar(T value) { return {value}; }

#define XLITE_BINARY_OPERATOR(symbol, op_name)                                                                         \
  template <class A, class B>                                                                                          \
  requires expr::builds_expression<A, B>                                                                               \
  auto operator symbol(A&& a, B&& b) { return expr::binary<op::op_name>(std::forward<A>(a), std::forward<B>(b)); }
XLITE_BINARY_OPERATOR(+, add)
XLITE_BINARY_OPERATOR(-, sub)
XLITE_BINARY_OPERATOR(*, mul)
XLITE_BINARY_OPERATOR(/, div)
XLITE_BINARY_OPERATOR(<, less)
XLITE_BINARY_OPERATOR(<=, less_equal)
XLITE_BINARY_OPERATOR(>, greater)
XLITE_BINARY_OPERATOR(>=, greater_equal)
XLITE_BINARY_OPERATOR(&&, logical_and)
XLITE_BINARY_OPERATOR(||, logical_or)
#undef XLITE_BINARY_OPERATOR

template <class A>
requires expr::builds_expression<A>
auto operator-(A&& a) { return expr::unary<op::neg>(std::forward<A>(a)); }
template <class A>
requires expr::builds_expression<A>
auto operator!(A&& a) { return expr::unary<op::logical_not>(std::forward<A>(a)); }

// Named functions, one per op. == and != compare whole tensors (as in xtensor); their
// element-wise forms are equal() and not_equal().
#define XLITE_NAMED_FUNCTION(function, op_name, ...)                                                                   \
  template <class... A>                                                                                                \
  requires(sizeof...(A) == info(op::op_name).arity) && expr::builds_expression<A...> auto function(A&&... a) {         \
    if constexpr (sizeof...(A) == 1) {                                                                                 \
      return expr::unary<op::op_name>(std::forward<A>(a)...);                                                          \
    } else if constexpr (sizeof...(A) == 2) {                                                                          \
      return expr::binary<op::op_name>(std::forward<A>(a)...);                                                         \
    } else {                                                                                                           \
      return expr::nary<op::op_name>(std::forward<A>(a)...);                                                           \
    }                                                                                                                  \
  }
XLITE_NAMED_FUNCTION(add, add)
XLITE_NAMED_FUNCTION(subtract, sub)
XLITE_NAMED_FUNCTION(multiply, mul)
XLITE_NAMED_FUNCTION(divide, div)
XLITE_NAMED_FUNCTION(negative, neg)
XLITE_NAMED_FUNCTION(equal, equal)
XLITE_NAMED_FUNCTION(not_equal, not_equal)
XLITE_NAMED_FUNCTION(less, less)
XLITE_NAMED_FUNCTION(less_equal, less_equal)
XLITE_NAMED_FUNCTION(greater, greater)
XLITE_NAMED_FUNCTION(greater_equal, greater_equal)
XLITE_NAMED_FUNCTION(logical_and, logical_and)
XLITE_NAMED_FUNCTION(logical_or, logical_or)
XLITE_NAMED_FUNCTION(logical_not, logical_not)
XLITE_NAMED_FUNCTION(where, where)
XLITE_NAMED_FUNCTION(fma, fma)
XLITE_NAMED_FUNCTION(min, minimum)
XLITE_NAMED_FUNCTION(max, maximum)
XLITE_NAMED_FUNCTION(clamp, clamp)
XLITE_NAMED_FUNCTION(pow, pow)
XLITE_NAMED_FUNCTION(abs, abs)
XLITE_NAMED_FUNCTION(exp, exp)
XLITE_NAMED_FUNCTION(log, log)
XLITE_NAMED_FUNCTION(log1p, log1p)
XLITE_NAMED_FUNCTION(sqrt, sqrt)
XLITE_NAMED_FUNCTION(rsqrt, rsqrt)
XLITE_NAMED_FUNCTION(tanh, tanh)
XLITE_NAMED_FUNCTION(sigmoid, sigmoid)
XLITE_NAMED_FUNCTION(relu, relu)
XLITE_NAMED_FUNCTION(gelu, gelu)
XLITE_NAMED_FUNCTION(sin, sin)
XLITE_NAMED_FUNCTION(cos, cos)
XLITE_NAMED_FUNCTION(floor, floor)
XLITE_NAMED_FUNCTION(ceil, ceil)
XLITE_NAMED_FUNCTION(round, round)
#undef XLITE_NAMED_FUNCTION

// cast<To>(x): element-wise conversion, as static_cast. A cast to x's own type is x; of a
// scalar, the converted scalar (constant folding, as make_node's).
template <class To, class A>
requires expr::builds_expression<A>
auto cast(A&& a) {
  static_cast<void>(sizeof(expr::checks::supported_element<To>));
  auto x = expr::to_operand(std::forward<A>(a));
  using X = decltype(x);
  if constexpr (std::is_same_v<typename X::value_type, To>) {
    return x;
  } else if constexpr (expr::is_scalar_leaf_v<X> && std::is_arithmetic_v<To>) {
    return expr::scalar<To>{kernels::detail::scalar_cast<To>(expr::scalar_value(x))};
  } else {
    expr::shape_ref s = expr::carried_shape(x);
    return expr::cast_node<To, X>{std::move(x), std::move(s)};
  }
}

} // namespace xlite

namespace xlite::expr {
// Argument-dependent lookup finds the builders for expressions of this namespace too.
using xlite::operator+, xlite::operator-, xlite::operator*, xlite::operator/, xlite::operator<, xlite::operator<=,
    xlite::operator>, xlite::operator>=, xlite::operator&&, xlite::operator||, xlite::operator!;
using xlite::abs, xlite::add, xlite::cast, xlite::ceil, xlite::clamp, xlite::cos, xlite::divide, xlite::equal,
    xlite::exp, xlite::floor, xlite::fma, xlite::gelu, xlite::greater, xlite::greater_equal, xlite::less,
    xlite::less_equal, xlite::log, xlite::log1p, xlite::logical_and, xlite::logical_not, xlite::logical_or, xlite::max,
    xlite::min, xlite::multiply, xlite::negative, xlite::not_equal, xlite::pow, xlite::relu, xlite::round, xlite::rsqrt,
    xlite::sigmoid, xlite::sin, xlite::sqrt, xlite::subtract, xlite::tanh, xlite::where;
} // namespace xlite::expr
