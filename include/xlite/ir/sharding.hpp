#pragma once

// How a tensor's elements are spread over devices: XLA's HloSharding, plus partial values as
// a state of their own (PyTorch DTensor's Partial; XLA keeps them inside its partitioner).
//
// A tiled sharding is a tile assignment: an array of device ids with one dimension per
// tensor dimension (how many tiles the tensor is cut into along it), then optionally a
// "partial" dimension (devices along it hold values whose sum, or max, min, product, is the
// tile) and a "replicated" dimension (devices along it hold the same tile). XLA prints
// {devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}; so does this.
//
// Tiles are cut as XLA cuts them: a dimension of size n in t tiles gives each tile
// ceil(n / t) elements, the last ones padded (and possibly empty), so every device's shard
// has the same shape.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/device_array.hpp"
#include "xlite/ir/hash.hpp"

namespace xlite::ir {

// What a tile-assignment dimension after the tensor's own stands for (XLA's last_tile_dims).
enum class subgroup : std::uint8_t { partial, replicated };

// Where one device's shard sits: its tile's index along each tensor dimension, and its
// position along the partial and replicated dimensions (0 when there are none).
struct placement {
  std::vector<std::int64_t> tile;
  std::int64_t partial_index = 0;
  std::int64_t replica_index = 0;
  friend bool operator==(const placement&, const placement&) = default;
};

class sharding {
public:
  // Every device holds the whole tensor.
  static sharding replicated() { return sharding(replicated_state{}); }

  // `tiles` has the tensor's dimensions first, then one per entry of `last`, which lists at
  // most one partial and one replicated dimension, in that order. A dimension of one device
  // is dropped, and a sharding left with one tile and no partial values is replicated(), so
  // equal placements compare equal. Partial values combine with `reduction`: sum, max, min
  // or prod.
  static sharding tiled(device_array tiles, std::vector<subgroup> last = {}, op reduction = op::sum) {
    check_tiles(tiles, last, reduction);
    const std::size_t rank = tiles.rank() - last.size();
    std::vector<std::int64_t> dims(tiles.dims().begin(), tiles.dims().begin() + static_cast<std::ptrdiff_t>(rank));
    tiled_state state{.tiles = tiles, .tensor_rank = rank, .reduction = reduction};
    for (std::size_t k = 0; k < last.size(); ++k) {
      const std::int64_t count = tiles.dims()[rank + k];
      (last[k] == subgroup::partial ? state.partial_count : state.replica_count) = count;
      if (count > 1) dims.push_back(count);
    }
    if (state.partial_count == 1) state.reduction = op::sum; // no partial values: nothing to combine
    const bool one_tile = std::ranges::all_of(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(rank),
                                              [](std::int64_t t) { return t == 1; });
    if (one_tile && state.partial_count == 1) return replicated();
    state.tiles = tiles.reshape(std::move(dims));
    return sharding(std::move(state));
  }

  bool is_replicated() const noexcept { return std::holds_alternative<replicated_state>(state_); }
  bool is_partial() const noexcept { return partial_count() > 1; }

  // How partial values combine (sum when there are none).
  op partial_reduction() const noexcept { return tiled() ? tiled()->reduction : op::sum; }
  std::int64_t partial_count() const noexcept { return tiled() ? tiled()->partial_count : 1; }
  std::int64_t replica_count() const noexcept { return tiled() ? tiled()->replica_count : 1; }

  // How many tiles the tensor is cut into along `axis` (1 for a replicated tensor).
  std::int64_t tile_count(std::size_t axis) const noexcept {
    return tiled() && axis < tiled()->tensor_rank ? tiled()->tiles.dims()[axis] : 1;
  }

  // The tile assignment without its dimensions of one device; empty for replicated().
  std::optional<device_array> tile_assignment() const {
    if (!tiled()) return std::nullopt;
    return tiled()->tiles;
  }

  // Throws shape_error unless this sharding can lay out a tensor of `global` shape; `what`
  // names the caller.
  void check_fits(const xlite::shape& global, std::string_view what) const {
    if (tiled() && tiled()->tensor_rank != global.rank()) {
      throw shape_error(xlite::detail::message(what, ": the sharding ", to_string(), " has ", tiled()->tensor_rank,
                                               " tiled dimensions but the tensor has rank ", global.rank(), " (shape ",
                                               global, ")"));
    }
  }

  // Every device's shard has this shape: the tile of the first device, padding included.
  xlite::shape shard_shape(const xlite::shape& global) const {
    check_fits(global, "shard_shape");
    std::vector<std::int64_t> dims(global.begin(), global.end());
    for (std::size_t axis = 0; axis < dims.size(); ++axis) dims[axis] = ceil_div(dims[axis], tile_count(axis));
    return xlite::shape(dims);
  }

  // Where `device` holds its shard; nullopt when the tile assignment does not hold it. A
  // replicated tensor is everywhere, at tile 0.
  std::optional<placement> placement_of(std::int64_t device, std::size_t rank) const {
    if (!tiled()) return placement{.tile = std::vector<std::int64_t>(rank, 0)};
    const std::vector<std::int64_t> index = tiled()->tiles.index_of(device); // a tile assignment has rank >= 1
    if (index.empty()) return std::nullopt;
    placement where{.tile = {index.begin(), index.begin() + static_cast<std::ptrdiff_t>(tiled()->tensor_rank)}};
    std::size_t next = tiled()->tensor_rank;
    if (partial_count() > 1) where.partial_index = index[next++];
    if (replica_count() > 1) where.replica_index = index[next];
    return where;
  }

  // The part of the global tensor `device` holds, as [begin, end) per dimension, without
  // padding: a padded tile ends early, and one past the end is empty (begin == end).
  std::vector<std::pair<std::int64_t, std::int64_t>> shard_bounds(const xlite::shape& global,
                                                                  std::int64_t device) const {
    const xlite::shape shard = shard_shape(global);
    const std::optional<placement> where = placement_of(device, global.rank());
    if (!where) {
      throw value_error(
          xlite::detail::message("shard_bounds: device ", device, " is not in the sharding ", to_string()));
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> bounds;
    for (std::size_t axis = 0; axis < global.rank(); ++axis) {
      const std::int64_t begin = std::min(where->tile[axis] * shard[axis], global[axis]);
      bounds.emplace_back(begin, std::min(begin + shard[axis], global[axis]));
    }
    return bounds;
  }

  // XLA's text: "{replicated}", "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
  // "{devices=[1,2]0,1 last_tile_dims={partial_sum}}".
  std::string to_string() const {
    if (!tiled()) return "{replicated}";
    const tiled_state& s = *tiled();
    std::string text = "{devices=[";
    for (std::size_t axis = 0; axis < s.tiles.rank(); ++axis) {
      text += (axis ? "," : "") + std::to_string(s.tiles.dims()[axis]);
    }
    text += ']';
    for (std::size_t k = 0; k < s.tiles.ids().size(); ++k) text += (k ? "," : "") + std::to_string(s.tiles.ids()[k]);
    if (is_partial()) {
      text += " last_tile_dims={partial_" + std::string(xlite::name(s.reduction));
      text += s.replica_count > 1 ? ", replicated}" : "}";
    } else if (s.replica_count > 1) {
      text += " last_tile_dim_replicate";
    }
    return text + '}';
  }

  // The tile assignment with every dimension explicit: the tensor's `rank`, then partial,
  // then replicated, each 1 when absent; replicated() over `devices` devices is
  // [1, ..., 1, 1, devices]. The partitioner reshapes shardings in this form and makes them
  // again with from_full_tiles.
  device_array full_tiles(std::size_t rank, std::int64_t devices) const {
    std::vector<std::int64_t> dims(rank, 1);
    const tiled_state* s = tiled();
    if (s) std::copy_n(s->tiles.dims().begin(), rank, dims.begin());
    dims.push_back(partial_count());
    dims.push_back(s ? replica_count() : devices);
    if (s) return device_array(std::move(dims), {s->tiles.ids().begin(), s->tiles.ids().end()});
    std::vector<std::int64_t> ids(static_cast<std::size_t>(devices));
    for (std::size_t k = 0; k < ids.size(); ++k) ids[k] = static_cast<std::int64_t>(k);
    return device_array(std::move(dims), std::move(ids));
  }
  static sharding from_full_tiles(device_array full, op reduction = op::sum) {
    return tiled(std::move(full), {subgroup::partial, subgroup::replicated}, reduction);
  }

  // As ints, for an IR node's attributes: empty for replicated(), else {tensor rank,
  // reduction, partial count, replica count, tile counts..., device ids...}.
  std::vector<std::int64_t> to_ints() const {
    const tiled_state* s = tiled();
    if (!s) return {};
    std::vector<std::int64_t> ints{static_cast<std::int64_t>(s->tensor_rank), static_cast<std::int64_t>(s->reduction),
                                   s->partial_count, s->replica_count};
    ints.insert(ints.end(), s->tiles.dims().begin(),
                s->tiles.dims().begin() + static_cast<std::ptrdiff_t>(s->tensor_rank));
    ints.insert(ints.end(), s->tiles.ids().begin(), s->tiles.ids().end());
    return ints;
  }
  static sharding from_ints(std::span<const std::int64_t> ints) {
    if (ints.empty()) return replicated();
    const auto rank = static_cast<std::size_t>(ints[0]);
    std::vector<std::int64_t> dims(ints.begin() + 4, ints.begin() + 4 + static_cast<std::ptrdiff_t>(rank));
    dims.push_back(ints[2]);
    dims.push_back(ints[3]);
    return from_full_tiles(
        device_array(std::move(dims), {ints.begin() + 4 + static_cast<std::ptrdiff_t>(rank), ints.end()}),
        static_cast<op>(ints[1]));
  }

  std::uint64_t hash() const {
    hasher h;
    h.add(tiled() ? 1 : 0);
    if (const tiled_state* s = tiled()) {
      h.add(s->tensor_rank | static_cast<std::uint64_t>(s->reduction) << 32);
      h.add(static_cast<std::uint64_t>(s->partial_count));
      h.add(static_cast<std::uint64_t>(s->replica_count));
      for (const std::int64_t dim : s->tiles.dims()) h.add(static_cast<std::uint64_t>(dim));
      for (const std::int64_t id : s->tiles.ids()) h.add(static_cast<std::uint64_t>(id));
    }
    return h.state;
  }

  friend bool operator==(const sharding&, const sharding&) = default;
  friend std::ostream& operator<<(std::ostream& out, const sharding& s) { return out << s.to_string(); }

private:
  struct replicated_state {
    friend bool operator==(const replicated_state&, const replicated_state&) = default;
  };
  struct tiled_state {
    device_array tiles;
    std::size_t tensor_rank = 0;
    std::int64_t partial_count = 1;
    op reduction = op::sum;
    std::int64_t replica_count = 1;
    friend bool operator==(const tiled_state&, const tiled_state&) = default;
  };

  explicit sharding(std::variant<replicated_state, tiled_state> state) : state_(std::move(state)) {}

  const tiled_state* tiled() const noexcept { return std::get_if<tiled_state>(&state_); }

  static std::int64_t ceil_div(std::int64_t n, std::int64_t d) { return (n + d - 1) / d; }

  static void check_tiles(const device_array& tiles, std::span<const subgroup> last, op reduction) {
    const auto fail = [&](const auto&... why) {
      throw value_error(
          xlite::detail::message("sharding: tile assignment ", format_dims(tiles.dims()), " ", tiles, ": ", why...));
    };
    if (last.size() > tiles.rank()) fail("it has fewer dimensions than the ", last.size(), " subgroups after them");
    if (last.size() > 2 || (last.size() == 2 && (last[0] != subgroup::partial || last[1] != subgroup::replicated))) {
      fail("the dimensions after the tensor's are at most one partial and one replicated, in that order");
    }
    if (tiles.rank() - last.size() > max_rank) fail("a tensor has at most ", max_rank, " dimensions");
    if (reduction != op::sum && reduction != op::max && reduction != op::min && reduction != op::prod) {
      fail("partial values combine with sum, max, min or prod, not ", xlite::name(reduction));
    }
    std::vector<std::int64_t> ids(tiles.ids().begin(), tiles.ids().end());
    std::ranges::sort(ids);
    if (!ids.empty() && ids.front() < 0) fail("device ids are non-negative, not ", ids.front());
    if (const auto twice = std::ranges::adjacent_find(ids); twice != ids.end()) {
      fail("device ", *twice, " appears twice");
    }
  }

  std::variant<replicated_state, tiled_state> state_;
};

} // namespace xlite::ir

template <>
struct std::hash<xlite::ir::sharding> {
  std::size_t operator()(const xlite::ir::sharding& s) const { return static_cast<std::size_t>(s.hash()); }
};
