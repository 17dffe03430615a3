#pragma once

// any_tensor: a host tensor whose dtype is known only at run time, as a file gives it. It
// holds one xlite::tensor<T> of the dtype it was made with; get<T>() hands out that tensor
// (no copy) once the caller names the right type. What load() and load_npy() return.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "xlite/core/bfloat16.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/float16.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/expr/tensor.hpp"

namespace xlite {

class any_tensor {
public:
  // An uninitialised tensor of dtype `type` and shape `s`, for a reader to fill.
  any_tensor(dtype type, const xlite::shape& s)
      : value_(visit_dtype(type, [&](auto tag) -> variant {
          using T = typename decltype(tag)::type;
          return tensor<T>(tensor<T>::uninitialized, s);
        })) {}

  template <element_type T>
  any_tensor(tensor<T> t) : value_(std::move(t)) {}

  dtype type() const noexcept {
    return std::visit([](const auto& t) { return dtype_of_v<typename std::decay_t<decltype(t)>::value_type>; }, value_);
  }
  const xlite::shape& shape() const noexcept {
    return std::visit([](const auto& t) -> const xlite::shape& { return t.shape(); }, value_);
  }
  std::int64_t size() const noexcept { return shape().numel(); }
  std::int64_t byte_size() const noexcept { return size() * static_cast<std::int64_t>(size_of(type())); }

  // The tensor, if T is its dtype; otherwise a dtype_error that names both.
  template <element_type T>
  const tensor<T>& get() const {
    check<T>();
    return std::get<tensor<T>>(value_);
  }
  template <element_type T>
  tensor<T>& get() {
    check<T>();
    return std::get<tensor<T>>(value_);
  }

  // The elements' bytes, row-major, in the machine's (little-endian) order.
  std::span<const std::byte> bytes() const noexcept {
    return std::visit(
        [&](const auto& t) { return std::as_bytes(std::span(t.data(), static_cast<std::size_t>(t.size()))); }, value_);
  }
  std::span<std::byte> bytes() noexcept {
    return std::visit(
        [&](auto& t) { return std::as_writable_bytes(std::span(t.data(), static_cast<std::size_t>(t.size()))); },
        value_);
  }

  // Same dtype, same shape and the same values (NaN != NaN).
  friend bool operator==(const any_tensor& a, const any_tensor& b) { return a.value_ == b.value_; }

private:
  using variant = std::variant<tensor<bool>, tensor<std::uint8_t>, tensor<std::int8_t>, tensor<std::int32_t>,
                               tensor<std::int64_t>, tensor<float16>, tensor<bfloat16>, tensor<float>, tensor<double>>;

  template <class T>
  void check() const {
    if (dtype_of_v<T> != type()) {
      throw dtype_error(
          detail::message("any_tensor::get: asked for ", name(dtype_of_v<T>), ", but the tensor is ", name(type())));
    }
  }

  variant value_;
};

namespace io::detail {

// A shape read from a file. Beyond what xlite::shape checks, the dimensions must multiply,
// left to right, without overflowing before a zero: (2^63 - 1, 2, 0) holds no element, but
// code that multiplies leading dimensions (outer counts of a reduction or a matmul's batch)
// would overflow on the way to the 0. A file is no place for such a shape.
inline xlite::shape file_shape(const std::vector<std::int64_t>& dims) {
  std::int64_t product = 1;
  for (const std::int64_t d : dims) {
    if (d <= 0) break; // 0: the product stays 0; negative: xlite::shape says so
    if (product > INT64_MAX / d) {
      std::string text;
      for (const std::int64_t e : dims) text += (text.empty() ? "" : ", ") + std::to_string(e);
      throw shape_error("shape: the dimensions (" + text + ") multiply past int64");
    }
    product *= d;
  }
  return xlite::shape(dims);
}

// The index of the first element of a bool tensor read from a file whose byte is not 0 or
// 1 (reading such a byte as bool is undefined), if there is one.
inline std::optional<std::size_t> non_boolean(const any_tensor& t) {
  if (t.type() != dtype::boolean) return std::nullopt;
  const auto bytes = t.bytes();
  const auto bad = std::ranges::find_if(bytes, [](std::byte b) { return b > std::byte{1}; });
  if (bad == bytes.end()) return std::nullopt;
  return static_cast<std::size_t>(bad - bytes.begin());
}

} // namespace io::detail

} // namespace xlite
