#pragma once

// Fully sharded data parallel, expressed as shardings (torch_xla's FSDPv2): the parameters,
// the optimizer's state and the batch are all cut along dimension 0 over one mesh axis,
// 'fsdp' by default, and the SPMD partitioner does the rest. Each device keeps 1/n of the
// model and of its optimizer state; a matmul all-gathers the weight it needs (when the
// batch's activations are the larger operand, as they are in FSDP's use), and each
// gradient, a partial sum over the batch's devices, is reduce-scattered into its
// parameter's tiles.
//
//   const optim::fully_sharded fsdp(spmd::mesh(ids, {8}, {"fsdp"}));
//   fsdp.shard(params);
//   optim::adam opt(params, {.lr = 1e-3});
//   fsdp.shard(opt);                          // the state, like its parameters
//   for (...) { fsdp.shard(batch.features); fsdp.shard(batch.labels); ... opt.step(...); }
//
// The state keeps its sharding from step to step: an update of a sharded state tensor takes
// that tensor's tiles (spmd/partitioner.hpp).

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/lazy/sharding.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/optim/optimizer.hpp"
#include "xlite/spmd/mesh.hpp"
#include "xlite/spmd/partition_spec.hpp"

namespace xlite::optim {

class fully_sharded {
public:
  explicit fully_sharded(spmd::mesh m, std::string axis = "fsdp") : mesh_(std::move(m)), axis_(std::move(axis)) {
    const auto names = mesh_.axis_names();
    if (std::ranges::find(names, axis_) == names.end()) {
      throw value_error(xlite::detail::message("fully_sharded: the mesh has no axis \"", axis_,
                                               "\"; it shards parameters, state and batch over one of its axes"));
    }
  }

  const spmd::mesh& mesh() const noexcept { return mesh_; }
  const std::string& axis() const noexcept { return axis_; }

  // FSDPv2's spec: dimension 0 over the axis, the others whole; a scalar stays whole.
  spmd::partition_spec spec(std::size_t rank) const {
    std::vector<spmd::dim_spec> dims(rank, spmd::none);
    if (rank > 0) dims[0] = axis_;
    return spmd::partition_spec(std::move(dims));
  }

  // A parameter, a batch's input or labels, or an activation (FSDPv2's shard_output).
  void shard(const lazy::tensor& t) const { spmd::mark_sharding(t, mesh_, spec(t.shape().rank())); }
  void shard(std::span<const lazy::tensor> tensors) const {
    for (const lazy::tensor& t : tensors) shard(t);
  }
  // Every state tensor of `opt`: each has its parameter's shape, so it is cut as it is.
  void shard(const optimizer& opt) const {
    for (const auto& [name, t] : opt.state().tensors) shard(t);
  }

private:
  spmd::mesh mesh_;
  std::string axis_;
};

} // namespace xlite::optim
