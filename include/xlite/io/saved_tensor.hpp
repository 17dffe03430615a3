#pragma once

// What the writers (save, save_npz, save_sharded) take for each name: saved_tensor, a host
// tensor, an any_tensor, a lazy tensor, or a function that makes the tensor when its turn
// comes; and what they share: checking the names, computing the pending lazy tensors in
// one launch, and writing one tensor's elements to a sink, from its device buffer when it
// is lazy (no host copy: the seed's xser.save streams for the same reason).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <ranges>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/core/source_location.hpp"
#include "xlite/io/any_tensor.hpp"
#include "xlite/lazy/step.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite {

// One tensor for save(): a host tensor, an any_tensor or a lazy tensor. It refers to the
// caller's tensor, which must outlive the call.
class saved_tensor {
public:
  template <element_type T>
  saved_tensor(const tensor<T>& t)
      : type_(dtype_of_v<T>), shape_(t.shape()), source_(source::host),
        host_(reinterpret_cast<const std::byte*>(t.data())) {}
  saved_tensor(const any_tensor& t)
      : type_(t.type()), shape_(t.shape()), source_(source::host), host_(t.bytes().data()) {}
  saved_tensor(const lazy::tensor& t) : type_(t.type()), shape_(t.shape()), source_(source::lazy), lazy_(&t) {}
  // A tensor of this dtype and shape that make() produces when its turn to be written
  // comes, so that only one is in memory at a time (a consolidated tensor, a tile).
  saved_tensor(dtype type, const xlite::shape& s, std::function<any_tensor()> make)
      : type_(type), shape_(s), source_(source::made), make_(std::move(make)) {}

  dtype type() const noexcept { return type_; }
  const xlite::shape& shape() const noexcept { return shape_; }
  std::int64_t byte_size() const noexcept { return shape_.numel() * static_cast<std::int64_t>(size_of(type_)); }
  enum class source { host, lazy, made };
  source from() const noexcept { return source_; }
  const std::byte* host_bytes() const noexcept { return host_; } // from() == host (null when empty)
  const lazy::tensor* lazy() const noexcept { return lazy_; }    // from() == lazy, else null
  const std::function<any_tensor()>& make() const noexcept { return make_; }

private:
  dtype type_;
  xlite::shape shape_;
  source source_;
  const std::byte* host_ = nullptr;
  const lazy::tensor* lazy_ = nullptr;
  std::function<any_tensor()> make_;
};

// What save() and its siblings take: a range of (name, tensor) pairs, such as a std::map or
// a vector of pairs. Its elements must be references (not values a view makes on the fly):
// a saved_tensor points into them until the save returns.
template <class R>
concept named_tensor_range = std::ranges::input_range<R> && std::is_reference_v<std::ranges::range_reference_t<R>> &&
    requires(std::ranges::range_reference_t<R> entry) {
  std::string(entry.first);
  saved_tensor(entry.second);
};

namespace io::detail {

using named_tensors = std::vector<std::pair<std::string, saved_tensor>>;

template <named_tensor_range R>
named_tensors named(const R& tensors) {
  named_tensors entries;
  for (const auto& [name, t] : tensors) entries.emplace_back(std::string(name), saved_tensor(t));
  return entries;
}

// Names must be distinct.
inline void check_names(const named_tensors& tensors, const std::filesystem::path& path, std::string_view what) {
  std::set<std::string_view> names;
  for (const auto& [name, t] : tensors) {
    if (!names.insert(name).second) {
      throw value_error(xlite::detail::message(what, "('", path.string(), "'): the name '", name, "' is given twice"));
    }
  }
}

// One launch computes every pending lazy tensor, so what they share is computed once.
inline void compute_pending(const named_tensors& tensors, source_location where) {
  std::vector<std::shared_ptr<lazy::detail::tensor_state>> pending;
  std::scoped_lock lock(lazy::detail::registry().mutex);
  for (const auto& [name, t] : tensors) {
    if (t.lazy() && t.lazy()->state()->pending) pending.push_back(t.lazy()->state());
  }
  if (!pending.empty()) lazy::detail::launch_by_device(std::move(pending), {"save", where});
}

// Writes t's elements, row-major and little-endian, to `sink` (in pieces).
template <class Sink>
void write_elements(const std::string& name, const saved_tensor& t, Sink&& sink, const std::filesystem::path& path,
                    source_location where) {
  const auto bytes = static_cast<std::size_t>(t.byte_size());
  if (const lazy::tensor* on_device = t.lazy()) {
    lazy::detail::transfer_to_host(*on_device, {"save", where},
                                   [&](const runtime::buffer& value) { sink(std::span(value.data(), bytes)); });
  } else if (t.from() == saved_tensor::source::host) {
    if (bytes > 0) sink(std::span(t.host_bytes(), bytes));
  } else {
    const any_tensor made = t.make()();
    if (made.type() != t.type() || made.shape() != t.shape()) {
      throw value_error(xlite::detail::message("save('", path.string(), "'): tensor '", name, "' was announced as ",
                                               xlite::name(t.type()), " ", t.shape(), " but made as ",
                                               xlite::name(made.type()), " ", made.shape()));
    }
    sink(made.bytes());
  }
}

} // namespace io::detail

} // namespace xlite
