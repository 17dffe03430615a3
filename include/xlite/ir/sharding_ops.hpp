#pragma once

// The IR's two sharding ops. mark_sharding is a user's annotation in the global graph: its
// value is its operand's, and the SPMD partitioner (spmd/partitioner.hpp) must give it the
// sharding it names. local_shard is in the partitioner's per-device program: each device
// takes its own tile of a value every device holds whole. Both keep the sharding in their
// ints (sharding::to_ints), so it is part of the graph's hash: a step traced with another
// sharding is another graph.

#include "xlite/ir/build.hpp"
#include "xlite/ir/node.hpp"
#include "xlite/ir/sharding.hpp"

namespace xlite::ir {

inline node_ptr mark_sharding(const node_ptr& x, const sharding& s) {
  s.check_fits(x->shape(), "mark_sharding");
  attributes attrs;
  attrs.ints = s.to_ints();
  return make_node(op::mark_sharding, x->type(), x->shape(), {x}, std::move(attrs));
}

// On each device, its tile of x (of x's global shape), padded with zeros to the shard shape.
inline node_ptr local_shard(const node_ptr& x, const sharding& s) {
  attributes attrs;
  attrs.ints = s.to_ints();
  return make_node(op::local_shard, x->type(), s.shard_shape(x->shape()), {x}, std::move(attrs));
}

} // namespace xlite::ir
