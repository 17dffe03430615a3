#pragma once

// conv2d (torch.nn.functional.conv2d, groups = 1) as a composite: im2col built from layout
// ops, then one matmul. No IR op of its own, so every pass that knows pad, slice, concat and
// matmul (reverse-mode autodiff among them) covers it with no extra work. The window
// geometry here is shared with pooling.hpp.

#include <cstdint>
#include <optional>
#include <ostream>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/build.hpp"
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

// Output positions along one axis: floor((in + 2 pad - dilation (kernel - 1) - 1) / stride) + 1,
// or 0 when the (dilated) kernel does not fit in the padded input.
constexpr std::int64_t window_count(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                                    std::int64_t dilation) {
  const std::int64_t span = dilation * (kernel - 1) + 1;
  return in + 2 * pad < span ? 0 : (in + 2 * pad - span) / stride + 1;
}

// Tap (i, j) of every window of an already padded (N, C, H, W) tensor: for each output
// position, the element at kernel position (i, j) of its window. One slice node, (N, C, OH, OW).
inline tensor window_tap(const tensor& padded, std::int64_t i, std::int64_t j, size2 out, size2 stride,
                         size2 dilation) {
  const shape& s = padded.shape();
  const ir::slice_range ranges[] = {
      {0, s[0], 1},
      {0, s[1], 1},
      {i * dilation.h, i * dilation.h + (out.h - 1) * stride.h + 1, stride.h},
      {j * dilation.w, j * dilation.w + (out.w - 1) * stride.w + 1, stride.w},
  };
  return make(padded.device(), ir::slice(padded.node(), ranges));
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

// input (N, C, H, W), weight (O, C, KH, KW), bias (O) -> (N, O, OH, OW), with
// OH = floor((H + 2 padding.h - dilation.h (KH - 1) - 1) / stride.h) + 1 (OW alike).
//
// Lowering (im2col): the input is padded once; each of the KH*KW kernel taps is one strided
// slice (N, C, OH, OW); the taps, concatenated along H, are the patches (N, C, KH*KW*OH, OW),
// whose memory is that of (N, C*KH*KW, OH*OW) with rows in the weight's (C, KH, KW) order.
// Then weight (O, C*KH*KW) times patches: a batched matmul whose weight operand broadcasts
// over N, giving (N, O, OH*OW), already NCHW. The bias is added to the product, so it runs as
// the GEMM's epilogue.
//
// Layout choice: a single (N*OH*OW, C*KH*KW) x (C*KH*KW, O) GEMM would need the input
// permuted to channels-last and the product permuted back to NCHW (or the patches
// permuted), and a permute is a full strided copy. The batched layout above has no permute
// at all: N GEMMs of O x C*KH*KW x OH*OW sharing their weight. On a (128, 1, 28, 28) ->
// conv 32 -> pool -> conv 64 -> pool forward pass, one thread, best of several runs, it took
// 56 ms, against 58 ms for channels-first with one GEMM and 64 ms for channels-last with one
// GEMM: the copies cost more than the extra GEMM calls. Nodes: one pad, KH*KW slices, one
// concat, one matmul with the bias as its epilogue, and reshapes (copies in today's
// runtime: the taps are concatenated along H, not each reshaped to (N, C, 1, OH*OW), to
// save one). A 1x1 kernel with stride 1 and no padding is just the matmul.
inline tensor conv2d(const tensor& input, const tensor& weight, const std::optional<tensor>& bias = std::nullopt,
                     size2 stride = 1, size2 padding = 0, size2 dilation = 1) {
  detail::require_nchw("conv2d", "input", input);
  if (weight.shape().rank() != 4) {
    throw shape_error(xlite::detail::message("conv2d: weight of shape ", weight.shape(),
                                             " is not 4-D (out_channels, in_channels, KH, KW)"));
  }
  const xlite::device& d = detail::common_device("conv2d", {&input, &weight});
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
  const size2 out{detail::window_count(h, kh, stride.h, padding.h, dilation.h),
                  detail::window_count(w, kw, stride.w, padding.w, dilation.w)};
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

  const tensor padded = pad(input, {{0, 0}, {0, 0}, {padding.h, padding.h}, {padding.w, padding.w}});
  std::vector<ir::node_ptr> taps;
  taps.reserve(static_cast<std::size_t>(kh * kw));
  for (std::int64_t i = 0; i < kh; ++i) {
    for (std::int64_t j = 0; j < kw; ++j) {
      // Tap order (i, j) row-major matches the weight's (KH, KW) order within each channel.
      taps.push_back(detail::window_tap(padded, i, j, out, stride, dilation).node());
    }
  }
  const tensor patches = detail::make(d, ir::concat(std::move(taps), 2)); // (N, C, KH*KW*OH, OW)
  tensor product =
      matmul(reshape(weight, shape{o, c * kh * kw}), reshape(patches, shape{n, c * kh * kw, out.h * out.w}));
  // The bias first: the capture numbers its reshape before the matmul, which the epilogue
  // needs (an epilogue's other inputs must be ready when the GEMM runs).
  if (bias) product = reshape(*bias, shape{o, 1}) + product;
  return reshape(product, shape{n, o, out.h, out.w});
}

} // namespace xlite::lazy
