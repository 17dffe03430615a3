#pragma once

// The compile-time graph of a static expression, with Boost.Hana: its subexpressions in
// evaluation order, the ones that occur more than once (common subexpressions), its node
// count, depth and a signature string. Users and tests can read all of it at compile time:
//
//   static_assert(xlite::expr::node_count_v<decltype(a * x + b)> == 5);
//   static_assert(xlite::expr::signature<decltype(a * x + b)>() ==
//   "add(mul(tensor<float32>,tensor<float32>),tensor<float32>)");
//
// Hana enters xlite here and nowhere else.

#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include <boost/hana/append.hpp>
#include <boost/hana/contains.hpp>
#include <boost/hana/count.hpp>
#include <boost/hana/flatten.hpp>
#include <boost/hana/fold_left.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/transform.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "xlite/core/dtype.hpp"
#include "xlite/expr/node.hpp"

namespace xlite::expr {

namespace hana = boost::hana;

// The operand types of E, as a hana::tuple of types.
template <class E>
constexpr auto operand_types(hana::basic_type<E>) {
  return hana::make_tuple();
}
template <op O, class T, class... Operands>
constexpr auto operand_types(hana::basic_type<node<O, T, Operands...>>) {
  return hana::tuple_t<Operands...>;
}
template <class To, class Operand>
constexpr auto operand_types(hana::basic_type<cast_node<To, Operand>>) {
  return hana::tuple_t<Operand>;
}

// Every subexpression of E, operands before the nodes that use them, E last.
template <class E>
constexpr auto post_order(hana::basic_type<E> e) {
  return hana::append(
      hana::flatten(hana::transform(operand_types(e), [](auto operand) { return post_order(operand); })), e);
}

template <class E>
inline constexpr std::size_t node_count_v =
    decltype(hana::length(post_order(hana::type_c<std::remove_cvref_t<E>>)))::value;

template <class E>
constexpr std::size_t depth(hana::basic_type<E> e) {
  return 1 + hana::fold_left(operand_types(e), std::size_t{0},
                             [](std::size_t deepest, auto operand) { return std::max(deepest, depth(operand)); });
}

template <class E>
inline constexpr std::size_t depth_v = depth(hana::type_c<std::remove_cvref_t<E>>);

// The node types that occur more than once in E, in evaluation order: the candidates for
// common-subexpression elimination (the evaluator shares those whose leaves are the same).
template <class E>
constexpr auto repeated_subexpressions(hana::basic_type<E> e) {
  constexpr auto all = post_order(e);
  return hana::fold_left(all, hana::make_tuple(), [](auto found, auto sub) {
    using S = typename decltype(sub)::type;
    if constexpr (is_node_v<S> && decltype(hana::count(all, sub))::value > 1 &&
                  !decltype(hana::contains(found, sub))::value) {
      return hana::append(found, sub);
    } else {
      return found;
    }
  });
}

// ---- signature ------------------------------------------------------------------------

namespace signature_text {

// A string built at compile time.
template <std::size_t N>
struct fixed_string {
  std::array<char, N> chars{};
  constexpr std::string_view view() const { return {chars.data(), N}; }
};

template <std::size_t N>
constexpr auto literal(const char (&text)[N]) {
  fixed_string<N - 1> s;
  std::copy_n(text, N - 1, s.chars.begin());
  return s;
}

template <std::size_t A, std::size_t B>
constexpr fixed_string<A + B> operator+(const fixed_string<A>& a, const fixed_string<B>& b) {
  fixed_string<A + B> s;
  std::copy_n(a.chars.begin(), A, s.chars.begin());
  std::copy_n(b.chars.begin(), B, s.chars.begin() + A);
  return s;
}

template <const std::string_view& Text>
constexpr auto from_view() {
  fixed_string<Text.size()> s;
  std::copy_n(Text.begin(), Text.size(), s.chars.begin());
  return s;
}

template <dtype D>
inline constexpr std::string_view short_name = name(D);

template <op O>
inline constexpr std::string_view op_name = name(O);

// The decimal digits of an integer constant.
template <auto V>
constexpr auto digits() {
  constexpr auto count = [] {
    std::size_t n = V < 0 ? 2 : 1;
    for (auto v = V < 0 ? -V : V; v >= 10; v /= 10) ++n;
    return n;
  }();
  fixed_string<count> s;
  auto v = V < 0 ? -V : V;
  for (std::size_t i = count; i-- > (V < 0 ? 1 : 0);) {
    s.chars[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  if (V < 0) s.chars[0] = '-';
  return s;
}

template <class E>
struct signature_of;

template <class T>
struct signature_of<tensor_ref<T>> {
  static constexpr auto value = literal("tensor<") + from_view<short_name<dtype_of_v<T>>>() + literal(">");
};
template <class T>
struct signature_of<tensor_owner<T>> : signature_of<tensor_ref<T>> {};
template <class T>
struct signature_of<scalar<T>> {
  static constexpr auto value = literal("scalar<") + from_view<short_name<dtype_of_v<T>>>() + literal(">");
};
template <auto V>
struct signature_of<constant<V>> {
  static constexpr auto value = [] {
    if constexpr (std::is_integral_v<decltype(V)>) {
      return literal("c<") + digits<V>() + literal(">");
    } else {
      return literal("c<") + from_view<short_name<dtype_of_v<decltype(V)>>>() + literal(">");
    }
  }();
};

template <class E>
requires is_external_leaf_v<E>
struct signature_of<E> {
  static constexpr auto value =
      literal("leaf<") + from_view<short_name<dtype_of_v<typename E::value_type>>>() + literal(">");
};

template <class First, class... Rest>
constexpr auto joined() {
  return (signature_of<First>::value + ... + (literal(",") + signature_of<Rest>::value));
}

template <op O, class T, class... Operands>
struct signature_of<node<O, T, Operands...>> {
  static constexpr auto value = from_view<op_name<O>>() + literal("(") + joined<Operands...>() + literal(")");
};
template <class To, class Operand>
struct signature_of<cast_node<To, Operand>> {
  static constexpr auto value = literal("cast<") + from_view<short_name<dtype_of_v<To>>>() + literal(">(") +
                                signature_of<Operand>::value + literal(")");
};

} // namespace signature_text

// The structure of E as text: op names, then operands in parentheses; leaves by kind and
// dtype, integral constants by value.
template <class E>
constexpr std::string_view signature() {
  return signature_text::signature_of<std::remove_cvref_t<E>>::value.view();
}

} // namespace xlite::expr
