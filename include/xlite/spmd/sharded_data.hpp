#pragma once

// The value of a sharded lazy tensor: one device_data per device, each that device's shard
// (its tile, padded to the shard shape, or its partial value), and the sharding that says
// which is which. A graph parameter holds it, as it holds a device_data for a value every
// device reads whole.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/collective.hpp"
#include "xlite/ir/node.hpp"
#include "xlite/ir/sharding.hpp"
#include "xlite/runtime/block_copy.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/collectives.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/device_data.hpp"
#include "xlite/runtime/processes.hpp"

namespace xlite::spmd {

class sharded_data : public ir::parameter_source {
public:
  // shards[d] is global device d's shard (runtime/processes.hpp), null for the devices of
  // other processes.
  sharded_data(dtype type, const xlite::shape& global, ir::sharding s, std::vector<runtime::device_data_ptr> shards)
      : type_(type), shape_(global), sharding_(std::move(s)), shards_(std::move(shards)) {}

  // Shards still being computed by a barrier's run on each of this process's devices, of
  // `devices` global devices.
  static std::shared_ptr<sharded_data> pending(dtype type, const xlite::shape& global, ir::sharding s,
                                               std::int64_t devices) {
    const xlite::shape local = s.shard_shape(global);
    return std::make_shared<sharded_data>(type, global, std::move(s),
                                          local_shards(devices, [&](const xlite::device& on, std::int64_t) {
                                            return std::make_shared<runtime::device_data>(on, type, local);
                                          }));
  }

  // `whole` cut into the shards of `s` over `devices` global devices (a transfer to each of
  // this process's).
  static std::shared_ptr<sharded_data> split(const runtime::buffer& whole, ir::sharding s, std::int64_t devices) {
    std::vector<runtime::device_data_ptr> shards = local_shards(devices, [&](const xlite::device& on, std::int64_t d) {
      const runtime::allocating_on allocating(on);
      return std::make_shared<runtime::device_data>(on, runtime::take_shard(whole, s, d));
    });
    return std::make_shared<sharded_data>(whole.type(), whole.shape(), std::move(s), std::move(shards));
  }

  dtype type() const noexcept { return type_; }
  const xlite::shape& shape() const noexcept { return shape_; }
  const ir::sharding& sharding() const noexcept { return sharding_; }
  // The global device count.
  std::int64_t device_count() const noexcept { return static_cast<std::int64_t>(shards_.size()); }
  // Global device d's shard: null when d is another process's.
  const runtime::device_data_ptr& shard(std::int64_t device) const { return shards_[static_cast<std::size_t>(device)]; }

  // Waits for the shards and puts the tensor together: each tile from its first replica,
  // partial values combined in the order of their partial index, as the all_reduce the
  // partitioner would insert combines them. Across processes every process calls it at the
  // same point, and the tiles of other processes' devices come from them.
  runtime::buffer_ptr assemble() const {
    std::map<std::int64_t, std::shared_ptr<const runtime::buffer>> tiles;
    for (std::int64_t d = 0; d < device_count(); ++d) {
      const auto where = sharding_.placement_of(d, shape_.rank());
      if (where && where->replica_index == 0 && shard(d)) tiles.emplace(d, shard(d)->wait());
    }
    tiles = runtime::gather_from_processes("assemble", std::move(tiles));
    std::vector<runtime::buffer_ptr> partials(static_cast<std::size_t>(sharding_.partial_count()));
    for (auto& p : partials) p = runtime::make_buffer(type_, shape_);
    const std::vector<std::int64_t> origin(shape_.rank(), 0);
    for (const auto& [d, tile] : tiles) {
      std::vector<std::int64_t> begin, extent;
      for (const auto& [b, e] : sharding_.shard_bounds(shape_, d)) {
        begin.push_back(b);
        extent.push_back(e - b);
      }
      runtime::copy_block(*tile, origin,
                          *partials[static_cast<std::size_t>(sharding_.placement_of(d, shape_.rank())->partial_index)],
                          begin, extent);
    }
    if (partials.size() == 1) return partials[0];
    runtime::buffer_ptr whole = runtime::make_buffer(type_, shape_);
    const std::vector<std::shared_ptr<const runtime::buffer>> inputs(partials.begin(), partials.end());
    runtime::detail::reduce_rows(inputs, 0, *whole, 0, shape_.numel(),
                                 ir::reduce_type_of(sharding_.partial_reduction()), 1.0);
    return whole;
  }

private:
  dtype type_;
  xlite::shape shape_;
  ir::sharding sharding_;
  std::vector<runtime::device_data_ptr> shards_;

  // make(device, global number) for this process's devices; null for the others'.
  template <class Make>
  static std::vector<runtime::device_data_ptr> local_shards(std::int64_t devices, Make make) {
    std::vector<runtime::device_data_ptr> shards(static_cast<std::size_t>(devices));
    for (std::int64_t k = 0; k < xlite::device_count(); ++k) {
      const xlite::device on("cpu:" + std::to_string(k));
      const std::int64_t d = runtime::global_device(on);
      if (d < devices) shards[static_cast<std::size_t>(d)] = make(on, d);
    }
    return shards;
  }
};

using sharded_data_ptr = std::shared_ptr<sharded_data>;

} // namespace xlite::spmd
