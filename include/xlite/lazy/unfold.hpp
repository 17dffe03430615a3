#pragma once

// torch.nn.functional.unfold and fold on lazy tensors: a tensor's sliding windows as columns
// (im2col) and back (col2im), the window ops of ir/window.hpp. conv2d (convolution.hpp) is
// unfold and one matmul; avg_pool2d (pooling.hpp) is unfold and a sum. Also the height and
// width pair (size2) that these ops and torch's take.

#include <cstdint>
#include <ostream>

#include "xlite/core/error.hpp"
#include "xlite/ir/window.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite::lazy {

// A height and a width: torch's int-or-pair arguments. `2` means {2, 2}.
struct size2 {
  std::int64_t h = 0;
  std::int64_t w = 0;
  constexpr size2(std::int64_t both) noexcept : h(both), w(both) {} // implicit, as torch takes an int
  constexpr size2(std::int64_t height, std::int64_t width) noexcept : h(height), w(width) {}
  friend constexpr bool operator==(const size2&, const size2&) = default;
  friend std::ostream& operator<<(std::ostream& out, const size2& s) { return out << '(' << s.h << ", " << s.w << ')'; }
};

namespace detail {

inline ir::window2d window_of(size2 kernel, size2 stride, size2 padding, size2 dilation) {
  return {kernel.h, kernel.w, stride.h, stride.w, padding.h, padding.w, dilation.h, dilation.w};
}

inline void require_positive(const char* op_name, const char* what, size2 value) {
  if (value.h < 1 || value.w < 1) {
    throw value_error(xlite::detail::message(op_name, ": ", what, " ", value, " must be positive"));
  }
}

inline void require_nchw(const char* op_name, const char* what, const tensor& t) {
  if (t.shape().rank() != 4) {
    throw shape_error(xlite::detail::message(op_name, ": ", what, " of shape ", t.shape(), " is not 4-D (N, C, H, W)"));
  }
}

} // namespace detail

// (N, C, H, W) -> (N, C*KH*KW, L): column l holds window l's elements (windows in row-major
// order, L = OH*OW of conv2d's formula), in (C, KH, KW) order, zeros from the padding.
inline tensor unfold(const tensor& x, size2 kernel, size2 dilation = 1, size2 padding = 0, size2 stride = 1) {
  detail::require_nchw("unfold", "input", x);
  return detail::make(x.device(), ir::unfold(x.node(), detail::window_of(kernel, stride, padding, dilation)));
}

// The adjoint of unfold: (N, C*KH*KW, L) -> (N, C, output_size.h, output_size.w), each
// column's elements summed into the positions their window covers; the padding's dropped.
inline tensor fold(const tensor& x, size2 output_size, size2 kernel, size2 dilation = 1, size2 padding = 0,
                   size2 stride = 1) {
  return detail::make(x.device(), ir::fold(x.node(), detail::window_of(kernel, stride, padding, dilation),
                                           output_size.h, output_size.w));
}

} // namespace xlite::lazy
