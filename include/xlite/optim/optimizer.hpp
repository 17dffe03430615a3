#pragma once

// What every optimizer shares: the layout its parameters had when it was made (shape,
// dtype, device of each), its per-parameter state tensors, the step count and the learning
// rate, with the checks on params, grads and loaded state. An optimizer holds no
// parameters: step(params, grads) replaces each params[i] with its updated lazy tensor, and
// the state tensors the same way, so a step is traced like any other op and computed at
// the next mark_step().

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/lazy/factories.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/device.hpp"

namespace xlite::optim {

// An optimizer's state, for checkpoints: the steps taken and the state tensors by name,
// "<slot>.<parameter index>" ("exp_avg.0", "momentum_buffer.3").
struct optimizer_state {
  std::int64_t step = 0;
  std::map<std::string, lazy::tensor, std::less<>> tensors;
};

class optimizer {
public:
  double lr() const noexcept { return lr_; }
  void set_lr(double lr) {
    check_lr(lr);
    lr_ = lr;
  }

  // The steps taken: the index of the next step, for a schedule (set_lr(schedule(steps()))).
  std::int64_t steps() const noexcept { return steps_; }

  // The state tensors are handles on the state's current values: to_host() them for a
  // checkpoint.
  optimizer_state state() const {
    optimizer_state s{steps_, {}};
    for (std::size_t slot = 0; slot < slot_names_.size(); ++slot) {
      for (std::size_t i = 0; i < layout_.size(); ++i) s.tensors.emplace(entry_name(slot, i), slots_[slot][i]);
    }
    return s;
  }

  // Takes `s` as the state, after checking that it has exactly this optimizer's entries,
  // each with its parameter's shape, dtype and device. On an error nothing changes.
  void load_state(const optimizer_state& s) {
    if (s.step < 0) throw value_error(xlite::detail::message(name_, ".load_state: step ", s.step, " is negative"));
    std::vector<std::vector<lazy::tensor>> loaded(slot_names_.size());
    std::set<std::string, std::less<>> expected;
    for (std::size_t slot = 0; slot < slot_names_.size(); ++slot) {
      for (std::size_t i = 0; i < layout_.size(); ++i) {
        const std::string entry = entry_name(slot, i);
        const auto it = s.tensors.find(entry);
        if (it == s.tensors.end()) {
          throw value_error(xlite::detail::message(name_, ".load_state: entry \"", entry, "\" is missing"));
        }
        check_like(layout_[i], it->second,
                   [&] { return xlite::detail::message(".load_state: entry \"", entry, "\""); });
        loaded[slot].push_back(it->second);
        expected.insert(entry);
      }
    }
    for (const auto& [entry, t] : s.tensors) {
      if (!expected.contains(entry)) {
        throw value_error(xlite::detail::message(name_, ".load_state: unknown entry \"", entry, "\""));
      }
    }
    slots_ = std::move(loaded);
    steps_ = s.step;
  }

protected:
  // `slot_names` name the state tensors each parameter has; each starts as zeros of the
  // parameter's shape and dtype on its device.
  optimizer(std::string name, std::span<const lazy::tensor> params, double lr, std::vector<std::string> slot_names)
      : name_(std::move(name)), slot_names_(std::move(slot_names)), slots_(slot_names_.size()), lr_(lr) {
    check_lr(lr);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const lazy::tensor& p = params[i];
      if (!is_floating_point(p.type())) {
        throw dtype_error(xlite::detail::message(name_, ": parameter ", i, " is ", p.type(),
                                                 "; an optimizer updates floating-point tensors"));
      }
      layout_.push_back({p.shape(), p.type(), p.device()});
      for (auto& slot : slots_) slot.push_back(lazy::zeros(p.shape(), p.type(), p.device()));
    }
  }

  // For the derived constructors: "sgd: momentum must be >= 0, got -0.5".
  void check_option(std::string_view option, double value, bool ok, std::string_view requirement) const {
    if (!ok) {
      throw value_error(xlite::detail::message(name_, ": ", option, " must be ", requirement, ", got ", value));
    }
  }

  // Checks params and grads against the layout, then counts the step: call it first in
  // step(). Returns the step's number, from 1 (PyTorch's `step` in its update rules).
  std::int64_t begin_step(std::span<const lazy::tensor> params, std::span<const lazy::tensor> grads) {
    if (params.size() != layout_.size()) {
      throw value_error(xlite::detail::message(name_, ".step: ", params.size(),
                                               " parameters, but the optimizer was made for ", layout_.size()));
    }
    if (grads.size() != params.size()) {
      throw value_error(
          xlite::detail::message(name_, ".step: ", grads.size(), " gradients for ", params.size(), " parameters"));
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      check_like(layout_[i], params[i], [i] { return xlite::detail::message(".step: parameter ", i); });
      check_like(layout_[i], grads[i], [i] { return xlite::detail::message(".step: gradient ", i); });
    }
    return ++steps_;
  }

  // State tensor `slot` (an index into slot_names) of parameter i.
  lazy::tensor& state_of(std::size_t slot, std::size_t i) { return slots_[slot][i]; }

private:
  struct parameter_layout {
    xlite::shape shape;
    dtype type;
    xlite::device device;
  };

  void check_lr(double lr) const {
    if (!(lr >= 0) || !std::isfinite(lr)) {
      throw value_error(xlite::detail::message(name_, ": the learning rate must be finite and >= 0, got ", lr));
    }
  }

  // `what()` continues "<name>": ".step: gradient 2", ".load_state: entry \"exp_avg.0\"". It
  // is called only for the message: step() checks every parameter, and formatting costs
  // more than tracing an op.
  template <class What>
  void check_like(const parameter_layout& expected, const lazy::tensor& t, const What& what) const {
    if (t.shape() != expected.shape) {
      throw shape_error(xlite::detail::message(name_, what(), " has shape ", t.shape(), ", expected ", expected.shape));
    }
    if (t.type() != expected.type) {
      throw dtype_error(xlite::detail::message(name_, what(), " is ", t.type(), ", expected ", expected.type));
    }
    if (t.device() != expected.device) {
      throw value_error(xlite::detail::message(name_, what(), " is on ", t.device(), ", expected ", expected.device));
    }
  }

  std::string entry_name(std::size_t slot, std::size_t i) const { return slot_names_[slot] + "." + std::to_string(i); }

  std::string name_;
  std::vector<parameter_layout> layout_;
  std::vector<std::string> slot_names_;
  std::vector<std::vector<lazy::tensor>> slots_; // slots_[slot][parameter]
  double lr_;
  std::int64_t steps_ = 0;
};

} // namespace xlite::optim
