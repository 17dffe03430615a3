#pragma once

// Zero-copy interop with xtensor, in both directions, and printing through it:
//
//   xlite::adapt(xt_array) * 2.0f            an xtensor container as an expression leaf
//   xlite::as_xtensor(t)                     an xtensor view of an xlite::tensor's memory
//   xlite::assign(xt_array, a * x + b)       one fused pass into an xtensor container
//   std::cout << t                           xtensor's printer
//
// Only contiguous row-major containers take part (xarray, xtensor, their adaptors): the
// fused loop reads memory directly. For a view or a column-major container, copy it into
// an xt::xarray (or an xlite::tensor) first.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <type_traits>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xlayout.hpp>

#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/expr/assign.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"

namespace xlite {

namespace expr {

// xtensor containers that own or adapt contiguous memory.
template <class C>
concept xtensor_container = requires(C& c) {
  c.data();
  c.shape();
  c.layout();
  typename std::remove_cvref_t<C>::value_type;
};

template <class C>
void check_row_major(const C& c, const char* function) {
  if (c.layout() != xt::layout_type::row_major) {
    throw value_error(detail::message(function, ": the xtensor container is not row-major (shape ",
                                      xlite::shape(c.shape()), "); copy it into an xt::xarray first"));
  }
}

} // namespace expr

// An xtensor container as a leaf of an xlite expression, reading its memory in place. Keep
// the container alive while the expression lives, as for a tensor.
template <expr::xtensor_container C>
auto adapt(const C& c) {
  expr::check_row_major(c, "adapt");
  using T = typename C::value_type;
  return expr::tensor_ref<T>{c.data(), expr::shape_ref(xlite::shape(c.shape()))};
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

// Evaluates e into an xtensor container in one fused pass, resizing it to e's shape.
template <expr::xtensor_container C, expr::expression E>
void assign(C& dst, const E& e) {
  using T = typename C::value_type;
  expr::check_row_major(dst, "assign");
  const std::vector<std::size_t> dims(expr::shape_of(e).begin(), expr::shape_of(e).end());
  const bool resize = !std::equal(dims.begin(), dims.end(), dst.shape().begin(), dst.shape().end());
  // Whether e reads dst's memory, as it is now: resizing may free it.
  const auto current_size = static_cast<std::int64_t>(dst.size());
  if (expr::overlaps_operand(e, dst.data(), resize ? current_size : expr::shape_of(e).numel())) {
    const tensor<T> temporary = e;
    if (resize) dst.resize(dims);
    std::copy(temporary.begin(), temporary.end(), dst.data());
  } else {
    if (resize) dst.resize(dims);
    expr::evaluate_expression(dst.data(), e);
  }
}

// Prints as xtensor prints.
template <class T>
std::ostream& operator<<(std::ostream& out, const tensor<T>& t) {
  return out << as_xtensor(t);
}

} // namespace xlite
