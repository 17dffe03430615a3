#pragma once

// Zero-copy interop with xtensor, in both directions, and printing through it:
//
//   xlite::adapt(xt_array) * 2.0f            an xtensor container as an expression leaf
//   xlite::as_xtensor(t)                     an xtensor view of an xlite::tensor's memory
//   xlite::assign(xt_array, a * x + b)       one fused pass into an xtensor container
//   std::cout << t                           xtensor's printer
//
// Only contiguous row-major containers take part (xarray, xtensor, their adaptors, and views
// that are contiguous, as a row of a matrix: xt::view(m, 1)): the fused loop reads memory
// directly. For a strided view or a column-major container, copy it into an xt::xarray (or
// an xlite::tensor) first.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xbuffer_adaptor.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xlayout.hpp>

#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/expr/assign.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"

namespace xlite {

namespace expr {

// xtensor containers and views over memory.
template <class C>
concept xtensor_container = requires(C& c) {
  c.data();
  c.data_offset();
  c.shape();
  c.layout();
  typename std::remove_cvref_t<C>::value_type;
};

// c's first element, after checking that its elements are contiguous in row-major order
// (xtensor's row_major layout: strides that match the shape's, for a view too). A view's
// data() is its underlying container's, and its elements start data_offset() further on.
template <xtensor_container C>
auto* row_major_data(C& c, const char* function) {
  if (c.layout() != xt::layout_type::row_major) {
    throw value_error(detail::message(function, ": the xtensor container is not contiguous in row-major order (shape ",
                                      xlite::shape(c.shape()), "); copy it into an xt::xarray first"));
  }
  return c.data() + c.data_offset();
}

// Whether a container's storage is memory it does not own (xt::adapt of a pointer with
// xt::no_ownership): its resize throws a std::runtime_error for another number of
// elements, after the container has taken the new shape and strides.
template <class Storage>
struct borrowed_buffer : std::false_type {};
template <class CP, class A>
struct borrowed_buffer<xt::xbuffer_adaptor<CP, xt::no_ownership, A>> : std::true_type {};

template <class C>
constexpr bool borrows_its_memory() {
  if constexpr (requires { typename C::storage_type; }) {
    return borrowed_buffer<std::remove_cvref_t<typename C::storage_type>>::value;
  } else {
    return false;
  }
}

// assign's work, for a container it can write.
template <xtensor_container C, expression E>
void assign_to_container(C& dst, const E& e) {
  using T = typename C::value_type;
  T* const current = row_major_data(dst, "assign");
  // Compared in place: a vector of e's dims for std::equal cost each call a malloc and a free,
  // on lines that are cold after a pass over a large array (docs/benchmarks.md, the cold rows).
  const xlite::shape& e_shape = shape_of(e);
  const auto has_e_shape = [&] {
    return std::ranges::equal(e_shape, dst.shape(), [](std::int64_t a, auto b) { return std::cmp_equal(a, b); });
  };
  const auto cannot_hold = [&] {
    return shape_error(detail::message("assign: an expression of shape ", e_shape,
                                       " into an xtensor container or view of shape ", xlite::shape(dst.shape())));
  };
  constexpr bool fixed_rank = requires { std::tuple_size<typename C::shape_type>::value; };
  // e's dims as resize takes them, of e's rank (checked below for a fixed rank): an array for
  // a fixed rank, which xtensor would otherwise copy out of a vector into an uninitialised one.
  const auto e_dims = [&] {
    if constexpr (fixed_rank) {
      std::array<std::size_t, std::tuple_size_v<typename C::shape_type>> dims{};
      std::ranges::copy(e_shape, dims.begin());
      return dims;
    } else {
      return std::vector<std::size_t>(e_shape.begin(), e_shape.end());
    }
  };
  constexpr bool resizable = requires { dst.resize(e_dims()); };
  const bool reshape = !has_e_shape();
  if (reshape) {
    if constexpr (!resizable) {
      throw cannot_hold();
    } else {
      if constexpr (fixed_rank) {
        if (e_shape.rank() != std::tuple_size_v<typename C::shape_type>) throw cannot_hold();
      }
      if constexpr (borrows_its_memory<C>()) {
        if (std::cmp_not_equal(e_shape.numel(), dst.size())) throw cannot_hold();
      }
    }
  }
  // Gives dst e's shape and returns where its elements now start. The layout checked
  // above is the container's, which a resize keeps.
  const auto resized = [&] {
    if constexpr (resizable) {
      if (reshape) {
        dst.resize(e_dims());
        if (!has_e_shape()) throw cannot_hold();
        return dst.data() + dst.data_offset();
      }
    }
    return current;
  };
  // Whether e reads dst's memory, as it is now: resizing may free it.
  const auto current_size = static_cast<std::int64_t>(dst.size());
  if (overlaps_operand(e, current, reshape ? current_size : e_shape.numel())) {
    const tensor<T> temporary = e;
    std::copy(temporary.begin(), temporary.end(), resized());
  } else {
    evaluate_expression(resized(), e);
  }
}

namespace checks {
template <class C>
struct assign_needs_writable_container {
  static_assert(!std::is_const_v<std::remove_pointer_t<decltype(std::declval<C&>().data())>>,
                "xlite: assign writes into its destination, and this xtensor container (C below) is read-only: a "
                "const container, or an adaptor of const memory");
};
} // namespace checks

} // namespace expr

// An xtensor container as a leaf of an xlite expression, reading its memory in place. Keep
// the container alive while the expression lives, as for a tensor, and the leaf too where it
// has a name: an expression built from `auto x = xlite::adapt(c);` refers to x's shape.
template <expr::xtensor_container C>
auto adapt(const C& c) {
  using T = typename C::value_type;
  return expr::tensor_ref<T>{expr::row_major_data(c, "adapt"), expr::shape_ref(xlite::shape(c.shape()))};
}

// An xtensor view (an xarray_adaptor) of a tensor's memory; changes go both ways.
template <class T>
auto as_xtensor(tensor<T>& t) {
  std::vector<std::size_t> dims(t.shape().begin(), t.shape().end());
  return xt::adapt(t.data(), static_cast<std::size_t>(t.size()), xt::no_ownership(), dims);
}
template <class T>
auto as_xtensor(const tensor<T>& t) {
  std::vector<std::size_t> dims(t.shape().begin(), t.shape().end());
  return xt::adapt(t.data(), static_cast<std::size_t>(t.size()), xt::no_ownership(), dims);
}

// Evaluates e into an xtensor container in one fused pass, resizing it to e's shape. What
// cannot take e's shape is a shape_error, before anything is written: a view (no resize), a
// container of another fixed rank (xt::xtensor<T, N>), one of a fixed shape
// (xt::xtensor_fixed, whose resize does nothing), an adaptor of memory it does not own for
// another number of elements (one of the same number takes e's shape).
template <expr::xtensor_container C, expr::expression E>
void assign(C& dst, const E& e) {
  static_cast<void>(sizeof(expr::checks::assign_needs_writable_container<C>));
  // Where the check failed, the body would only add errors to its sentence.
  if constexpr (!std::is_const_v<std::remove_pointer_t<decltype(dst.data())>>) expr::assign_to_container(dst, e);
}

// Prints as xtensor prints.
template <class T>
std::ostream& operator<<(std::ostream& out, const tensor<T>& t) {
  return out << as_xtensor(t);
}

} // namespace xlite
