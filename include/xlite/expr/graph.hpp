#pragma once

// The compile-time graph of a static expression: its subexpressions in evaluation order,
// the ones that occur more than once (common subexpressions), its node count, depth and a
// signature string, given to users as Boost.Hana tuples and constants. Users and tests can
// read all of it at compile time:
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

#include <boost/hana/fold_left.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "xlite/core/dtype.hpp"
#include "xlite/expr/node.hpp"

namespace xlite::expr {

namespace hana = boost::hana;

// ---- the walks, over plain type lists ----------------------------------------------------
//
// Post order and the repeated nodes are computed by pack expansion over type_list, and
// handed to users as hana tuples: Hana's algorithms (transform, flatten, fold_left with
// count and contains) instantiate a tuple and a closure at every step, and took a quarter
// of the time of compiling one expression's evaluation.

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

// The machinery behind post_order_t and repeated_t (not xlite::expr::detail, which would
// hide xlite::detail from this namespace).
namespace type_walks {

template <class... Lists>
struct concat {
  using type = type_list<>;
};
template <class... A>
struct concat<type_list<A...>> {
  using type = type_list<A...>;
};
template <class... A, class... B, class... Rest>
struct concat<type_list<A...>, type_list<B...>, Rest...> : concat<type_list<A..., B...>, Rest...> {};

// post_order_t's walk.
template <class E>
struct post_order_of {
  using type = type_list<E>;
};
template <op O, class T, class... Operands>
struct post_order_of<node<O, T, Operands...>>
    : concat<typename post_order_of<Operands>::type..., type_list<node<O, T, Operands...>>> {};
template <class To, class Operand>
struct post_order_of<cast_node<To, Operand>>
    : concat<typename post_order_of<Operand>::type, type_list<cast_node<To, Operand>>> {};

// The list with S appended unless it holds S already.
template <class List, class S>
struct append_new;
template <class... Ts, class S>
struct append_new<type_list<Ts...>, S> {
  using type = std::conditional_t<(std::is_same_v<S, Ts> || ...), type_list<Ts...>, type_list<Ts..., S>>;
};

// Found, then each of Candidates that Found does not hold yet, in order.
template <class Found, class Candidates>
struct without_repeats {
  using type = Found;
};
template <class Found, class S, class... Rest>
struct without_repeats<Found, type_list<S, Rest...>>
    : without_repeats<typename append_new<Found, S>::type, type_list<Rest...>> {};

template <class S, class... Ts>
inline constexpr std::size_t count_of_v = (std::size_t{std::is_same_v<S, Ts>} + ... + 0);

// The node types that occur more than once in a post order, each once, in that order.
template <class PostOrder>
struct repeated_nodes;
template <class... Ts>
struct repeated_nodes<type_list<Ts...>>
    : without_repeats<type_list<>, typename concat<std::conditional_t<is_node_v<Ts> && (count_of_v<Ts, Ts...> > 1),
                                                                      type_list<Ts>, type_list<>>...>::type> {};

template <class... Ts>
constexpr auto as_hana_tuple(type_list<Ts...>) {
  return hana::tuple_t<Ts...>;
}

} // namespace type_walks

// Every subexpression of E, operands before the nodes that use them, E last.
template <class E>
using post_order_t = typename type_walks::post_order_of<std::remove_cvref_t<E>>::type;

// The node types that occur more than once in E, each once, by first occurrence.
template <class E>
using repeated_t = typename type_walks::repeated_nodes<post_order_t<E>>::type;

// ---- what users read --------------------------------------------------------------------

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
constexpr auto post_order(hana::basic_type<E>) {
  return type_walks::as_hana_tuple(post_order_t<E>{});
}

template <class E>
inline constexpr std::size_t node_count_v = post_order_t<E>::size;

template <class E>
constexpr std::size_t depth(hana::basic_type<E>) {
  return 1 + hana::fold_left(operand_types(hana::type_c<std::remove_cvref_t<E>>), std::size_t{0},
                             [](std::size_t deepest, auto operand) { return std::max(deepest, depth(operand)); });
}

template <class E>
inline constexpr std::size_t depth_v = depth(hana::type_c<E>);

// The node types that occur more than once in E, in evaluation order: the candidates for
// common-subexpression elimination (the evaluator shares those whose leaves are the same).
template <class E>
constexpr auto repeated_subexpressions(hana::basic_type<E>) {
  return type_walks::as_hana_tuple(repeated_t<E>{});
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
