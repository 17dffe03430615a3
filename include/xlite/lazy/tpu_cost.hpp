#pragma once

// What the pending work of some lazy tensors would cost on a TPU-like core: their graph,
// compiled as mark_step() would compile it (fusion, the mixed-precision policy), priced by
// tpu::estimate_step on a systolic array and a vector unit. Nothing runs.
//
//   auto report = xlite::lazy::tpu_step_cost(tensors, mxu);   // cycles, MXU utilization, MFU

#include <span>

#include "xlite/amp/policy.hpp"
#include "xlite/compile/compiler.hpp"
#include "xlite/lazy/debug.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/tpu/step_cost.hpp"

namespace xlite::lazy {

template <class Array>
tpu::step_report tpu_step_cost(std::span<const tensor> tensors, const Array& array,
                               const tpu::vector_unit_config& vpu = {}) {
  const ir::captured_graph captured = debug::detail::pending_graph(tensors);
  const compile::executable_ptr exe = compile::compile_graph(captured.program, amp::current_policy());
  return tpu::estimate_step(*exe, array, vpu);
}

} // namespace xlite::lazy
