#pragma once

// What a whole compiled step (a compile::executable: a lazy graph after fusion) costs on a
// TPU-like core: matmuls on a systolic array (tpu/cost_model.hpp), everything else on a
// modelled vector unit, kernel after kernel as the executor runs them.
//
//   - matmul: the array's cost of each product of the batch, off-chip traffic and stalls
//     included. An element-wise kernel fused as its epilogue reads the product on chip.
//   - element-wise kernel: ceil(elements / lanes) vector steps of its ops (a transcendental
//     op or a division costs cycles_per_transcendental, any other cycles_per_op); it reads each input
//     and writes each result off chip once, keeping intermediate values on chip.
//   - reduction: the same over its operand's elements, its fused ops plus the combine.
//   - layout and window ops: one vector step per `lanes` elements read and written.
// Each non-matmul kernel takes max(its vector cycles, its off-chip bytes / bandwidth).
// Control flow and collectives are not modelled (a value_error says so).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>

#include "xlite/compile/executable.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/tpu/dataflow.hpp"
#include "xlite/tpu/memory_config.hpp"
#include "xlite/tpu/report.hpp"

namespace xlite::tpu {

struct vector_unit_config {
  std::int64_t lanes = 1024;                  // elements per vector step (a TPU: 8 x 128)
  std::int64_t cycles_per_op = 1;             // add, multiply, compare, select, cast, ...
  std::int64_t cycles_per_transcendental = 4; // exp, log, tanh, sigmoid, gelu, pow, sqrt, div, ...

  void validate() const {
    if (lanes < 1 || cycles_per_op < 1 || cycles_per_transcendental < 1) {
      throw value_error(xlite::detail::message("tpu::vector_unit_config: lanes (", lanes, "), cycles_per_op (",
                                               cycles_per_op, ") and cycles_per_transcendental (",
                                               cycles_per_transcendental, ") must be positive"));
    }
  }
};

struct step_report {
  std::int64_t cycles = 0;        // the whole step, kernel after kernel
  std::int64_t mxu_cycles = 0;    // in matmul kernels
  std::int64_t vector_cycles = 0; // in the other kernels
  std::int64_t macs = 0;
  std::int64_t offchip_bytes = 0;
  double seconds = 0;          // cycles at the memory_config's clock
  double mxu_utilization = 0;  // macs / (mxu_cycles x Rows x Cols): how busy matmul kernels keep the array
  double flops_per_second = 0; // 2 macs / seconds
  double mfu = 0;              // of the array's peak, 2 Rows Cols per cycle, over the whole step
};

inline std::ostream& operator<<(std::ostream& os, const step_report& r) {
  return os << "step: " << r.cycles << " cycles (" << r.mxu_cycles << " matmul, " << r.vector_cycles << " vector), "
            << r.seconds * 1e6 << " us, MXU utilization " << r.mxu_utilization << ", " << r.flops_per_second / 1e9
            << " GFLOP/s, MFU " << r.mfu << ", off-chip " << r.offchip_bytes << " bytes";
}

namespace detail {

inline bool transcendental(op code) {
  switch (code) {
  case op::exp:
  case op::log:
  case op::log1p:
  case op::sqrt:
  case op::rsqrt:
  case op::tanh:
  case op::sigmoid:
  case op::gelu:
  case op::pow:
  case op::sin:
  case op::cos:
  case op::div:
    return true;
  default:
    return false;
  }
}

inline std::int64_t bytes_of(const ir::instruction& v) {
  return v.shape.numel() * static_cast<std::int64_t>(size_of(v.type));
}

// Cycles of a kernel's fused ops per vector step.
inline std::int64_t op_cycles(const compile::kernel& k, const vector_unit_config& vpu) {
  std::int64_t cycles = 0;
  for (const compile::register_step& s : k.program) {
    if (s.what == compile::register_step::kind::compute) {
      cycles += transcendental(s.code) ? vpu.cycles_per_transcendental : vpu.cycles_per_op;
    }
  }
  return cycles;
}

inline std::int64_t vector_steps(std::int64_t elements, const vector_unit_config& vpu) {
  return (elements + vpu.lanes - 1) / vpu.lanes;
}

} // namespace detail

// `array` is a tpu::systolic_array (its cost() and memory()); `vpu` the vector unit.
template <class Array>
step_report estimate_step(const compile::executable& exe, const Array& array, const vector_unit_config& vpu = {}) {
  vpu.validate();
  const memory_config& memory = array.memory();
  const ir::graph& g = exe.program;
  step_report r;
  // Cycles of a non-matmul kernel: its vector work or its off-chip traffic, the longer.
  const auto vector_kernel = [&](std::int64_t vector_cycles, std::int64_t bytes) {
    const double transfer = std::ceil(static_cast<double>(bytes) / memory.offchip_bytes_per_cycle);
    r.vector_cycles += std::max(vector_cycles, static_cast<std::int64_t>(transfer));
    r.offchip_bytes += bytes;
  };
  for (std::size_t i = 0; i < exe.kernels.size(); ++i) {
    const compile::kernel& k = exe.kernels[i];
    const ir::instruction& root = g.instructions[k.group.root];
    const op_kind kind = info(root.code).kind;
    if (kind == op_kind::control || kind == op_kind::collective) {
      throw value_error(xlite::detail::message("tpu::estimate_step: ", name(root.code),
                                               " is not modelled (control flow and collectives)"));
    }
    if (kind == op_kind::source) continue;
    if (root.code == op::matmul) {
      const ir::instruction& a = g.instructions[root.operands[0]];
      const std::size_t rank = root.shape.rank();
      const std::int64_t m = root.shape[rank - 2], n = root.shape[rank - 1];
      const std::int64_t depth = a.shape[a.shape.rank() - (root.attrs.ints[0] != 0 ? 2 : 1)];
      const std::int64_t batch = m * n == 0 ? 0 : root.shape.numel() / (m * n);
      const gemm_report product = array.cost({m, depth, n});
      std::int64_t bytes = batch * product.offchip_bytes;
      const bool epilogue = i + 1 < exe.kernels.size() && exe.kernels[i + 1].group.matmul_epilogue;
      if (epilogue) { // the product stays on chip for the epilogue, which writes the result
        bytes -= root.shape.numel() * static_cast<std::int64_t>(sizeof(typename Array::accumulator_type));
      }
      r.mxu_cycles += batch * product.total_cycles;
      r.macs += batch * product.macs;
      r.offchip_bytes += bytes;
      continue;
    }
    std::int64_t bytes = 0;
    for (const ir::value_id v : k.group.inputs) {
      const bool product_on_chip = k.group.matmul_epilogue && v == exe.kernels[i - 1].group.root;
      if (!product_on_chip) bytes += detail::bytes_of(g.instructions[v]);
    }
    if (k.group.elementwise) {
      bytes += detail::bytes_of(root);
      for (const ir::value_id v : k.group.extra_results) bytes += detail::bytes_of(g.instructions[v]);
      const std::int64_t per_step = std::max<std::int64_t>(detail::op_cycles(k, vpu), vpu.cycles_per_op);
      vector_kernel(detail::vector_steps(root.shape.numel(), vpu) * per_step, bytes);
    } else if (kind == op_kind::reduction) {
      bytes += detail::bytes_of(root);
      const std::int64_t elements = g.instructions[root.operands[0]].shape.numel();
      vector_kernel(detail::vector_steps(elements, vpu) * (detail::op_cycles(k, vpu) + vpu.cycles_per_op), bytes);
    } else { // layout and window ops move elements
      std::int64_t elements = root.shape.numel();
      for (const ir::value_id v : root.operands) elements += g.instructions[v].shape.numel();
      bytes = detail::bytes_of(root);
      for (const ir::value_id v : root.operands) bytes += detail::bytes_of(g.instructions[v]);
      vector_kernel(detail::vector_steps(elements, vpu) * vpu.cycles_per_op, bytes);
    }
  }
  r.cycles = r.mxu_cycles + r.vector_cycles;
  constexpr double cells = static_cast<double>(Array::rows * Array::cols);
  if (r.cycles > 0) {
    r.seconds = static_cast<double>(r.cycles) / memory.clock_hz;
    r.flops_per_second = 2.0 * static_cast<double>(r.macs) / r.seconds;
    r.mfu = static_cast<double>(r.macs) / (static_cast<double>(r.cycles) * cells);
  }
  if (r.mxu_cycles > 0) r.mxu_utilization = static_cast<double>(r.macs) / (static_cast<double>(r.mxu_cycles) * cells);
  return r;
}

} // namespace xlite::tpu
