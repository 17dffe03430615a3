#pragma once

// Learning-rate schedules: plain functions of the step (counted from 0, as optimizer's
// steps()), to pass to set_lr before each step:
//
//   optim::linear_warmup schedule(100, optim::cosine(3e-4, 10'000, 1e-5));
//   opt.set_lr(schedule(opt.steps()));
//   opt.step(params, grads);
//
// The rate is a graph parameter of the step, so a new rate every step never recompiles.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <numbers>
#include <utility>

#include "xlite/core/error.hpp"

namespace xlite::optim {

template <class S>
concept schedule = requires(const S& s, std::int64_t step) {
  { s(step) } -> std::convertible_to<double>;
};

// lr at every step.
class constant {
public:
  explicit constant(double lr) : lr_(lr) {}
  double operator()(std::int64_t) const { return lr_; }

private:
  double lr_;
};

// lr * gamma^floor(step / step_size) (torch.optim.lr_scheduler.StepLR).
class step_decay {
public:
  step_decay(double lr, std::int64_t step_size, double gamma) : lr_(lr), step_size_(step_size), gamma_(gamma) {
    if (step_size < 1) throw value_error(xlite::detail::message("step_decay: step_size must be >= 1, got ", step_size));
  }
  double operator()(std::int64_t step) const { return lr_ * std::pow(gamma_, static_cast<double>(step / step_size_)); }

private:
  double lr_;
  std::int64_t step_size_;
  double gamma_;
};

// From lr at step 0 down to min_lr at total_steps along half a cosine, then min_lr
// (torch.optim.lr_scheduler.CosineAnnealingLR with T_max = total_steps, held at its end).
class cosine {
public:
  cosine(double lr, std::int64_t total_steps, double min_lr = 0) : lr_(lr), total_steps_(total_steps), min_lr_(min_lr) {
    if (total_steps < 1) {
      throw value_error(xlite::detail::message("cosine: total_steps must be >= 1, got ", total_steps));
    }
  }
  double operator()(std::int64_t step) const {
    const double progress =
        static_cast<double>(std::clamp<std::int64_t>(step, 0, total_steps_)) / static_cast<double>(total_steps_);
    return min_lr_ + (lr_ - min_lr_) * (1 + std::cos(std::numbers::pi * progress)) / 2;
  }

private:
  double lr_;
  std::int64_t total_steps_;
  double min_lr_;
};

// then(0) * step / warmup_steps for the first warmup_steps steps (0 at step 0, as Hugging
// Face's get_linear_schedule_with_warmup), then `then` from its own step 0.
template <schedule Then>
class linear_warmup {
public:
  linear_warmup(std::int64_t warmup_steps, Then then) : warmup_steps_(warmup_steps), then_(std::move(then)) {
    if (warmup_steps < 0) {
      throw value_error(xlite::detail::message("linear_warmup: warmup_steps must be >= 0, got ", warmup_steps));
    }
  }
  double operator()(std::int64_t step) const {
    if (step >= warmup_steps_) return then_(step - warmup_steps_);
    return then_(0) * static_cast<double>(std::max<std::int64_t>(step, 0)) / static_cast<double>(warmup_steps_);
  }

private:
  std::int64_t warmup_steps_;
  Then then_;
};

} // namespace xlite::optim
