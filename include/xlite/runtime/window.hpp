#pragma once

// Runs the window ops (ir/window.hpp): unfold, fold, select_window_max and
// scatter_window_max. Each works plane by plane ((n, c) of an (N, C, H, W) tensor, or an
// unfolded row), planes split over the pool's threads; the planes a thread writes are its
// own, so sums (fold, scatter) run in one fixed order whatever the thread count: taps in
// (KH, KW) order, then windows in row-major order. bfloat16 and float16 sums accumulate
// in float and are rounded once.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/ir/window.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/elementwise.hpp"
#include "xlite/runtime/layout.hpp"

namespace xlite::runtime {

namespace detail {

// Planes of `plane_elements` per task: about 16K elements, at least one plane.
inline std::int64_t plane_grain(std::int64_t plane_elements) {
  return std::max<std::int64_t>(1, (std::int64_t{1} << 14) / std::max<std::int64_t>(1, plane_elements));
}

// One tap of a kernel along one axis: window p reads element p * stride + offset, which is
// inside the axis for windows [first, last) and in the padding for the others.
struct tap_reach {
  std::int64_t first, last, offset;
};

inline tap_reach reach(std::int64_t size, std::int64_t windows, std::int64_t stride, std::int64_t pad,
                       std::int64_t tap) {
  const std::int64_t offset = tap - pad;
  const std::int64_t first = std::min(windows, offset >= 0 ? 0 : (-offset + stride - 1) / stride);
  const std::int64_t last = size - 1 - offset < 0 ? first : std::clamp((size - 1 - offset) / stride + 1, first, windows);
  return {first, last, offset};
}

// The two axes' reach of tap (i, j).
struct tap_rect {
  tap_reach rows, cols;
};

inline tap_rect reach(const ir::window2d& w, std::int64_t h, std::int64_t wd, std::int64_t i, std::int64_t j) {
  return {reach(h, w.out_h(h), w.stride_h, w.pad_h, i * w.dilation_h),
          reach(wd, w.out_w(wd), w.stride_w, w.pad_w, j * w.dilation_w)};
}

// x (N, C, H, W) -> out (N, C*KH*KW, OH*OW); E is the element as raw bytes, 0 bits a zero.
template <class E>
void unfold_rows(const E* x, const shape& in, const ir::window2d& w, E* out, thread_pool& pool) {
  const std::int64_t h = in[2], wd = in[3], oh = w.out_h(h), ow = w.out_w(wd);
  const std::int64_t kh = w.kernel_h, kw = w.kernel_w;
  pool.parallel_for(in[0] * in[1] * kh * kw, plane_grain(oh * ow), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t j = r % kw, i = r / kw % kh;
      const E* plane = x + r / (kh * kw) * h * wd;
      E* row = out + r * oh * ow;
      const tap_rect t = reach(w, h, wd, i, j);
      std::fill(row, row + t.rows.first * ow, E{});
      for (std::int64_t y = t.rows.first; y < t.rows.last; ++y) {
        E* to = row + y * ow;
        const E* from = plane + (y * w.stride_h + t.rows.offset) * wd + t.cols.offset;
        std::fill(to, to + t.cols.first, E{});
        if (w.stride_w == 1) {
          std::memcpy(to + t.cols.first, from + t.cols.first,
                      static_cast<std::size_t>(t.cols.last - t.cols.first) * sizeof(E));
        } else {
          for (std::int64_t x_at = t.cols.first; x_at < t.cols.last; ++x_at) to[x_at] = from[x_at * w.stride_w];
        }
        std::fill(to + t.cols.last, to + ow, E{});
      }
      std::fill(row + t.rows.last * ow, row + oh * ow, E{});
    }
  });
}

// Each (n, c) plane of `out` (N, C, H, W) computed into an accumulator of type A: the plane
// itself when T is A, else a float plane rounded into it at the end.
template <class T, class Fill>
void accumulate_planes(T* out, const shape& s, thread_pool& pool, Fill fill) {
  using A = compute_t<T>;
  const std::int64_t plane_elements = s[2] * s[3];
  pool.parallel_for(s[0] * s[1], plane_grain(plane_elements), [&](std::int64_t begin, std::int64_t end) {
    std::vector<A> widened;
    for (std::int64_t p = begin; p < end; ++p) {
      T* plane = out + p * plane_elements;
      A* sums = nullptr;
      if constexpr (std::is_same_v<A, T>) {
        sums = plane;
        std::fill(sums, sums + plane_elements, A{});
      } else {
        widened.assign(static_cast<std::size_t>(plane_elements), A{});
        sums = widened.data();
      }
      fill(p, sums);
      if constexpr (!std::is_same_v<A, T>) {
        for (std::int64_t e = 0; e < plane_elements; ++e) plane[e] = static_cast<T>(sums[e]);
      }
    }
  });
}

// cols (N, C*KH*KW, OH*OW) -> out (N, C, H, W), each column element added where unfold read it.
template <class T>
void fold_rows(const T* cols, const ir::window2d& w, T* out, const shape& s, thread_pool& pool) {
  using A = compute_t<T>;
  const std::int64_t h = s[2], wd = s[3], oh = w.out_h(h), ow = w.out_w(wd);
  accumulate_planes(out, s, pool, [&](std::int64_t p, A* sums) {
    for (std::int64_t i = 0; i < w.kernel_h; ++i) {
      for (std::int64_t j = 0; j < w.kernel_w; ++j) {
        const T* row = cols + ((p * w.kernel_h + i) * w.kernel_w + j) * oh * ow;
        const tap_rect t = reach(w, h, wd, i, j);
        for (std::int64_t y = t.rows.first; y < t.rows.last; ++y) {
          A* to = sums + (y * w.stride_h + t.rows.offset) * wd + t.cols.offset;
          const T* from = row + y * ow;
          for (std::int64_t x_at = t.cols.first; x_at < t.cols.last; ++x_at) {
            to[x_at * w.stride_w] += static_cast<A>(from[x_at]);
          }
        }
      }
    }
  });
}

// Whether v replaces `best` as a window's maximum so far: a larger value, or a NaN over a
// number; nothing replaces a NaN. So the first maximum (or NaN) in tap order wins.
template <class A>
bool beats(A v, A best) {
  return (best == best) & !(v <= best); // best is not NaN, and v > best or v is NaN; no branch
}

// The windows whose taps all fall inside the input along one axis: [first, last).
inline tap_reach inner_windows(std::int64_t size, std::int64_t windows, std::int64_t stride, std::int64_t pad,
                               std::int64_t kernel, std::int64_t dilation) {
  const tap_reach first_tap = reach(size, windows, stride, pad, 0);
  const tap_reach last_tap = reach(size, windows, stride, pad, (kernel - 1) * dilation);
  const std::int64_t first = std::max(first_tap.first, last_tap.first);
  return {first, std::max(first, std::min(first_tap.last, last_tap.last)), 0};
}

// Calls visit(window index in the plane, position of the window's first maximum of `plane`)
// for every window of an h x wd plane, in row-major order. Windows inside the input take a
// loop without bounds checks; those that reach into the padding skip its taps. Every window
// holds an element (ir::select_window_max checks).
template <class T, class Visit>
void for_each_window_max(const T* plane, std::int64_t h, std::int64_t wd, const ir::window2d& w, Visit visit) {
  using A = compute_t<T>;
  const std::int64_t oh = w.out_h(h), ow = w.out_w(wd);
  const tap_reach rows = inner_windows(h, oh, w.stride_h, w.pad_h, w.kernel_h, w.dilation_h);
  const tap_reach cols = inner_windows(wd, ow, w.stride_w, w.pad_w, w.kernel_w, w.dilation_w);
  for (std::int64_t y = 0; y < oh; ++y) {
    const std::int64_t top = y * w.stride_h - w.pad_h;
    const bool inner_row = y >= rows.first && y < rows.last;
    for (std::int64_t x = 0; x < ow; ++x) {
      const std::int64_t left = x * w.stride_w - w.pad_w;
      std::int64_t best_at = -1;
      A best{};
      if (inner_row && x >= cols.first && x < cols.last) {
        best_at = top * wd + left;
        best = static_cast<A>(plane[best_at]);
        for (std::int64_t i = 0; i < w.kernel_h; ++i) {
          const std::int64_t row_at = (top + i * w.dilation_h) * wd + left;
          for (std::int64_t j = 0; j < w.kernel_w; ++j) {
            // Selects, not a branch: on real data which tap wins is a coin toss.
            const std::int64_t at = row_at + j * w.dilation_w;
            const A v = static_cast<A>(plane[at]);
            const bool wins = beats(v, best);
            best = wins ? v : best;
            best_at += static_cast<std::int64_t>(wins) * (at - best_at);
          }
        }
      } else {
        for (std::int64_t i = 0; i < w.kernel_h; ++i) {
          const std::int64_t row = top + i * w.dilation_h;
          if (row < 0 || row >= h) continue;
          for (std::int64_t j = 0; j < w.kernel_w; ++j) {
            const std::int64_t col = left + j * w.dilation_w;
            if (col < 0 || col >= wd) continue;
            const A v = static_cast<A>(plane[row * wd + col]);
            if (best_at < 0 || beats(v, best)) {
              best = v;
              best_at = row * wd + col;
            }
          }
        }
      }
      visit(y * ow + x, best_at);
    }
  }
}

// out (N, C, OH, OW): y's element at each window's first maximum of x.
template <class T>
void select_at_max(const T* x, const T* y, const shape& in, const ir::window2d& w, T* out, thread_pool& pool) {
  const std::int64_t h = in[2], wd = in[3], windows = w.out_h(h) * w.out_w(wd);
  pool.parallel_for(in[0] * in[1], plane_grain(h * wd), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      const T* from = y + p * h * wd;
      T* to = out + p * windows;
      for_each_window_max(x + p * h * wd, h, wd, w, [&](std::int64_t o, std::int64_t at) { to[o] = from[at]; });
    }
  });
}

// out (N, C, H, W): each element of g (N, C, OH, OW) added at its window's first maximum of x.
template <class T>
void scatter_to_max(const T* x, const T* g, const ir::window2d& w, T* out, const shape& s, thread_pool& pool) {
  using A = compute_t<T>;
  const std::int64_t h = s[2], wd = s[3], windows = w.out_h(h) * w.out_w(wd);
  accumulate_planes(out, s, pool, [&](std::int64_t p, A* sums) {
    const T* from = g + p * windows;
    for_each_window_max(x + p * h * wd, h, wd, w,
                        [&](std::int64_t o, std::int64_t at) { sums[at] += static_cast<A>(from[o]); });
  });
}

} // namespace detail

inline void run_window(const ir::instruction& ins, std::span<const buffer* const> inputs, buffer& out,
                       thread_pool& pool) {
  const ir::window2d w = ir::window2d::from(ins.attrs.ints);
  const buffer& x = *inputs[0];
  if (ins.code == op::unfold) {
    detail::visit_element_size(size_of(ins.type), [&](auto tag) {
      using E = typename decltype(tag)::type;
      detail::unfold_rows(reinterpret_cast<const E*>(x.data()), x.shape(), w, reinterpret_cast<E*>(out.data()), pool);
    });
    return;
  }
  visit_dtype(ins.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw dtype_error(xlite::detail::message(name(ins.code), ": bool operands"));
    } else {
      switch (ins.code) {
      case op::fold:
        return detail::fold_rows(x.as<T>(), w, out.as<T>(), out.shape(), pool);
      case op::select_window_max:
        if constexpr (std::is_floating_point_v<detail::compute_t<T>>) {
          return detail::select_at_max(x.as<T>(), inputs[1]->as<T>(), x.shape(), w, out.as<T>(), pool);
        }
        break;
      case op::scatter_window_max:
        if constexpr (std::is_floating_point_v<detail::compute_t<T>>) {
          return detail::scatter_to_max(x.as<T>(), inputs[1]->as<T>(), w, out.as<T>(), out.shape(), pool);
        }
        break;
      default:
        break;
      }
      throw value_error(xlite::detail::message("run_window: ", name(ins.code), " on ", name(ins.type),
                                               " is not a window op this runtime runs"));
    }
  });
}

} // namespace xlite::runtime
