#pragma once

// Adam and AdamW (torch.optim.Adam and torch.optim.AdamW): one implementation that differs
// only in how weight decay enters, as an L2 term added to the gradient (Adam) or as a
// decay of the parameter decoupled from the gradient (AdamW).

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

enum class weight_decay_style {
  l2,        // g + weight_decay * p: torch.optim.Adam
  decoupled, // p * (1 - lr * weight_decay) before the update: torch.optim.AdamW
};

template <weight_decay_style Style>
struct basic_adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = Style == weight_decay_style::l2 ? 0.0 : 1e-2; // PyTorch's defaults
  bool amsgrad = false;
};

template <weight_decay_style Style>
class basic_adam : public optimizer {
public:
  using options_type = basic_adam_options<Style>;

  // The optimizer keeps the parameters' shapes, dtypes and devices, not the tensors.
  explicit basic_adam(std::span<const lazy::tensor> params, const options_type& options = {})
      : optimizer(Style == weight_decay_style::l2 ? "adam" : "adamw", params, options.lr, slot_names(options)),
        options_(options) {
    const auto in_unit = [](double beta) { return beta >= 0 && beta < 1; };
    check_option("beta1", options.beta1, in_unit(options.beta1), "in [0, 1)");
    check_option("beta2", options.beta2, in_unit(options.beta2), "in [0, 1)");
    check_option("eps", options.eps, std::isfinite(options.eps) && options.eps >= 0, "finite and >= 0");
    check_option("weight_decay", options.weight_decay, std::isfinite(options.weight_decay) && options.weight_decay >= 0,
                 "finite and >= 0");
  }

  // Replaces each params[i] (and the moments) with its updated lazy tensor.
  void step(std::span<lazy::tensor> params, std::span<const lazy::tensor> grads) {
    const auto t = static_cast<double>(begin_step(params, grads));
    // The bias corrections come from the host's step count; as graph parameters their
    // changing values (1 exactly, after enough steps) never change the graph.
    const double bias_correction1 = 1 - std::pow(options_.beta1, t);
    const double bias_correction2 = 1 - std::pow(options_.beta2, t);
    detail::step_scalar step_size(lr() / bias_correction1);
    detail::step_scalar bias_correction2_sqrt(std::sqrt(bias_correction2));
    detail::step_scalar beta1(options_.beta1);
    detail::step_scalar beta2(options_.beta2);
    detail::step_scalar one_minus_beta1(1 - options_.beta1);
    detail::step_scalar one_minus_beta2(1 - options_.beta2);
    detail::step_scalar eps(options_.eps);
    detail::step_scalar decay(Style == weight_decay_style::l2 ? options_.weight_decay
                                                              : 1 - lr() * options_.weight_decay);
    for (std::size_t i = 0; i < params.size(); ++i) {
      lazy::tensor p = params[i];
      lazy::tensor g = grads[i];
      if (options_.weight_decay != 0) {
        if constexpr (Style == weight_decay_style::l2) {
          g = g + p * decay.like(p);
        } else {
          p = p * decay.like(p);
        }
      }
      lazy::tensor& exp_avg = state_of(0, i);
      lazy::tensor& exp_avg_sq = state_of(1, i);
      exp_avg = exp_avg * beta1.like(p) + g * one_minus_beta1.like(p);
      exp_avg_sq = exp_avg_sq * beta2.like(p) + g * g * one_minus_beta2.like(p);
      const lazy::tensor* second_moment = &exp_avg_sq;
      if (options_.amsgrad) {
        lazy::tensor& max_exp_avg_sq = state_of(2, i);
        max_exp_avg_sq = lazy::maximum(max_exp_avg_sq, exp_avg_sq);
        second_moment = &max_exp_avg_sq;
      }
      const lazy::tensor denominator = lazy::sqrt(*second_moment) / bias_correction2_sqrt.like(p) + eps.like(p);
      params[i] = p - step_size.like(p) * (exp_avg / denominator);
    }
  }

private:
  static std::vector<std::string> slot_names(const options_type& options) {
    if (options.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    return {"exp_avg", "exp_avg_sq"};
  }

  options_type options_;
};

using adam_options = basic_adam_options<weight_decay_style::l2>;
using adamw_options = basic_adam_options<weight_decay_style::decoupled>;
using adam = basic_adam<weight_decay_style::l2>;
using adamw = basic_adam<weight_decay_style::decoupled>;

} // namespace xlite::optim
