#pragma once

// A tensor's shape: up to max_rank non-negative dimensions, stored inline (no allocation),
// with NumPy broadcasting. Dimensions are signed 64-bit, as in PyTorch, so arithmetic on
// them never wraps around silently; a shape is validated once, when it is made, and its
// element count is then known to fit in int64.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "xlite/core/error.hpp"

namespace xlite {

inline constexpr std::size_t max_rank = 8;

class shape {
public:
  using value_type = std::int64_t;

  // Rank 0: a scalar, with one element.
  constexpr shape() = default;

  shape(std::initializer_list<std::int64_t> dims) : shape(std::span(dims.begin(), dims.size())) {}

  // From any range of integers: std::vector<std::size_t>, an xtensor shape, a span...
  template <std::ranges::input_range Dims>
  requires std::integral<std::ranges::range_value_t<Dims>>
  [[gnu::noinline]] explicit shape(const Dims& dims) {
    for (const auto dim : dims) {
      if (rank_ == max_rank) {
        throw shape_error(
            detail::message("shape: rank ", std::ranges::distance(dims), " exceeds the maximum rank ", max_rank));
      }
      if constexpr (std::is_signed_v<std::ranges::range_value_t<Dims>>) {
        if (dim < 0) throw shape_error(detail::message("shape: dimension ", rank_, " is negative (", dim, ")"));
      }
      if (std::cmp_greater(dim, INT64_MAX)) {
        throw shape_error(detail::message("shape: dimension ", rank_, " (", dim, ") does not fit in int64"));
      }
      dims_[rank_++] = static_cast<std::int64_t>(dim);
    }
    check_numel_fits();
  }

  constexpr std::size_t rank() const noexcept { return rank_; }
  constexpr std::int64_t operator[](std::size_t axis) const noexcept { return dims_[axis]; }
  constexpr std::span<const std::int64_t> dims() const noexcept { return {dims_.data(), rank_}; }
  constexpr auto begin() const noexcept { return dims().begin(); }
  constexpr auto end() const noexcept { return dims().end(); }

  // The number of elements: the product of the dimensions (1 for rank 0), 0 as soon as one
  // is 0. Unsigned, so that (2^62, 2^62, 0), a valid shape, wraps on the way to its 0 rather
  // than overflowing; any other product fits, as checked when the shape was made. Over
  // every slot, those past the rank counting 1: straight-line code, where a loop to the
  // rank was unrolled and vectorized by g++ -O3 wherever an element count is taken.
  constexpr std::int64_t numel() const noexcept {
    std::uint64_t n = 1;
    for (std::size_t axis = 0; axis < max_rank; ++axis) {
      n *= axis < rank_ ? static_cast<std::uint64_t>(dims_[axis]) : 1;
    }
    return static_cast<std::int64_t>(n);
  }

  // Whole arrays, without branches: the dimensions past the rank are 0 in every shape. A loop
  // to the rank was unrolled by g++ -O3 into eight compares and branches wherever a shape is
  // compared, as every evaluation does for each operand.
  friend constexpr bool operator==(const shape& a, const shape& b) noexcept {
    std::uint64_t differ = a.rank_ ^ b.rank_;
    for (std::size_t axis = 0; axis < max_rank; ++axis) {
      differ |= static_cast<std::uint64_t>(a.dims_[axis] ^ b.dims_[axis]);
    }
    return differ == 0;
  }

  // "(2, 3)", "(4,)" for rank 1 and "()" for rank 0, as NumPy prints shapes. Digit by digit:
  // std::to_string, or a stream, is several times the code, compiled in every file that can
  // report a shape.
  [[gnu::noinline]] std::string to_string() const {
    char text[2 + max_rank * 21 + 1]; // "(", up to 19 digits and ", " per dimension, ",)"
    std::size_t length = 0;
    text[length++] = '(';
    for (std::size_t axis = 0; axis < rank_; ++axis) {
      if (axis > 0) {
        text[length++] = ',';
        text[length++] = ' ';
      }
      const std::size_t first = length; // a dimension is not negative: its digits, last first
      auto rest = static_cast<std::uint64_t>(dims_[axis]);
      do {
        text[length++] = static_cast<char>('0' + rest % 10);
        rest /= 10;
      } while (rest != 0);
      std::reverse(text + first, text + length);
    }
    if (rank_ == 1) text[length++] = ',';
    text[length++] = ')';
    return std::string(text, length);
  }

  friend std::ostream& operator<<(std::ostream& out, const shape& s) { return out << s.to_string(); }

private:
  // Checks that the element count fits in int64. (2^62, 2^62, 0) is a valid shape, with 0
  // elements: multiplying its dimensions in order would overflow before reaching the 0.
  void check_numel_fits() const {
    if (std::ranges::find(dims(), 0) != end()) return;
    std::int64_t n = 1;
    for (const auto dim : dims()) {
      if (__builtin_mul_overflow(n, dim, &n)) {
        throw shape_error(detail::message("shape: ", to_string(), " has more elements than int64 can count"));
      }
    }
  }

  std::array<std::int64_t, max_rank> dims_{}; // 0 past the rank
  std::size_t rank_ = 0;
};

// NumPy broadcasting of any number of shapes: they are aligned at their last dimension,
// and at each position the dimensions that are not 1 must be equal. `op` names the
// operation in the error, which lists every shape of rank 1 or more and names the two that
// disagree: folding the shapes pairwise would name, for a third that disagrees, the
// broadcast of the first two, a shape no operand has.
[[gnu::noinline]] inline shape broadcast_shapes(std::span<const shape* const> shapes, std::string_view op) {
  std::size_t rank = 0;
  for (const shape* s : shapes) rank = std::max(rank, s->rank());
  const auto dim = [](const shape& s, std::size_t i) { return i < s.rank() ? s[s.rank() - 1 - i] : 1; };
  std::array<std::int64_t, max_rank> dims{};
  for (std::size_t i = 0; i < rank; ++i) { // i counts from the last dimension
    const shape* first_not_one = nullptr;  // the first shape whose dimension there is not 1
    for (const shape* s : shapes) {
      const std::int64_t d = dim(*s, i);
      if (d == 1) continue;
      if (first_not_one == nullptr) {
        first_not_one = s;
      } else if (d != dim(*first_not_one, i)) {
        // Rank 0 (a scalar) broadcasts against anything: left out, so that an expression
        // with a scalar operand reads the same from both front ends (the static one does
        // not pass a number's shape).
        const auto listed =
            static_cast<std::size_t>(std::ranges::count_if(shapes, [](const shape* t) { return t->rank() > 0; }));
        std::string all;
        std::size_t k = 0;
        for (const shape* t : shapes) {
          if (t->rank() == 0) continue;
          all += (k == 0 ? "" : k + 1 == listed ? " and " : ", ") + t->to_string();
          ++k;
        }
        throw shape_error(detail::message(op, ": shapes ", all, " cannot be broadcast together: dimension -", i + 1,
                                          " is ", dim(*first_not_one, i), " in ", *first_not_one, " and ", d, " in ",
                                          *s));
      }
    }
    dims[rank - 1 - i] = first_not_one != nullptr ? dim(*first_not_one, i) : 1;
  }
  return shape(std::span(dims.data(), rank));
}

// The broadcast of two shapes; without a walk when they are equal or one has rank 0.
// Out of line, as the n-ary form: -O3 inlined it into several callers of each file.
[[gnu::noinline]] inline shape broadcast_shapes(const shape& a, const shape& b, std::string_view op) {
  if (a == b || b.rank() == 0) return a;
  if (a.rank() == 0) return b;
  const std::array<const shape*, 2> both{&a, &b};
  return broadcast_shapes(both, op);
}

// An axis in [-rank, rank) made non-negative, as NumPy and PyTorch accept negative axes.
inline std::size_t normalize_axis(std::int64_t axis, std::size_t rank, std::string_view op) {
  const auto r = static_cast<std::int64_t>(rank);
  if (rank == 0)
    throw index_error(detail::message(op, ": axis ", axis, " given for a rank-0 tensor, which has no axes"));
  if (axis < -r || axis >= r) {
    throw index_error(
        detail::message(op, ": axis ", axis, " is out of range for rank ", rank, " (valid: ", -r, " to ", r - 1, ")"));
  }
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

} // namespace xlite
