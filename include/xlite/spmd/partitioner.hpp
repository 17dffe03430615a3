#pragma once

// The SPMD partitioner: from a barrier's global graph, in which some values carry a user's
// sharding (mark_sharding ops, sharded parameters), to the one program every device runs on
// its shards, with the collectives that program needs. It is GSPMD's idea, done in a short
// backward pass that carries annotations back, then one forward pass over the instructions:
//
// - Each value gets a sharding as it is made. A user's mark_sharding always wins, and is
//   carried back through the element-wise ops, reductions, reshapes, slices, concats and
//   matmuls that lead to it, so that a value computed from whole operands is computed on
//   tiles rather than whole and cut afterwards. An op takes the layout carried back only
//   where no operand has to move for it, so it never costs a collective.
//   Element-wise ops (and broadcast_to) take the sharding of the operand that cuts the
//   result into the most tiles (on a tie the one the annotation carried back asks for, else
//   the first) and reshard the others to match. permute moves its operand's tiles with the
//   axes. reshape keeps a tiled dimension's tiles where it is the major dimension of the
//   dimensions it merges with or splits into, and its tiles are even on both sides
//   (GSPMD's rule).
// - A reduction over tiled axes reduces each shard and leaves a partial value (sum, max,
//   min or prod) pending; an f32 or f64 mean is a partial sum of each shard's sum divided
//   by the count. A matmul whose operands agree on the batch and contracting dimensions'
//   tiles (a 2-D operand broadcasts over the batch) multiplies shards and leaves a partial
//   sum over them; when they do not agree, the operand that is cheaper to move (in bytes) is
//   resharded to fit the other.
// - A partial value is combined (all-reduced or reduce-scattered) only where a consumer needs
//   the full value: add, sub, neg, sum, permute and reshape keep partial sums partial, mul
//   and div by a value every device holds whole too, so chains like sum(matmul(x, w)) reduce
//   once. They do so only for a partial value with no other user: one that others need whole
//   is combined once, first.
//   Outputs may stay partial.
// - slice keeps the tiles of the dimensions it takes whole; concat takes its operands'
//   layout with the most tiles, the concatenated dimension whole. Window ops (unfold,
//   fold, max pooling's) keep the batch's tiles, so a convolution (unfold, then a matmul
//   whose 2-D weight broadcasts over the batch) runs on the batch's shards.
// - Resharding: a partial value whose parts can become the tiles of one dimension is
//   reduce-scattered, else all-reduced; the same tiles wanted on other devices are sent
//   there (collective_permute); tiles that move to another, untiled dimension are
//   exchanged with an all_to_all; tiled dimensions are all-gathered (and their padding
//   sliced off) until the layout matches; a value every device holds whole is cut locally
//   (local_shard), which moves nothing. Each distinct reshard of a value is made once.
// - Every other op (gather, control flow, random, argmax over tiled axes, a matmul that
//   broadcasts a batch of size 1, uneven tiles under a reduction) runs on whole values:
//   its operands are gathered first. That is correct for every op; the ops above are the
//   ones that stay sharded.
//
// Tiles are XLA's, padded to ceil(n / t): padding holds garbage after element-wise ops and
// is never read, since reductions and contractions over an uneven tiled axis gather it
// first and gathering slices it off.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/core/separate_compilation.hpp"
#include "xlite/core/source_location.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/collective.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/ir/sharding.hpp"
#include "xlite/ir/sharding_ops.hpp"

namespace xlite::spmd {

// The per-device program: local parameter k reads a device's shard of the global graph's
// parameter k; output k is its shard of global output k, laid out as output_shardings[k].
// ir::numbered_trace(outputs, parameters) captures it.
struct partitioned_program {
  std::vector<ir::node_ptr> parameters;
  std::vector<ir::node_ptr> outputs;
  std::vector<ir::sharding> output_shardings;
};

namespace detail {

// Whether a and b put the same tile (and partial part) of a rank-`rank` tensor on every one
// of `devices` devices; which replica is which does not matter.
inline bool same_layout(const ir::sharding& a, const ir::sharding& b, std::size_t rank, std::int64_t devices) {
  if (a.partial_count() != b.partial_count() || a.partial_reduction() != b.partial_reduction()) return false;
  for (std::int64_t d = 0; d < devices; ++d) {
    const auto pa = a.placement_of(d, rank), pb = b.placement_of(d, rank);
    if (!pa || !pb || pa->tile != pb->tile || pa->partial_index != pb->partial_index) return false;
  }
  return true;
}

inline std::int64_t tile_product(const ir::sharding& s, std::size_t rank) {
  std::int64_t tiles = 1;
  for (std::size_t a = 0; a < rank; ++a) tiles *= s.tile_count(a);
  return tiles;
}

// s's tiles regrouped for a tensor whose dimension j takes the tiles of s's dimension
// kept[j] (or one tile, for -1). s's dimensions that no j keeps join the replicated devices,
// or, with into_partial, the partial ones (combining with `reduction`).
inline ir::sharding regroup(const ir::sharding& s, std::size_t rank, std::span<const std::int64_t> kept,
                            std::int64_t devices, bool into_partial = false, op reduction = op::sum) {
  const ir::device_array full = s.full_tiles(rank, devices);
  const auto partial = rank, replica = rank + 1;
  std::vector<std::size_t> order, dropped;
  std::vector<std::int64_t> dims;
  for (const std::int64_t k : kept) {
    if (k >= 0) order.push_back(static_cast<std::size_t>(k));
    dims.push_back(k >= 0 ? full.dims()[static_cast<std::size_t>(k)] : 1);
  }
  std::int64_t dropped_devices = 1;
  for (std::size_t a = 0; a < rank; ++a) {
    if (std::ranges::find(kept, static_cast<std::int64_t>(a)) == kept.end()) {
      dropped.push_back(a);
      dropped_devices *= full.dims()[a];
    }
  }
  if (into_partial) {
    order.insert(order.end(), dropped.begin(), dropped.end());
    order.insert(order.end(), {partial, replica});
    dims.insert(dims.end(), {dropped_devices * full.dims()[partial], full.dims()[replica]});
  } else {
    order.push_back(partial);
    order.insert(order.end(), dropped.begin(), dropped.end());
    order.push_back(replica);
    dims.insert(dims.end(), {full.dims()[partial], dropped_devices * full.dims()[replica]});
  }
  const op combine = into_partial && dropped_devices > 1 ? reduction : s.partial_reduction();
  return ir::sharding::from_full_tiles(full.transpose(order).reshape(std::move(dims)), combine);
}

// The groups of devices along full-tile dimension `dim` (a tensor dimension, or `rank` for
// the partial one), each in tile order.
inline ir::replica_groups groups_along(const ir::sharding& s, std::size_t rank, std::size_t dim, std::int64_t devices) {
  const ir::device_array full = s.full_tiles(rank, devices);
  std::vector<std::size_t> order;
  for (std::size_t a = 0; a < full.rank(); ++a) {
    if (a != dim) order.push_back(a);
  }
  order.push_back(dim);
  const ir::device_array rows = full.transpose(order);
  const auto size = static_cast<std::size_t>(full.dims()[dim]);
  ir::replica_groups groups;
  for (std::size_t k = 0; k < rows.ids().size(); k += size) groups.emplace_back(&rows.ids()[k], &rows.ids()[k] + size);
  return groups;
}

// A reshape maps each run of input dimensions [in_begin, in_end) onto a run of output
// dimensions [out_begin, out_end) with the same element count: merges, splits and both.
struct reshape_group {
  std::size_t in_begin, in_end, out_begin, out_end;
};

// The minimal runs, in order; shapes of equal, non-zero element counts.
inline std::vector<reshape_group> reshape_groups(const xlite::shape& in, const xlite::shape& out) {
  std::vector<reshape_group> groups;
  std::size_t i = 0, j = 0;
  while (i < in.rank() || j < out.rank()) {
    reshape_group g{i, i, j, j};
    std::int64_t in_count = i < in.rank() ? in[i++] : 1, out_count = j < out.rank() ? out[j++] : 1;
    while (in_count != out_count) {
      if (in_count < out_count) {
        in_count *= in[i++];
      } else {
        out_count *= out[j++];
      }
    }
    g.in_end = i;
    g.out_end = j;
    groups.push_back(g);
  }
  return groups;
}

// A run's major dimension: its first one of size above 1 (end for an empty run).
inline std::size_t run_major(const xlite::shape& s, std::size_t begin, std::size_t end) {
  while (begin + 1 < end && s[begin] == 1) ++begin;
  return begin;
}

inline std::vector<std::int64_t> identity_dims(std::size_t rank) {
  std::vector<std::int64_t> kept(rank);
  std::iota(kept.begin(), kept.end(), 0);
  return kept;
}

} // namespace detail

class partitioner {
public:
  // `parameter_shardings[k]` is how global parameter k is laid out over `devices` devices.
  partitioner(const ir::graph& g, std::span<const ir::sharding> parameter_shardings, std::int64_t devices)
      : graph_(g), parameter_shardings_(parameter_shardings), devices_(devices), users_(g.instructions.size()) {
    for (const ir::instruction& ins : g.instructions) {
      for (const ir::value_id v : ins.operands) ++users_[v];
    }
    for (const ir::value_id v : g.outputs) ++users_[v];
    propagate_back();
  }

  partitioned_program run() {
    values_.reserve(graph_.instructions.size());
    for (const ir::instruction& ins : graph_.instructions) values_.push_back(partition(ins));
    partitioned_program program;
    program.parameters = std::move(parameters_);
    for (const ir::value_id v : graph_.outputs) {
      program.outputs.push_back(values_[v].local);
      program.output_shardings.push_back(values_[v].sharding);
    }
    return program;
  }

private:
  struct value {
    ir::node_ptr local;    // the device's shard
    ir::sharding sharding; // of the global value
  };

  const ir::instruction& global(ir::value_id v) const { return graph_.instructions[v]; }
  std::size_t rank_of(ir::value_id v) const { return global(v).shape.rank(); }

  value partition(const ir::instruction& ins) {
    const std::vector<ir::value_id>& x = ins.operands;
    switch (ins.code) {
    case op::parameter: {
      const ir::sharding& s = parameter_shardings_[static_cast<std::size_t>(ins.attrs.ints[0])];
      parameters_.push_back(
          ir::parameter(std::make_shared<ir::parameter_source>(), ins.type, s.shard_shape(ins.shape)));
      return {parameters_.back(), s};
    }
    case op::mark_sharding:
      return reshard(x[0], ir::sharding::from_ints(ins.attrs.ints));
    case op::permute: {
      const value in = linear_operand(x[0]);
      return {ir::permute(in.local, ins.attrs.ints),
              detail::regroup(in.sharding, rank_of(x[0]), ins.attrs.ints, devices_)};
    }
    case op::reshape:
      if (ins.shape.numel() > 0) return reshape(ins);
      break;
    case op::slice:
      return slice(ins);
    case op::concat:
      return concat(ins);
    case op::matmul:
      if (multiplies_shards(ins)) return matmul(ins);
      break;
    default:
      if (info(ins.code).kind == op_kind::elementwise || ins.code == op::broadcast_to) return elementwise(ins);
      if (info(ins.code).kind == op_kind::reduction) return reduction(ins);
      if (info(ins.code).kind == op_kind::window) return window(ins);
      if (info(ins.code).kind == op_kind::collective) {
        throw value_error(xlite::detail::message(
            name(ins.code),
            ": collectives are for replica mode (xlite::spawn); in SPMD mode the partitioner inserts them"));
      }
    }
    return on_whole_values(ins);
  }

  // ins on operands every device holds whole: the global op itself.
  value on_whole_values(const ir::instruction& ins) {
    std::vector<ir::node_ptr> operands;
    for (const ir::value_id v : ins.operands) operands.push_back(reshard(v, ir::sharding::replicated()).local);
    return {ir::make_node(ins.code, ins.type, ins.shape, std::move(operands), ins.attrs), ir::sharding::replicated()};
  }

  // A reshape on shards: each tiled input dimension that is the major one of its run, with
  // even tiles on both sides, passes its tiles to the major output dimension of the run;
  // the other tiled dimensions are gathered first. A partial value stays partial.
  value reshape(const ir::instruction& ins) {
    const ir::value_id x = ins.operands[0];
    const xlite::shape& in = global(x).shape;
    const std::size_t rank = in.rank();
    const ir::sharding& given = values_[x].sharding;
    std::vector<std::int64_t> kept = detail::identity_dims(rank), to_output(ins.shape.rank(), -1);
    for (const detail::reshape_group& g : detail::reshape_groups(in, ins.shape)) {
      const std::size_t major_out = detail::run_major(ins.shape, g.out_begin, g.out_end);
      for (std::size_t a = g.in_begin; a < g.in_end; ++a) {
        const std::int64_t tiles = given.tile_count(a);
        if (tiles == 1) continue;
        if (a == detail::run_major(in, g.in_begin, g.in_end) && major_out < g.out_end && in[a] % tiles == 0 &&
            ins.shape[major_out] % tiles == 0) {
          to_output[major_out] = static_cast<std::int64_t>(a);
        } else {
          kept[a] = -1;
        }
      }
    }
    value operand = kept == detail::identity_dims(rank) ? linear_operand(x) : full_value(x);
    operand = reshard(x, operand, detail::regroup(operand.sharding, rank, kept, devices_));
    const ir::sharding result = detail::regroup(operand.sharding, rank, to_output, devices_);
    return {ir::reshape(operand.local, result.shard_shape(ins.shape)), result};
  }

  // A slice on shards: a tiled dimension it takes whole keeps its tiles; the other tiled
  // dimensions are gathered first.
  value slice(const ir::instruction& ins) {
    const ir::value_id x = ins.operands[0];
    const xlite::shape& in = global(x).shape;
    const std::size_t rank = in.rank();
    std::vector<std::int64_t> kept = detail::identity_dims(rank);
    for (std::size_t a = 0; a < rank; ++a) {
      if (!takes_whole(ins, a) && values_[x].sharding.tile_count(a) > 1) kept[a] = -1;
    }
    value operand = kept == detail::identity_dims(rank) ? linear_operand(x) : full_value(x);
    operand = reshard(x, operand, detail::regroup(operand.sharding, rank, kept, devices_));
    std::vector<ir::slice_range> ranges;
    for (std::size_t a = 0; a < rank; ++a) {
      const std::int64_t* range = &ins.attrs.ints[3 * a];
      ranges.push_back(takes_whole(ins, a) ? ir::slice_range{0, operand.local->shape()[a], 1}
                                           : ir::slice_range{range[0], range[1], range[2]});
    }
    return {ir::slice(operand.local, ranges), operand.sharding};
  }

  // Whether slice `ins` takes its operand's dimension `axis` whole.
  bool takes_whole(const ir::instruction& ins, std::size_t axis) const {
    const std::int64_t* range = &ins.attrs.ints[3 * axis]; // start, stop, step
    return range[0] == 0 && range[1] == global(ins.operands[0]).shape[axis] && range[2] == 1;
  }

  // A concat on shards: its operands take the layout with the most tiles among theirs,
  // the concatenated dimension whole.
  value concat(const ir::instruction& ins) {
    const std::size_t rank = ins.shape.rank();
    std::vector<std::int64_t> kept = detail::identity_dims(rank);
    kept[static_cast<std::size_t>(ins.attrs.ints[0])] = -1;
    std::vector<value> operands;
    ir::sharding chosen = ir::sharding::replicated();
    for (const ir::value_id v : ins.operands) {
      operands.push_back(full_value(v));
      const ir::sharding s = detail::regroup(operands.back().sharding, rank, kept, devices_);
      if (detail::tile_product(s, rank) > detail::tile_product(chosen, rank)) chosen = s;
    }
    std::vector<ir::node_ptr> locals;
    for (std::size_t k = 0; k < operands.size(); ++k) {
      locals.push_back(reshard(ins.operands[k], operands[k], chosen).local);
    }
    return {rebuild(ins, std::move(locals), chosen.shard_shape(ins.shape)), chosen};
  }

  // A window op (unfold, fold, max pooling's) on shards of the batch: a sample's windows
  // are its own, so dimension 0's tiles, the first operand's, pass through; the other tiled
  // dimensions are gathered first.
  value window(const ir::instruction& ins) {
    const auto batch_only = [](std::size_t rank) {
      std::vector<std::int64_t> kept(rank, -1);
      kept[0] = 0;
      return kept;
    };
    const ir::value_id first = ins.operands[0];
    const ir::sharding lead = full_value(first).sharding;
    const auto batch_tiles = [&](std::size_t rank) {
      return detail::regroup(lead, rank_of(first), batch_only(rank), devices_);
    };
    std::vector<ir::node_ptr> operands;
    for (const ir::value_id v : ins.operands) operands.push_back(reshard(v, full_value(v), batch_tiles(rank_of(v))).local);
    const ir::sharding result = batch_tiles(ins.shape.rank());
    return {rebuild(ins, std::move(operands), result.shard_shape(ins.shape)), result};
  }

  // Result dimension i of a broadcast from operand `v` takes the operand's dimension kept[i]
  // (-1 where the operand has none or broadcasts a 1).
  std::vector<std::int64_t> broadcast_dims(ir::value_id v, const xlite::shape& result) const {
    const xlite::shape& in = global(v).shape;
    std::vector<std::int64_t> kept(result.rank(), -1);
    const std::size_t lead = result.rank() - in.rank();
    for (std::size_t i = lead; i < result.rank(); ++i) {
      if (in[i - lead] == result[i]) kept[i] = static_cast<std::int64_t>(i - lead);
    }
    return kept;
  }

  // The operand's sharding for a result laid out as `result_sharding`: its tiles where it
  // has the result's dimension, whole elsewhere.
  ir::sharding operand_sharding(ir::value_id v, const xlite::shape& result, const ir::sharding& result_sharding) const {
    const std::vector<std::int64_t> to_operand = broadcast_dims(v, result);
    std::vector<std::int64_t> kept(rank_of(v), -1);
    for (std::size_t i = 0; i < to_operand.size(); ++i) {
      if (to_operand[i] >= 0) kept[static_cast<std::size_t>(to_operand[i])] = static_cast<std::int64_t>(i);
    }
    return detail::regroup(result_sharding, result.rank(), kept, devices_);
  }

  // Backward propagation, the part of it that pays in a forward partitioner: the sharding a
  // later mark_sharding asks of each value, carried back through element-wise ops,
  // broadcasts, permutes, reductions, reshapes, slices, concats and matmuls to operands with
  // no other user. An element-wise op or a matmul takes it when no operand has to move for
  // it (an element-wise op also prefers it on a tie): each device computes its tile from
  // operands cut locally, not the whole value to cut afterwards.
  void propagate_back() {
    wanted_later_.resize(graph_.instructions.size());
    for (std::size_t v = graph_.instructions.size(); v-- > 0;) {
      const ir::instruction& ins = graph_.instructions[v];
      const auto wanted =
          ins.code == op::mark_sharding ? std::optional(ir::sharding::from_ints(ins.attrs.ints)) : wanted_later_[v];
      if (!wanted || wanted->is_partial()) continue;
      const auto ask = [&](ir::value_id operand, const ir::sharding& s) {
        if (users_[operand] == 1) wanted_later_[operand] = s;
      };
      // Ops with no rule of their own for the layout carried back (reductions, reshape, slice,
      // concat) pass it on only where the operand keeps all its tiles: on fewer, the
      // annotation's reshard would have to gather them, where cutting a whole value is local.
      const auto ask_all_tiles = [&](ir::value_id operand, const ir::sharding& s) {
        if (detail::tile_product(s, rank_of(operand)) == detail::tile_product(*wanted, ins.shape.rank())) {
          ask(operand, s);
        }
      };
      if (ins.code == op::mark_sharding) {
        ask(ins.operands[0], *wanted);
      } else if (ins.code == op::permute) {
        std::vector<std::int64_t> back(ins.shape.rank());
        for (std::size_t j = 0; j < back.size(); ++j)
          back[static_cast<std::size_t>(ins.attrs.ints[j])] = static_cast<std::int64_t>(j);
        ask(ins.operands[0], detail::regroup(*wanted, ins.shape.rank(), back, devices_));
      } else if (info(ins.code).kind == op_kind::elementwise || ins.code == op::broadcast_to) {
        for (const ir::value_id u : ins.operands) ask(u, operand_sharding(u, ins.shape, *wanted));
      } else if (info(ins.code).kind == op_kind::reduction) {
        // The operand's kept dimensions take the result's tiles; the reduced ones stay whole.
        const ir::value_id x = ins.operands[0];
        std::vector<std::int64_t> from_result(rank_of(x), -1);
        for (std::size_t a = 0, j = 0; a < from_result.size(); ++a) {
          const bool reduced = std::ranges::find(ins.attrs.ints, static_cast<std::int64_t>(a)) != ins.attrs.ints.end();
          if (!reduced) from_result[a] = static_cast<std::int64_t>(j);
          if (!reduced || ins.attrs.flag) ++j;
        }
        ask_all_tiles(x, detail::regroup(*wanted, ins.shape.rank(), from_result, devices_));
      } else if (ins.code == op::reshape && ins.shape.numel() > 0) {
        ask_all_tiles(ins.operands[0], reshape_operand_sharding(ins, *wanted));
      } else if (ins.code == op::slice || ins.code == op::concat) {
        // The dimensions taken whole (all but the concatenated one) keep their tiles.
        for (const ir::value_id u : ins.operands) {
          std::vector<std::int64_t> kept = detail::identity_dims(ins.shape.rank());
          for (std::size_t a = 0; a < kept.size(); ++a) {
            const bool whole =
                ins.code == op::slice ? takes_whole(ins, a) : a != static_cast<std::size_t>(ins.attrs.ints[0]);
            if (!whole) kept[a] = -1;
          }
          ask_all_tiles(u, detail::regroup(*wanted, ins.shape.rank(), kept, devices_));
        }
      } else if (ins.code == op::matmul && multiplies_shards(ins)) {
        // Only towards an operand whose partner is laid out for the product already (before
        // the forward pass, as a parameter, an annotation or a constant is): otherwise an
        // operand computed on the product's tiles could cost a collective that multiplying
        // the operands as they come would not.
        const auto [a_wanted, b_wanted] = matmul_operand_shardings(ins, *wanted);
        const ir::value_id a = ins.operands[0], b = ins.operands[1];
        if (known_to_hold(b, b_wanted)) ask(a, a_wanted);
        if (known_to_hold(a, a_wanted)) ask(b, b_wanted);
      }
    }
  }

  // The operand sharding from which reshape `ins` makes `result` (as far as reshape() keeps
  // tiles: a run's major dimension, even tiles on both sides; the rest whole).
  ir::sharding reshape_operand_sharding(const ir::instruction& ins, const ir::sharding& result) const {
    const xlite::shape& in = global(ins.operands[0]).shape;
    std::vector<std::int64_t> from_result(in.rank(), -1);
    for (const detail::reshape_group& g : detail::reshape_groups(in, ins.shape)) {
      const std::size_t major_in = detail::run_major(in, g.in_begin, g.in_end);
      const std::size_t major_out = detail::run_major(ins.shape, g.out_begin, g.out_end);
      if (major_in == g.in_end || major_out == g.out_end) continue;
      const std::int64_t tiles = result.tile_count(major_out);
      if (in[major_in] % tiles == 0 && ins.shape[major_out] % tiles == 0) {
        from_result[major_in] = static_cast<std::int64_t>(major_out);
      }
    }
    return detail::regroup(result, ins.shape.rank(), from_result, devices_);
  }

  // Whether value v, laid out as `s`, serves an op that wants it as `wanted` without moving:
  // it is laid out so, or every device holds it whole (and cuts it locally).
  bool serves(const ir::sharding& s, ir::value_id v, const ir::sharding& wanted) const {
    return !s.is_partial() &&
           (detail::tile_product(s, rank_of(v)) == 1 || detail::same_layout(s, wanted, rank_of(v), devices_));
  }

  // Whether v's layout, known before the forward pass decides it, serves `wanted`.
  bool known_to_hold(ir::value_id v, const ir::sharding& wanted) const {
    const ir::instruction& ins = global(v);
    if (ins.code == op::parameter) {
      return serves(parameter_shardings_[static_cast<std::size_t>(ins.attrs.ints[0])], v, wanted);
    }
    if (ins.code == op::mark_sharding) return serves(ir::sharding::from_ints(ins.attrs.ints), v, wanted);
    return info(ins.code).kind == op_kind::source; // constants and iota: whole
  }

  value elementwise(const ir::instruction& ins) {
    const std::vector<ir::value_id>& x = ins.operands;
    if (keeps_partial(ins)) {
      std::vector<ir::node_ptr> operands;
      for (const ir::value_id v : x) operands.push_back(values_[v].local);
      const xlite::shape local = operands[0]->shape();
      return {rebuild(ins, std::move(operands), local), values_[x[0]].sharding};
    }
    const std::size_t rank = ins.shape.rank();
    const std::optional<ir::sharding>& later = wanted_later_[values_.size()];
    // The sharding a later mark_sharding asks for, when no operand has to move for it.
    const auto fits_later = [&](ir::value_id v) {
      return serves(values_[v].sharding, v, operand_sharding(v, ins.shape, *later));
    };
    if (later && std::ranges::all_of(x, fits_later)) return on_shards(ins, *later);
    // Else the operand sharding that cuts the result into the most tiles, on a tie the first,
    // or the one a later mark_sharding asks for.
    ir::sharding chosen = ir::sharding::replicated();
    for (const ir::value_id v : x) {
      const ir::sharding& given = values_[v].sharding;
      const ir::sharding s = given.is_partial() ? partial_combined(given, rank_of(v)) : given;
      if (s.is_replicated()) continue;
      const ir::sharding lifted = detail::regroup(s, rank_of(v), broadcast_dims(v, ins.shape), devices_);
      const std::int64_t tiles = detail::tile_product(lifted, rank), most = detail::tile_product(chosen, rank);
      if (tiles > most || (tiles == most && later && detail::same_layout(lifted, *later, rank, devices_))) {
        chosen = lifted;
      }
    }
    return on_shards(ins, chosen);
  }

  // Element-wise op ins on its operands laid out for a result sharded as `chosen`.
  value on_shards(const ir::instruction& ins, const ir::sharding& chosen) {
    const std::vector<ir::value_id>& x = ins.operands;
    std::vector<ir::node_ptr> operands;
    for (const ir::value_id v : x) operands.push_back(reshard(v, operand_sharding(v, ins.shape, chosen)).local);
    return {rebuild(ins, std::move(operands), chosen.shard_shape(ins.shape)), chosen};
  }

  // Linear ops of partial sums stay partial sums: a + b, a - b, -a, and a * c, a / c with c
  // one element held by every device. Not when another op needs a partial operand whole:
  // combining it first, once, saves combining this op's result too.
  bool keeps_partial(const ir::instruction& ins) const {
    const ir::sharding& first = values_[ins.operands[0]].sharding;
    if (!first.is_partial() || first.partial_reduction() != op::sum || global(ins.operands[0]).shape != ins.shape) {
      return false;
    }
    for (const ir::value_id v : ins.operands) {
      if (values_[v].sharding.is_partial() && users_[v] > 1) return false;
    }
    switch (ins.code) {
    case op::neg:
      return true;
    case op::add:
    case op::sub: {
      const ir::value_id b = ins.operands[1];
      return global(b).shape == ins.shape &&
             detail::same_layout(values_[b].sharding, first, ins.shape.rank(), devices_);
    }
    case op::mul:
    case op::div: {
      const ir::value_id c = ins.operands[1];
      return global(c).shape.numel() == 1 && values_[c].sharding.is_replicated();
    }
    default:
      return false;
    }
  }

  value reduction(const ir::instruction& ins) {
    const ir::value_id x = ins.operands[0];
    const xlite::shape& in = global(x).shape;
    const bool reduces_tiles = std::ranges::any_of(ins.attrs.ints, [&](std::int64_t a) {
      return values_[x].sharding.tile_count(static_cast<std::size_t>(a)) > 1;
    });
    // A 16-bit float sum of a shard would round (or overflow) where the whole mean does not.
    const bool wide_float = ins.type == dtype::f32 || ins.type == dtype::f64;
    if (ins.code != op::mean || !reduces_tiles || !wide_float || in.numel() == 0) return reduce_shards(ins, ins.code);
    // The mean over tiles: each device's sum divided by the count, a partial sum.
    const value total = reduce_shards(ins, op::sum);
    const auto count = static_cast<double>(in.numel() / ins.shape.numel());
    return {ir::elementwise(op::div, {total.local, ir::constant(ir::literal::of(count), ins.type)}), total.sharding};
  }

  // ins's reduction `code` over the shards of its operand.
  value reduce_shards(const ir::instruction& ins, op code) {
    const ir::value_id x = ins.operands[0];
    const std::size_t rank = rank_of(x);
    const xlite::shape& in = global(x).shape;
    const std::span<const std::int64_t> axes = ins.attrs.ints;
    // Reduced axes whose tiles cannot be reduced separately are gathered first.
    const bool separable = code != op::mean && code != op::argmax;
    std::vector<std::int64_t> kept = detail::identity_dims(rank);
    for (const std::int64_t a : axes) {
      const auto axis = static_cast<std::size_t>(a);
      const std::int64_t tiles = values_[x].sharding.tile_count(axis);
      if (tiles > 1 && (!separable || in[axis] % tiles != 0)) kept[axis] = -1;
    }
    // A sum of partial sums is a partial sum; other reductions need the full value.
    const bool stays_partial =
        code == op::sum && values_[x].sharding.partial_reduction() == op::sum && kept == detail::identity_dims(rank);
    value operand = stays_partial ? linear_operand(x) : full_value(x);
    operand = reshard(x, operand, detail::regroup(operand.sharding, rank, kept, devices_));
    // The result keeps the other axes' tiles; the reduced axes' tiles become partial values.
    std::vector<std::int64_t> result_dims;
    for (std::size_t a = 0; a < rank; ++a) {
      const bool reduced = std::ranges::find(axes, static_cast<std::int64_t>(a)) != axes.end();
      if (!reduced) result_dims.push_back(static_cast<std::int64_t>(a));
      if (reduced && ins.attrs.flag) result_dims.push_back(-1);
    }
    const ir::sharding result = detail::regroup(operand.sharding, rank, result_dims, devices_, true, code);
    return {ir::reduce(code, operand.local, axes, ins.attrs.flag), result};
  }

  // Whether a matmul runs on shards: each operand has the result's batch dimensions, or is
  // 2-D and broadcasts over them (a linear layer on a batch of sequences, a convolution's
  // weight). A matmul that broadcasts a batch of size 1 runs on whole values.
  bool multiplies_shards(const ir::instruction& ins) const {
    for (const ir::value_id v : ins.operands) {
      const xlite::shape& s = global(v).shape;
      if (s.rank() == 2) continue;
      if (s.rank() != ins.shape.rank()) return false;
      for (std::size_t i = 0; i + 2 < s.rank(); ++i) {
        if (s[i] != ins.shape[i]) return false;
      }
    }
    return true;
  }

  // A matmul operand's dimensions: rows m (of a) or columns n (of b), the contracting one k,
  // and whether it has the batch dimensions (first, as the result's) or broadcasts.
  struct operand_axes {
    bool a_batched, b_batched;
    std::size_t a_m, a_k, b_k, b_n;
  };

  operand_axes axes_of(const ir::instruction& ins) const {
    const std::size_t ra = rank_of(ins.operands[0]), rb = rank_of(ins.operands[1]);
    const bool ta = ins.attrs.ints[0] != 0, tb = ins.attrs.ints[1] != 0;
    return {.a_batched = ra > 2,
            .b_batched = rb > 2,
            .a_m = ta ? ra - 1 : ra - 2,
            .a_k = ta ? ra - 2 : ra - 1,
            .b_k = tb ? rb - 1 : rb - 2,
            .b_n = tb ? rb - 2 : rb - 1};
  }

  // The operand shardings whose tiles multiply into a product laid out as `result`: a takes
  // its batch and row tiles, b its batch and column tiles, both whole along k.
  std::pair<ir::sharding, ir::sharding> matmul_operand_shardings(const ir::instruction& ins,
                                                                 const ir::sharding& result) const {
    const operand_axes axes = axes_of(ins);
    const std::size_t batch = ins.shape.rank() - 2;
    std::vector<std::int64_t> a_from(rank_of(ins.operands[0]), -1), b_from(rank_of(ins.operands[1]), -1);
    if (axes.a_batched) std::iota(a_from.begin(), a_from.begin() + static_cast<std::ptrdiff_t>(batch), 0);
    if (axes.b_batched) std::iota(b_from.begin(), b_from.begin() + static_cast<std::ptrdiff_t>(batch), 0);
    a_from[axes.a_m] = static_cast<std::int64_t>(batch);
    b_from[axes.b_n] = static_cast<std::int64_t>(batch + 1);
    return {detail::regroup(result, ins.shape.rank(), a_from, devices_),
            detail::regroup(result, ins.shape.rank(), b_from, devices_)};
  }

  value matmul(const ir::instruction& ins) {
    const ir::value_id a = ins.operands[0], b = ins.operands[1];
    const std::size_t ra = rank_of(a), rb = rank_of(b), batch = ins.shape.rank() - 2;
    // The layout a later mark_sharding asks for, when neither operand has to move for it.
    if (const std::optional<ir::sharding>& later = wanted_later_[values_.size()]) {
      const auto [a_wanted, b_wanted] = matmul_operand_shardings(ins, *later);
      if (serves(values_[a].sharding, a, a_wanted) && serves(values_[b].sharding, b, b_wanted)) {
        return product(ins, reshard(a, a_wanted), reshard(b, b_wanted), *later);
      }
    }
    const operand_axes axes = axes_of(ins);
    value va = contraction_operand(a, axes.a_k), vb = contraction_operand(b, axes.b_k);
    if (auto together = combine(va.sharding, vb.sharding, axes, batch)) return product(ins, va, vb, *together);
    // Reshard the operand that is cheaper to move to the other's batch and contracting tiles.
    std::vector<std::int64_t> b_from_a(rb, -1), a_from_b(ra, -1);
    if (axes.a_batched && axes.b_batched) {
      std::iota(b_from_a.begin(), b_from_a.begin() + static_cast<std::ptrdiff_t>(batch), 0);
      std::iota(a_from_b.begin(), a_from_b.begin() + static_cast<std::ptrdiff_t>(batch), 0);
    }
    b_from_a[axes.b_k] = static_cast<std::int64_t>(axes.a_k);
    a_from_b[axes.a_k] = static_cast<std::int64_t>(axes.b_k);
    const ir::sharding b_wanted = detail::regroup(va.sharding, ra, b_from_a, devices_);
    const ir::sharding a_wanted = detail::regroup(vb.sharding, rb, a_from_b, devices_);
    if (reshard_bytes(vb, b, b_wanted) <= reshard_bytes(va, a, a_wanted)) {
      vb = reshard(b, vb, b_wanted);
    } else {
      va = reshard(a, va, a_wanted);
    }
    return product(ins, va, vb, *combine(va.sharding, vb.sharding, axes, batch));
  }

  // A matmul operand, whole (not partial), its contracting axis gathered if its tiles are
  // uneven.
  value contraction_operand(ir::value_id v, std::size_t k) {
    value operand = full_value(v);
    const std::int64_t tiles = operand.sharding.tile_count(k);
    if (tiles > 1 && global(v).shape[k] % tiles != 0) {
      std::vector<std::int64_t> kept = detail::identity_dims(rank_of(v));
      kept[k] = -1;
      operand = reshard(v, operand, detail::regroup(operand.sharding, rank_of(v), kept, devices_));
    }
    return operand;
  }

  // The product's sharding when each device multiplies its own tiles: (batch tiles, m tile,
  // n tile) with a partial sum over the k tiles. Nullopt unless every device holds the same
  // batch tiles of the operands that have a batch and the same k tile of both, and the
  // devices spread evenly over the result's tiles.
  std::optional<ir::sharding> combine(const ir::sharding& sa, const ir::sharding& sb, const operand_axes& axes,
                                      std::size_t batch) const {
    std::vector<std::int64_t> dims; // the product's tiles: batch dimensions, m, n, k
    for (std::size_t i = 0; i < batch; ++i) {
      const std::int64_t from_a = axes.a_batched ? sa.tile_count(i) : 1, from_b = axes.b_batched ? sb.tile_count(i) : 1;
      if (axes.a_batched && axes.b_batched && from_a != from_b) return std::nullopt;
      dims.push_back(std::max(from_a, from_b));
    }
    const std::int64_t tm = sa.tile_count(axes.a_m), tn = sb.tile_count(axes.b_n), tk = sa.tile_count(axes.a_k);
    if (sb.tile_count(axes.b_k) != tk) return std::nullopt;
    dims.insert(dims.end(), {tm, tn, tk});
    const std::int64_t tiles = std::reduce(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
    if (devices_ % tiles != 0) return std::nullopt;
    const std::int64_t per_tile = devices_ / tiles;
    std::vector<std::vector<std::int64_t>> buckets(static_cast<std::size_t>(tiles));
    const std::size_t ra = axes.a_batched ? batch + 2 : 2, rb = axes.b_batched ? batch + 2 : 2;
    for (std::int64_t d = 0; d < devices_; ++d) {
      const auto pa = sa.placement_of(d, ra), pb = sb.placement_of(d, rb);
      if (!pa || !pb || pa->tile[axes.a_k] != pb->tile[axes.b_k]) return std::nullopt;
      std::int64_t at = 0;
      for (std::size_t i = 0; i < batch; ++i) {
        if (axes.a_batched && axes.b_batched && pa->tile[i] != pb->tile[i]) return std::nullopt;
        at = at * dims[i] + (axes.a_batched ? pa->tile[i] : pb->tile[i]);
      }
      at = ((at * tm + pa->tile[axes.a_m]) * tn + pb->tile[axes.b_n]) * tk + pa->tile[axes.a_k];
      auto& bucket = buckets[static_cast<std::size_t>(at)];
      if (static_cast<std::int64_t>(bucket.size()) == per_tile) return std::nullopt;
      bucket.push_back(d);
    }
    std::vector<std::int64_t> ids;
    for (const auto& bucket : buckets) ids.insert(ids.end(), bucket.begin(), bucket.end());
    dims.push_back(per_tile);
    return ir::sharding::from_full_tiles(ir::device_array(std::move(dims), std::move(ids)));
  }

  value product(const ir::instruction& ins, const value& a, const value& b, const ir::sharding& result) {
    return {ir::matmul(a.local, b.local, ins.attrs.ints[0] != 0, ins.attrs.ints[1] != 0), result};
  }

  // v for an op that keeps a partial operand partial (permute, reshape, sum): as it is, unless
  // it is partial and another op uses it too. That op needs it whole, so combining it once,
  // first, saves combining this op's result as well.
  value linear_operand(ir::value_id v) { return users_[v] == 1 ? values_[v] : full_value(v); }

  // The value of v, combined if it is partial.
  value full_value(ir::value_id v) {
    const value& in = values_[v];
    if (!in.sharding.is_partial()) return in;
    return reshard(v, in, partial_combined(in.sharding, rank_of(v)));
  }

  value reshard(ir::value_id v, const ir::sharding& wanted) { return reshard(v, values_[v], wanted); }

  // `from` (a layout of v's global value) laid out as `wanted`. Each distinct reshard of a
  // value is made once: the optimizer's several uses of one gradient combine it once.
  value reshard(ir::value_id v, const value& from, const ir::sharding& wanted) {
    if (detail::same_layout(from.sharding, wanted, rank_of(v), devices_)) return {from.local, wanted};
    if (wanted.is_partial()) { // no collective splits a value into parts that sum to it
      throw value_error(xlite::detail::message("mark_sharding: a value laid out as ", from.sharding,
                                               " cannot be made partial (", wanted,
                                               "); only a pending partial value can keep that sharding"));
    }
    auto key = std::tuple{v, from.sharding.to_ints(), wanted.to_ints()};
    if (const auto made = reshards_.find(key); made != reshards_.end()) return made->second;
    value moved = from.sharding.is_partial() ? combine_partial(v, from, wanted) : gather_and_cut(v, from, wanted);
    reshards_.emplace(std::move(key), moved);
    return moved;
  }

  value combine_partial(ir::value_id v, const value& from, const ir::sharding& wanted) {
    const std::size_t rank = rank_of(v);
    const ir::replica_groups parts = detail::groups_along(from.sharding, rank, rank, devices_);
    const ir::reduce_type combine = ir::reduce_type_of(from.sharding.partial_reduction());
    for (std::size_t axis = 0; axis < rank; ++axis) {
      if (detail::same_layout(scattered(from.sharding, rank, axis), wanted, rank, devices_) &&
          global(v).shape[axis] % wanted.tile_count(axis) == 0) {
        return {ir::reduce_scatter(from.local, combine, 1.0, static_cast<std::int64_t>(axis), parts, next_site()),
                wanted};
      }
    }
    const ir::sharding combined = partial_combined(from.sharding, rank);
    if (!detail::same_layout(combined, wanted, rank, devices_)) return reshard(v, reshard(v, from, combined), wanted);
    return {ir::all_reduce(from.local, combine, 1.0, parts, next_site()), wanted};
  }

  // What reduce_scatter along `axis` makes of partial layout s: part p of tile t becomes
  // tile t * parts + p.
  ir::sharding scattered(const ir::sharding& s, std::size_t rank, std::size_t axis) const {
    const ir::device_array full = s.full_tiles(rank, devices_);
    std::vector<std::size_t> order;
    for (std::size_t a = 0; a <= axis; ++a) order.push_back(a);
    order.push_back(rank);
    for (std::size_t a = axis + 1; a < rank; ++a) order.push_back(a);
    order.push_back(rank + 1);
    std::vector<std::int64_t> dims(full.dims().begin(), full.dims().end());
    dims[axis] *= dims[rank];
    dims[rank] = 1;
    return ir::sharding::from_full_tiles(full.transpose(order).reshape(std::move(dims)));
  }

  // A whole (not partial) `from` laid out as `wanted`: its tiles sent to other devices or
  // moved to another dimension if that is all it takes, else the tiled dimensions gathered
  // that must be, then the rest cut locally.
  value gather_and_cut(ir::value_id v, value from, const ir::sharding& wanted) {
    if (auto sent = send_tiles(v, from, wanted)) return *sent;
    if (auto moved = move_tiles(v, from, wanted)) return *moved;
    const xlite::shape& global_shape = global(v).shape;
    const std::size_t rank = global_shape.rank();
    const auto done = [&] { return detail::same_layout(from.sharding, wanted, rank, devices_); };
    // Gather the axes tiled otherwise than wanted first: what remains may fit already.
    std::vector<std::size_t> axes(rank);
    std::iota(axes.begin(), axes.end(), std::size_t{0});
    // (std::stable_partition: clang 14's ranges reject libstdc++ 12's ranges::stable_partition)
    std::stable_partition(axes.begin(), axes.end(),
                          [&](std::size_t a) { return from.sharding.tile_count(a) != wanted.tile_count(a); });
    for (const std::size_t axis : axes) {
      if (done()) break;
      if (from.sharding.tile_count(axis) == 1) continue;
      ir::node_ptr gathered = ir::all_gather(from.local, static_cast<std::int64_t>(axis),
                                             detail::groups_along(from.sharding, rank, axis, devices_), next_site());
      if (gathered->shape()[axis] != global_shape[axis]) gathered = drop_padding(gathered, axis, global_shape[axis]);
      std::vector<std::int64_t> kept = detail::identity_dims(rank);
      kept[axis] = -1;
      from = {gathered, detail::regroup(from.sharding, rank, kept, devices_)};
    }
    if (done()) return {from.local, wanted};
    return {ir::local_shard(from.local, wanted), wanted}; // `from` is whole on every device now
  }

  // `from` wanted as the same tiles on other devices: each device receives its tile from one
  // that holds it (collective_permute), one tile where gathering would move them all.
  // Nullopt when the tiles differ, or a tile has too few holders to send it everywhere.
  std::optional<value> send_tiles(ir::value_id v, const value& from, const ir::sharding& wanted) {
    const std::size_t rank = rank_of(v);
    for (std::size_t a = 0; a < rank; ++a) {
      if (from.sharding.tile_count(a) != wanted.tile_count(a)) return std::nullopt;
    }
    // Each device sends one tile: the devices that hold a tile and have not sent it yet.
    std::map<std::vector<std::int64_t>, std::vector<std::int64_t>> spare_holders;
    std::vector<std::vector<std::int64_t>> wanted_tile;
    for (std::int64_t d = 0; d < devices_; ++d) {
      const auto held = from.sharding.placement_of(d, rank), asked = wanted.placement_of(d, rank);
      if (!held || !asked) return std::nullopt;
      spare_holders[held->tile].push_back(d);
      wanted_tile.push_back(asked->tile);
    }
    // A device that holds its tile already keeps it; the others take a spare holder's.
    ir::permute_pairs pairs;
    std::vector<std::int64_t> waiting;
    for (std::int64_t d = 0; d < devices_; ++d) {
      auto& holders = spare_holders[wanted_tile[static_cast<std::size_t>(d)]];
      if (const auto own = std::ranges::find(holders, d); own != holders.end()) {
        holders.erase(own);
        pairs.emplace_back(d, d);
      } else {
        waiting.push_back(d);
      }
    }
    for (const std::int64_t d : waiting) {
      auto& holders = spare_holders[wanted_tile[static_cast<std::size_t>(d)]];
      if (holders.empty()) return std::nullopt;
      pairs.emplace_back(holders.back(), d);
      holders.pop_back();
    }
    return value{ir::collective_permute(from.local, pairs, next_site()), wanted};
  }

  // `from` wanted with the tiles of one dimension along another, untiled one: an all_to_all,
  // in which each device sends a piece of its tile to each other member of its group, moves
  // 1/t of what gathering would. Nullopt when the layouts differ otherwise.
  std::optional<value> move_tiles(ir::value_id v, const value& from, const ir::sharding& wanted) {
    const xlite::shape& global_shape = global(v).shape;
    const std::size_t rank = global_shape.rank();
    for (std::size_t i = 0; i < rank; ++i) {
      const std::int64_t tiles = from.sharding.tile_count(i);
      if (tiles == 1 || global_shape[i] % tiles != 0) continue;
      for (std::size_t j = 0; j < rank; ++j) {
        if (from.sharding.tile_count(j) != 1 || global_shape[j] % tiles != 0) continue;
        std::vector<std::int64_t> swapped = detail::identity_dims(rank);
        std::swap(swapped[i], swapped[j]);
        if (!detail::same_layout(detail::regroup(from.sharding, rank, swapped, devices_), wanted, rank, devices_)) {
          continue;
        }
        return value{ir::all_to_all(from.local, static_cast<std::int64_t>(j), static_cast<std::int64_t>(i), tiles,
                                    detail::groups_along(from.sharding, rank, i, devices_), next_site()),
                     wanted};
      }
    }
    return std::nullopt;
  }

  ir::sharding partial_combined(const ir::sharding& s, std::size_t rank) const {
    const ir::device_array full = s.full_tiles(rank, devices_);
    std::vector<std::int64_t> dims(full.dims().begin(), full.dims().end());
    dims[rank + 1] *= dims[rank];
    dims[rank] = 1;
    return ir::sharding::from_full_tiles(full.reshape(std::move(dims)));
  }

  static ir::node_ptr drop_padding(const ir::node_ptr& x, std::size_t axis, std::int64_t size) {
    std::vector<ir::slice_range> ranges;
    for (const std::int64_t n : x->shape()) ranges.push_back({0, n, 1});
    ranges[axis].stop = size;
    return ir::slice(x, ranges);
  }

  // What resharding `from` to `wanted` moves: nothing when the layout already fits or every
  // device holds the value whole, else (at most) the whole value.
  std::int64_t reshard_bytes(const value& from, ir::value_id v, const ir::sharding& wanted) const {
    const std::size_t rank = rank_of(v);
    if (from.sharding.is_replicated() || detail::same_layout(from.sharding, wanted, rank, devices_)) return 0;
    return global(v).shape.numel() * static_cast<std::int64_t>(size_of(global(v).type));
  }

  static ir::node_ptr rebuild(const ir::instruction& ins, std::vector<ir::node_ptr> operands,
                              const xlite::shape& local) {
    return ir::make_node(ins.code, ins.type, local, std::move(operands), ins.attrs);
  }

  // Collectives the partitioner inserts: one site per collective of the program, the same
  // on every device.
  std::int64_t next_site() {
    static const std::int64_t base = ir::collective_site(xlite::source_location::current());
    return ir::derived_collective_site(base, "spmd #" + std::to_string(sites_++));
  }

  const ir::graph& graph_;
  std::span<const ir::sharding> parameter_shardings_;
  std::int64_t devices_;
  std::vector<std::int64_t> users_; // of each global value, outputs included
  std::vector<std::optional<ir::sharding>> wanted_later_; // by a mark_sharding (propagate_back)
  std::vector<value> values_;
  std::map<std::tuple<ir::value_id, std::vector<std::int64_t>, std::vector<std::int64_t>>, value> reshards_;
  std::vector<ir::node_ptr> parameters_;
  std::int64_t sites_ = 0;
};

XLITE_BACKEND_FUNCTION partitioned_program partition(const ir::graph& g,
                                                     std::span<const ir::sharding> parameter_shardings,
                                                     std::int64_t devices);

#if XLITE_BACKEND_DEFINITIONS
XLITE_BACKEND_FUNCTION partitioned_program partition(const ir::graph& g,
                                                     std::span<const ir::sharding> parameter_shardings,
                                                     std::int64_t devices) {
  return partitioner(g, parameter_shardings, devices).run();
}
#endif

} // namespace xlite::spmd
