#pragma once

// Stochastic gradient descent with momentum, as torch.optim.SGD.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/optim/optimizer.hpp"
#include "xlite/optim/scalar.hpp"

namespace xlite::optim {

struct sgd_options {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class sgd : public optimizer {
public:
  // The optimizer keeps the parameters' shapes, dtypes and devices, not the tensors.
  explicit sgd(std::span<const lazy::tensor> params, const sgd_options& options = {})
      : optimizer("sgd", params, options.lr, slot_names(options)), options_(options) {
    const auto finite = [](double x) { return std::isfinite(x); };
    check_option("momentum", options.momentum, finite(options.momentum) && options.momentum >= 0, "finite and >= 0");
    check_option("dampening", options.dampening, finite(options.dampening), "finite");
    check_option("weight_decay", options.weight_decay, finite(options.weight_decay) && options.weight_decay >= 0,
                 "finite and >= 0");
    if (options.nesterov) {
      check_option("momentum", options.momentum, options.momentum > 0, "> 0 with nesterov");
      check_option("dampening", options.dampening, options.dampening == 0, "0 with nesterov");
    }
  }

  // Replaces each params[i] (and the momentum buffers) with its updated lazy tensor.
  void step(std::span<lazy::tensor> params, std::span<const lazy::tensor> grads) {
    const std::int64_t t = begin_step(params, grads);
    detail::step_scalar lr(this->lr());
    detail::step_scalar momentum(options_.momentum);
    detail::step_scalar weight_decay(options_.weight_decay);
    // PyTorch's first step sets the buffer to the gradient. The buffer starts at zero, so
    // momentum * 0 + 1 * g is that value: with the gradient's share a graph parameter, 1 on
    // the first step and 1 - dampening after, every step is the same graph.
    detail::step_scalar gradient_share(t == 1 ? 1.0 : 1.0 - options_.dampening);
    for (std::size_t i = 0; i < params.size(); ++i) {
      lazy::tensor g = grads[i];
      if (options_.weight_decay != 0) g = g + params[i] * weight_decay.like(g);
      if (options_.momentum != 0) {
        lazy::tensor& buffer = state_of(0, i);
        buffer = buffer * momentum.like(g) + g * gradient_share.like(g);
        g = options_.nesterov ? g + buffer * momentum.like(g) : buffer;
      }
      params[i] = params[i] - g * lr.like(g);
    }
  }

private:
  static std::vector<std::string> slot_names(const sgd_options& options) {
    if (options.momentum == 0) return {};
    return {"momentum_buffer"};
  }

  sgd_options options_;
};

} // namespace xlite::optim
