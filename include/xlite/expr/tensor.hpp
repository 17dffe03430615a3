#pragma once

// xlite::tensor<T>: an owning, contiguous, row-major host tensor of any rank up to 8, with
// 64-byte aligned storage (one cache line, one AVX-512 register; a page from 32 KiB on, huge
// pages from 32 MiB on: core/aligned_memory.hpp). Value semantics: copies copy the data,
// moves are cheap.
// Assigning an expression evaluates it in one fused pass (expr/evaluate.hpp); printing and
// other conveniences go through xtensor (expr/xtensor.hpp).

#include <algorithm>
#include <array>
#include <cassert>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>

#include "xlite/core/aligned_memory.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"

namespace xlite {

inline constexpr std::size_t tensor_alignment = cache_line;

namespace detail {

// A static expression node (expr/node.hpp): it carries its broadcast shape as a member.
template <class E>
concept expression_object = requires(const E& e) {
  { e.shape } -> std::convertible_to<const xlite::shape&>;
  typename E::value_type;
};

} // namespace detail

template <class T>
class tensor {
public:
  static_assert(element_type<T>,
                "xlite::tensor<T>: T must be bool, uint8_t, int8_t, int32_t, int64_t, float or double");
  using value_type = T;

  // An empty tensor of shape (0,).
  tensor() : tensor(xlite::shape{0}, T{}) {}

  // Zero-filled.
  explicit tensor(const xlite::shape& s) : tensor(s, T{}) {}

  tensor(const xlite::shape& s, T fill) : shape_(s), data_(allocate_aligned<T>(s.numel())) {
    std::fill_n(data_.get(), s.numel(), fill);
  }

  // Nested initializer lists, rank 1 to 4: tensor<float>{{1, 2}, {3, 4}} has shape (2, 2).
  tensor(std::initializer_list<T> values)
      : tensor(uninitialized, xlite::shape{static_cast<std::int64_t>(values.size())}) {
    std::copy(values.begin(), values.end(), data_.get());
  }
  tensor(std::initializer_list<std::initializer_list<T>> rows) { from_nested(rows); }
  tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> planes) { from_nested(planes); }
  tensor(std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> cubes) {
    from_nested(cubes);
  }

  // Storage without initialisation, for results that are written in full before they are
  // read: tensor<float>(xlite::uninitialized, s).
  struct uninitialized_t {};
  static constexpr uninitialized_t uninitialized{};
  tensor(uninitialized_t, const xlite::shape& s) : shape_(s), data_(allocate_aligned<T>(s.numel())) {}

  // Evaluates a static expression in one fused pass (defined in expr/assign.hpp).
  template <detail::expression_object E>
  tensor(const E& e) : tensor(uninitialized, e.shape) {
    evaluate_expression(data(), e);
  }
  template <detail::expression_object E>
  tensor& operator=(const E& e) {
    assign_expression(*this, e);
    return *this;
  }

  tensor(const tensor& other) : tensor(uninitialized, other.shape_) { std::copy_n(other.data(), other.size(), data()); }
  tensor(tensor&&) noexcept = default;
  tensor& operator=(const tensor& other) {
    if (this != &other) *this = tensor(other);
    return *this;
  }
  tensor& operator=(tensor&&) noexcept = default;
  ~tensor() = default;

  const xlite::shape& shape() const noexcept { return shape_; }
  std::size_t rank() const noexcept { return shape_.rank(); }
  std::int64_t size() const noexcept { return shape_.numel(); }
  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size(); }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size(); }

  // t(i, j, ...): one index per dimension, unchecked (asserted in debug builds).
  template <std::integral... I>
  T& operator()(I... index) noexcept {
    return data_[offset_unchecked(index...)];
  }
  template <std::integral... I>
  const T& operator()(I... index) const noexcept {
    return data_[offset_unchecked(index...)];
  }

  // t.at(i, j, ...): checked; an index_error names the axis, the index and the size.
  template <std::integral... I>
  T& at(I... index) {
    return data_[offset_checked(index...)];
  }
  template <std::integral... I>
  const T& at(I... index) const {
    return data_[offset_checked(index...)];
  }

  // Same shape and the same values (NaN != NaN, as for the elements).
  friend bool operator==(const tensor& a, const tensor& b) {
    return a.shape_ == b.shape_ && std::equal(a.begin(), a.end(), b.begin());
  }

  // A new shape for the same elements, in row-major order.
  tensor reshaped(const xlite::shape& s) && {
    if (s.numel() != size()) {
      throw shape_error(detail::message("reshape: cannot view ", shape_, " (", size(), " elements) as ", s, " (",
                                        s.numel(), " elements)"));
    }
    tensor result(std::move(*this));
    result.shape_ = s;
    return result;
  }

private:
  template <class... I>
  std::int64_t offset_unchecked(I... index) const noexcept {
    assert(sizeof...(I) == rank());
    std::int64_t offset = 0;
    std::size_t axis = 0;
    ((offset = offset * shape_[axis++] + static_cast<std::int64_t>(index)), ...);
    return offset;
  }

  template <class... I>
  std::int64_t offset_checked(I... index) const {
    if (sizeof...(I) != rank()) {
      throw index_error(detail::message("tensor::at: ", sizeof...(I), " indices for a tensor of rank ", rank(),
                                        " and shape ", shape_));
    }
    std::size_t axis = 0;
    (check_index(axis++, static_cast<std::int64_t>(index)), ...);
    return offset_unchecked(index...);
  }

  void check_index(std::size_t axis, std::int64_t index) const {
    if (index < 0 || index >= shape_[axis]) {
      throw index_error(detail::message("tensor::at: index ", index, " is out of range for axis ", axis, " of size ",
                                        shape_[axis], " (shape ", shape_, ")"));
    }
  }

  // Records each axis's length, checking that all lists at one depth have the same length.
  template <class List>
  static void measure(const List& list, std::size_t axis, std::array<std::int64_t, max_rank>& dims) {
    if constexpr (!std::is_same_v<List, T>) {
      const auto n = static_cast<std::int64_t>(list.size());
      if (dims[axis] == -1) {
        dims[axis] = n;
      } else if (dims[axis] != n) {
        throw shape_error(detail::message("tensor: ragged nested initializer list: axis ", axis, " has ", dims[axis],
                                          " elements in one place and ", n, " in another"));
      }
      for (const auto& inner : list) measure(inner, axis + 1, dims);
    }
  }

  template <class List>
  static void flatten(const List& list, T*& out) {
    if constexpr (std::is_same_v<List, T>) {
      *out++ = list;
    } else {
      for (const auto& inner : list) flatten(inner, out);
    }
  }

  template <class List>
  void from_nested(const List& list) {
    constexpr std::size_t depth = nesting_depth<List>();
    std::array<std::int64_t, max_rank> dims;
    dims.fill(-1);
    measure(list, 0, dims);
    std::replace(dims.begin(), dims.end(), std::int64_t{-1}, std::int64_t{0}); // axes under an empty list
    shape_ = xlite::shape(std::span<const std::int64_t>(dims.data(), depth));
    data_ = allocate_aligned<T>(shape_.numel());
    T* out = data_.get();
    flatten(list, out);
  }

  template <class List>
  static constexpr std::size_t nesting_depth() {
    if constexpr (std::is_same_v<List, T>) {
      return 0;
    } else {
      return 1 + nesting_depth<typename List::value_type>();
    }
  }

  xlite::shape shape_;
  aligned_array<T> data_;
};

} // namespace xlite
