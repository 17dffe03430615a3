#pragma once

// Host scalars that change from step to step (the learning rate, Adam's bias corrections,
// clip_grad_norm's max_norm) enter a step's graph as rank-0 graph parameters, whatever
// their value. A plain scalar would not do: lazy ops make 0 and 1 graph constants, and a
// rate that reaches 0 (a warmup's first step, a cosine's last) or a bias correction that
// rounds to 1 after a few hundred steps would change the graph and compile it again.

#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/device.hpp"

namespace xlite::optim::detail {

// One host value for one step, made once per (device, dtype) it is used with, so a model of
// many parameter tensors adds one graph parameter per scalar, not one per tensor.
class step_scalar {
public:
  explicit step_scalar(double value) : value_(value) {}

  double value() const noexcept { return value_; }

  // The value on t's device, in t's dtype (the dtype a plain scalar would take with t).
  const lazy::tensor& like(const lazy::tensor& t) {
    for (const lazy::tensor& made : made_) {
      if (made.device() == t.device() && made.type() == t.type()) return made;
    }
    return made_.emplace_back(t.device(), lazy::detail::scalar_parameter(value_, t.type(), t.device()));
  }

private:
  double value_;
  std::vector<lazy::tensor> made_;
};

} // namespace xlite::optim::detail
