#pragma once

// The operands and results of the systolic array: a row-major matrix that owns its
// elements, and a view of any row-major, contiguous rank-2 container (xlite::tensor,
// xt::xtensor, tpu::matrix) from which the array reads its operands.

#include <array>
#include <concepts>
#include <cstdint>
#include <iterator>
#include <ranges>
#include <type_traits>
#include <vector>

#include "xlite/core/error.hpp"

namespace xlite::tpu {

template <class T>
class matrix {
public:
  matrix(std::int64_t rows, std::int64_t cols) : rows_(rows), cols_(cols), elements_(checked_size(rows, cols)) {}

  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::array<std::int64_t, 2> shape() const noexcept { return {rows_, cols_}; }
  T* data() noexcept { return elements_.data(); }
  const T* data() const noexcept { return elements_.data(); }
  T& operator()(std::int64_t i, std::int64_t j) noexcept { return elements_[static_cast<std::size_t>(i * cols_ + j)]; }
  const T& operator()(std::int64_t i, std::int64_t j) const noexcept {
    return elements_[static_cast<std::size_t>(i * cols_ + j)];
  }
  friend bool operator==(const matrix&, const matrix&) = default;

private:
  static std::size_t checked_size(std::int64_t rows, std::int64_t cols) {
    std::int64_t size = 0;
    if (rows < 0 || cols < 0 || __builtin_mul_overflow(rows, cols, &size)) {
      throw shape_error(xlite::detail::message("tpu::matrix: (", rows, ", ", cols, ") is not a matrix shape"));
    }
    return static_cast<std::size_t>(size);
  }

  std::int64_t rows_;
  std::int64_t cols_;
  std::vector<T> elements_;
};

namespace detail {
template <class C>
concept contiguous_2d = requires(const C& c) {
  {c.data()};
  { c.shape() } -> std::ranges::forward_range;
};
} // namespace detail

// Rows x cols elements, row-major and contiguous.
template <class T>
struct matrix_view {
  const T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  matrix_view(const T* d, std::int64_t r, std::int64_t c) : data(d), rows(r), cols(c) {}
  template <detail::contiguous_2d C>
  requires std::same_as<std::remove_cvref_t<decltype(*std::declval<const C&>().data())>, T> matrix_view(const C& c)
      : data(c.data()) { // NOLINT: a view converts
    const auto& s = c.shape();
    if (std::ranges::distance(s) != 2) {
      throw shape_error(
          xlite::detail::message("tpu: a matrix operand must have rank 2, got rank ", std::ranges::distance(s)));
    }
    auto it = std::ranges::begin(s);
    rows = static_cast<std::int64_t>(*it);
    cols = static_cast<std::int64_t>(*std::next(it));
    if constexpr (requires { c.strides(); }) { // xtensor: column-major containers and views
      const auto& st = c.strides();
      auto stride = std::ranges::begin(st);
      const auto row_stride = static_cast<std::int64_t>(*stride), col_stride = static_cast<std::int64_t>(*++stride);
      if ((rows > 1 && row_stride != cols) || (cols > 1 && col_stride != 1)) {
        throw value_error(xlite::detail::message("tpu: a matrix operand of shape (", rows, ", ", cols,
                                                 ") has strides (", row_stride, ", ", col_stride,
                                                 "); it must be row-major and contiguous"));
      }
    }
  }
};

// The view of a matrix operand, whatever container holds it.
template <detail::contiguous_2d C>
auto view_of(const C& c) {
  return matrix_view<std::remove_cvref_t<decltype(*c.data())>>(c);
}
template <class T>
matrix_view<T> view_of(matrix_view<T> v) {
  return v;
}

} // namespace xlite::tpu
