#pragma once

// The window ops: sliding windows over the last two axes (H, W) of an (N, C, H, W) tensor,
// the building blocks of convolution and pooling.
//
//   unfold(x)                  (N, C, H, W) -> (N, C*KH*KW, OH*OW): every window's elements
//                              as a column, zeros where it reaches into the padding
//                              (torch.nn.functional.unfold, im2col); rows in (C, KH, KW) order,
//                              a convolution weight's, so that conv2d is one matmul.
//   fold(cols)                 the adjoint: (N, C*KH*KW, OH*OW) -> (N, C, H, W), each column's
//                              elements added back where unfold read them; padding dropped
//                              (torch.nn.functional.fold, col2im).
//   select_window_max(x, y)    (N, C, OH, OW): for each window of x, y's element at the
//                              position of the window's first maximum in row-major order (NaN
//                              counts as the maximum, as torch's max_pool2d). max pooling is
//                              select_window_max(x, x).
//   scatter_window_max(x, g)   the adjoint in y: (N, C, H, W), each element of g (N, C, OH, OW)
//                              added at the position of its window's first maximum of x; XLA's
//                              select-and-scatter, max pooling's gradient. The first maximum
//                              takes it all, as in PyTorch and XLA.
//
// The four are closed under differentiation (unfold <-> fold, select <-> scatter in y; x,
// which only chooses positions, gets no gradient), so conv2d and max_pool2d have gradients
// of any order. Attributes: ints = window2d::ints(), the geometry below.

#include <cstdint>
#include <ostream>
#include <span>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/node.hpp"

namespace xlite::ir {

// A window's geometry along H and W: kernel size, stride, padding (on both sides) and
// dilation (the distance between a kernel's taps).
struct window2d {
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;

  static constexpr std::size_t int_count = 8;
  std::vector<std::int64_t> ints() const {
    return {kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w};
  }
  static window2d from(std::span<const std::int64_t> ints) {
    return {ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], ints[6], ints[7]};
  }

  // Window positions along one axis of `size` elements: the dilated kernel slid by stride
  // over the padded axis; 0 when it does not fit.
  static constexpr std::int64_t count(std::int64_t size, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                                      std::int64_t dilation) {
    const std::int64_t span = dilation * (kernel - 1) + 1;
    return size + 2 * pad < span ? 0 : (size + 2 * pad - span) / stride + 1;
  }
  constexpr std::int64_t out_h(std::int64_t h) const { return count(h, kernel_h, stride_h, pad_h, dilation_h); }
  constexpr std::int64_t out_w(std::int64_t w) const { return count(w, kernel_w, stride_w, pad_w, dilation_w); }

  friend bool operator==(const window2d&, const window2d&) = default;
  friend std::ostream& operator<<(std::ostream& out, const window2d& w) {
    return out << "kernel=(" << w.kernel_h << ", " << w.kernel_w << "), stride=(" << w.stride_h << ", " << w.stride_w
               << "), padding=(" << w.pad_h << ", " << w.pad_w << "), dilation=(" << w.dilation_h << ", "
               << w.dilation_w << ')';
  }
};

namespace detail {

inline void require_rank4(op o, const char* what, const shape& s) {
  if (s.rank() != 4) {
    throw shape_error(xlite::detail::message(name(o), ": ", what, " of shape ", s, " is not 4-D (N, C, H, W)"));
  }
}

// The windows over an (N, C, h, w) input: positive sizes, no negative padding, and at least
// one window along each axis.
inline void require_windows(op o, const window2d& w, std::int64_t h, std::int64_t wd) {
  if (w.kernel_h < 1 || w.kernel_w < 1 || w.stride_h < 1 || w.stride_w < 1 || w.dilation_h < 1 || w.dilation_w < 1 ||
      w.pad_h < 0 || w.pad_w < 0) {
    throw value_error(xlite::detail::message(name(o), ": window ", w,
                                             " needs positive kernel, stride and dilation and no negative padding"));
  }
  if (w.out_h(h) < 1 || w.out_w(wd) < 1) {
    throw shape_error(xlite::detail::message(name(o), ": window ", w, " does not fit an input of ", h, " x ", wd));
  }
}

// Every window of the max ops holds an element of the input along `size`: one whose taps all
// fall into the padding has no maximum.
inline void require_elements_in_windows(op o, const window2d& w, std::int64_t size, std::int64_t kernel,
                                        std::int64_t stride, std::int64_t pad, std::int64_t dilation) {
  const std::int64_t windows = window2d::count(size, kernel, stride, pad, dilation);
  for (std::int64_t p = 0; p < windows; ++p) {
    bool holds = false;
    for (std::int64_t i = 0; i < kernel && !holds; ++i) {
      const std::int64_t at = p * stride - pad + i * dilation;
      holds = at >= 0 && at < size;
    }
    if (!holds) {
      throw value_error(xlite::detail::message(name(o), ": window ", p, " of ", w, " over ", size,
                                               " elements holds only padding"));
    }
  }
}

inline node_ptr window_max_op(op o, const node_ptr& x, const node_ptr& other, const shape& other_shape,
                              const shape& result, const window2d& w) {
  if (!is_floating_point(x->type())) {
    throw dtype_error(xlite::detail::message(name(o), ": x must be floating point, got ", name(x->type())));
  }
  if (other->shape() != other_shape) {
    throw shape_error(xlite::detail::message(name(o), ": operand of shape ", other->shape(), " does not match ",
                                             other_shape, " for x of shape ", x->shape(), " and window ", w));
  }
  const shape& s = x->shape();
  require_elements_in_windows(o, w, s[2], w.kernel_h, w.stride_h, w.pad_h, w.dilation_h);
  require_elements_in_windows(o, w, s[3], w.kernel_w, w.stride_w, w.pad_w, w.dilation_w);
  attributes attrs;
  attrs.ints = w.ints();
  return make_node(o, x->type(), result, {x, cast(other, x->type())}, std::move(attrs));
}

} // namespace detail

// (N, C, H, W) -> (N, C*KH*KW, OH*OW).
inline node_ptr unfold(const node_ptr& x, const window2d& w) {
  const shape& s = x->shape();
  detail::require_rank4(op::unfold, "input", s);
  detail::require_windows(op::unfold, w, s[2], s[3]);
  if (w == window2d{}) return reshape(x, shape{s[0], s[1], s[2] * s[3]}); // 1x1, stride 1: each pixel its window
  attributes attrs;
  attrs.ints = w.ints();
  return make_node(op::unfold, x->type(), shape{s[0], s[1] * w.kernel_h * w.kernel_w, w.out_h(s[2]) * w.out_w(s[3])},
                   {x}, std::move(attrs));
}

// (N, C*KH*KW, OH*OW) -> (N, C, h, wd), where OH and OW are the window counts over h x wd.
inline node_ptr fold(const node_ptr& cols, const window2d& w, std::int64_t h, std::int64_t wd) {
  const shape& s = cols->shape();
  if (s.rank() != 3) {
    throw shape_error(xlite::detail::message("fold: input of shape ", s, " is not 3-D (N, C*KH*KW, L)"));
  }
  if (cols->type() == dtype::boolean) throw dtype_error("fold: bool input; its sums need a number type");
  if (h < 1 || wd < 1) throw shape_error(xlite::detail::message("fold: output size ", h, " x ", wd, " is empty"));
  detail::require_windows(op::fold, w, h, wd);
  const std::int64_t taps = w.kernel_h * w.kernel_w, blocks = w.out_h(h) * w.out_w(wd);
  if (s[1] % taps != 0 || s[2] != blocks) {
    throw shape_error(xlite::detail::message("fold: input of shape ", s, " does not hold the ", taps,
                                             "-element windows of a ", h, " x ", wd, " output with ", w, ": need (N, C*",
                                             taps, ", ", blocks, ")"));
  }
  attributes attrs;
  attrs.ints = w.ints();
  return make_node(op::fold, cols->type(), shape{s[0], s[1] / taps, h, wd}, {cols}, std::move(attrs));
}

// (N, C, H, W), (N, C, H, W) -> (N, C, OH, OW).
inline node_ptr select_window_max(const node_ptr& x, const node_ptr& y, const window2d& w) {
  const shape& s = x->shape();
  detail::require_rank4(op::select_window_max, "x", s);
  detail::require_windows(op::select_window_max, w, s[2], s[3]);
  return detail::window_max_op(op::select_window_max, x, y, s, shape{s[0], s[1], w.out_h(s[2]), w.out_w(s[3])}, w);
}

// (N, C, H, W), (N, C, OH, OW) -> (N, C, H, W).
inline node_ptr scatter_window_max(const node_ptr& x, const node_ptr& g, const window2d& w) {
  const shape& s = x->shape();
  detail::require_rank4(op::scatter_window_max, "x", s);
  detail::require_windows(op::scatter_window_max, w, s[2], s[3]);
  return detail::window_max_op(op::scatter_window_max, x, g, shape{s[0], s[1], w.out_h(s[2]), w.out_w(s[3])}, s, w);
}

} // namespace xlite::ir
