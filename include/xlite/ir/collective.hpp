#pragma once

// Collective nodes: values exchanged between devices, as XLA's AllReduce, AllGather,
// ReduceScatter, AllToAll and CollectivePermute. Every device runs the same graph; the
// node's result on a device depends on the operand's value on the other members of its
// replica group. runtime/collectives.hpp runs them.
//
// Their attributes are ints (see the layout by op below) and the literal: the scale of the
// reductions as its real, and the call site as its integer (collective_site). Members
// match their collectives by order within the group; the call site is how a member that
// runs a different collective at that point (replicas whose steps were cut differently,
// one by an early item()) is told apart, and fails instead of exchanging the wrong values. Replica groups are explicit
// here (the front end fills in "all devices"), all of one size, so each node's result shape is known when it is traced:
//   all_reduce          ints = {reduce_type, groups...}            value = scale
//   all_gather          ints = {dim, groups...}
//   reduce_scatter      ints = {reduce_type, dim, groups...}       value = scale
//   all_to_all          ints = {split_dim, concat_dim, split_count, groups...}
//   collective_permute  ints = {source, target, source, target, ...}
// where groups... is {group count, group size, the members of each group in turn}.

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/core/source_location.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/hash.hpp"
#include "xlite/ir/node.hpp"

namespace xlite::ir {

// torch_xla's REDUCE_SUM, REDUCE_MUL, REDUCE_MIN, REDUCE_MAX, REDUCE_AND, REDUCE_OR. On
// bool, sum is or and mul is and; and/or take bool and integers.
enum class reduce_type : std::uint8_t { sum, mul, min, max, logical_and, logical_or };

constexpr std::string_view name(reduce_type r) {
  constexpr std::string_view names[] = {"sum", "mul", "min", "max", "and", "or"};
  return names[static_cast<std::size_t>(r)];
}

// The reduction that combines partial values left by reduction op `reduction` (sum, max,
// min, prod): what an all_reduce of them runs.
constexpr reduce_type reduce_type_of(op reduction) {
  switch (reduction) {
  case op::max:
    return reduce_type::max;
  case op::min:
    return reduce_type::min;
  case op::prod:
    return reduce_type::mul;
  default:
    return reduce_type::sum;
  }
}

// Replica groups as torch_xla takes them: {{0, 1, 2, 3}, {4, 5, 6, 7}} makes two groups.
using replica_groups = std::vector<std::vector<std::int64_t>>;

// A collective_permute's (source, target) pairs.
using permute_pairs = std::vector<std::pair<std::int64_t, std::int64_t>>;

namespace detail {

struct site_names {
  std::mutex mutex;
  std::map<std::int64_t, std::string> names;
};
inline site_names& collective_site_names() {
  // Never destroyed: a device worker still running a step's collectives at exit looks
  // names up here while the process's statics are destroyed (as collectives() is).
  static auto* const names = new site_names;
  return *names;
}

} // namespace detail

// The id of a collective traced at `where` (the k-th of one call, for calls that trace
// several): the same in every replica and every step, so it does not change the graph's
// hash from step to step.
inline std::int64_t collective_site(const xlite::source_location& where, std::uint64_t k = 0) {
  hasher h;
  for (const char* c = where.file_name(); *c; ++c) h.add(static_cast<unsigned char>(*c));
  h.add(where.line());
  h.add(k);
  const auto id = static_cast<std::int64_t>(h.state >> 1);
  auto& registry = detail::collective_site_names();
  std::scoped_lock lock(registry.mutex);
  registry.names.try_emplace(id, xlite::detail::concat(where.file_name(), ":", where.line(),
                                                       k ? xlite::detail::concat(" (#", k, ")") : std::string()));
  return id;
}

// A site derived from another: the gradient of a collective.
inline std::int64_t derived_collective_site(std::int64_t site, std::string_view what) {
  hasher h;
  h.add(static_cast<std::uint64_t>(site));
  for (const char c : what) h.add(static_cast<unsigned char>(c));
  const auto id = static_cast<std::int64_t>(h.state >> 1);
  auto& registry = detail::collective_site_names();
  std::scoped_lock lock(registry.mutex);
  const auto base = registry.names.find(site);
  registry.names.try_emplace(id, (base == registry.names.end() ? std::string("?") : base->second) + " " +
                                     std::string(what));
  return id;
}

// "file.cpp:42", for messages; "" for a site this process never traced (a graph loaded
// from the disk cache).
inline std::string collective_site_name(std::int64_t site) {
  auto& registry = detail::collective_site_names();
  std::scoped_lock lock(registry.mutex);
  const auto found = registry.names.find(site);
  return found == registry.names.end() ? std::string() : found->second;
}

namespace detail {

inline literal scale_and_site(double scale, std::int64_t site) { return {scale, site}; }

inline void append_groups(std::vector<std::int64_t>& ints, const replica_groups& groups, std::string_view what) {
  if (groups.empty()) throw value_error(xlite::detail::message(what, ": no replica groups"));
  const std::size_t size = groups[0].size();
  std::vector<std::int64_t> all;
  for (const auto& group : groups) {
    if (group.empty() || group.size() != size) {
      throw value_error(xlite::detail::message(what, ": replica groups must be non-empty and of one size; got sizes ",
                                               size, " and ", group.size()));
    }
    all.insert(all.end(), group.begin(), group.end());
  }
  std::ranges::sort(all);
  if (all.front() < 0) throw value_error(xlite::detail::message(what, ": device ", all.front(), " in a replica group"));
  if (const auto twice = std::ranges::adjacent_find(all); twice != all.end()) {
    throw value_error(xlite::detail::message(what, ": device ", *twice, " is in more than one replica group"));
  }
  ints.push_back(static_cast<std::int64_t>(groups.size()));
  ints.push_back(static_cast<std::int64_t>(size));
  for (const auto& group : groups) ints.insert(ints.end(), group.begin(), group.end());
}

inline std::size_t checked_dim(const node_ptr& x, std::int64_t dim, std::string_view what) {
  return normalize_axis(dim, x->shape().rank(), what);
}

inline shape with_dim(const shape& s, std::size_t dim, std::int64_t size) {
  std::vector<std::int64_t> dims(s.begin(), s.end());
  dims[dim] = size;
  return shape(dims);
}

inline void check_splits(const node_ptr& x, std::size_t dim, std::int64_t parts, std::string_view what) {
  if (x->shape()[dim] % parts != 0) {
    throw shape_error(xlite::detail::message(what, ": dimension ", dim, " of shape ", x->shape(),
                                             " does not split into ", parts, " equal parts"));
  }
}

inline void check_reduction(const node_ptr& x, reduce_type r, double scale, std::string_view what) {
  if ((r == reduce_type::logical_and || r == reduce_type::logical_or) && is_floating_point(x->type())) {
    throw dtype_error(
        xlite::detail::message(what, ": ", name(r), " takes bool and integer tensors, not ", xlite::name(x->type())));
  }
  if (scale != 1.0 && !is_floating_point(x->type())) {
    throw dtype_error(xlite::detail::message(what, ": scale ", scale, " applies to floating-point tensors, not ",
                                             xlite::name(x->type())));
  }
}

} // namespace detail

// The replica groups stored in `ints` from position `from`.
inline replica_groups groups_of(std::span<const std::int64_t> ints, std::size_t from) {
  const auto count = static_cast<std::size_t>(ints[from]);
  const auto size = static_cast<std::size_t>(ints[from + 1]);
  replica_groups groups(count);
  for (std::size_t g = 0; g < count; ++g) {
    const auto begin = ints.begin() + static_cast<std::ptrdiff_t>(from + 2 + g * size);
    groups[g].assign(begin, begin + static_cast<std::ptrdiff_t>(size));
  }
  return groups;
}

inline std::int64_t group_size(std::span<const std::int64_t> ints, std::size_t from) { return ints[from + 1]; }

inline node_ptr all_reduce(const node_ptr& x, reduce_type r, double scale, const replica_groups& groups,
                           std::int64_t site) {
  detail::check_reduction(x, r, scale, "all_reduce");
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(r)};
  detail::append_groups(attrs.ints, groups, "all_reduce");
  attrs.value = detail::scale_and_site(scale, site);
  return make_node(op::all_reduce, x->type(), x->shape(), {x}, std::move(attrs));
}

inline node_ptr all_gather(const node_ptr& x, std::int64_t dim, const replica_groups& groups, std::int64_t site) {
  const std::size_t d = detail::checked_dim(x, dim, "all_gather");
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(d)};
  detail::append_groups(attrs.ints, groups, "all_gather");
  attrs.value = detail::scale_and_site(1.0, site);
  const std::int64_t members = group_size(attrs.ints, 1);
  return make_node(op::all_gather, x->type(), detail::with_dim(x->shape(), d, x->shape()[d] * members), {x},
                   std::move(attrs));
}

inline node_ptr reduce_scatter(const node_ptr& x, reduce_type r, double scale, std::int64_t dim,
                               const replica_groups& groups, std::int64_t site) {
  detail::check_reduction(x, r, scale, "reduce_scatter");
  const std::size_t d = detail::checked_dim(x, dim, "reduce_scatter");
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(r), static_cast<std::int64_t>(d)};
  detail::append_groups(attrs.ints, groups, "reduce_scatter");
  attrs.value = detail::scale_and_site(scale, site);
  const std::int64_t members = group_size(attrs.ints, 2);
  detail::check_splits(x, d, members, "reduce_scatter");
  return make_node(op::reduce_scatter, x->type(), detail::with_dim(x->shape(), d, x->shape()[d] / members), {x},
                   std::move(attrs));
}

inline node_ptr all_to_all(const node_ptr& x, std::int64_t split_dim, std::int64_t concat_dim, std::int64_t split_count,
                           const replica_groups& groups, std::int64_t site) {
  const std::size_t split = detail::checked_dim(x, split_dim, "all_to_all");
  const std::size_t concat = detail::checked_dim(x, concat_dim, "all_to_all");
  attributes attrs;
  attrs.ints = {static_cast<std::int64_t>(split), static_cast<std::int64_t>(concat), split_count};
  detail::append_groups(attrs.ints, groups, "all_to_all");
  attrs.value = detail::scale_and_site(1.0, site);
  const std::int64_t members = group_size(attrs.ints, 3);
  if (split_count != members) {
    throw value_error(xlite::detail::message("all_to_all: split_count is ", split_count,
                                             " but the replica groups have ", members, " members"));
  }
  detail::check_splits(x, split, members, "all_to_all");
  const shape split_shape = detail::with_dim(x->shape(), split, x->shape()[split] / members);
  return make_node(op::all_to_all, x->type(), detail::with_dim(split_shape, concat, split_shape[concat] * members), {x},
                   std::move(attrs));
}

inline node_ptr collective_permute(const node_ptr& x, const permute_pairs& pairs, std::int64_t site) {
  attributes attrs;
  attrs.value = detail::scale_and_site(1.0, site);
  for (const auto& [source, target] : pairs) {
    if (source < 0 || target < 0) {
      throw value_error(
          xlite::detail::message("collective_permute: the pair (", source, ", ", target, ") names a negative device"));
    }
    attrs.ints.push_back(source);
    attrs.ints.push_back(target);
  }
  return make_node(op::collective_permute, x->type(), x->shape(), {x}, std::move(attrs));
}

inline permute_pairs pairs_of(std::span<const std::int64_t> ints) {
  permute_pairs pairs;
  for (std::size_t k = 0; k + 1 < ints.size(); k += 2) pairs.emplace_back(ints[k], ints[k + 1]);
  return pairs;
}

} // namespace xlite::ir
