#pragma once

// Collectives on lazy tensors, as torch_xla's xla_model has them: each records one node,
// which the devices run at the barrier, each with its own value (replica mode, xlite::spawn
// in runtime/replica.hpp). Replica groups default to every replica of the spawn, of every
// process (outside a spawn, the tensor's device alone, or every process in a run of several). rendezvous and
// mesh_reduce exchange host values between replicas now, outside any graph.
//
//   xlite::spawn([](std::int64_t k) {
//     auto g = ...;                                         // this replica's gradient
//     g = xlite::all_reduce(xlite::reduce_type::sum, g, 1.0 / xlite::runtime::world_size());
//     xlite::mark_step();
//   });

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "xlite/core/source_location.hpp"
#include "xlite/ir/collective.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/collectives.hpp"
#include "xlite/runtime/replica.hpp"

namespace xlite {

using ir::permute_pairs;
using ir::reduce_type;
using ir::replica_groups;

namespace lazy::detail {

// Whether the caller is a replica: a thread of xlite::spawn, or, in a run of several
// processes, a process outside a spawn (on its one device).
inline bool in_replica(std::string_view what) {
  if (runtime::detail::replica_ordinal() >= 0) return true;
  if (runtime::process_count() == 1) return false;
  if (device_count() != 1) {
    throw value_error(xlite::detail::message(what, ": outside xlite::spawn each of the ", runtime::process_count(),
                                             " processes is one replica and needs one device, not ", device_count(),
                                             "; call collectives from the replicas of a spawn"));
  }
  return true;
}

// In a replica, a collective takes the replica's own tensor, and names only replicas: a
// device without a replica would never come.
inline void check_replica(const lazy::tensor& x, std::span<const std::int64_t> devices, std::string_view what) {
  if (!in_replica(what)) return;
  if (x.device() != xlite::device()) {
    throw value_error(xlite::detail::message(what, ": replica ", runtime::global_ordinal(), " passed a tensor on ",
                                             x.device(), "; a replica's collectives take its own device's tensors"));
  }
  for (const std::int64_t id : devices) {
    if (id < 0 || id >= runtime::world_size()) {
      throw value_error(
          xlite::detail::message(what, ": ", id, " is not a replica; the spawn has ", runtime::world_size()));
    }
  }
}

// Every replica of the spawn, or the tensor's device outside one.
inline replica_groups groups_or_default(const replica_groups& groups, const lazy::tensor& x, std::string_view what) {
  std::vector<std::int64_t> named;
  for (const auto& group : groups) named.insert(named.end(), group.begin(), group.end());
  check_replica(x, named, what);
  if (!groups.empty()) return groups;
  if (!lazy::detail::in_replica(what)) return {{x.device().ordinal()}};
  std::vector<std::int64_t> all(static_cast<std::size_t>(runtime::world_size()));
  for (std::size_t k = 0; k < all.size(); ++k) all[k] = static_cast<std::int64_t>(k);
  return {all};
}

} // namespace lazy::detail

// Each call's source line (`at`) tells its collective apart (ir/collective.hpp): replicas
// that reach different collectives at the same point fail with both lines named.

// The reduction of x over the replicas of its group, times scale (xm.all_reduce).
inline lazy::tensor all_reduce(reduce_type r, const lazy::tensor& x, double scale = 1.0,
                               const replica_groups& groups = {}, source_location at = source_location::current()) {
  return {x.device(), ir::all_reduce(x.node(), r, scale, lazy::detail::groups_or_default(groups, x, "all_reduce"),
                                     ir::collective_site(at))};
}

// In place on each tensor of xs, as xm.all_reduce on a list.
inline void all_reduce(reduce_type r, std::vector<lazy::tensor>& xs, double scale = 1.0,
                       const replica_groups& groups = {}, source_location at = source_location::current()) {
  for (std::size_t k = 0; k < xs.size(); ++k) {
    xs[k] = {xs[k].device(),
             ir::all_reduce(xs[k].node(), r, scale, lazy::detail::groups_or_default(groups, xs[k], "all_reduce"),
                            ir::collective_site(at, k))};
  }
}

// The group's values of x, concatenated along dim in group order (xm.all_gather).
inline lazy::tensor all_gather(const lazy::tensor& x, std::int64_t dim = 0, const replica_groups& groups = {},
                               source_location at = source_location::current()) {
  return {x.device(), ir::all_gather(x.node(), dim, lazy::detail::groups_or_default(groups, x, "all_gather"),
                                     ir::collective_site(at))};
}

// This replica's part, along scatter_dim, of the group's reduction of x, times scale
// (xm.reduce_scatter); shard_count must be the group's size.
inline lazy::tensor reduce_scatter(reduce_type r, const lazy::tensor& x, double scale, std::int64_t scatter_dim,
                                   std::int64_t shard_count, const replica_groups& groups = {},
                                   source_location at = source_location::current()) {
  const replica_groups g = lazy::detail::groups_or_default(groups, x, "reduce_scatter");
  if (shard_count != static_cast<std::int64_t>(g[0].size())) {
    throw value_error(xlite::detail::message("reduce_scatter: shard_count is ", shard_count,
                                             " but the replica groups have ", g[0].size(), " members"));
  }
  return {x.device(), ir::reduce_scatter(x.node(), r, scale, scatter_dim, g, ir::collective_site(at))};
}

// x cut into split_count parts along split_dimension, part j sent to the group's j-th
// member, which concatenates what it receives along concat_dimension (xm.all_to_all).
inline lazy::tensor all_to_all(const lazy::tensor& x, std::int64_t split_dimension, std::int64_t concat_dimension,
                               std::int64_t split_count, const replica_groups& groups = {},
                               source_location at = source_location::current()) {
  return {x.device(),
          ir::all_to_all(x.node(), split_dimension, concat_dimension, split_count,
                         lazy::detail::groups_or_default(groups, x, "all_to_all"), ir::collective_site(at))};
}

// Each (source, target) pair sends source's x to target; a replica no pair targets gets
// zeros (xm.collective_permute).
inline lazy::tensor collective_permute(const lazy::tensor& x, const permute_pairs& pairs,
                                       source_location at = source_location::current()) {
  std::vector<std::int64_t> named;
  for (const auto& [source, target] : pairs) named.insert(named.end(), {source, target});
  lazy::detail::check_replica(x, named, "collective_permute");
  return {x.device(), ir::collective_permute(x.node(), pairs, ir::collective_site(at))};
}

// Waits for the replicas (all when empty) to reach `tag` and returns their payloads in
// ordinal order, or in the order of `replicas` (xm.rendezvous).
inline std::vector<std::string> rendezvous(std::string_view tag, std::string payload = {},
                                           const std::vector<std::int64_t>& replicas = {}) {
  lazy::detail::in_replica("rendezvous"); // outside a spawn, a process of one device is the replica
  std::vector<std::int64_t> members = replicas;
  if (members.empty()) {
    for (std::int64_t k = 0; k < runtime::world_size(); ++k) members.push_back(k);
  }
  return runtime::collectives().rendezvous(runtime::global_ordinal(), tag, std::move(payload), members);
}

// Every replica's `data`, in ordinal order, reduced by reduce_fn (xm.mesh_reduce): the
// same result on every replica. T is copied as bytes.
template <class T, class F>
requires std::is_trivially_copyable_v<T>
auto mesh_reduce(std::string_view tag, const T& data, F&& reduce_fn) {
  std::string bytes(sizeof(T), '\0');
  std::memcpy(bytes.data(), &data, sizeof(T));
  std::vector<T> all;
  for (const std::string& payload : rendezvous(tag, std::move(bytes))) {
    if (payload.size() != sizeof(T)) {
      throw runtime::collective_error(xlite::detail::message("mesh_reduce '", tag, "': a replica sent ", payload.size(),
                                                             " bytes where ", sizeof(T), " were expected"));
    }
    T value;
    std::memcpy(&value, payload.data(), sizeof(T));
    all.push_back(value);
  }
  return reduce_fn(all);
}

} // namespace xlite
