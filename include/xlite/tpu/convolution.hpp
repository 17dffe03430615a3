#pragma once

// Convolutions on the systolic array, mapped as SCALE-Sim maps them: im2col turns an
// (N, C, H, W) input into an (N*OH*OW, C*KH*KW) matrix whose rows are its windows, the
// (F, C, KH, KW) weights become a (C*KH*KW, F) matrix, and one GEMM gives the output in
// (N*OH*OW, F) order (channels last), priced and computed as any other.
//
//   auto [y, report] = xlite::tpu::conv2d(mxu, x, w, {.pad_h = 1, .pad_w = 1});

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/ir/window.hpp"
#include "xlite/tpu/dataflow.hpp"
#include "xlite/tpu/matrix.hpp"
#include "xlite/tpu/report.hpp"

namespace xlite::tpu {

struct conv2d_options {
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
};

namespace detail {

template <class C>
std::vector<std::int64_t> dims_of(const C& c) {
  std::vector<std::int64_t> dims;
  for (const auto d : c.shape()) dims.push_back(static_cast<std::int64_t>(d));
  return dims;
}

inline std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string text = "(";
  for (std::size_t i = 0; i < d.size(); ++i) text += (i ? ", " : "") + std::to_string(d[i]);
  return text + (d.size() == 1 ? ",)" : ")");
}

// The window geometry of a convolution of `input` (N, C, H, W) by `weights` (F, C, KH, KW),
// checked: errors name conv2d, both shapes and what does not fit.
inline ir::window2d conv2d_window(const std::vector<std::int64_t>& input, const std::vector<std::int64_t>& weights,
                                  const conv2d_options& o) {
  const auto fail = [&](const std::string& why) {
    throw shape_error(
        xlite::detail::message("tpu::conv2d: input ", dims_text(input), ", weights ", dims_text(weights), ": ", why));
  };
  if (input.size() != 4) fail("the input must be 4-D (N, C, H, W)");
  if (weights.size() != 4) fail("the weights must be 4-D (out_channels, in_channels, KH, KW)");
  if (input[1] != weights[1]) fail("the input's channels and the weights' in_channels differ");
  if (o.stride_h < 1 || o.stride_w < 1 || o.dilation_h < 1 || o.dilation_w < 1 || o.pad_h < 0 || o.pad_w < 0) {
    fail(xlite::detail::message("stride and dilation must be positive and padding not negative, got stride (",
                                o.stride_h, ", ", o.stride_w, "), padding (", o.pad_h, ", ", o.pad_w, "), dilation (",
                                o.dilation_h, ", ", o.dilation_w, ")"));
  }
  const ir::window2d w{weights[2], weights[3], o.stride_h, o.stride_w, o.pad_h, o.pad_w, o.dilation_h, o.dilation_w};
  if (w.kernel_h < 1 || w.kernel_w < 1 || w.out_h(input[2]) < 1 || w.out_w(input[3]) < 1) {
    fail("the kernel does not fit the padded input");
  }
  return w;
}

} // namespace detail

// The GEMM a convolution becomes: M = N*OH*OW windows, K = C*KH*KW, N = out_channels.
inline gemm_shape conv2d_gemm_shape(const std::vector<std::int64_t>& input, const std::vector<std::int64_t>& weights,
                                    const conv2d_options& o = {}) {
  const ir::window2d w = detail::conv2d_window(input, weights, o);
  return {input[0] * w.out_h(input[2]) * w.out_w(input[3]), input[1] * w.kernel_h * w.kernel_w, weights[0]};
}

// y = conv2d(x, w) on `array`: x (N, C, H, W) and w (F, C, KH, KW) are contiguous row-major
// containers (xlite::tensor, xt::xtensor); y is (N*OH*OW, F), row (n, oh, ow).
template <class Array, class Input, class Weights>
auto conv2d(const Array& array, const Input& x, const Weights& w, const conv2d_options& o = {},
            timing mode = timing::pipelined) {
  const std::vector<std::int64_t> xd = detail::dims_of(x), wd = detail::dims_of(w);
  const ir::window2d win = detail::conv2d_window(xd, wd, o);
  const gemm_shape g = conv2d_gemm_shape(xd, wd, o);
  const std::int64_t channels = xd[1], h = xd[2], wid = xd[3], oh = win.out_h(h), ow = win.out_w(wid);
  using X = std::remove_cvref_t<decltype(*x.data())>;
  using W = std::remove_cvref_t<decltype(*w.data())>;
  matrix<X> windows(g.m, g.k); // zeros where a window reaches into the padding
  for (std::int64_t n = 0; n < xd[0]; ++n) {
    for (std::int64_t y = 0; y < oh; ++y) {
      for (std::int64_t z = 0; z < ow; ++z) {
        X* row = windows.data() + ((n * oh + y) * ow + z) * g.k;
        for (std::int64_t c = 0; c < channels; ++c) {
          for (std::int64_t i = 0; i < win.kernel_h; ++i) {
            for (std::int64_t j = 0; j < win.kernel_w; ++j) {
              const std::int64_t hi = y * win.stride_h - win.pad_h + i * win.dilation_h;
              const std::int64_t wi = z * win.stride_w - win.pad_w + j * win.dilation_w;
              if (hi >= 0 && hi < h && wi >= 0 && wi < wid) {
                row[(c * win.kernel_h + i) * win.kernel_w + j] = x.data()[((n * channels + c) * h + hi) * wid + wi];
              }
            }
          }
        }
      }
    }
  }
  matrix<W> filters(g.k, g.n); // the weights' (F, K) transposed
  for (std::int64_t f = 0; f < g.n; ++f) {
    for (std::int64_t kk = 0; kk < g.k; ++kk) filters(kk, f) = w.data()[f * g.k + kk];
  }
  return array.gemm(windows, filters, mode);
}

} // namespace xlite::tpu
