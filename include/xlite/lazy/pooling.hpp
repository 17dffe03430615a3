#pragma once

// max_pool2d and avg_pool2d (torch.nn.functional's, floor mode, no dilation) on (N, C, H, W)
// tensors, as composites of reshape, slice, pad and reductions or element-wise ops, so that
// autodiff and the other passes need nothing new. The windows are convolution.hpp's.
//
// Two lowerings:
// - windows that do not overlap (stride == kernel, no padding): the input, cropped to whole
//   windows when H or W is not a multiple of the kernel (floor mode drops the rest), is
//   reshaped to (N, C, OH, KH, OW, KW) and reduced over axes 3 and 5 with one amax (mean).
//   One reduction, and its gradient (the reduction's) splits a tie equally among the maxima of
//   a window, as JAX's max pooling does.
// - any other window: the KH*KW strided taps of the padded input (padded with -inf for max,
//   0 for average), folded with maximum (+): one fused element-wise kernel over the taps. A
//   tie's gradient is then the fold's, pair by pair (autodiff's maximum halves a tie, so a
//   three-way tie splits 1/4, 1/4, 1/2): the paths agree on values, not on tie gradients.
// Both propagate NaN, as torch does. Speed: today the runtime reduces short runs (KW
// elements) one output at a time, so the tap path is the faster one even for tiling
// windows (relu then max_pool2d 2 on (128, 32, 28, 28), two threads: 7 ms against 20-24 ms);
// the reshape path is kept for its tie rule and its few nodes, and gains most from a
// faster reduction.

#include <cstdint>
#include <limits>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/lazy/convolution.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite::lazy {

namespace detail {

struct pool_geometry {
  size2 kernel, stride, padding, out;
  bool tiled; // windows side by side: the reshape-and-reduce lowering
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
  const size2 out{window_count(s[2], kernel.h, stride.h, padding.h, 1),
                  window_count(s[3], kernel.w, stride.w, padding.w, 1)};
  if (out.h < 1 || out.w < 1) {
    throw shape_error(xlite::detail::message(op_name, ": kernel ", kernel, " is larger than the padded input ",
                                             size2{s[2] + 2 * padding.h, s[3] + 2 * padding.w}, " (input of shape ", s,
                                             ", padding ", padding, ")"));
  }
  return {kernel, stride, padding, out, stride == kernel && padding == size2{0}};
}

// x cropped to the windows and viewed as (N, C, OH, KH, OW, KW).
inline tensor tiled_windows(const tensor& x, const pool_geometry& g) {
  const shape& s = x.shape();
  const tensor cropped = slice(slice(x, 2, 0, g.out.h * g.kernel.h), 3, 0, g.out.w * g.kernel.w); // x when they divide
  return reshape(cropped, shape{s[0], s[1], g.out.h, g.kernel.h, g.out.w, g.kernel.w});
}

// The taps of every window of x padded with `fill`, folded with `combine`.
template <class F>
tensor fold_taps(const tensor& x, const pool_geometry& g, double fill, F combine) {
  const tensor padded = pad(x, {{0, 0}, {0, 0}, {g.padding.h, g.padding.h}, {g.padding.w, g.padding.w}}, fill);
  tensor result = window_tap(padded, 0, 0, g.out, g.stride, 1);
  for (std::int64_t i = 0; i < g.kernel.h; ++i) {
    for (std::int64_t j = i == 0 ? 1 : 0; j < g.kernel.w; ++j) {
      result = combine(result, window_tap(padded, i, j, g.out, g.stride, 1));
    }
  }
  return result;
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
  if (g.tiled) return amax(detail::tiled_windows(x, g), {3, 5});
  return detail::fold_taps(x, g, -std::numeric_limits<double>::infinity(),
                           [](const tensor& a, const tensor& b) { return maximum(a, b); });
}
// stride = kernel, as torch's default.
inline tensor max_pool2d(const tensor& x, size2 kernel) { return max_pool2d(x, kernel, kernel); }

// The mean of each window. The divisor is kernel.h * kernel.w, or, with count_include_pad =
// false, the number of elements of x in the window (torch's rules for floor mode).
inline tensor avg_pool2d(const tensor& x, size2 kernel, size2 stride, size2 padding = 0,
                         bool count_include_pad = true) {
  const detail::pool_geometry g = detail::pool_windows("avg_pool2d", x, kernel, stride, padding);
  if (g.tiled) return mean(detail::tiled_windows(x, g), {3, 5});
  const tensor sums = detail::fold_taps(x, g, 0.0, [](const tensor& a, const tensor& b) { return a + b; });
  if (count_include_pad || g.padding == size2{0}) return sums / static_cast<double>(kernel.h * kernel.w);
  return sums / detail::window_sizes(x, g);
}
inline tensor avg_pool2d(const tensor& x, size2 kernel) { return avg_pool2d(x, kernel, kernel); }

} // namespace xlite::lazy
