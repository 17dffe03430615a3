#pragma once

// xlite::grad: reverse-mode gradients of a lazy tensor with respect to others. It walks the
// trace that computes the output back to the tensors asked for and records, for each node
// on the way, the vector-Jacobian product of its op (autodiff/vjp.hpp). The gradients are
// lazy tensors like any other: nothing runs until the barrier, where the forward and the
// backward pass compile together into one graph, fused and cached, as PyTorch/XLA's
// training step is.
//
//   auto loss = lazy::cross_entropy(model(x), y);
//   auto grads = xlite::grad(loss, params);          // one lazy tensor per parameter
//   optimizer.step(params, grads);
//   xlite::mark_step();

#include <cstddef>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "xlite/autodiff/backprop.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/sharding.hpp"
#include "xlite/ir/sharding_ops.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite {

namespace autodiff::detail {

inline std::string describe(const lazy::tensor& t) {
  return xlite::detail::message(name(t.type()), t.shape());
}

} // namespace autodiff::detail

// The gradients of `output` with respect to each of `inputs`: gradient k has the shape and
// dtype of inputs[k]. `output` must be a floating-point scalar (a loss), unless
// `output_gradient` (output's shape) is given, the vector of the vector-Jacobian product.
// An input that `output` does not depend on gets zeros. The inputs may be any tensors of
// the trace, device values (parameters) or pending results.
inline std::vector<lazy::tensor> grad(const lazy::tensor& output, std::span<const lazy::tensor> inputs,
                                      const std::optional<lazy::tensor>& output_gradient = std::nullopt) {
  using autodiff::detail::describe;
  if (category(output.type()) != dtype_category::floating_point) {
    throw dtype_error(xlite::detail::message("grad: the output is ", describe(output),
                                             "; only a floating-point output has a gradient"));
  }
  ir::node_ptr seed;
  if (output_gradient) {
    if (output_gradient->shape() != output.shape()) {
      throw shape_error(xlite::detail::message("grad: output_gradient ", describe(*output_gradient),
                                               " does not match the output ", describe(output)));
    }
    seed = ir::cast(output_gradient->node(), output.type());
  } else if (output.shape().rank() != 0) {
    throw shape_error(xlite::detail::message("grad: the output ", describe(output),
                                             " is not a scalar; reduce it (sum, mean) or pass output_gradient"));
  } else {
    seed = ir::constant(ir::literal::of(1.0), output.type());
  }

  std::vector<ir::node_ptr> targets;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (category(inputs[k].type()) != dtype_category::floating_point) {
      throw dtype_error(xlite::detail::message("grad: input ", k, " is ", describe(inputs[k]),
                                               "; only floating-point inputs have gradients"));
    }
    lazy::detail::common_device("grad", {&output, &inputs[k]});
    targets.push_back(inputs[k].node());
  }
  const ir::node_ptr root = output.node();
  const std::vector<ir::node_ptr> found = autodiff::backprop(std::span(&root, 1), std::span(&seed, 1), targets);

  std::vector<lazy::tensor> gradients;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    ir::node_ptr g = found[k] ? ir::cast(found[k], inputs[k].type()) : autodiff::detail::zeros_like(targets[k]);
    // A sharded input's gradient is laid out as the input, as GSPMD lays out a parameter's
    // gradient: a gradient summed over the batch's devices is reduce-scattered into an FSDP
    // parameter's tiles, not all-reduced whole. An input that is a pending partial value
    // is left alone: its gradient is a whole value, which cannot be made partial.
    if (targets[k]->code() == op::mark_sharding) {
      const ir::sharding input_sharding = ir::sharding::from_ints(targets[k]->attrs().ints);
      if (!input_sharding.is_partial()) g = ir::mark_sharding(g, input_sharding);
    }
    gradients.push_back(lazy::detail::make(inputs[k].device(), std::move(g)));
  }
  return gradients;
}

inline std::vector<lazy::tensor> grad(const lazy::tensor& output, std::initializer_list<lazy::tensor> inputs,
                                      const std::optional<lazy::tensor>& output_gradient = std::nullopt) {
  return grad(output, std::span(inputs.begin(), inputs.size()), output_gradient);
}

} // namespace xlite
