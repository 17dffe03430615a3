#pragma once

// The nodes of a static expression. A node holds only its operands and, for leaves, where
// the data is: no evaluation logic lives here (that is expr/evaluate.hpp), and no operator
// overloads (expr/functions.hpp). Operands are held by value; a leaf refers to a tensor's
// memory (tensor_ref) or, when the tensor was a temporary, owns it (tensor_owner), so
// `auto e = x + make_tensor();` does not dangle. A leaf over an lvalue tensor does: keep
// the tensor alive while the expression lives, or call eval(e). Leaves and nodes carry their
// shape as a shape_ref (expr/shape_ref.hpp): a pointer to a tensor's shape, or to a named
// leaf's (`auto x = xlite::adapt(c);`), where one has it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/expr/shape_ref.hpp"
#include "xlite/expr/tensor.hpp"

namespace xlite::expr {

// A leaf over contiguous row-major memory it does not own: an xlite::tensor or an xtensor
// container (xlite::adapt).
template <class T>
struct tensor_ref {
  using value_type = T;
  const T* data;
  shape_ref shape;
};

// A leaf that owns a tensor that was a temporary when the expression was built. Shared, so
// copying the expression does not copy the data.
template <class T>
struct tensor_owner {
  using value_type = T;
  std::shared_ptr<const tensor<T>> held;
  shape_ref shape;
  const T* data;

  explicit tensor_owner(tensor<T>&& t)
      : held(std::make_shared<const tensor<T>>(std::move(t))), shape(shape_ref::to(held->shape())), data(held->data()) {
  }
};

// A run-time scalar, broadcast to every element.
template <class T>
struct scalar {
  using value_type = T;
  T value;
  static constexpr xlite::shape shape{}; // rank 0: broadcast against anything
};

// A compile-time constant: xlite::c<1>, or xlite::c<0.5f> where the compiler takes floating-point
// template arguments (GCC 11, Clang 18; not Clang 14). It takes the element type of the
// expression it joins, and lets the simplification rules see its value (x * c<1> is x).
template <auto V>
struct constant {
  using value_type = decltype(V);
  static constexpr auto value = V;
  static constexpr xlite::shape shape{};
};

// f(std::get<I>(operands)...) for a node's operands (or any tuple): std::apply's effect in two
// functions rather than its four layers (apply, __apply_impl, __invoke, __invoke_impl), which
// g++ compiled for every node of an expression, for each way the node is evaluated: 290 of
// the 1,678 functions in a file that evaluates E3.
template <class F, class Tuple, std::size_t... I>
constexpr decltype(auto) unpack_indices(F& f, Tuple&& operands, std::index_sequence<I...>) {
  return f(std::get<I>(static_cast<Tuple&&>(operands))...);
}
template <class F, class Tuple>
constexpr decltype(auto) unpack(F&& f, Tuple&& operands) {
  return unpack_indices(f, static_cast<Tuple&&>(operands),
                        std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<Tuple>>>{});
}

// An element-wise op of the op set applied to operands, of result element type T.
template <op O, class T, class... Operands>
struct node {
  static_assert(info(O).kind == op_kind::elementwise && info(O).arity == sizeof...(Operands));
  using value_type = T;
  static constexpr op kind = O;
  std::tuple<Operands...> operands;
  shape_ref shape;
};

// cast<To>(operand).
template <class To, class Operand>
struct cast_node {
  using value_type = To;
  Operand operand;
  shape_ref shape;
};

// The shape of any expression: leaves, nodes, scalars, deferred and lazy leaves alike.
template <class E>
const xlite::shape& shape_of(const E& e) noexcept {
  return e.shape;
}

// E's shape as a node over E carries it: the same reference where E holds a shape_ref, else
// a copy (a deferred or lazy leaf holds a shape of its own).
template <class E>
shape_ref carried_shape(const E& e) noexcept {
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(e.shape)>, shape_ref>) {
    return e.shape;
  } else {
    return shape_ref(e.shape);
  }
}

// A deferred leaf (expr/deferred.hpp): computed as a whole when its expression is
// evaluated, as matmul is.
template <class E>
inline constexpr bool is_deferred_v = requires { E::is_deferred; };

// A leaf that a later layer computes: a lazy tensor in a static expression
// (lazy/expression.hpp). It has value_type, shape and is_external_leaf; the static layer
// builds and simplifies expressions over it, and never evaluates them.
template <class E>
inline constexpr bool is_external_leaf_v = requires {
  E::is_external_leaf;
};

template <class E>
inline constexpr bool is_leaf_v = is_deferred_v<E> || is_external_leaf_v<E>;
template <class T>
inline constexpr bool is_leaf_v<tensor_ref<T>> = true;
template <class T>
inline constexpr bool is_leaf_v<tensor_owner<T>> = true;
template <class T>
inline constexpr bool is_leaf_v<scalar<T>> = true;
template <auto V>
inline constexpr bool is_leaf_v<constant<V>> = true;

template <class E>
inline constexpr bool is_node_v = false;
template <op O, class T, class... Operands>
inline constexpr bool is_node_v<node<O, T, Operands...>> = true;
template <class To, class Operand>
inline constexpr bool is_node_v<cast_node<To, Operand>> = true;

// Anything that can stand in an expression tree.
template <class E>
concept expression = is_leaf_v<std::remove_cvref_t<E>> || is_node_v<std::remove_cvref_t<E>>;

template <class E>
inline constexpr bool is_scalar_leaf_v = false;
template <class T>
inline constexpr bool is_scalar_leaf_v<scalar<T>> = true;
template <auto V>
inline constexpr bool is_scalar_leaf_v<constant<V>> = true;

template <class E>
inline constexpr bool is_constant_v = false;
template <auto V>
inline constexpr bool is_constant_v<constant<V>> = true;

template <class E>
inline constexpr bool is_memory_leaf_v = false;
template <class T>
inline constexpr bool is_memory_leaf_v<tensor_ref<T>> = true;
template <class T>
inline constexpr bool is_memory_leaf_v<tensor_owner<T>> = true;

// How many external leaves E holds.
template <class E>
struct external_leaf_count : std::integral_constant<std::size_t, is_external_leaf_v<E>> {};
template <op O, class T, class... Operands>
struct external_leaf_count<node<O, T, Operands...>>
    : std::integral_constant<std::size_t, (external_leaf_count<Operands>::value + ... + 0)> {};
template <class To, class Operand>
struct external_leaf_count<cast_node<To, Operand>> : external_leaf_count<Operand> {};
template <class E>
inline constexpr std::size_t external_leaf_count_v = external_leaf_count<std::remove_cvref_t<E>>::value;

// How many deferred leaves E holds.
template <class E>
struct deferred_count : std::integral_constant<std::size_t, is_deferred_v<E>> {};
template <op O, class T, class... Operands>
struct deferred_count<node<O, T, Operands...>>
    : std::integral_constant<std::size_t, (deferred_count<Operands>::value + ... + 0)> {};
template <class To, class Operand>
struct deferred_count<cast_node<To, Operand>> : deferred_count<Operand> {};
template <class E>
inline constexpr std::size_t deferred_count_v = deferred_count<std::remove_cvref_t<E>>::value;

} // namespace xlite::expr
