#pragma once

// Assigning a static expression to a tensor, and eval(): where an expression becomes data.

#include <type_traits>

#include "xlite/expr/deferred.hpp"
#include "xlite/expr/evaluate.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"

namespace xlite::expr {

namespace checks {
template <class Target, class Source>
struct assignment_types_must_match {
  static_assert(std::is_same_v<Target, Source>,
                "xlite: assigning an expression of one element type (Source below) to a tensor of another (Target "
                "below): write xlite::cast<Target>(expression)");
};
template <class E>
struct no_lazy_leaves {
  static_assert(external_leaf_count_v<E> == 0,
                "xlite: this expression has lazy tensors among its leaves (xlite::lazy::leaf): a lazy::tensor "
                "traces it (lazy::tensor y = expression;), a host tensor cannot hold it");
};
} // namespace checks

// Writes e into `out`, which has room for e.shape and overlaps no operand of e.
template <class T, expression E>
void evaluate_expression(T* out, const E& e) {
  static_cast<void>(sizeof(checks::no_lazy_leaves<E>));
  static_cast<void>(sizeof(checks::assignment_types_must_match<T, typename E::value_type>));
  if constexpr (!std::is_same_v<T, typename E::value_type>) {
    return; // the check above failed: the loop would only add errors to its sentence
  } else if constexpr (deferred_count_v<E> > 0) {
    evaluate_deferred(out, e);
  } else {
    evaluate_into(e, out);
  }
}

// dst = e: in place when dst already has e's shape and is at most one of e's operands
// (a = a * 2 + b), else through a new buffer that then replaces dst's.
template <class T, expression E>
void assign_expression(tensor<T>& dst, const E& e) {
  static_cast<void>(sizeof(checks::no_lazy_leaves<E>));
  if (dst.shape() == shape_of(e) && !overlaps_operand(e, dst.data(), dst.size())) {
    evaluate_expression(dst.data(), e);
  } else {
    dst = tensor<T>(e);
  }
}

} // namespace xlite::expr

namespace xlite {

// The value of an expression, as a new tensor.
template <expr::expression E>
tensor<typename std::remove_cvref_t<E>::value_type> eval(const E& e) {
  return tensor<typename std::remove_cvref_t<E>::value_type>(e);
}

// A tensor is already a value: a copy of it, or the tensor itself when it is a temporary
// (eval(sum(x, {1})), whose reduction returned a tensor), so that code can eval a tensor
// or an expression alike. Unlike xt::eval, which returns a reference, an lvalue is copied:
// eval always gives a tensor of its own.
template <class T>
tensor<T> eval(tensor<T> t) {
  return t;
}

} // namespace xlite
