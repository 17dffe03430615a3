#pragma once

// What pending lazy work would cost on a TPU-like core: its graph, compiled as mark_step()
// compiles it (constant folding, fusion, the mixed-precision policy), priced by
// tpu::estimate_step on a systolic array and a vector unit. Nothing runs. In SPMD mode
// this is the global graph on one core, before partitioning.
//
//   auto step = xlite::lazy::tpu_step_cost(mxu);           // all that mark_step() would run
//   auto some = xlite::lazy::tpu_step_cost(tensors, mxu);  // what these tensors need

#include <mutex>
#include <span>
#include <vector>

#include "xlite/amp/policy.hpp"
#include "xlite/compile/compiler.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/elementwise.hpp"
#include "xlite/tpu/step_cost.hpp"

namespace xlite::lazy {

namespace detail {

template <class Array>
tpu::step_report tpu_cost_of(const std::vector<ir::node_ptr>& outputs, const Array& array,
                             const tpu::vector_unit_config& vpu) {
  const ir::captured_graph captured = ir::capture(outputs);
  const compile::executable_ptr exe =
      compile::compile_graph(captured.program, amp::current_policy(), runtime::evaluate_constant);
  return tpu::estimate_step(*exe, array, vpu);
}

} // namespace detail

template <class Array>
tpu::step_report tpu_step_cost(std::span<const tensor> tensors, const Array& array,
                               const tpu::vector_unit_config& vpu = {}) {
  std::vector<ir::node_ptr> outputs;
  for (const tensor& t : tensors) outputs.push_back(t.node());
  return detail::tpu_cost_of(outputs, array, vpu);
}

// Every live tensor's pending work: the step the next mark_step() would run.
template <class Array>
tpu::step_report tpu_step_cost(const Array& array, const tpu::vector_unit_config& vpu = {}) {
  std::vector<ir::node_ptr> outputs;
  {
    std::scoped_lock lock(detail::registry().mutex);
    for (const auto& weak : detail::registry().live) {
      if (const auto s = weak.lock(); s && s->pending) outputs.push_back(s->pending);
    }
  }
  return detail::tpu_cost_of(outputs, array, vpu);
}

} // namespace xlite::lazy
