#pragma once

// Runs the ops that move elements without computing: reshape, permute, slice, concat, pad,
// gather, index_select. Each but the last two is a strided copy: the result's index walked
// in row-major order, the operand read at offset + sum(position * stride). gather and
// index_select read their position along one axis from an index tensor. Elements are copied
// as raw bytes of their size.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/runtime/buffer.hpp"

namespace xlite::runtime {

namespace detail {

using strides_t = std::array<std::int64_t, max_rank>;

inline strides_t row_major_strides(const shape& s) {
  strides_t strides{};
  std::int64_t stride = 1;
  for (std::size_t a = s.rank(); a-- > 0;) {
    strides[a] = stride;
    stride *= s[a];
  }
  return strides;
}

// dst[dst_offset + sum(p * dst_strides)] = src[src_offset + sum(p * src_strides)] for every
// index p of `extent`. Axes that are contiguous with the next one on both sides are merged,
// so the copy walks rows as long as the layout allows, each a memcpy where both sides are
// dense (a slice of whole rows, a pad's interior, a concat's part).
template <class E>
void copy_strided(const E* src, const strides_t& src_strides, std::int64_t src_offset, E* dst,
                  const strides_t& dst_strides, std::int64_t dst_offset, const shape& extent, thread_pool& pool) {
  std::array<std::int64_t, max_rank> dims{}, from{}, to{};
  std::size_t rank = 0;
  for (std::size_t a = 0; a < extent.rank(); ++a) {
    if (extent[a] == 1) continue;
    if (rank > 0 && from[rank - 1] == src_strides[a] * extent[a] && to[rank - 1] == dst_strides[a] * extent[a]) {
      dims[rank - 1] *= extent[a];
    } else {
      dims[rank++] = extent[a];
    }
    from[rank - 1] = src_strides[a];
    to[rank - 1] = dst_strides[a];
  }
  if (extent.numel() == 0) return;
  if (rank == 0) {
    dst[dst_offset] = src[src_offset];
    return;
  }
  const std::int64_t row = dims[rank - 1], rows = extent.numel() / row;
  const std::int64_t from_step = from[rank - 1], to_step = to[rank - 1];
  pool.parallel_for(rows, std::max<std::int64_t>(1, (1 << 15) / row), [&](std::int64_t begin, std::int64_t end) {
    std::array<std::int64_t, max_rank> position{};
    std::int64_t rest = begin, s = src_offset, d = dst_offset;
    for (std::size_t a = rank - 1; a-- > 0;) {
      position[a] = rest % dims[a];
      rest /= dims[a];
      s += position[a] * from[a];
      d += position[a] * to[a];
    }
    for (std::int64_t r = begin; r < end; ++r) {
      if (from_step == 1 && to_step == 1) {
        std::memcpy(dst + d, src + s, static_cast<std::size_t>(row) * sizeof(E));
      } else {
        for (std::int64_t k = 0; k < row; ++k) dst[d + k * to_step] = src[s + k * from_step];
      }
      for (std::size_t a = rank - 1; a-- > 0;) {
        s += from[a];
        d += to[a];
        if (++position[a] < dims[a]) break;
        s -= from[a] * dims[a];
        d -= to[a] * dims[a];
        position[a] = 0;
      }
    }
  });
}

// dst[p] = src[p with p[axis] replaced by index[sum(p * index_strides)]] for every index p
// of `extent` (gather: the index's own strides; index_select: 1 along `axis`, else 0).
template <class E>
void take_along_axis(const E* src, const shape& src_shape, const std::int64_t* index, const strides_t& index_strides,
                     std::size_t axis, E* dst, const shape& extent, op code, thread_pool& pool) {
  const std::size_t rank = extent.rank();
  const strides_t src_strides = row_major_strides(src_shape);
  pool.parallel_for(extent.numel(), 1 << 14, [&](std::int64_t begin, std::int64_t end) {
    std::array<std::int64_t, max_rank> position{};
    for (std::int64_t i = begin; i < end; ++i) {
      std::int64_t rest = i, s = 0, at = 0;
      for (std::size_t a = rank; a-- > 0;) {
        position[a] = rest % extent[a];
        rest /= extent[a];
        at += position[a] * index_strides[a];
        if (a != axis) s += position[a] * src_strides[a];
      }
      const std::int64_t j = index[at];
      if (j < 0 || j >= src_shape[axis]) {
        throw index_error(xlite::detail::message(name(code), ": index ", j, " is out of range for axis ", axis,
                                                 " of shape ", src_shape));
      }
      dst[i] = src[s + j * src_strides[axis]];
    }
  });
}

template <class F>
void visit_element_size(std::size_t size, F&& f) {
  switch (size) {
  case 1:
    return f(std::type_identity<std::uint8_t>{});
  case 2:
    return f(std::type_identity<std::uint16_t>{});
  case 4:
    return f(std::type_identity<std::uint32_t>{});
  default:
    return f(std::type_identity<std::uint64_t>{});
  }
}

} // namespace detail

inline void run_layout(const ir::instruction& ins, std::span<const buffer* const> inputs, buffer& out,
                       thread_pool& pool) {
  detail::visit_element_size(size_of(ins.type), [&](auto tag) {
    using E = typename decltype(tag)::type;
    const auto* src = reinterpret_cast<const E*>(inputs[0]->data());
    auto* dst = reinterpret_cast<E*>(out.data());
    const shape& in_shape = inputs[0]->shape();
    const detail::strides_t in_strides = detail::row_major_strides(in_shape);
    const detail::strides_t out_strides = detail::row_major_strides(out.shape());
    switch (ins.code) {
    case op::reshape:
      if (dst != src) std::memcpy(dst, src, static_cast<std::size_t>(out.byte_size())); // else planned in place
      break;
    case op::permute: {
      detail::strides_t strides{};
      for (std::size_t a = 0; a < ins.attrs.ints.size(); ++a) {
        strides[a] = in_strides[static_cast<std::size_t>(ins.attrs.ints[a])];
      }
      detail::copy_strided(src, strides, 0, dst, out_strides, 0, out.shape(), pool);
      break;
    }
    case op::slice: {
      detail::strides_t strides{};
      std::int64_t offset = 0;
      for (std::size_t a = 0; a < in_shape.rank(); ++a) {
        offset += ins.attrs.ints[3 * a] * in_strides[a];
        strides[a] = ins.attrs.ints[3 * a + 2] * in_strides[a];
      }
      detail::copy_strided(src, strides, offset, dst, out_strides, 0, out.shape(), pool);
      break;
    }
    case op::concat: {
      const auto axis = static_cast<std::size_t>(ins.attrs.ints[0]);
      std::int64_t start = 0;
      for (const buffer* part : inputs) {
        detail::copy_strided(reinterpret_cast<const E*>(part->data()), detail::row_major_strides(part->shape()), 0, dst,
                             out_strides, start * out_strides[axis], part->shape(), pool);
        start += part->shape()[axis];
      }
      break;
    }
    case op::pad: {
      // The fill everywhere, then the operand into the interior.
      visit_dtype(ins.type, [&](auto value_tag) {
        using T = typename decltype(value_tag)::type;
        const T fill = is_floating_point(ins.type) ? static_cast<T>(ins.attrs.value.real)
                                                   : static_cast<T>(ins.attrs.value.integer);
        std::fill_n(reinterpret_cast<T*>(out.data()), out.shape().numel(), fill);
      });
      std::int64_t offset = 0;
      for (std::size_t a = 0; a < in_shape.rank(); ++a) offset += ins.attrs.ints[2 * a] * out_strides[a];
      detail::copy_strided(src, in_strides, 0, dst, out_strides, offset, in_shape, pool);
      break;
    }
    case op::gather:
    case op::index_select: {
      const auto axis = static_cast<std::size_t>(ins.attrs.ints[0]);
      detail::strides_t index_strides{};
      if (ins.code == op::gather) {
        index_strides = out_strides;
      } else {
        index_strides[axis] = 1;
      }
      detail::take_along_axis(src, in_shape, inputs[1]->as<std::int64_t>(), index_strides, axis, dst, out.shape(),
                              ins.code, pool);
      break;
    }
    default:
      throw value_error(xlite::detail::message("run_layout: ", name(ins.code), " is not a layout op"));
    }
  });
}

} // namespace xlite::runtime
