#pragma once

// max_pool2d and avg_pool2d (torch.nn.functional's, floor mode, no dilation) on (N, C, H, W)
// tensors, on the window ops (ir/window.hpp):
// - max_pool2d is select_window_max(x, x): one pass. Its gradient, scatter_window_max, gives
//   each window's gradient to the window's first maximum in row-major order, as PyTorch and
//   XLA do on a tie; NaN counts as the maximum, so it propagates, as torch's does.
// - avg_pool2d is unfold over the input padded with zeros, then a sum over each window's
//   taps, divided by the window's size; its gradient is the sum's and unfold's (fold).

#include <cstdint>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/window.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/lazy/unfold.hpp"

namespace xlite::lazy {

namespace detail {

struct pool_geometry {
  size2 kernel, stride, padding, out;
};

// torch's checks: positive kernel and stride, padding at most half the kernel (so every
// window holds an element of x), a kernel no larger than the padded input.
inline pool_geometry pool_windows(const char* op_name, const tensor& x, size2 kernel, size2 stride, size2 padding) {
  require_nchw(op_name, "input", x);
  if (!is_floating_point(x.type())) {
    throw dtype_error(xlite::detail::message(op_name, ": input must be floating point, got ", name(x.type())));
  }
  require_positive(op_name, "kernel", kernel);
  require_positive(op_name, "stride", stride);
  if (padding.h < 0 || padding.w < 0 || 2 * padding.h > kernel.h || 2 * padding.w > kernel.w) {
    throw value_error(
        xlite::detail::message(op_name, ": padding ", padding, " must be between 0 and half the kernel ", kernel));
  }
  const shape& s = x.shape();
  const size2 out{ir::window2d::count(s[2], kernel.h, stride.h, padding.h, 1),
                  ir::window2d::count(s[3], kernel.w, stride.w, padding.w, 1)};
  if (out.h < 1 || out.w < 1) {
    throw shape_error(xlite::detail::message(op_name, ": kernel ", kernel, " is larger than the padded input ",
                                             size2{s[2] + 2 * padding.h, s[3] + 2 * padding.w}, " (input of shape ", s,
                                             ", padding ", padding, ")"));
  }
  return {kernel, stride, padding, out};
}

// How many elements of x (not padding) each window holds, (OH, OW) in x's dtype: the
// divisor of avg_pool2d with count_include_pad = false. Made from iotas: no transfer.
inline tensor window_sizes(const tensor& x, const pool_geometry& g) {
  // Along one axis: min(start + kernel, size) - max(start, 0), start = position * stride - pad.
  const auto along = [&](std::int64_t axis, std::int64_t size, std::int64_t kernel, std::int64_t stride,
                         std::int64_t pad) {
    const shape positions = axis == 0 ? shape{g.out.h, 1} : shape{1, g.out.w};
    const tensor start = make(x.device(), ir::iota(dtype::i64, positions, axis)) * stride - pad;
    return minimum(start + kernel, size) - maximum(start, 0);
  };
  const shape& s = x.shape();
  return cast(along(0, s[2], g.kernel.h, g.stride.h, g.padding.h) * along(1, s[3], g.kernel.w, g.stride.w, g.padding.w),
              x.type());
}

} // namespace detail

// The maximum of each kernel.h x kernel.w window, stride apart, over x padded with -inf:
// (N, C, H, W) -> (N, C, OH, OW), OH = floor((H + 2 padding.h - kernel.h) / stride.h) + 1.
inline tensor max_pool2d(const tensor& x, size2 kernel, size2 stride, size2 padding = 0) {
  const detail::pool_geometry g = detail::pool_windows("max_pool2d", x, kernel, stride, padding);
  return detail::make(x.device(),
                      ir::select_window_max(x.node(), x.node(), detail::window_of(g.kernel, g.stride, g.padding, 1)));
}
// stride = kernel, as torch's default.
inline tensor max_pool2d(const tensor& x, size2 kernel) { return max_pool2d(x, kernel, kernel); }

// The mean of each window. The divisor is kernel.h * kernel.w, or, with count_include_pad =
// false, the number of elements of x in the window (torch's rules for floor mode).
inline tensor avg_pool2d(const tensor& x, size2 kernel, size2 stride, size2 padding = 0,
                         bool count_include_pad = true) {
  const detail::pool_geometry g = detail::pool_windows("avg_pool2d", x, kernel, stride, padding);
  const shape& s = x.shape();
  const tensor taps = reshape(unfold(x, kernel, 1, padding, stride), shape{s[0], s[1], kernel.h * kernel.w, g.out.h * g.out.w});
  const tensor sums = reshape(sum(taps, {2}), shape{s[0], s[1], g.out.h, g.out.w});
  if (count_include_pad || g.padding == size2{0}) return sums / static_cast<double>(kernel.h * kernel.w);
  return sums / detail::window_sizes(x, g);
}
inline tensor avg_pool2d(const tensor& x, size2 kernel) { return avg_pool2d(x, kernel, kernel); }

} // namespace xlite::lazy
