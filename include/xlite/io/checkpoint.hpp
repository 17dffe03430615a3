#pragma once

// Sharded checkpoints: each device writes its own tiles, and the checkpoint loads back whole,
// consolidated into one safetensors file, or onto another mesh and sharding.
//
//   <dir>/index.json                                what the checkpoint holds (below)
//   <dir>/<save id>.device-<d>-of-<n>.safetensors   device d's tiles, named as their tensors
//
// index.json: {"format": "xlite-sharded-checkpoint-1", "devices": n, "files": [...],
//   "metadata": {string: string}, "tensors": {name: {"dtype": "F32", "shape": [8, 6],
//   "sharding": "{devices=[2,4]0,...}", "tiles": [{"file": 0, "begin": [0, 0], "shape": [4, 2]}, ...]}}}
//
// A tile is a device's shard without its padding; replicas write theirs once (the first
// replica). Tensors that are not tiled (host tensors, unsharded or replicated lazy tensors,
// partial values, which are summed first) are written whole by device 0's file.
//
// Saving is atomic for the checkpoint as a whole: the tile files of a save carry a fresh
// save id, the index is written last (core/atomic_file.hpp), and only then are the files of
// the previous save removed. A crash at any moment leaves an index that names whole files
// of one save. (PyTorch/XLA's FSDP checkpoints, one file per rank and a consolidation script,
// do not say which files belong together.)
//
// Loading reads the index and checks it as load() checks a file: names and shapes, that
// the tiles of each tensor lie inside it and cover it exactly once, that each tile file
// holds the tile with the dtype and shape the index says.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/atomic_file.hpp"
#include "xlite/core/error.hpp"
#include "xlite/io/any_tensor.hpp"
#include "xlite/io/json.hpp"
#include "xlite/io/safetensors.hpp"
#include "xlite/lazy/sharding.hpp"
#include "xlite/runtime/block_copy.hpp"
#include "xlite/runtime/collectives.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/processes.hpp"
#include "xlite/spmd/mesh.hpp"
#include "xlite/spmd/partition_spec.hpp"

namespace xlite {

namespace io::detail {

inline constexpr std::string_view checkpoint_format = "xlite-sharded-checkpoint-1";

struct checkpoint_tile {
  std::size_t file;
  std::vector<std::int64_t> begin;
  xlite::shape extent;
};

struct checkpoint_tensor {
  dtype type;
  xlite::shape shape;
  std::string sharding;
  std::vector<checkpoint_tile> tiles;
};

struct checkpoint_index {
  std::int64_t devices = 1;
  std::vector<std::string> files;
  tensor_metadata metadata;
  std::map<std::string, checkpoint_tensor, std::less<>> tensors;
};

// Copies the block of `extent` at `from` in `source` (row-major, dims `source_dims`) to `to`
// in `target`; elements are `width` bytes.
inline void copy_block(std::span<const std::byte> source, std::span<const std::int64_t> source_dims,
                       std::span<const std::int64_t> from, std::span<std::byte> target,
                       std::span<const std::int64_t> target_dims, std::span<const std::int64_t> to,
                       std::span<const std::int64_t> extent, std::size_t width) {
  runtime::detail::for_each_row(
      source_dims, from, target_dims, to, extent, [&](std::int64_t s, std::int64_t t, std::int64_t length) {
        std::memcpy(target.data() + static_cast<std::size_t>(t) * width,
                    source.data() + static_cast<std::size_t>(s) * width, static_cast<std::size_t>(length) * width);
      });
}

inline std::string index_json(const checkpoint_index& index) {
  std::string json = "{\"format\":" + json_string(checkpoint_format) + ",\"devices\":" + std::to_string(index.devices) +
                     ",\"files\":[";
  for (std::size_t f = 0; f < index.files.size(); ++f) json += (f ? "," : "") + json_string(index.files[f]);
  json += "],\"metadata\":{";
  bool first = true;
  for (const auto& [key, value] : index.metadata) {
    json += (first ? "" : ",") + json_string(key) + ":" + json_string(value);
    first = false;
  }
  json += "},\"tensors\":{";
  first = true;
  for (const auto& [name, t] : index.tensors) {
    json += (first ? "\n" : ",\n") + json_string(name) + ":{\"dtype\":\"" + std::string(safetensors_name(t.type)) +
            "\",\"shape\":" + json_integers(t.shape.dims()) + ",\"sharding\":" + json_string(t.sharding) +
            ",\"tiles\":[";
    first = false;
    for (std::size_t k = 0; k < t.tiles.size(); ++k) {
      const checkpoint_tile& tile = t.tiles[k];
      json += (k ? "," : "") + std::string("{\"file\":") + std::to_string(tile.file) +
              ",\"begin\":" + json_integers(tile.begin) + ",\"shape\":" + json_integers(tile.extent.dims()) + "}";
    }
    json += "]}";
  }
  return json + "}}\n";
}

// Reads and checks <dir>/index.json.
inline checkpoint_index read_index(const std::filesystem::path& dir, const std::string& context) {
  const auto fail = [&](auto&&... parts) {
    throw io_error(xlite::detail::message(context, ": ", std::forward<decltype(parts)>(parts)...));
  };
  const std::filesystem::path path = dir / "index.json";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("there is no readable ", path.string(), "; is it a checkpoint saved by save_sharded?");
  const auto size = static_cast<std::int64_t>(in.tellg());
  if (size < 0) fail("cannot read index.json");
  if (size > max_header_bytes) fail("index.json has ", size, " bytes, over the limit of ", max_header_bytes);
  std::string text(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  in.read(text.data(), size);
  if (!in) fail("cannot read index.json");

  checkpoint_index index;
  json_reader json(text, context + ": index.json");
  std::set<std::string, std::less<>> keys;
  const auto integers = [&] {
    std::vector<std::int64_t> values;
    json.array([&] {
      if (values.size() == max_rank) json.fail(xlite::detail::message("more than ", max_rank, " dimensions"));
      values.push_back(json.integer());
    });
    return values;
  };
  const auto shape_of = [&](const std::vector<std::int64_t>& dims) {
    try {
      return file_shape(dims);
    } catch (const shape_error& e) {
      json.fail(e.what());
    }
  };
  json.object([&](const std::string& key) {
    if (!keys.insert(key).second) json.fail("the key '" + key + "' appears twice");
    if (key == "format") {
      if (json.string() != checkpoint_format)
        json.fail(xlite::detail::message("the format is not ", checkpoint_format));
    } else if (key == "devices") {
      index.devices = json.integer();
    } else if (key == "files") {
      json.array([&] { index.files.push_back(json.string()); });
    } else if (key == "metadata") {
      json.object([&](const std::string& k) { index.metadata[k] = json.string(); });
    } else if (key == "tensors") {
      json.object([&](const std::string& name) {
        if (index.tensors.contains(name)) json.fail("tensor '" + name + "' appears twice");
        checkpoint_tensor t{dtype::f32, {}, {}, {}};
        std::set<std::string, std::less<>> fields;
        json.object([&](const std::string& field) {
          if (!fields.insert(field).second) json.fail("tensor '" + name + "' has two '" + field + "'");
          if (field == "dtype") {
            const std::string type_name = json.string();
            const auto type = safetensors_dtype(type_name);
            if (!type) json.fail("tensor '" + name + "' has an unknown dtype '" + type_name + "'");
            t.type = *type;
          } else if (field == "shape") {
            t.shape = shape_of(integers());
          } else if (field == "sharding") {
            t.sharding = json.string();
          } else if (field == "tiles") {
            json.array([&] {
              checkpoint_tile tile{0, {}, {}};
              std::set<std::string, std::less<>> parts;
              json.object([&](const std::string& part) {
                if (!parts.insert(part).second) json.fail("a tile of tensor '" + name + "' has two '" + part + "'");
                if (part == "file") {
                  tile.file = static_cast<std::size_t>(json.integer());
                } else if (part == "begin") {
                  tile.begin = integers();
                } else if (part == "shape") {
                  tile.extent = shape_of(integers());
                } else {
                  json.fail("a tile of tensor '" + name + "' has an unknown field '" + part + "'");
                }
              });
              if (parts.size() != 3) fail("a tile of tensor '", name, "' needs a file, a begin and a shape");
              // A device writes one tile of a tensor: more tiles than files is not a checkpoint
              // (and would make the overlap check below quadratic in a hostile count).
              if (t.tiles.size() == index.files.size()) fail("tensor '", name, "' has more tiles than there are files");
              t.tiles.push_back(std::move(tile));
            });
          } else {
            json.fail("tensor '" + name + "' has an unknown field '" + field + "'");
          }
        });
        if (fields.size() != 4) fail("tensor '", name, "' needs a dtype, a shape, a sharding and tiles");
        if (name == "__metadata__") fail("'__metadata__' is safetensors' own key, not a tensor name");
        index.tensors.emplace(name, std::move(t));
      });
    } else {
      json.fail("an unknown key '" + key + "'");
    }
  });
  json.end();
  if (keys.size() != 5) fail("index.json needs format, devices, files, metadata and tensors");
  if (index.devices != static_cast<std::int64_t>(index.files.size())) {
    fail("index.json says ", index.devices, " devices but lists ", index.files.size(), " files");
  }

  // Tile files are plain names in the directory: nothing outside it is ever read.
  for (const std::string& file : index.files) {
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      fail("index.json names the file '", file, "', which is not a plain file name");
    }
  }
  for (const auto& [name, t] : index.tensors) {
    std::int64_t covered = 0;
    std::set<std::size_t> files;
    for (std::size_t k = 0; k < t.tiles.size(); ++k) {
      const checkpoint_tile& tile = t.tiles[k];
      if (tile.file >= index.files.size())
        fail("a tile of tensor '", name, "' names file ", tile.file, " of ", index.files.size());
      if (!files.insert(tile.file).second) fail("two tiles of tensor '", name, "' are in file ", tile.file);
      if (tile.begin.size() != t.shape.rank() || tile.extent.rank() != t.shape.rank()) {
        fail("a tile of tensor '", name, "' does not have the tensor's rank ", t.shape.rank());
      }
      for (std::size_t axis = 0; axis < t.shape.rank(); ++axis) {
        if (tile.begin[axis] > t.shape[axis] || tile.extent[axis] > t.shape[axis] - tile.begin[axis]) {
          fail("a tile of tensor '", name, "' at ", json_integers(tile.begin), " of shape ", tile.extent,
               " lies outside its shape ", t.shape);
        }
      }
      for (std::size_t other = 0; other < k; ++other) {
        const checkpoint_tile& o = t.tiles[other];
        bool overlap = tile.extent.numel() > 0 && o.extent.numel() > 0;
        for (std::size_t axis = 0; overlap && axis < t.shape.rank(); ++axis) {
          overlap =
              tile.begin[axis] < o.begin[axis] + o.extent[axis] && o.begin[axis] < tile.begin[axis] + tile.extent[axis];
        }
        if (overlap) fail("two tiles of tensor '", name, "' overlap");
      }
      covered += tile.extent.numel();
    }
    // Disjoint tiles inside the tensor cover it exactly when their sizes add up to it.
    if (covered != t.shape.numel()) {
      fail("the tiles of tensor '", name, "' cover ", covered, " of its ", t.shape.numel(), " elements");
    }
  }
  return index;
}

// Reads tensors out of a checkpoint's tile files, each file opened and its header checked
// once.
class checkpoint_reader {
public:
  checkpoint_reader(std::filesystem::path dir, std::string context)
      : dir_(std::move(dir)), context_(std::move(context)), index_(read_index(dir_, context_)),
        files_(index_.files.size()) {}

  const checkpoint_index& index() const noexcept { return index_; }

  // The whole tensor `name`, put together from its tiles. Every tile is found in its file
  // first, so the tensor is allocated only when the files hold all of its bytes.
  any_tensor whole(const std::string& name) {
    const checkpoint_tensor& t = index_.tensors.at(name);
    std::vector<std::pair<open_file*, const stored_tensor*>> stored;
    for (const checkpoint_tile& tile : t.tiles) stored.push_back(locate(name, t, tile));
    any_tensor result(t.type, t.shape);
    const std::vector<std::int64_t> whole_dims = runtime::detail::dims_of(t.shape);
    for (std::size_t k = 0; k < t.tiles.size(); ++k) {
      const auto& [file, tile] = stored[k];
      const any_tensor part = read_tensor(file->in, file->header, *tile, file->context);
      const std::vector<std::int64_t> tile_dims = runtime::detail::dims_of(tile->shape);
      copy_block(part.bytes(), tile_dims, std::vector<std::int64_t>(tile_dims.size(), 0), result.bytes(), whole_dims,
                 t.tiles[k].begin, tile_dims, size_of(t.type));
    }
    return result;
  }

private:
  struct open_file {
    std::ifstream in;
    safetensors_header header;
    std::string context;
  };

  // The tile of tensor `name` in its file, checked against the index.
  std::pair<open_file*, const stored_tensor*> locate(const std::string& name, const checkpoint_tensor& t,
                                                     const checkpoint_tile& tile) {
    open_file& file = opened(tile.file);
    const auto stored = std::ranges::find(file.header.tensors, name, &stored_tensor::name);
    if (stored == file.header.tensors.end()) {
      throw io_error(xlite::detail::message(file.context, ": it has no tile of tensor '", name, "'"));
    }
    if (stored->type != t.type || stored->shape != tile.extent) {
      throw io_error(xlite::detail::message(file.context, ": the tile of tensor '", name, "' is ",
                                            safetensors_name(stored->type), " ", stored->shape, ", not ",
                                            safetensors_name(t.type), " ", tile.extent, " as index.json says"));
    }
    return {&file, &*stored};
  }

  open_file& opened(std::size_t k) {
    if (!files_[k]) {
      const std::filesystem::path path = dir_ / index_.files[k];
      std::int64_t size = 0;
      auto file = std::make_unique<open_file>();
      file->context = context_ + ": " + path.string();
      file->in = open_for_reading(path, context_, size);
      file->header = read_header(file->in, size, file->context);
      files_[k] = std::move(file);
    }
    return *files_[k];
  }

  std::filesystem::path dir_;
  std::string context_;
  checkpoint_index index_;
  std::vector<std::unique_ptr<open_file>> files_;
};

// Whether `file` in a checkpoint directory is a tile file (of any save).
inline bool is_tile_file(std::string_view file) {
  return file.size() > 17 && file[16] == '.' &&
         std::all_of(file.begin(), file.begin() + 16,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }) &&
         file.substr(17).starts_with("device-") && file.ends_with(".safetensors");
}

// Calls visit(path, stem) for each tile file in `dir` and each temporary file a killed
// save left of one (stem: the tile file's name).
template <class Visit>
void for_each_tile_file(const std::filesystem::path& dir, Visit&& visit) {
  std::error_code failure;
  std::filesystem::directory_iterator it(dir, failure), end;
  for (; !failure && it != end; it.increment(failure)) {
    const std::string name = it->path().filename().string();
    const std::string stem = name.substr(0, name.find(".tmp."));
    if (is_tile_file(stem)) visit(it->path(), std::string_view(stem));
  }
}

// Removes the tile files (and their temporaries) that `keep` does not want; best effort.
template <class Keep>
void remove_tile_files(const std::filesystem::path& dir, Keep&& keep) {
  for_each_tile_file(dir, [&](const std::filesystem::path& path, std::string_view stem) {
    std::error_code ignored;
    if (!keep(stem)) std::filesystem::remove(path, ignored);
  });
}

// Every process's `payload`, in process order, on every process (each process's device 0
// meets the others'): one part of a save across processes. With one process, `payload`.
inline std::vector<std::string> agree(std::string_view tag, std::string payload) {
  if (runtime::process_count() == 1) return {std::move(payload)};
  std::vector<std::int64_t> first_devices;
  for (std::int64_t p = 0; p < runtime::process_count(); ++p) first_devices.push_back(p * device_count());
  return runtime::collectives().rendezvous(runtime::global_device(xlite::device("cpu:0")), tag, std::move(payload),
                                           first_devices);
}

// After every process did its part of a save: throws, in every process, if one failed:
// this process's own exception `mine`, or an io_error naming the first process that failed.
inline void check_all_did(std::string_view what, const std::exception_ptr& mine) {
  std::string text;
  if (mine) {
    try {
      std::rethrow_exception(mine);
    } catch (...) {
      text = xlite::detail::current_exception_message();
    }
  }
  const std::vector<std::string> outcomes = agree(what, text);
  if (mine) std::rethrow_exception(mine);
  for (std::size_t p = 0; p < outcomes.size(); ++p) {
    if (!outcomes[p].empty()) throw io_error(xlite::detail::message(what, ": process ", p, " failed: ", outcomes[p]));
  }
}

// 16 hex digits that no file in `dir` starts with. From std::random_device at each call,
// so a forked process does not repeat its parent's ids.
inline std::string fresh_save_id(const std::filesystem::path& dir) {
  static constexpr char hex[] = "0123456789abcdef";
  for (;;) {
    std::random_device entropy;
    std::string id;
    for (int word = 0; word < 4; ++word) {
      for (std::uint32_t bits = entropy(), k = 0; k < 4; ++k, bits >>= 4) id += hex[bits & 15];
    }
    bool taken = false;
    for_each_tile_file(
        dir, [&](const std::filesystem::path&, std::string_view stem) { taken = taken || stem.starts_with(id); });
    if (!taken) return id;
  }
}

} // namespace io::detail

// Saves `tensors` (name and tensor pairs, as for save()) as a sharded checkpoint in the
// directory `dir`, made if missing: each device writes its tiles of the sharded lazy
// tensors, device 0 also the tensors that are not tiled. Replaces the checkpoint there
// atomically. In a run of several processes (runtime/processes.hpp) every process calls it
// alike, each writes its own devices' files into `dir` (one file system, or a shared one),
// and the first process writes the index once every process has written: a failure in any
// process fails the save in every process, and the previous checkpoint stands.
template <named_tensor_range Named>
void save_sharded(const std::filesystem::path& dir, const Named& tensors, const tensor_metadata& metadata = {},
                  source_location where = source_location::current()) {
  io::detail::named_tensors entries = io::detail::named(tensors);
  io::detail::check_names(entries, dir, "save_sharded");
  io::detail::compute_pending(entries, where);
  std::error_code failure;
  std::filesystem::create_directories(dir, failure);
  if (failure) {
    throw io_error(
        xlite::detail::message("save_sharded('", dir.string(), "'): cannot make the directory: ", failure.message()));
  }

  const std::int64_t devices = runtime::is_spmd() ? runtime::global_runtime_device_count() : 1;
  io::detail::checkpoint_index index;
  index.devices = devices;
  index.metadata = metadata;
  std::vector<io::detail::named_tensors> per_device(static_cast<std::size_t>(devices)); // this process's
  const bool first_process = runtime::process_index() == 0;                             // has device 0
  std::deque<any_tensor> put_together;
  for (const auto& [name, t] : entries) {
    io::detail::checkpoint_tensor& stored = index.tensors[name];
    stored = {t.type(), t.shape(), "{replicated}", {}};
    spmd::sharded_data_ptr shards;
    if (const lazy::tensor* on_device = t.lazy()) {
      std::scoped_lock lock(lazy::detail::registry().mutex);
      shards = on_device->state()->shards;
    }
    if (!shards || shards->sharding().is_partial() || shards->sharding().is_replicated()) {
      stored.tiles.push_back({0, std::vector<std::int64_t>(t.shape().rank(), 0), t.shape()});
      if (shards && runtime::process_count() > 1) {
        // Putting it together is a step of every process, whose tiles it takes; device 0's keeps it.
        any_tensor whole(t.type(), t.shape());
        lazy::detail::transfer_to_host(*t.lazy(), {"save_sharded", where}, [&](const runtime::buffer& value) {
          std::copy_n(value.data(), value.byte_size(), whole.bytes().data());
        });
        if (first_process) per_device[0].emplace_back(name, saved_tensor(put_together.emplace_back(std::move(whole))));
      } else if (first_process) {
        per_device[0].emplace_back(name, t);
      }
      continue;
    }
    const ir::sharding& sharding = shards->sharding();
    stored.sharding = sharding.to_string();
    for (std::int64_t d = 0; d < devices; ++d) {
      const auto placed = sharding.placement_of(d, t.shape().rank());
      if (!placed || placed->replica_index != 0) continue;
      std::vector<std::int64_t> begin, extent;
      for (const auto& [b, e] : sharding.shard_bounds(t.shape(), d)) {
        begin.push_back(b);
        extent.push_back(e - b);
      }
      const xlite::shape tile_shape(extent);
      stored.tiles.push_back({static_cast<std::size_t>(d), begin, tile_shape});
      if (!shards->shard(d)) continue; // another process's device, which that process writes
      per_device[static_cast<std::size_t>(d)].emplace_back(
          name, saved_tensor(t.type(), tile_shape, [shards, d, tile_shape, type = t.type()] {
            const runtime::buffer& shard = *shards->shard(d)->wait();
            any_tensor tile(type, tile_shape);
            const std::vector<std::int64_t> extent = runtime::detail::dims_of(tile_shape);
            const std::vector<std::int64_t> origin(extent.size(), 0);
            io::detail::copy_block(std::span(shard.data(), static_cast<std::size_t>(shard.byte_size())),
                                   runtime::detail::dims_of(shard.shape()), origin, tile.bytes(), extent, origin,
                                   extent, size_of(type));
            return tile;
          }));
    }
  }
  // Across processes each writes its devices' files, and the first the index once all have.
  const std::string id = io::detail::agree("save_sharded id", first_process ? io::detail::fresh_save_id(dir) : "")[0];
  const auto is_this_save = [&](std::string_view stem) { return stem.starts_with(id); };
  const auto take_this_save_away = [&] { // the previous checkpoint stands
    if (first_process) io::detail::remove_tile_files(dir, [&](std::string_view stem) { return !is_this_save(stem); });
  };
  std::exception_ptr mine;
  try {
    for (std::int64_t d = 0; d < devices; ++d) {
      index.files.push_back(id + ".device-" + std::to_string(d) + "-of-" + std::to_string(devices) + ".safetensors");
      if (runtime::process_of(d) != runtime::process_index()) continue;
      io::detail::save_entries(dir / index.files.back(), std::move(per_device[static_cast<std::size_t>(d)]), {}, where);
    }
  } catch (...) {
    mine = std::current_exception();
  }
  try {
    io::detail::check_all_did("save_sharded", mine); // every process wrote its files
    if (first_process) {
      try {
        atomic_file file(dir / "index.json", "save_sharded");
        file.write(io::detail::index_json(index));
        file.commit();
      } catch (...) {
        mine = std::current_exception();
      }
    }
    io::detail::check_all_did("save_sharded", mine); // the index is in place
  } catch (...) {
    take_this_save_away();
    throw;
  }
  // The new index is in place: the previous saves' files, and what killed saves left, go,
  // before any process returns.
  if (first_process) io::detail::remove_tile_files(dir, is_this_save);
  io::detail::agree("save_sharded done", {});
}

inline void save_sharded(const std::filesystem::path& dir,
                         std::initializer_list<std::pair<std::string_view, saved_tensor>> tensors,
                         const tensor_metadata& metadata = {}, source_location where = source_location::current()) {
  save_sharded<std::initializer_list<std::pair<std::string_view, saved_tensor>>>(dir, tensors, metadata, where);
}

// The metadata saved with a sharded checkpoint.
inline tensor_metadata load_sharded_metadata(const std::filesystem::path& dir) {
  return io::detail::read_index(dir, "load_sharded_metadata('" + dir.string() + "')").metadata;
}

// Every tensor of the sharded checkpoint in `dir`, whole, on the host.
inline tensor_map load_sharded(const std::filesystem::path& dir) {
  io::detail::checkpoint_reader reader(dir, "load_sharded('" + dir.string() + "')");
  tensor_map tensors;
  for (const auto& [name, t] : reader.index().tensors) tensors.emplace(name, reader.whole(name));
  return tensors;
}

// The sharded checkpoint in `dir` onto the devices of this run, which may be other than
// those it was saved from: the tensors named in `specs` laid out as their spec says over
// `m`, the others whole. Reads one whole tensor at a time.
inline std::map<std::string, lazy::tensor, std::less<>>
load_sharded(const std::filesystem::path& dir, const spmd::mesh& m,
             const std::map<std::string, spmd::partition_spec, std::less<>>& specs) {
  const std::string context = "load_sharded('" + dir.string() + "')";
  io::detail::checkpoint_reader reader(dir, context);
  for (const auto& [name, spec] : specs) {
    if (!reader.index().tensors.contains(name)) {
      throw value_error(
          xlite::detail::message(context, ": a spec is given for '", name, "', which the checkpoint does not hold"));
    }
  }
  std::map<std::string, lazy::tensor, std::less<>> tensors;
  for (const auto& [name, stored] : reader.index().tensors) {
    const any_tensor whole = reader.whole(name);
    lazy::tensor t = visit_dtype(
        whole.type(), [&](auto tag) { return lazy::tensor::from(whole.get<typename decltype(tag)::type>()); });
    if (const auto spec = specs.find(name); spec != specs.end()) spmd::mark_sharding(t, m, spec->second);
    tensors.emplace(name, std::move(t));
  }
  return tensors;
}

// Writes the sharded checkpoint in `dir` as one safetensors file at `output`, with its
// metadata, putting one tensor together at a time (torch_xla's consolidate_sharded_ckpts).
inline void consolidate(const std::filesystem::path& dir, const std::filesystem::path& output,
                        source_location where = source_location::current()) {
  io::detail::checkpoint_reader reader(dir, "consolidate('" + dir.string() + "')");
  io::detail::named_tensors entries;
  for (const auto& [name, t] : reader.index().tensors) {
    entries.emplace_back(name, saved_tensor(t.type, t.shape, [&reader, key = name] { return reader.whole(key); }));
  }
  io::detail::save_entries(output, std::move(entries), reader.index().metadata, where);
}

} // namespace xlite
