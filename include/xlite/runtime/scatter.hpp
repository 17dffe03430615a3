#pragma once

// The adjoints of gather and index_select (ir/build.hpp): scatter_add and index_add sum src's
// elements into a zero tensor at positions an index gives along one axis. The work is cut
// into lines, the positions of src on every axis but that one; a line's elements land in one
// line of the result, which no other line touches, so lines run on any thread and each
// result element adds its contributions in src's order: the same bits for any thread count.
// Sums are kept in the compute dtype (float for bf16 and f16) and rounded once.

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>

#include "xlite/core/aligned_memory.hpp"
#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/kernels/convert.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/elementwise.hpp"
#include "xlite/runtime/layout.hpp"

namespace xlite::runtime {

namespace detail {

// result[line(p), index[p] along axis] += src[p] for each p of src's shape, into `sums`
// (zeros of the result's shape). index_of_slice: the index is 1-D, one entry per position
// along the axis (index_add); otherwise it has src's shape (scatter_add).
template <class T, class C>
void scatter_lines(const T* src, const shape& src_shape, const std::int64_t* index, bool index_of_slice,
                   std::size_t axis, C* sums, const shape& result_shape, op code, thread_pool& pool) {
  const std::size_t rank = src_shape.rank();
  const strides_t src_strides = row_major_strides(src_shape), result_strides = row_major_strides(result_shape);
  const std::int64_t length = src_shape[axis], positions = result_shape[axis];
  const std::int64_t lines = length == 0 ? 0 : src_shape.numel() / length;
  pool.parallel_for(lines, 256, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t line = begin; line < end; ++line) {
      std::int64_t rest = line, from = 0, to = 0;
      for (std::size_t a = rank; a-- > 0;) {
        if (a == axis) continue;
        const std::int64_t at = rest % src_shape[a];
        rest /= src_shape[a];
        from += at * src_strides[a];
        to += at * result_strides[a];
      }
      for (std::int64_t k = 0; k < length; ++k) {
        const std::int64_t element = from + k * src_strides[axis];
        const std::int64_t j = index[index_of_slice ? k : element];
        if (j < 0 || j >= positions) {
          throw index_error(xlite::detail::message(name(code), ": index ", j, " is out of range for axis ", axis,
                                                   " of shape ", result_shape));
        }
        sums[to + j * result_strides[axis]] += static_cast<C>(src[element]);
      }
    }
  });
}

} // namespace detail

// Runs scatter_add or index_add `ins`: inputs are src and the int64 index.
inline void run_scatter(const ir::instruction& ins, std::span<const buffer* const> inputs, buffer& out,
                        thread_pool& pool) {
  const auto axis = static_cast<std::size_t>(ins.attrs.ints[0]);
  visit_dtype(ins.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    const std::int64_t count = out.shape().numel();
    // Sums in the compute dtype: in the result itself when that is the storage dtype.
    aligned_array<C> scratch;
    C* sums = reinterpret_cast<C*>(out.data());
    if constexpr (!std::is_same_v<C, T>) {
      scratch = allocate_aligned<C>(count);
      sums = scratch.get();
    }
    std::fill_n(sums, count, C{});
    detail::scatter_lines(inputs[0]->as<T>(), inputs[0]->shape(), inputs[1]->as<std::int64_t>(),
                          ins.code == op::index_add, axis, sums, out.shape(), ins.code, pool);
    if constexpr (!std::is_same_v<C, T>) detail::store_values(out.as<T>(), sums, count, false);
  });
}

} // namespace xlite::runtime
