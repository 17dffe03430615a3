#pragma once

// Losses (torch.nn.functional.cross_entropy, mse_loss) and linear, as composites of
// element-wise ops, reductions and matmul: each is a small fused graph, and autodiff
// differentiates its parts with no rule of its own.

#include <cstdint>
#include <optional>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite::lazy {

// How a loss reduces its per-element values (torch's `reduction=` strings).
enum class reduction { none, mean, sum };

namespace detail {

inline tensor reduce_loss(const tensor& values, reduction r) {
  switch (r) {
  case reduction::none:
    return values;
  case reduction::sum:
    return sum(values);
  case reduction::mean:
    break;
  }
  return mean(values);
}

} // namespace detail

// logits (N, C) of a floating-point dtype, targets (N) class indices of an integer dtype:
// loss_i = -sum_c q_ic log_softmax(logits)_ic with q_i = (1 - label_smoothing) one_hot(target_i)
// + label_smoothing / C, then reduced (mean over N by default). The one-hot row is an iota
// comparison, so the whole loss is one log_softmax, one fused multiply-and-sum and the
// reduction. A target outside [0, C) is not detected (its values are known only on the
// device): its one-hot row is zero, so the sample contributes only its smoothing term
// (torch raises an error; it also has ignore_index and class weights, which this has not).
inline tensor cross_entropy(const tensor& logits, const tensor& targets, reduction r = reduction::mean,
                            double label_smoothing = 0.0) {
  detail::common_device("cross_entropy", {&logits, &targets});
  if (logits.shape().rank() != 2) {
    throw shape_error(xlite::detail::message("cross_entropy: logits of shape ", logits.shape(), " are not 2-D (N, C)"));
  }
  if (!is_floating_point(logits.type())) {
    throw dtype_error(
        xlite::detail::message("cross_entropy: logits must be floating point, got ", name(logits.type())));
  }
  if (category(targets.type()) != dtype_category::integral) {
    throw dtype_error(xlite::detail::message("cross_entropy: targets must be class indices of an integer dtype, got ",
                                             name(targets.type())));
  }
  const std::int64_t classes = logits.shape()[1];
  if (targets.shape() != shape{logits.shape()[0]}) {
    throw shape_error(xlite::detail::message("cross_entropy: targets of shape ", targets.shape(),
                                             " do not match logits of shape ", logits.shape(), ": need (",
                                             logits.shape()[0], ",)"));
  }
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
    throw value_error(
        xlite::detail::message("cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing));
  }
  if (classes < 1)
    throw shape_error(xlite::detail::message("cross_entropy: logits of shape ", logits.shape(), " have no classes"));
  tensor q = one_hot(targets, classes, logits.type());
  if (label_smoothing > 0.0) q = q * (1.0 - label_smoothing) + label_smoothing / static_cast<double>(classes);
  return detail::reduce_loss(-sum(q * log_softmax(logits, 1), {1}), r);
}

// (input - target)^2, reduced (mean over every element by default). The shapes must be
// equal: torch broadcasts them with a warning, which is nearly always a mistake.
inline tensor mse_loss(const tensor& input, const tensor& target, reduction r = reduction::mean) {
  detail::common_device("mse_loss", {&input, &target});
  if (input.shape() != target.shape()) {
    throw shape_error(xlite::detail::message("mse_loss: input of shape ", input.shape(), " and target of shape ",
                                             target.shape(), " differ"));
  }
  if (!is_floating_point(input.type()) || target.type() != input.type()) {
    throw dtype_error(xlite::detail::message("mse_loss: input and target must have one floating-point dtype, got ",
                                             name(input.type()), " and ", name(target.type())));
  }
  const tensor difference = input - target;
  return detail::reduce_loss(difference * difference, r);
}

// torch.nn.functional.linear: x (..., in) times weight (out, in) transposed, plus bias (out):
// (..., out). x's leading axes are flattened into the rows of one GEMM, and the bias runs as
// that GEMM's epilogue. (The transposed weight is a copy: the IR's matmul has no transpose
// flags.)
inline tensor linear(const tensor& x, const tensor& weight, const std::optional<tensor>& bias = std::nullopt) {
  detail::common_device("linear", {&x, &weight});
  const shape &xs = x.shape(), &ws = weight.shape();
  if (ws.rank() != 2) {
    throw shape_error(
        xlite::detail::message("linear: weight of shape ", ws, " is not 2-D (out_features, in_features)"));
  }
  if (xs.rank() < 1 || xs[xs.rank() - 1] != ws[1]) {
    throw shape_error(xlite::detail::message("linear: input of shape ", xs, " does not fit weight of shape ", ws,
                                             ": need (..., ", ws[1], ")"));
  }
  if (weight.type() != x.type() || x.type() == dtype::boolean) {
    throw dtype_error(xlite::detail::message("linear: input and weight must have one numeric dtype, got ",
                                             name(x.type()), " and ", name(weight.type())));
  }
  if (bias) {
    detail::common_device("linear", {&x, &*bias});
    if (bias->shape() != shape{ws[0]}) {
      throw shape_error(xlite::detail::message("linear: bias of shape ", bias->shape(),
                                               " does not match weight of shape ", ws, ": need (", ws[0], ",)"));
    }
    if (bias->type() != x.type()) {
      throw dtype_error(xlite::detail::message("linear: bias is ", name(bias->type()), ", input is ", name(x.type())));
    }
  }
  std::int64_t rows = 1;
  for (std::size_t a = 0; a + 1 < xs.rank(); ++a) rows *= xs[a];
  tensor y = matmul(reshape(x, shape{rows, ws[1]}), transpose(weight));
  if (bias) y = *bias + y; // the bias first, so that a computed bias is ready for the epilogue
  std::vector<std::int64_t> dims(xs.begin(), xs.end());
  dims.back() = ws[0];
  return reshape(y, shape(dims));
}

} // namespace xlite::lazy
