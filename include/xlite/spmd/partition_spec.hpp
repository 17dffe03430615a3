#pragma once

// Partition specs: how each dimension of a tensor is split over a mesh's axes, as
// torch_xla's mark_sharding and JAX's PartitionSpec take them, and the tile assignment a
// spec gives on a mesh.
//
//   spmd::partition_spec{"data", spmd::none}      // rows split over 'data', columns whole
//   spmd::partition_spec{{"data", "model"}}       // one dimension split over both axes
//   spmd::partition_spec{0, 1}                    // axes by index
//
// Each entry is none, a mesh axis (index or name), or several axes: the dimension is then
// cut into the product of their sizes, the first axis outermost, so the order matters. The
// mesh axes no entry names hold replicas. A spec may have fewer entries than the tensor has
// dimensions (JAX's rule): the dimensions after them are not split.

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/sharding.hpp"
#include "xlite/spmd/mesh.hpp"

namespace xlite::spmd {

// A mesh axis as a spec names it: by index or by name.
class axis_ref {
public:
  axis_ref(std::int64_t index) : ref_(index) {}         // NOLINT(google-explicit-constructor): specs are written {0, 1}
  axis_ref(int index) : ref_(std::int64_t{index}) {}    // NOLINT(google-explicit-constructor)
  axis_ref(std::string name) : ref_(std::move(name)) {} // NOLINT(google-explicit-constructor)
  axis_ref(const char* name) : ref_(std::string(name)) {} // NOLINT(google-explicit-constructor)

  // The index of the axis on `m`; throws naming `m`'s axes when it has no such axis.
  std::size_t resolve(const mesh& m, std::string_view what) const {
    if (const auto* name = std::get_if<std::string>(&ref_)) return m.axis_index(*name, what);
    const std::int64_t index = std::get<std::int64_t>(ref_);
    if (index < 0 || index >= static_cast<std::int64_t>(m.rank())) {
      throw index_error(
          xlite::detail::message(what, ": mesh axis ", index, " does not exist; the mesh has axes ", m.axes_text()));
    }
    return static_cast<std::size_t>(index);
  }

  // 0, or 'data'.
  std::string to_string() const {
    if (const auto* name = std::get_if<std::string>(&ref_)) return "'" + *name + "'";
    return std::to_string(std::get<std::int64_t>(ref_));
  }

  friend bool operator==(const axis_ref&, const axis_ref&) = default;

private:
  std::variant<std::int64_t, std::string> ref_;
};

// A spec entry for a dimension that is not split (Python's None).
struct none_t {
  explicit constexpr none_t() = default;
};
inline constexpr none_t none{};

// One entry of a partition spec: the mesh axes its dimension is split over, outermost
// first; none when empty.
class dim_spec {
public:
  dim_spec(none_t) {} // NOLINT(google-explicit-constructor)
  template <class Axis>
  requires std::constructible_from<axis_ref, Axis> dim_spec(Axis&& axis)
      : axes_{axis_ref(std::forward<Axis>(axis))} {} // NOLINT(google-explicit-constructor)
  dim_spec(std::initializer_list<axis_ref> axes) : axes_(axes) {}
  explicit dim_spec(std::vector<axis_ref> axes) : axes_(std::move(axes)) {}

  const std::vector<axis_ref>& axes() const noexcept { return axes_; }

  // None, 'data', or ('data', 'model').
  std::string to_string() const {
    if (axes_.empty()) return "None";
    if (axes_.size() == 1) return axes_[0].to_string();
    std::string text = "(";
    for (std::size_t k = 0; k < axes_.size(); ++k) text += (k ? ", " : "") + axes_[k].to_string();
    return text + ")";
  }

  friend bool operator==(const dim_spec&, const dim_spec&) = default;

private:
  std::vector<axis_ref> axes_;
};

class partition_spec {
public:
  partition_spec() = default;
  partition_spec(std::initializer_list<dim_spec> dims) : dims_(dims) {}
  explicit partition_spec(std::vector<dim_spec> dims) : dims_(std::move(dims)) {}

  std::size_t size() const noexcept { return dims_.size(); }
  const std::vector<dim_spec>& dims() const noexcept { return dims_; }

  // As Python prints the tuple: ('data', None), ('data',), ().
  std::string to_string() const {
    std::string text = "(";
    for (std::size_t k = 0; k < dims_.size(); ++k) text += (k ? ", " : "") + dims_[k].to_string();
    return text + (dims_.size() == 1 ? ",)" : ")");
  }

  friend bool operator==(const partition_spec&, const partition_spec&) = default;
  friend std::ostream& operator<<(std::ostream& out, const partition_spec& s) { return out << s.to_string(); }

private:
  std::vector<dim_spec> dims_;
};

// The sharding `spec` gives a tensor of shape `global` on `m` (JAX's NamedSharding to
// HloSharding): the mesh is transposed so that the axes of dimension 0 come first, then
// those of dimension 1, ..., then the axes no entry names, and reshaped into one tile count
// per dimension and a replica count. `what` names the caller in errors, which name the
// spec, the shape and the mesh's axes.
inline ir::sharding to_sharding(const mesh& m, const partition_spec& spec, const xlite::shape& global,
                                std::string_view what = "mark_sharding") {
  const auto context = [&] {
    return xlite::detail::message(" (partition spec ", spec, ", tensor shape ", global, ", mesh ", m.axes_text(), ")");
  };
  if (spec.size() > global.rank()) {
    throw value_error(xlite::detail::message(what, ": the partition spec has ", spec.size(),
                                             " entries but the tensor has rank ", global.rank(), context()));
  }
  const std::int64_t devices = runtime::global_runtime_device_count();
  if (m.size() != devices) {
    throw value_error(xlite::detail::message(what, ": the mesh has ", m.size(), " devices but the program runs on ",
                                             devices, "; a mesh must cover every device", context()));
  }
  constexpr std::size_t unused = static_cast<std::size_t>(-1);
  std::vector<std::size_t> used_by(m.rank(), unused); // the dimension that names each mesh axis
  std::vector<std::size_t> order;
  std::vector<std::int64_t> tiles(global.rank(), 1);
  for (std::size_t dim = 0; dim < spec.size(); ++dim) {
    for (const axis_ref& ref : spec.dims()[dim].axes()) {
      const std::size_t axis = ref.resolve(m, what);
      if (used_by[axis] == dim) {
        throw value_error(xlite::detail::message(what, ": mesh axis ", ref.to_string(),
                                                 " is named twice for dimension ", dim, context()));
      }
      if (used_by[axis] != unused) {
        throw value_error(xlite::detail::message(what, ": mesh axis ", ref.to_string(), " splits dimension ",
                                                 used_by[axis], " and dimension ", dim,
                                                 "; an axis can split one dimension only", context()));
      }
      used_by[axis] = dim;
      order.push_back(axis);
      tiles[dim] *= m.axis_size(axis);
    }
  }
  std::int64_t replicas = 1;
  for (std::size_t axis = 0; axis < m.rank(); ++axis) {
    if (used_by[axis] == unused) {
      order.push_back(axis);
      replicas *= m.axis_size(axis);
    }
  }
  tiles.push_back(replicas);
  return ir::sharding::tiled(m.logical_mesh().transpose(order).reshape(std::move(tiles)), {ir::subgroup::replicated});
}

} // namespace xlite::spmd
