#pragma once

// What a whole compiled step (a compile::executable: a lazy graph after fusion) costs on a
// TPU-like core: matmuls on a systolic array (tpu/cost_model.hpp), everything else on a
// modelled vector unit, kernel after kernel as the executor runs them.
//
//   - matmul: the array's compute cycles for each product of the batch. An element-wise
//     kernel fused as its epilogue runs on the vector unit as the product's regions come
//     out, reading the product on chip: the pair takes the longest of the array's cycles,
//     the epilogue's vector cycles and the pair's off-chip traffic.
//   - element-wise kernel: ceil(elements / lanes) vector steps of its per-element ops (a
//     transcendental op or a division costs cycles_per_transcendental, any other
//     cycles_per_op; constants, iota and broadcasts are set up once, not per step). It reads
//     each input and writes each result off chip once, intermediate values staying on chip.
//   - reduction: the same over its operand's elements, its fused ops plus the combine.
//   - layout and window ops: one vector step per `lanes` elements read and written (each
//     operand read whole).
// Each kernel takes the longer of its compute and its off-chip bytes over the link; kernels
// do not overlap. Operands and results count at their dtype's size in the graph. Control
// flow and collectives are not modelled (a value_error says so).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>

#include "xlite/compile/executable.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"
#include "xlite/tpu/cost_model.hpp"
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
  std::int64_t mxu_cycles = 0;    // in matmul kernels, with their epilogues
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

// Division and the transcendentals: the element-wise ops that compute in floating point.
inline bool transcendental(op code) {
  return info(code).kind == op_kind::elementwise && info(code).rule == dtype_rule::to_floating;
}

// Cycles of a kernel's fused ops per vector step: its per-element work, not the constants,
// iota and broadcasts set up once.
inline std::int64_t op_cycles(const compile::kernel& k, const vector_unit_config& vpu) {
  std::int64_t cycles = 0;
  for (const compile::register_step& s : k.program) {
    const bool setup = s.invariant || s.code == op::constant || s.code == op::iota || s.code == op::broadcast_to;
    if (s.what == compile::register_step::kind::compute && !setup) {
      cycles += transcendental(s.code) ? vpu.cycles_per_transcendental : vpu.cycles_per_op;
    }
  }
  return cycles;
}

} // namespace detail

// `array` is a tpu::systolic_array (its shape, dataflow and memory); `vpu` the vector unit.
template <class Array>
step_report estimate_step(const compile::executable& exe, const Array& array, const vector_unit_config& vpu = {}) {
  vpu.validate();
  const memory_config& memory = array.memory();
  const ir::graph& g = exe.program;
  const detail::checked_counts count{
      [] { throw value_error("tpu::estimate_step: the step has more cycles or bytes than 64 bits count"); }};
  const auto bytes_of = [&](const ir::instruction& v) {
    return count.mul(v.shape.numel(), static_cast<std::int64_t>(size_of(v.type)));
  };
  step_report r;
  // The cycles of a kernel: its compute or its off-chip traffic, whichever is longer.
  const auto kernel_cycles = [&](std::int64_t compute, std::int64_t bytes) {
    const double transfer = std::ceil(static_cast<double>(bytes) / memory.offchip_bytes_per_cycle);
    if (!(transfer < 0x1p62)) count.fail();
    r.offchip_bytes = count.add(r.offchip_bytes, bytes);
    return std::max(compute, static_cast<std::int64_t>(transfer));
  };
  const auto vector_steps = [&](std::int64_t elements) { return (elements + vpu.lanes - 1) / vpu.lanes; };
  // Bytes of a kernel's results and of its inputs, but for a product it reads on chip.
  constexpr ir::value_id nothing_on_chip = std::numeric_limits<ir::value_id>::max();
  const auto elementwise_bytes = [&](const compile::kernel& k, ir::value_id on_chip) {
    std::int64_t bytes = bytes_of(g.instructions[k.group.root]);
    for (const ir::value_id v : k.group.extra_results) bytes = count.add(bytes, bytes_of(g.instructions[v]));
    for (const ir::value_id v : k.group.inputs) {
      if (v != on_chip) bytes = count.add(bytes, bytes_of(g.instructions[v]));
    }
    return bytes;
  };
  for (std::size_t i = 0; i < exe.kernels.size(); ++i) {
    const compile::kernel& k = exe.kernels[i];
    const ir::instruction& root = g.instructions[k.group.root];
    const op_kind kind = info(root.code).kind;
    if (kind == op_kind::control || kind == op_kind::collective) {
      throw value_error(xlite::detail::message("tpu::estimate_step: ", name(root.code),
                                               " is not modelled (control flow and collectives)"));
    }
    if (root.code == op::matmul) {
      const ir::instruction& a = g.instructions[root.operands[0]];
      const std::size_t rank = root.shape.rank();
      const std::int64_t m = root.shape[rank - 2], n = root.shape[rank - 1];
      const std::int64_t depth = a.shape[a.shape.rank() - (root.attrs.ints[0] != 0 ? 2 : 1)];
      const std::int64_t batch = m * n == 0 ? 0 : root.shape.numel() / (m * n);
      const gemm_report product = estimate<Array::rows, Array::cols, typename Array::dataflow_type>(
          {m, depth, n}, timing::pipelined, memory,
          {static_cast<std::int64_t>(size_of(a.type)), static_cast<std::int64_t>(size_of(root.type))});
      std::int64_t compute = count.mul(batch, product.compute_cycles);
      std::int64_t bytes = count.mul(batch, product.offchip_bytes);
      r.macs = count.add(r.macs, count.mul(batch, product.macs));
      const bool epilogue = i + 1 < exe.kernels.size() && exe.kernels[i + 1].group.matmul_epilogue;
      if (epilogue) { // the product stays on chip; the epilogue writes the results
        const compile::kernel& e = exe.kernels[++i];
        if (product.macs > 0) bytes -= bytes_of(root);
        bytes = count.add(bytes, elementwise_bytes(e, k.group.root));
        const std::int64_t per_step = std::max(detail::op_cycles(e, vpu), vpu.cycles_per_op);
        compute = std::max(compute, count.mul(vector_steps(g.instructions[e.group.root].shape.numel()), per_step));
      }
      r.mxu_cycles = count.add(r.mxu_cycles, kernel_cycles(compute, bytes));
      continue;
    }
    std::int64_t compute = 0, bytes = 0;
    if (k.group.elementwise) {
      bytes = elementwise_bytes(k, nothing_on_chip);
      const std::int64_t per_step = std::max(detail::op_cycles(k, vpu), vpu.cycles_per_op);
      compute = count.mul(vector_steps(root.shape.numel()), per_step);
    } else if (kind == op_kind::reduction) {
      bytes = elementwise_bytes(k, nothing_on_chip);
      const std::int64_t elements = g.instructions[root.operands[0]].shape.numel();
      compute = count.mul(vector_steps(elements), detail::op_cycles(k, vpu) + vpu.cycles_per_op);
    } else if (kind != op_kind::source) { // layout and window ops move elements
      std::int64_t elements = root.shape.numel();
      bytes = bytes_of(root);
      for (const ir::value_id v : root.operands) {
        elements = count.add(elements, g.instructions[v].shape.numel());
        bytes = count.add(bytes, bytes_of(g.instructions[v]));
      }
      compute = count.mul(vector_steps(elements), vpu.cycles_per_op);
    }
    r.vector_cycles = count.add(r.vector_cycles, kernel_cycles(compute, bytes));
  }
  r.cycles = count.add(r.mxu_cycles, r.vector_cycles);
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
