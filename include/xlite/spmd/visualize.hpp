#pragma once

// A sharding drawn as a person would draw it (JAX's visualize_array_sharding): a table with
// one cell per tile, naming the devices that hold it.
//
//   (8, 4) in tiles of (4, 2): {devices=[2,2]0,1,2,3}
//   ┌───────┬───────┐
//   │ cpu 0 │ cpu 1 │
//   ├───────┼───────┤
//   │ cpu 2 │ cpu 3 │
//   └───────┴───────┘
//
// Columns are the tiles of the last dimension, rows those of the others (a tensor of rank 3
// or more labels each row with its tile index). Replicas of a tile are listed "cpu 0,1";
// partial values are joined by their reduction, "cpu 0 + 2" or "cpu max(0, 2)".

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xlite/core/shape.hpp"
#include "xlite/ir/sharding.hpp"

namespace xlite::spmd {

namespace detail {

// The devices that hold the tile at `tile` (its index along each tensor dimension).
inline std::string tile_label(const ir::sharding& s, std::span<const std::int64_t> tile) {
  const std::optional<ir::device_array> tiles = s.tile_assignment();
  if (!tiles) return "all devices";
  std::vector<std::int64_t> index(tile.begin(), tile.end());
  index.resize(tiles->rank(), 0);
  const std::size_t partial_axis = tile.size();
  const std::size_t replica_axis = tile.size() + (s.is_partial() ? 1 : 0);
  const bool sum = s.partial_reduction() == op::sum;
  std::string terms;
  for (std::int64_t p = 0; p < s.partial_count(); ++p) {
    if (p > 0) terms += sum ? " + " : ", ";
    if (s.is_partial()) index[partial_axis] = p;
    for (std::int64_t r = 0; r < s.replica_count(); ++r) {
      if (s.replica_count() > 1) index[replica_axis] = r;
      terms += (r ? "," : "") + std::to_string((*tiles)[index]);
    }
  }
  if (s.is_partial() && !sum) terms = std::string(xlite::name(s.partial_reduction())) + "(" + terms + ")";
  return "cpu " + terms;
}

// Columns of a text line, counting each UTF-8 code point once.
inline std::size_t columns(const std::string& text) {
  std::size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

inline std::string repeat(const std::string& piece, std::size_t count) {
  std::string text;
  for (std::size_t k = 0; k < count; ++k) text += piece;
  return text;
}

} // namespace detail

inline std::string visualize(const ir::sharding& s, const xlite::shape& global) {
  const xlite::shape shard = s.shard_shape(global);
  const std::size_t rank = global.rank();
  const std::int64_t columns = rank == 0 ? 1 : s.tile_count(rank - 1);
  std::int64_t rows = 1;
  for (std::size_t axis = 0; axis + 1 < rank; ++axis) rows *= s.tile_count(axis);

  // Labels, row by row: the row's tile index (rank 3 and more) and each cell's devices.
  std::vector<std::string> row_names;
  std::vector<std::string> cells;
  std::vector<std::int64_t> tile(rank, 0);
  for (std::int64_t row = 0; row < rows; ++row) {
    std::string row_name = "[";
    for (std::size_t axis = 0; axis + 1 < rank; ++axis) row_name += std::to_string(tile[axis]) + ", ";
    row_names.push_back(row_name + ":] ");
    for (std::int64_t column = 0; column < columns; ++column) {
      if (rank > 0) tile[rank - 1] = column;
      cells.push_back(detail::tile_label(s, tile));
    }
    for (std::size_t axis = rank > 1 ? rank - 1 : 0; axis-- > 0;) { // next row's tile, row-major
      if (++tile[axis] < s.tile_count(axis)) break;
      tile[axis] = 0;
    }
  }
  std::size_t width = 0;
  for (const std::string& cell : cells) width = std::max(width, detail::columns(cell));
  std::size_t name_width = 0;
  for (const std::string& name : row_names) name_width = std::max(name_width, name.size());
  for (std::string& name : row_names) name.resize(name_width, ' ');
  const std::string indent = rank > 2 ? std::string(name_width, ' ') : "";

  const auto rule = [&](const char* left, const char* middle, const char* right) {
    std::string line = indent + left;
    for (std::int64_t column = 0; column < columns; ++column) {
      line += detail::repeat("─", width + 2) + (column + 1 < columns ? middle : right);
    }
    return line + "\n";
  };
  std::string text = xlite::detail::concat(global, " in tiles of ", shard, ": ", s, "\n");
  text += rule("┌", "┬", "┐");
  for (std::int64_t row = 0; row < rows; ++row) {
    if (row > 0) text += rule("├", "┼", "┤");
    text += (rank > 2 ? row_names[static_cast<std::size_t>(row)] : "") + "│";
    for (std::int64_t column = 0; column < columns; ++column) {
      const std::string& cell = cells[static_cast<std::size_t>(row * columns + column)];
      text += " " + cell + std::string(width - detail::columns(cell), ' ') + " │";
    }
    text += "\n";
  }
  return text + rule("└", "┴", "┘");
}

} // namespace xlite::spmd
