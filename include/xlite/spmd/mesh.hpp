#pragma once

// A device mesh: the devices of a program laid out as an N-d array whose axes have names
// ("data", "model", ...), which partition specs then refer to (torch_xla's
// spmd.Mesh). `hybrid_mesh` builds one for devices in slices: fast links (ICI) within a
// slice, slower ones (DCN) between slices.

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/ir/device_array.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/processes.hpp"

namespace xlite::spmd {

// One axis of a mesh: its name ("" when the mesh has none) and its number of devices.
struct mesh_axis {
  std::string name;
  std::int64_t size = 0;
  friend bool operator==(const mesh_axis&, const mesh_axis&) = default;
};

class mesh {
public:
  // `device_ids` (global ordinals) fill `mesh_shape` in row-major order; `axis_names` is
  // empty or names every axis. Throws value_error for a shape whose product is not the
  // number of ids, a repeated id or name, or an id that is not a device.
  mesh(std::vector<std::int64_t> device_ids, std::vector<std::int64_t> mesh_shape,
       std::vector<std::string> axis_names = {})
      : devices_(checked_devices(device_ids, mesh_shape)), axis_names_(std::move(axis_names)) {
    check_names();
  }

  // The axes in order, as torch_xla's Mesh.shape() (an OrderedDict of name -> size).
  std::vector<mesh_axis> shape() const {
    std::vector<mesh_axis> axes;
    for (std::size_t axis = 0; axis < rank(); ++axis) axes.push_back({axis_name(axis), axis_size(axis)});
    return axes;
  }

  // The device ids as an array of the mesh's shape (Mesh.get_logical_mesh()).
  const ir::device_array& logical_mesh() const noexcept { return devices_; }

  std::int64_t size() const noexcept { return devices_.size(); }
  std::size_t rank() const noexcept { return devices_.rank(); }
  std::span<const std::int64_t> device_ids() const noexcept { return devices_.ids(); }
  std::span<const std::string> axis_names() const noexcept { return axis_names_; }
  std::int64_t axis_size(std::size_t axis) const noexcept { return devices_.dims()[axis]; }
  std::string axis_name(std::size_t axis) const { return axis_names_.empty() ? "" : axis_names_[axis]; }

  // The index of the axis named `name`; throws value_error naming the mesh's axes. `what`
  // names the caller.
  std::size_t axis_index(std::string_view name, std::string_view what) const {
    for (std::size_t axis = 0; axis < axis_names_.size(); ++axis) {
      if (axis_names_[axis] == name) return axis;
    }
    throw value_error(
        xlite::detail::message(what, ": the mesh has no axis named '", name, "'; its axes are ", axes_text()));
  }

  // "('data': 4, 'model': 2)", or "(4, 2)" without names.
  std::string axes_text() const {
    std::string text = "(";
    for (std::size_t axis = 0; axis < rank(); ++axis) {
      if (axis) text += ", ";
      if (!axis_names_.empty()) text += "'" + axis_names_[axis] + "': ";
      text += std::to_string(axis_size(axis));
    }
    return text + (rank() == 1 && axis_names_.empty() ? ",)" : ")");
  }

  friend bool operator==(const mesh&, const mesh&) = default;
  friend std::ostream& operator<<(std::ostream& out, const mesh& m) {
    return out << "mesh" << m.axes_text() << " of devices " << m.devices_;
  }

private:
  static ir::device_array checked_devices(std::vector<std::int64_t>& ids, const std::vector<std::int64_t>& dims) {
    if (dims.empty()) throw value_error("mesh: the mesh shape has no axes");
    std::int64_t places = 1;
    for (const std::int64_t dim : dims) {
      if (dim <= 0) throw value_error(xlite::detail::message("mesh: axis sizes must be positive, not ", dim));
      if (__builtin_mul_overflow(places, dim, &places)) places = -1;
    }
    if (places != static_cast<std::int64_t>(ids.size())) {
      throw value_error(xlite::detail::message("mesh: a mesh of shape ", ir::format_dims(dims), " holds ",
                                               places < 0 ? "too many" : std::to_string(places), " devices, but ",
                                               ids.size(), " device ids were given"));
    }
    const std::int64_t count = runtime::global_runtime_device_count();
    std::vector<bool> seen(static_cast<std::size_t>(count));
    for (const std::int64_t id : ids) {
      if (id < 0 || id >= count) {
        throw value_error(xlite::detail::message("mesh: device id ", id, " does not exist; there are ", count,
                                                 " devices, ids 0 to ", count - 1,
                                                 " (XLITE_NUM_DEVICES sets how many)"));
      }
      if (seen[static_cast<std::size_t>(id)]) {
        throw value_error(xlite::detail::message("mesh: device id ", id, " appears twice in the device ids"));
      }
      seen[static_cast<std::size_t>(id)] = true;
    }
    return {dims, std::move(ids)};
  }

  void check_names() const {
    if (!axis_names_.empty() && axis_names_.size() != rank()) {
      throw value_error(xlite::detail::message("mesh: ", axis_names_.size(), " axis names for a mesh of ", rank(),
                                               rank() == 1 ? " axis" : " axes"));
    }
    for (std::size_t axis = 0; axis < axis_names_.size(); ++axis) {
      if (axis_names_[axis].empty())
        throw value_error(xlite::detail::message("mesh: axis ", axis, " has an empty name"));
      for (std::size_t before = 0; before < axis; ++before) {
        if (axis_names_[before] == axis_names_[axis]) {
          throw value_error(xlite::detail::message("mesh: the axis name '", axis_names_[axis], "' appears twice"));
        }
      }
    }
  }

  ir::device_array devices_;
  std::vector<std::string> axis_names_;
};

// A mesh over slices of devices (torch_xla's HybridMesh). Axis k has ici[k] * dcn[k]
// devices: a mesh index m along it is slice coordinate m / ici[k] and in-slice coordinate
// m % ici[k], so that the axes' ICI parts stay within a slice and their DCN parts cross
// slices (numpy's block() of one ici-shaped mesh per slice, laid out in the dcn shape).
// Slice s is the devices with ordinals s * n to (s + 1) * n - 1, n = product(ici); the
// mesh covers all the devices. `dcn` empty means one slice.
inline mesh hybrid_mesh(const std::vector<std::int64_t>& ici, std::vector<std::int64_t> dcn = {},
                        std::vector<std::string> axis_names = {}) {
  if (dcn.empty()) dcn.assign(ici.size(), 1);
  if (dcn.size() != ici.size()) {
    throw value_error(xlite::detail::message("hybrid_mesh: the ICI shape has ", ici.size(),
                                             " axes but the DCN shape has ", dcn.size()));
  }
  std::vector<std::int64_t> dims(ici.size());
  std::int64_t per_slice = 1;
  std::int64_t slices = 1;
  bool overflow = false;
  for (std::size_t axis = 0; axis < ici.size(); ++axis) {
    if (ici[axis] <= 0 || dcn[axis] <= 0) {
      throw value_error(xlite::detail::message("hybrid_mesh: axis ", axis, " has sizes ", ici[axis], " (ICI) and ",
                                               dcn[axis], " (DCN); both must be positive"));
    }
    overflow |= __builtin_mul_overflow(ici[axis], dcn[axis], &dims[axis]);
    overflow |= __builtin_mul_overflow(per_slice, ici[axis], &per_slice);
    overflow |= __builtin_mul_overflow(slices, dcn[axis], &slices);
  }
  const std::int64_t count = runtime::global_runtime_device_count();
  std::int64_t total = 0;
  if (__builtin_mul_overflow(per_slice, slices, &total) || overflow || total != count) {
    throw value_error(xlite::detail::message("hybrid_mesh: the ICI shape ", ir::format_dims(ici), " and the DCN shape ",
                                             ir::format_dims(dcn), " do not make the ", count,
                                             " devices there are (XLITE_NUM_DEVICES sets how many)"));
  }
  // Row-major coordinates of a flat index over `shape`.
  const auto ravel = [](std::span<const std::int64_t> index, std::span<const std::int64_t> shape) {
    std::int64_t flat = 0;
    for (std::size_t axis = 0; axis < shape.size(); ++axis) flat = flat * shape[axis] + index[axis];
    return flat;
  };
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> index(dims.size(), 0);
  std::vector<std::int64_t> slice(dims.size());
  std::vector<std::int64_t> within(dims.size());
  for (std::int64_t n = 0; n < count; ++n) {
    for (std::size_t axis = 0; axis < dims.size(); ++axis) {
      slice[axis] = index[axis] / ici[axis];
      within[axis] = index[axis] % ici[axis];
    }
    ids.push_back(ravel(slice, dcn) * per_slice + ravel(within, ici));
    for (std::size_t axis = dims.size(); axis-- > 0;) { // next mesh index, row-major
      if (++index[axis] < dims[axis]) break;
      index[axis] = 0;
    }
  }
  return mesh(std::move(ids), std::move(dims), std::move(axis_names));
}

} // namespace xlite::spmd
