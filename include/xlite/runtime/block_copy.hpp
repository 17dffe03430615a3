#pragma once

// Moving blocks of elements between row-major buffers: the collectives' pieces, a device's
// tile of a value it holds whole (op::local_shard), and the host's split and reassembly of a
// sharded tensor (spmd/sharded_data.hpp).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "xlite/core/shape.hpp"
#include "xlite/ir/sharding.hpp"
#include "xlite/runtime/buffer.hpp"

namespace xlite::runtime {

namespace detail {

// Calls run(source, target, length) with element offsets for each row of a block of
// `extent` that starts at `from` in a row-major array of dims `source` and lands at `to` in
// one of dims `target`.
template <class Run>
void for_each_row(std::span<const std::int64_t> source, std::span<const std::int64_t> from,
                  std::span<const std::int64_t> target, std::span<const std::int64_t> to,
                  std::span<const std::int64_t> extent, Run&& run) {
  const std::size_t rank = extent.size();
  if (std::ranges::any_of(extent, [](std::int64_t e) { return e == 0; })) return;
  if (rank == 0) return run(std::int64_t{0}, std::int64_t{0}, std::int64_t{1});
  std::vector<std::int64_t> at(rank, 0); // the row's index within the block (last entry 0)
  for (;;) {
    std::int64_t s = 0;
    std::int64_t t = 0;
    for (std::size_t axis = 0; axis < rank; ++axis) {
      s = s * source[axis] + from[axis] + at[axis];
      t = t * target[axis] + to[axis] + at[axis];
    }
    run(s, t, extent[rank - 1]);
    std::size_t axis = rank - 1;
    for (;;) { // the next row: odometer over all but the last axis
      if (axis == 0) return;
      --axis;
      if (++at[axis] < extent[axis]) break;
      at[axis] = 0;
    }
  }
}

inline std::vector<std::int64_t> dims_of(const xlite::shape& s) { return {s.begin(), s.end()}; }

} // namespace detail

// Copies the block of `extent` elements per dimension at `from` in `source` to `to` in
// `target` (both of one dtype).
inline void copy_block(const buffer& source, std::span<const std::int64_t> from, buffer& target,
                       std::span<const std::int64_t> to, std::span<const std::int64_t> extent) {
  const auto element = static_cast<std::int64_t>(size_of(source.type()));
  detail::for_each_row(detail::dims_of(source.shape()), from, detail::dims_of(target.shape()), to, extent,
                       [&](std::int64_t s, std::int64_t t, std::int64_t length) {
                         std::memcpy(target.data() + t * element, source.data() + s * element,
                                     static_cast<std::size_t>(length * element));
                       });
}

// The tile `device` holds of `whole` under `s`, padded with zeros to the shard shape.
inline buffer_ptr take_shard(const buffer& whole, const ir::sharding& s, std::int64_t device) {
  const xlite::shape& global = whole.shape();
  buffer_ptr shard = make_buffer(whole.type(), s.shard_shape(global));
  std::memset(shard->data(), 0, static_cast<std::size_t>(shard->byte_size()));
  std::vector<std::int64_t> begin, extent;
  for (const auto& [b, e] : s.shard_bounds(global, device)) {
    begin.push_back(b);
    extent.push_back(e - b);
  }
  copy_block(whole, begin, *shard, std::vector<std::int64_t>(global.rank(), 0), extent);
  return shard;
}

} // namespace xlite::runtime
