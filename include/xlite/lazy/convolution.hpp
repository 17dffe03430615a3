#pragma once

// conv2d (torch.nn.functional.conv2d, groups = 1) as a composite: unfold (im2col), then one
// matmul. No IR op of its own: autodiff, autocast and fusion cover it through its parts.

#include <cstdint>
#include <optional>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/lazy/unfold.hpp"

namespace xlite::lazy {

// input (N, C, H, W), weight (O, C, KH, KW), bias (O) -> (N, O, OH, OW), with
// OH = floor((H + 2 padding.h - dilation.h (KH - 1) - 1) / stride.h) + 1 (OW alike).
//
// Lowering: the patches unfold(input) (N, C*KH*KW, OH*OW), rows in the weight's (C, KH, KW)
// order; then weight (O, C*KH*KW) times patches, a batched matmul whose weight broadcasts
// over N, giving (N, O, OH*OW), already NCHW. The GEMM runs the N products side by side on
// the threads. The bias is added to the product, so it runs as the GEMM's epilogue.
// A 1x1 kernel with stride 1 and no padding needs no unfold, only a reshape.
//
// Layout choice: a single (N*OH*OW, C*KH*KW) x (C*KH*KW, O) GEMM would need the input
// permuted to channels-last and the product permuted back to NCHW, full strided copies
// that cost more than the extra GEMM calls (measured when conv2d was written: 56 ms for the
// batched layout against 58 and 64 ms for the one-GEMM layouts, on a two-conv forward pass).
// The gradient is the matmul's and unfold's: fold (col2im) of weight^T times the output's
// gradient, and the output's gradient times the patches^T summed over N.
inline tensor conv2d(const tensor& input, const tensor& weight, const std::optional<tensor>& bias = std::nullopt,
                     size2 stride = 1, size2 padding = 0, size2 dilation = 1) {
  detail::require_nchw("conv2d", "input", input);
  if (weight.shape().rank() != 4) {
    throw shape_error(xlite::detail::message("conv2d: weight of shape ", weight.shape(),
                                             " is not 4-D (out_channels, in_channels, KH, KW)"));
  }
  detail::common_device("conv2d", {&input, &weight});
  if (!is_floating_point(input.type()) || weight.type() != input.type()) {
    throw dtype_error(xlite::detail::message("conv2d: input and weight must have one floating-point dtype, got ",
                                             name(input.type()), " and ", name(weight.type())));
  }
  detail::require_positive("conv2d", "stride", stride);
  detail::require_positive("conv2d", "dilation", dilation);
  if (padding.h < 0 || padding.w < 0) {
    throw value_error(xlite::detail::message("conv2d: padding ", padding, " must not be negative"));
  }
  const shape &in = input.shape(), &k = weight.shape();
  const std::int64_t n = in[0], c = in[1], h = in[2], w = in[3];
  const std::int64_t o = k[0], kh = k[2], kw = k[3];
  if (k[1] != c) {
    throw shape_error(xlite::detail::message("conv2d: input of shape ", in, " has ", c,
                                             " channels but weight of shape ", k, " expects ", k[1],
                                             " (weight is (out_channels, in_channels, KH, KW))"));
  }
  const size2 out{ir::window2d::count(h, kh, stride.h, padding.h, dilation.h),
                  ir::window2d::count(w, kw, stride.w, padding.w, dilation.w)};
  if (kh < 1 || kw < 1 || out.h < 1 || out.w < 1) {
    throw shape_error(xlite::detail::message("conv2d: kernel ", size2{kh, kw}, " with dilation ", dilation,
                                             " does not fit the padded input ",
                                             size2{h + 2 * padding.h, w + 2 * padding.w}, " (input of shape ", in,
                                             ", weight of shape ", k, ", padding ", padding, ")"));
  }
  if (bias) {
    detail::common_device("conv2d", {&input, &*bias});
    if (bias->shape() != shape{o}) {
      throw shape_error(xlite::detail::message("conv2d: bias of shape ", bias->shape(),
                                               " does not match weight of shape ", k, ": need (", o, ",)"));
    }
    if (bias->type() != input.type()) {
      throw dtype_error(
          xlite::detail::message("conv2d: bias is ", name(bias->type()), ", input is ", name(input.type())));
    }
  }

  const tensor patches = unfold(input, {kh, kw}, dilation, padding, stride); // (N, C*KH*KW, OH*OW)
  tensor product = matmul(reshape(weight, shape{o, c * kh * kw}), patches);
  // The bias first: the capture numbers its reshape before the matmul, which the epilogue
  // needs (an epilogue's other inputs must be ready when the GEMM runs).
  if (bias) product = reshape(*bias, shape{o, 1}) + product;
  return reshape(product, shape{n, o, out.h, out.w});
}

} // namespace xlite::lazy
