#pragma once

// Gradient clipping by total norm, as torch.nn.utils.clip_grad_norm_: every gradient is
// scaled by min(1, max_norm / (norm + 1e-6)), where norm is the L2 norm of all gradients
// together. The scale is always applied, never chosen by a host branch on the norm: a host
// `if (norm > max_norm)` would need the norm's value, and so an execution, at every step
// (PyTorch/XLA's own clip_grad_norm_ is written this way for that reason).

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/lazy/factories.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/optim/scalar.hpp"

namespace xlite::optim {

struct clipped_gradients {
  std::vector<lazy::tensor> grads;
  lazy::tensor total_norm; // before clipping, rank 0, in the gradients' promoted dtype
};

// The gradients scaled to a total L2 norm of at most max_norm, as lazy tensors: nothing is
// computed until the step's barrier. max_norm is a graph parameter: changing it does not
// recompile. All gradients must be on one device (the norm spans them all).
inline clipped_gradients clip_grad_norm(std::span<const lazy::tensor> grads, double max_norm) {
  if (!(max_norm >= 0)) {
    throw value_error(xlite::detail::message("clip_grad_norm: max_norm must be >= 0, got ", max_norm));
  }
  if (grads.empty()) return {{}, lazy::zeros(shape{})};
  for (std::size_t i = 1; i < grads.size(); ++i) {
    if (grads[i].device() != grads[0].device()) {
      throw value_error(xlite::detail::message("clip_grad_norm: gradient ", i, " is on ", grads[i].device(),
                                               ", gradient 0 on ", grads[0].device()));
    }
  }
  lazy::tensor squares = lazy::sum(grads[0] * grads[0]);
  for (std::size_t i = 1; i < grads.size(); ++i) squares = squares + lazy::sum(grads[i] * grads[i]);
  lazy::tensor total_norm = lazy::sqrt(squares);
  detail::step_scalar limit(max_norm);
  const lazy::tensor scale = lazy::minimum(limit.like(total_norm) / (total_norm + 1e-6), 1.0);
  clipped_gradients result{{}, total_norm};
  for (const lazy::tensor& g : grads) result.grads.push_back(g * lazy::cast(scale, g.type()));
  return result;
}

} // namespace xlite::optim
