#pragma once

// An N-d array of device ids (global ordinals), row-major: a mesh's logical layout and a
// sharding's tile assignment are both one. numpy's ndarray of ids is what PyTorch/XLA uses
// for both; this is the small part of it they need: index, transpose, reshape, print.

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "xlite/core/error.hpp"

namespace xlite::ir {

// "[2, 4]": dimensions as the messages print them.
inline std::string format_dims(std::span<const std::int64_t> dims) {
  std::string text = "[";
  for (std::size_t axis = 0; axis < dims.size(); ++axis) text += (axis ? ", " : "") + std::to_string(dims[axis]);
  return text + "]";
}

class device_array {
public:
  // `ids` in row-major order over `dims`, which must hold exactly that many places. The rank
  // is not capped at max_rank: a tile assignment has a tensor's dimensions and two more.
  device_array(std::vector<std::int64_t> dims, std::vector<std::int64_t> ids)
      : dims_(std::move(dims)), ids_(std::move(ids)) {
    std::int64_t places = 1;
    bool overflow = false;
    for (const std::int64_t dim : dims_) {
      if (dim <= 0) {
        throw shape_error(xlite::detail::message("device_array: dimensions ", format_dims(dims_), " must be positive"));
      }
      overflow |= __builtin_mul_overflow(places, dim, &places);
    }
    if (overflow || places != static_cast<std::int64_t>(ids_.size())) {
      throw shape_error(xlite::detail::message("device_array: ", ids_.size(), " device ids do not fill dimensions ",
                                               format_dims(dims_)));
    }
  }

  std::span<const std::int64_t> dims() const noexcept { return dims_; }
  std::size_t rank() const noexcept { return dims_.size(); }
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(ids_.size()); }
  std::span<const std::int64_t> ids() const noexcept { return ids_; }

  // The id at a full index (one coordinate per dimension), unchecked.
  std::int64_t operator[](std::span<const std::int64_t> index) const noexcept {
    std::int64_t flat = 0;
    for (std::size_t axis = 0; axis < rank(); ++axis) flat = flat * dims_[axis] + index[axis];
    return ids_[static_cast<std::size_t>(flat)];
  }

  // The index of `id`, or an empty vector when the array does not hold it.
  std::vector<std::int64_t> index_of(std::int64_t id) const {
    const auto found = std::ranges::find(ids_, id);
    if (found == ids_.end()) return {};
    std::vector<std::int64_t> index(rank());
    auto flat = static_cast<std::int64_t>(found - ids_.begin());
    for (std::size_t axis = rank(); axis-- > 0;) {
      index[axis] = flat % dims_[axis];
      flat /= dims_[axis];
    }
    return index;
  }

  // numpy's transpose: result axis k is this array's axis order[k].
  device_array transpose(std::span<const std::size_t> order) const {
    std::vector<std::int64_t> dims(rank());
    for (std::size_t k = 0; k < rank(); ++k) dims[k] = dims_[order[k]];
    std::vector<std::int64_t> out;
    out.reserve(ids_.size());
    std::vector<std::int64_t> result_index(rank(), 0);
    std::vector<std::int64_t> source_index(rank());
    for (std::size_t n = 0; n < ids_.size(); ++n) {
      for (std::size_t k = 0; k < rank(); ++k) source_index[order[k]] = result_index[k];
      out.push_back((*this)[source_index]);
      for (std::size_t k = rank(); k-- > 0;) { // odometer over the result's index
        if (++result_index[k] < dims[k]) break;
        result_index[k] = 0;
      }
    }
    return {std::move(dims), std::move(out)};
  }

  // The same ids in the same order, viewed with other dimensions.
  device_array reshape(std::vector<std::int64_t> dims) const { return {std::move(dims), ids_}; }

  friend bool operator==(const device_array& a, const device_array& b) {
    return a.dims_ == b.dims_ && a.ids_ == b.ids_;
  }

  // As numpy prints an array: "[[0, 1], [2, 3]]"; a rank-0 array is its one id.
  std::string to_string() const {
    std::string text;
    std::size_t next = 0;
    const auto print = [&](auto& self, std::size_t axis) -> void {
      if (axis == rank()) {
        text += std::to_string(ids_[next++]);
        return;
      }
      text += '[';
      for (std::int64_t i = 0; i < dims_[axis]; ++i) {
        if (i > 0) text += ", ";
        self(self, axis + 1);
      }
      text += ']';
    };
    print(print, 0);
    return text;
  }

  friend std::ostream& operator<<(std::ostream& out, const device_array& a) { return out << a.to_string(); }

private:
  std::vector<std::int64_t> dims_;
  std::vector<std::int64_t> ids_;
};

} // namespace xlite::ir
