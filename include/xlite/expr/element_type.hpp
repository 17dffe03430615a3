#pragma once

// The element type of each static node, from the op's dtype rule (core/op.hpp), and the
// compile-time errors that explain, in words, what an expression got wrong.
//
// The static layer is stricter than PyTorch in one way, on purpose: tensors of different
// element types do not mix without a cast (as in Eigen), because an implicit conversion
// inside a fused SIMD loop is a silent cost. Plain scalars follow PyTorch's rule for
// Python numbers: they take the tensor's type, unless they are of a higher category
// (tensor<int> * 2.5), which is an error asking for a cast.

#include <cstdint>
#include <type_traits>

#include "xlite/core/dtype.hpp"
#include "xlite/core/op.hpp"
#include "xlite/expr/node.hpp"

namespace xlite::expr {

// The element type a C++ scalar takes when it joins an expression of element type T.
template <class S>
inline constexpr bool is_plain_scalar_v = std::is_arithmetic_v<std::remove_cvref_t<S>>;

namespace checks {

// Each check is a class template so that the compiler's "required from" note names the op
// and the types involved, right under the sentence.
template <op O, class A, class B>
struct element_types_must_match {
  static_assert(std::is_same_v<A, B>,
                "xlite: these operands have different element types (A and B below); xlite does not convert "
                "between tensors implicitly: write xlite::cast<A>(b) or xlite::cast<B>(a)");
};

template <op O, class T>
struct needs_floating_point {
  static_assert(std::is_floating_point_v<T>,
                "xlite: this op computes in floating point and its operand has an integral or bool element type "
                "(T below): write it on xlite::cast<float>(x)");
};

template <op O, class T>
struct needs_numbers {
  static_assert(!std::is_same_v<T, bool>,
                "xlite: arithmetic on a bool expression (a comparison or a tensor<bool>): write "
                "xlite::where(mask, a, b), or xlite::cast<float>(mask) to count");
};

template <op O, class T>
struct needs_booleans {
  static_assert(std::is_same_v<T, bool>,
                "xlite: logical ops and the condition of where take bool expressions (comparisons or tensor<bool>); "
                "for a number x write x != 0");
};

template <class T, class S>
struct scalar_must_fit {
  static_assert(promote_with_scalar(dtype_of_v<T>, scalar_category_v<S>) == dtype_of_v<T>,
                "xlite: this scalar (S below) would promote the expression's element type (T below), as "
                "tensor<int> * 2.5 would: cast the expression first, e.g. xlite::cast<float>(x) * 2.5");
};

template <op O, class T>
struct not_bfloat16 {
  static_assert(dtype_of_v<T> != dtype::bf16,
                "xlite: bfloat16 is a storage type in static expressions (T below): compute in float, "
                "xlite::cast<float>(x), and round once at the end, xlite::cast<xlite::bfloat16>(...); matmul takes "
                "bfloat16 operands directly");
};

template <class T>
struct supported_element {
  static_assert(element_type<T>, "xlite: expressions hold bool, uint8_t, int8_t, int32_t, int64_t, float or double");
};

} // namespace checks

// Whether an operand is a scalar that adopts the expression's element type.
template <class E>
inline constexpr bool adopts_type_v = is_scalar_leaf_v<std::remove_cvref_t<E>> || is_plain_scalar_v<E>;

// The element type of an operand that has one of its own; void for a scalar, which takes
// the expression's.
template <class E>
using own_element_t = std::conditional_t<adopts_type_v<E>, void, typename std::remove_cvref_t<E>::value_type>;

// The element type of an op over these operands: the first own one (void if none has one).
// Whether the others agree is checked apart, by check_operand_type, so that the type stays
// the first's where they do not: clang gives a class whose static_assert failed the type
// int, and went on with errors about an int expression.
template <op O, class... E>
struct common_element {
  using type = void;
};
template <op O, class E, class... Rest>
struct common_element<O, E, Rest...> {
  using type =
      std::conditional_t<std::is_void_v<own_element_t<E>>, typename common_element<O, Rest...>::type, own_element_t<E>>;
};

// Fails with a sentence unless operand E can join an op O of element type T: a scalar must
// fit T, any other operand must have T. Called where the node is built, not in adopt(),
// whose return type is deduced: clang drops a function whose static_assert failed, and the
// call then added "no matching function" to the sentence.
template <op O, class T, class E>
constexpr void check_operand_type() {
  if constexpr (std::is_void_v<T>) {
    return; // scalars only: nothing to agree with
  } else if constexpr (is_scalar_leaf_v<E>) {
    static_cast<void>(sizeof(checks::scalar_must_fit<T, typename E::value_type>));
  } else {
    static_cast<void>(sizeof(checks::element_types_must_match<O, T, typename E::value_type>));
  }
}

} // namespace xlite::expr
