#pragma once

// Static expressions over lazy tensors. lazy::leaf<float>(x) puts lazy tensor x in a static
// expression (expr/) as a leaf of element type float, checked against x's dtype; the
// expression is built, typed and simplified at compile time as any static expression is,
// and assigning it to a lazy::tensor traces it in one call:
//
//   lazy::tensor y = relu(lazy::leaf<float>(x) * lazy::leaf<float>(w) + 0.5f);
//
// gives one node per op the simplified expression has, with no tensor handle in between,
// and the fusion pass makes them one kernel. Scalars become what they are in lazy ops
// (0 and 1 constants, others graph parameters); each node has the expression's element
// type, with a cast where PyTorch's promotion would pick another. Host tensors cannot be
// leaves (make them lazy with lazy::tensor::from), nor can deferred ones (matmul).

#include <type_traits>
#include <utility>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite::lazy {

// A lazy tensor as a leaf of a static expression.
template <class T>
struct expression_leaf {
  using value_type = T;
  static constexpr bool is_external_leaf = true;
  ir::node_ptr node;
  xlite::device device;
  xlite::shape shape;
};

// x as a leaf of element type T; a dtype_error when x's dtype is not T's.
template <class T>
expression_leaf<T> leaf(const tensor& x) {
  if (x.type() != dtype_of<T>::value) {
    throw dtype_error(xlite::detail::message("lazy::leaf<", dtype_of<T>::value, ">: the tensor is ", x.type(), " ",
                                             x.shape(), "; cast it first"));
  }
  return {x.node(), x.device(), x.shape()};
}

namespace detail {

template <class E>
inline constexpr bool is_expression_node_v = false;
template <op O, class T, class... Operands>
inline constexpr bool is_expression_node_v<expr::node<O, T, Operands...>> = true;
template <class E>
inline constexpr bool is_cast_node_v = false;
template <class To, class Operand>
inline constexpr bool is_cast_node_v<expr::cast_node<To, Operand>> = true;

// The device of e's first lazy leaf.
template <class E>
const xlite::device* device_of(const E& e) {
  if constexpr (expr::is_external_leaf_v<E>) {
    return &e.device;
  } else if constexpr (is_expression_node_v<E>) {
    return expr::unpack(
        [](const auto&... operands) {
          const xlite::device* found = nullptr;
          ((found = found != nullptr ? found : device_of(operands)), ...);
          return found;
        },
        e.operands);
  } else if constexpr (is_cast_node_v<E>) {
    return device_of(e.operand);
  } else {
    return nullptr;
  }
}

template <class E>
ir::node_ptr trace_expression(const E& e, const xlite::device& d) {
  using T = typename E::value_type;
  constexpr dtype type = dtype_of<T>::value;
  if constexpr (expr::is_external_leaf_v<E>) {
    if (e.device != d) {
      throw value_error(xlite::detail::message("lazy expression: leaves on different devices, ", d, " and ", e.device,
                                               "; move one first"));
    }
    return e.node;
  } else if constexpr (expr::is_scalar_leaf_v<E>) {
    if constexpr (expr::is_constant_v<E>) {
      return scalar_node(static_cast<T>(E::value), type, d);
    } else {
      return scalar_node(e.value, type, d);
    }
  } else if constexpr (is_cast_node_v<E>) {
    return ir::cast(trace_expression(e.operand, d), type);
  } else if constexpr (is_expression_node_v<E>) {
    ir::node_ptr n = expr::unpack(
        [&](const auto&... operands) { return ir::elementwise(E::kind, {trace_expression(operands, d)...}); },
        e.operands);
    return n->type() == type ? n : ir::cast(std::move(n), type);
  } else {
    static_assert(expr::is_external_leaf_v<E>, "a static expression over lazy tensors takes lazy::leaf leaves, "
                                               "scalars and element-wise ops: no host tensors, no matmul");
  }
}

} // namespace detail

template <class E>
requires detail::traceable_expression<E> tensor::tensor(const E& e)
    : tensor(*detail::device_of(e), detail::trace_expression(e, *detail::device_of(e))) {}

} // namespace xlite::lazy
