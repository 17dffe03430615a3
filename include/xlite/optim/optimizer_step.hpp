#pragma once

// Data parallelism in replica mode, as torch_xla's xm.optimizer_step: each replica has
// computed the gradients of its own part of the batch; their mean over the replica group
// (an all_reduce) is what every replica's optimizer applies, so the parameters stay equal
// on every replica.

#include <cstdint>
#include <span>
#include <vector>

#include "xlite/lazy/collectives.hpp"
#include "xlite/lazy/step.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite {

// Replaces grads' values by their mean over the replica group (every replica when
// `groups` is empty), then runs opt.step(params, grads); with `barrier`, also mark_step().
// *Departure:* torch_xla scales by 1 / world_size even with groups; this takes the group's
// mean, which is what a group of data-parallel replicas needs.
template <class Optimizer>
void optimizer_step(Optimizer& opt, std::span<lazy::tensor> params, std::span<const lazy::tensor> grads,
                    const replica_groups& groups = {}, bool barrier = false,
                    xlite::source_location at = xlite::source_location::current()) {
  std::vector<lazy::tensor> mean(grads.begin(), grads.end());
  if (!mean.empty()) {
    const std::int64_t members = groups.empty() ? runtime::world_size() : static_cast<std::int64_t>(groups[0].size());
    if (members > 1) all_reduce(reduce_type::sum, mean, 1.0 / static_cast<double>(members), groups, at);
  }
  opt.step(params, mean);
  if (barrier) mark_step();
}

} // namespace xlite
