#pragma once

// Collectives between devices, as XLA defines them (operation_semantics: AllReduce,
// AllGather, ReduceScatter, AllToAll, CollectivePermute) and torch_xla's xla_model exposes
// them, with replica groups. Each device calls the collective from its own thread with its
// own buffer and its global number (runtime/processes.hpp); the call returns that device's
// result. Members in other processes send their buffers through the process group
// (rendezvous.hpp), and each process computes its own members' results from all of them,
// by the same code, so a result is the same whichever processes the devices are in.
//
// Arguments are checked after the members meet, where they are known to agree (each
// member's call is described, and the descriptions compared): a bad argument then fails
// every member alike, instead of one member failing and the others waiting for it.
//
// Results are the same on every member and for any timing: a reduction combines the
// members' values in group order, element by element, in float for the 16-bit floats (one
// rounding at the end) and in the type itself otherwise; integers wrap as in PyTorch.
// all_reduce splits the work: the k-th member of this process reduces the k-th part of the
// elements, and every member copies the whole result.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/core/storage_float.hpp"
#include "xlite/ir/collective.hpp"
#include "xlite/runtime/block_copy.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/rendezvous.hpp"

namespace xlite::runtime {

using ir::reduce_type;

namespace detail {

// The type a reduction of T accumulates in: float for the 16-bit floats; for integer sums
// and products the unsigned type of the same width, so overflow wraps instead of being
// undefined.
template <class T, reduce_type R>
struct accumulator {
  using type = T;
};
template <class T, reduce_type R>
requires is_storage_float_v<T>
struct accumulator<T, R> {
  using type = float;
};
template <class T, reduce_type R>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool> &&
         (R == reduce_type::sum || R == reduce_type::mul)) struct accumulator<T, R> {
  using type = std::make_unsigned_t<T>;
};
template <class T, reduce_type R>
using accumulator_t = typename accumulator<T, R>::type;

template <reduce_type R, class A>
A combine(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return R == reduce_type::sum || R == reduce_type::logical_or || R == reduce_type::max ? a || b : a && b;
  } else if constexpr (R == reduce_type::sum) {
    return static_cast<A>(a + b);
  } else if constexpr (R == reduce_type::mul) {
    return static_cast<A>(a * b);
  } else if constexpr (R == reduce_type::min || R == reduce_type::max) {
    if constexpr (std::is_floating_point_v<A>) {
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b; // NaN wins, as in PyTorch
    }
    return R == reduce_type::min ? std::min(a, b) : std::max(a, b);
  } else if constexpr (std::is_integral_v<A>) {
    return R == reduce_type::logical_and ? a & b : a | b;
  } else {
    return a; // floating and/or: rejected before
  }
}

template <class F>
decltype(auto) visit_reduce_type(reduce_type r, F&& f) {
  switch (r) {
  case reduce_type::sum:
    return f(std::integral_constant<reduce_type, reduce_type::sum>{});
  case reduce_type::mul:
    return f(std::integral_constant<reduce_type, reduce_type::mul>{});
  case reduce_type::min:
    return f(std::integral_constant<reduce_type, reduce_type::min>{});
  case reduce_type::max:
    return f(std::integral_constant<reduce_type, reduce_type::max>{});
  case reduce_type::logical_and:
    return f(std::integral_constant<reduce_type, reduce_type::logical_and>{});
  case reduce_type::logical_or:
    break;
  }
  return f(std::integral_constant<reduce_type, reduce_type::logical_or>{});
}

// target[0, length) = scale * (inputs[0][offset + i] op inputs[1][offset + i] op ...), in
// group order. A block of elements at a time, one input after another, so that each pass
// is a loop over contiguous memory the compiler vectorizes; each element still combines
// its inputs in group order.
inline void reduce_rows(std::span<const std::shared_ptr<const buffer>> inputs, std::int64_t source_offset,
                        buffer& target, std::int64_t target_offset, std::int64_t length, reduce_type r, double scale) {
  visit_dtype(target.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    visit_reduce_type(r, [&](auto op) {
      using A = accumulator_t<T, decltype(op)::value>;
      constexpr std::int64_t block = 1024;
      A acc[block];
      T* out = target.as<T>() + target_offset;
      for (std::int64_t begin = 0; begin < length; begin += block) {
        const std::int64_t n = std::min(block, length - begin);
        const T* first = inputs[0]->as<T>() + source_offset + begin;
        for (std::int64_t i = 0; i < n; ++i) acc[i] = static_cast<A>(first[i]);
        for (std::size_t k = 1; k < inputs.size(); ++k) {
          const T* in = inputs[k]->as<T>() + source_offset + begin;
          for (std::int64_t i = 0; i < n; ++i) acc[i] = combine<decltype(op)::value>(acc[i], static_cast<A>(in[i]));
        }
        if constexpr (std::is_floating_point_v<A>) {
          if (scale != 1.0) {
            for (std::int64_t i = 0; i < n; ++i) acc[i] = static_cast<A>(acc[i] * static_cast<A>(scale));
          }
        }
        for (std::int64_t i = 0; i < n; ++i) out[begin + i] = static_cast<T>(acc[i]);
      }
    });
  });
}

} // namespace detail

// A buffer crosses between processes as its dtype and dimensions, then its bytes; what
// arrives counts against no device, as the scratch of an all_reduce.
template <>
struct wire<std::shared_ptr<const buffer>> {
  static std::string meta(const std::shared_ptr<const buffer>& b) {
    std::string text = std::to_string(static_cast<int>(b->type()));
    for (std::size_t k = 0; k < b->shape().rank(); ++k) text += xlite::detail::concat(",", b->shape()[k]);
    return text;
  }
  static std::span<const std::byte> body(const std::shared_ptr<const buffer>& b) {
    return {static_cast<const std::byte*>(b->data()), static_cast<std::size_t>(b->byte_size())};
  }
  static std::span<std::byte> make(std::shared_ptr<const buffer>& slot, std::string_view meta) {
    std::vector<std::int64_t> dims;
    std::size_t type = all_dtypes.size();
    for (std::size_t k = 0; !meta.empty(); ++k) {
      const std::size_t comma = std::min(meta.find(','), meta.size());
      const std::size_t value = detail::parse_count(meta.substr(0, comma));
      if (k == 0) {
        type = value;
      } else {
        dims.push_back(static_cast<std::int64_t>(value));
      }
      meta.remove_prefix(std::min(comma + 1, meta.size()));
    }
    if (type >= all_dtypes.size() || dims.size() > max_rank) {
      throw collective_error("a buffer between processes came with a malformed dtype or shape");
    }
    const auto nowhere = allocating_on::nowhere();
    buffer_ptr made = make_buffer(all_dtypes[type], xlite::shape(dims));
    const std::span<std::byte> place{static_cast<std::byte*>(made->data()),
                                     static_cast<std::size_t>(made->byte_size())};
    slot = std::move(made);
    return place;
  }
};

// The collectives of the devices of one process. Each call names the calling device.
class device_collectives {
public:
  using input = std::shared_ptr<const buffer>;

  explicit device_collectives(std::chrono::milliseconds timeout = collective_timeout())
      : buffers_("buffers", timeout), payloads_("payloads", timeout) {}

  // Every member gets the reduction of all members' x, times `scale` (floating point only).
  // `site` names the call in the description members compare (ir::collective_site_name).
  buffer_ptr all_reduce(std::int64_t device, const input& x, reduce_type r, double scale = 1.0,
                        const replica_groups& groups = {}, std::string_view site = {}) {
    const call c = meet(device, groups, x, xlite::detail::concat("all_reduce(", name(r), ", scale=", scale, ")"), site,
                        "all_reduce");
    check_reduction(x->type(), r, scale, "all_reduce");
    const std::int64_t n = x->shape().numel();
    if (c.m->local_count() == 1) { // the only member in this process: no one to share the work with
      buffer_ptr result = make_buffer(x->type(), x->shape());
      detail::reduce_rows(c.inputs(), 0, *result, 0, n, r, scale);
      buffers_.wait_all_done(*c.m, "all_reduce");
      return result;
    }
    const auto parts = static_cast<std::int64_t>(c.m->local_count());
    const auto part = static_cast<std::int64_t>(c.m->local_index(c.sorted_position));
    // The members' shared scratch counts against no device: a device's memory is its result,
    // as in an in-place ring all-reduce.
    const auto reduced = c.m->shared<buffer>([&] {
      const auto scratch = allocating_on::nowhere();
      return make_buffer(x->type(), x->shape());
    });
    const std::int64_t begin = n * part / parts;
    const std::int64_t end = n * (part + 1) / parts;
    detail::reduce_rows(c.inputs(), begin, *reduced, begin, end - begin, r, scale);
    buffers_.wait_all_done(*c.m, "all_reduce");
    buffer_ptr result = make_buffer(x->type(), x->shape());
    std::memcpy(result->data(), reduced->data(), static_cast<std::size_t>(result->byte_size()));
    return result;
  }

  // Every member gets all members' x concatenated along `dim`, in group order.
  buffer_ptr all_gather(std::int64_t device, const input& x, std::size_t dim, const replica_groups& groups = {},
                        std::string_view site = {}) {
    const call c = meet(device, groups, x, xlite::detail::concat("all_gather(dim=", dim, ")"), site, "all_gather");
    check_dim(x->shape(), dim, "all_gather");
    std::vector<std::int64_t> dims = detail::dims_of(x->shape());
    const std::int64_t piece = dims[dim];
    dims[dim] *= static_cast<std::int64_t>(c.inputs().size());
    buffer_ptr result = make_buffer(x->type(), xlite::shape(dims));
    std::vector<std::int64_t> to(dims.size(), 0);
    for (const input& in : c.inputs()) {
      copy_block(*in, std::vector<std::int64_t>(dims.size(), 0), *result, to, detail::dims_of(in->shape()));
      to[dim] += piece;
    }
    buffers_.wait_all_done(*c.m, "all_gather");
    return result;
  }

  // Member k gets the k-th of n equal parts, along `dim`, of the reduction of all members'
  // x (times `scale`); x's dimension must split into n parts.
  buffer_ptr reduce_scatter(std::int64_t device, const input& x, reduce_type r, double scale, std::size_t dim,
                            const replica_groups& groups = {}, std::string_view site = {}) {
    const call c = meet(device, groups, x,
                        xlite::detail::concat("reduce_scatter(", name(r), ", scale=", scale, ", dim=", dim, ")"), site,
                        "reduce_scatter");
    check_reduction(x->type(), r, scale, "reduce_scatter");
    check_dim(x->shape(), dim, "reduce_scatter");
    std::vector<std::int64_t> dims = detail::dims_of(x->shape());
    const auto members = static_cast<std::int64_t>(c.inputs().size());
    check_divides(dims[dim], members, dim, "reduce_scatter", x->shape());
    dims[dim] /= members;
    buffer_ptr result = make_buffer(x->type(), xlite::shape(dims));
    std::vector<std::int64_t> from(dims.size(), 0);
    from[dim] = dims[dim] * c.position;
    detail::for_each_row(detail::dims_of(x->shape()), from, dims, std::vector<std::int64_t>(dims.size(), 0), dims,
                         [&](std::int64_t s, std::int64_t t, std::int64_t length) {
                           detail::reduce_rows(c.inputs(), s, *result, t, length, r, scale);
                         });
    buffers_.wait_all_done(*c.m, "reduce_scatter");
    return result;
  }

  // x is cut into split_count parts along split_dim; member k's part j goes to member j,
  // which concatenates the parts it receives along concat_dim, in group order.
  // split_count must be the group's size.
  buffer_ptr all_to_all(std::int64_t device, const input& x, std::size_t split_dim, std::size_t concat_dim,
                        std::int64_t split_count, const replica_groups& groups = {}, std::string_view site = {}) {
    const call c = meet(device, groups, x,
                        xlite::detail::concat("all_to_all(split_dim=", split_dim, ", concat_dim=", concat_dim,
                                              ", split_count=", split_count, ")"),
                        site, "all_to_all");
    check_dim(x->shape(), split_dim, "all_to_all");
    check_dim(x->shape(), concat_dim, "all_to_all");
    const auto members = static_cast<std::int64_t>(c.inputs().size());
    if (split_count != members) {
      throw collective_error(xlite::detail::message("all_to_all: split_count is ", split_count, " but the group has ",
                                                    members, " members"));
    }
    std::vector<std::int64_t> part = detail::dims_of(x->shape());
    check_divides(part[split_dim], members, split_dim, "all_to_all", x->shape());
    part[split_dim] /= members;
    std::vector<std::int64_t> dims = part;
    dims[concat_dim] *= members;
    buffer_ptr result = make_buffer(x->type(), xlite::shape(dims));
    std::vector<std::int64_t> from(dims.size(), 0);
    from[split_dim] = part[split_dim] * c.position;
    std::vector<std::int64_t> to(dims.size(), 0);
    for (const input& in : c.inputs()) {
      copy_block(*in, from, *result, to, part);
      to[concat_dim] += part[concat_dim];
    }
    buffers_.wait_all_done(*c.m, "all_to_all");
    return result;
  }

  // Each (source, target) pair sends source's x to target; a device that is no pair's
  // target gets zeros. Sources are distinct, and so are targets.
  buffer_ptr collective_permute(std::int64_t device, const input& x, const ir::permute_pairs& pairs,
                                std::string_view site = {}) {
    std::vector<std::int64_t> members;
    for (const auto& [source, target] : pairs) {
      members.push_back(source);
      members.push_back(target);
    }
    std::ranges::sort(members);
    members.erase(std::unique(members.begin(), members.end()), members.end());
    check_pairs(pairs);
    buffer_ptr result = make_buffer(x->type(), x->shape());
    std::memset(result->data(), 0, static_cast<std::size_t>(result->byte_size()));
    if (!std::ranges::binary_search(members, device)) return result;
    std::string described = "collective_permute(pairs=";
    for (const auto& [source, target] : pairs) described += xlite::detail::concat("(", source, ", ", target, ")");
    const call c = meet(device, {members}, x, described + ")", site, "collective_permute");
    for (const auto& [source, target] : pairs) {
      if (target != device) continue;
      const auto from = std::ranges::lower_bound(members, source) - members.begin();
      std::memcpy(result->data(), c.inputs()[static_cast<std::size_t>(from)]->data(),
                  static_cast<std::size_t>(result->byte_size()));
    }
    buffers_.wait_all_done(*c.m, "collective_permute");
    return result;
  }

  // Out of any graph: waits for `replicas` (all devices when empty) to reach the
  // rendezvous `tag`, and returns their payloads in the order of `replicas`.
  std::vector<std::string> rendezvous(std::int64_t device, std::string_view tag, std::string payload,
                                      const std::vector<std::int64_t>& replicas = {}) {
    const std::string what = xlite::detail::concat("rendezvous '", tag, "'");
    const std::vector<std::int64_t> members =
        group_of(device, replicas.empty() ? replica_groups{} : replica_groups{replicas}, world(), what);
    const auto m =
        payloads_.attend(device, members, std::move(payload), xlite::detail::concat("rendezvous '", tag, "'"), what);
    return in_group_order(m->contributions(), members);
  }

  // XLITE_COLLECTIVE_TIMEOUT's C++ twin: how long a member waits for its group.
  std::chrono::milliseconds timeout() const noexcept { return buffers_.timeout(); }
  void set_timeout(std::chrono::milliseconds timeout) noexcept {
    buffers_.set_timeout(timeout);
    payloads_.set_timeout(timeout);
  }

  // Fails every collective in progress and every later one with `why`, until reset(), and
  // tells the other processes, whose collectives then fail too.
  void abort(const std::string& why) {
    buffers_.abort(why);
    payloads_.abort(why);
    if (const auto group = processes()) group->abort(why);
  }
  void reset() {
    buffers_.reset();
    payloads_.reset();
  }

  // The first failure since reset(): the error every later collective gets.
  std::optional<std::string> failure() const {
    if (auto f = buffers_.failure()) return f;
    return payloads_.failure();
  }

private:
  // A member at a meeting: the meeting, the member's place in its group, and the members'
  // inputs in group order.
  struct call {
    std::shared_ptr<meeting<input>> m;
    std::size_t position;        // in the group's order
    std::size_t sorted_position; // in the meeting's
    std::vector<input> ordered;
    const std::vector<input>& inputs() const { return ordered; }
  };

  // `contributions` (in the meeting's sorted order) in the order of `members`.
  template <class T>
  static std::vector<T> in_group_order(const std::vector<T>& contributions, const std::vector<std::int64_t>& members) {
    std::vector<std::int64_t> sorted = members;
    std::ranges::sort(sorted);
    std::vector<T> ordered;
    for (const std::int64_t id : members) {
      ordered.push_back(contributions[static_cast<std::size_t>(std::ranges::lower_bound(sorted, id) - sorted.begin())]);
    }
    return ordered;
  }

  static std::int64_t world() { return global_runtime_device_count(); }

  static std::size_t position_in(const std::vector<std::int64_t>& members, std::int64_t device) {
    return static_cast<std::size_t>(std::ranges::find(members, device) - members.begin());
  }

  call meet(std::int64_t device, const replica_groups& groups, const input& x, const std::string& op,
            std::string_view site, std::string_view what) {
    const std::vector<std::int64_t> members = group_of(device, groups, world(), what);
    const std::size_t position = position_in(members, device);
    std::string description = xlite::detail::concat(op, " of ", xlite::name(x->type()), " ", x->shape());
    if (!groups.empty()) description += " in groups " + format(groups);
    if (!site.empty()) description += xlite::detail::concat(" at ", site);
    auto m = buffers_.attend(device, members, x, std::move(description), what);
    std::vector<input> ordered = in_group_order(m->contributions(), members);
    const std::size_t sorted_position = m->position_of(device);
    return {std::move(m), position, sorted_position, std::move(ordered)};
  }

  static std::string format(const replica_groups& groups) {
    std::string text = "[";
    for (std::size_t g = 0; g < groups.size(); ++g) {
      text += g ? ", [" : "[";
      for (std::size_t k = 0; k < groups[g].size(); ++k) text += (k ? ", " : "") + std::to_string(groups[g][k]);
      text += "]";
    }
    return text + "]";
  }

  static void check_reduction(dtype type, reduce_type r, double scale, std::string_view what) {
    const bool logical = r == reduce_type::logical_and || r == reduce_type::logical_or;
    if (logical && is_floating_point(type)) {
      throw collective_error(
          xlite::detail::message(what, ": ", name(r), " takes bool and integer tensors, not ", xlite::name(type)));
    }
    if (scale != 1.0 && !is_floating_point(type)) {
      throw collective_error(xlite::detail::message(what, ": scale ", scale, " applies to floating-point tensors, not ",
                                                    xlite::name(type)));
    }
  }

  static void check_dim(const xlite::shape& s, std::size_t dim, std::string_view what) {
    if (dim >= s.rank()) {
      throw collective_error(xlite::detail::message(what, ": dimension ", dim, " is out of range for shape ", s));
    }
  }

  static void check_divides(std::int64_t size, std::int64_t members, std::size_t dim, std::string_view what,
                            const xlite::shape& s) {
    if (size % members != 0) {
      throw collective_error(xlite::detail::message(what, ": dimension ", dim, " of shape ", s, " (", size,
                                                    ") does not split into ", members, " equal parts"));
    }
  }

  static void check_pairs(const ir::permute_pairs& pairs) {
    std::vector<std::int64_t> sources;
    std::vector<std::int64_t> targets;
    for (const auto& [source, target] : pairs) {
      for (const std::int64_t id : {source, target}) {
        if (id < 0 || id >= world()) {
          throw collective_error(
              xlite::detail::message("collective_permute: ", id, " is not a device; there are ", world()));
        }
      }
      sources.push_back(source);
      targets.push_back(target);
    }
    for (auto* ids : {&sources, &targets}) {
      std::ranges::sort(*ids);
      if (const auto twice = std::ranges::adjacent_find(*ids); twice != ids->end()) {
        throw collective_error(xlite::detail::message("collective_permute: device ", *twice, " is the ",
                                                      ids == &sources ? "source" : "target", " of two pairs"));
      }
    }
  }

  meeting_place<input> buffers_;
  meeting_place<std::string> payloads_;
};

// The process's collectives, with XLITE_COLLECTIVE_TIMEOUT.
inline device_collectives& collectives() {
  // Never destroyed: device workers still running a step's collectives at exit finish them
  // while the process's statics are destroyed, and this is made after the workers, so it
  // would be destroyed first.
  static auto* const instance = new device_collectives;
  return *instance;
}

} // namespace xlite::runtime

namespace xlite::runtime {

// The buffers of every process's devices, on every process: each brings `mine` (global
// device number and buffer) and gets everyone's, by device. Every process calls it at the
// same point of the program, from one thread (the host's, putting a sharded value together):
// `what` names that point, and processes at different points fail with both named. With one
// process it returns `mine`.
inline std::map<std::int64_t, std::shared_ptr<const buffer>>
gather_from_processes(std::string_view what, std::map<std::int64_t, std::shared_ptr<const buffer>> mine) {
  const auto group = processes();
  if (!group) return mine;
  static std::atomic<std::uint64_t> calls{0};
  const std::string key = xlite::detail::concat(what, " #", calls.fetch_add(1));
  auto kept = std::make_shared<std::map<std::int64_t, std::shared_ptr<const buffer>>>(std::move(mine));
  parcel outgoing;
  for (const auto& [device, b] : *kept) {
    detail::append_field(outgoing.header, std::to_string(device));
    detail::append_field(outgoing.header, wire<std::shared_ptr<const buffer>>::meta(b));
    outgoing.bodies.push_back(wire<std::shared_ptr<const buffer>>::body(b));
  }
  outgoing.keep_alive = kept;
  std::vector<std::int64_t> everyone(static_cast<std::size_t>(group->size()));
  for (std::size_t p = 0; p < everyone.size(); ++p) everyone[p] = static_cast<std::int64_t>(p);
  std::map<std::int64_t, std::shared_ptr<const buffer>> all = *kept;
  group->exchange(
      everyone, key, outgoing,
      [&](std::int64_t peer, const std::string& header) {
        const std::vector<std::string_view> fields = detail::split_fields(header);
        if (fields.size() % 2 != 0) {
          throw collective_error(xlite::detail::message(what, ": process ", peer, " sent a malformed header"));
        }
        std::vector<std::span<std::byte>> places;
        for (std::size_t f = 0; f < fields.size(); f += 2) {
          const auto device = static_cast<std::int64_t>(detail::parse_count(fields[f]));
          if (process_of(device) != peer || all.contains(device)) {
            throw collective_error(xlite::detail::message(what, ": process ", peer, " sent device ", device,
                                                          "'s buffer, which is not its own"));
          }
          places.push_back(wire<std::shared_ptr<const buffer>>::make(all[device], fields[f + 1]));
        }
        return places;
      },
      std::chrono::steady_clock::now() + collectives().timeout());
  return all;
}

} // namespace xlite::runtime
