#pragma once

// The analytic cycle and traffic model of a Rows x Cols systolic array: closed forms per
// fold, so a 4096^3 GEMM costs a handful of operations. tpu/cycle_simulation.hpp steps the
// same array cell by cell, and the tests hold the two equal.
//
// A fold (docs/tpu.md has the derivation) takes 2 Rows + Cols + T - 2 cycles in every
// dataflow: weight- and input-stationary load the stationary tile (Rows), stream T operands
// through the skewed array (T + Rows + Cols - 2); output-stationary streams first and then
// shifts the accumulators out (Rows). SCALE-Sim v2 leaves that last drain out of
// output-stationary folds; its maintainers agree it belongs there.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "xlite/core/error.hpp"
#include "xlite/tpu/dataflow.hpp"
#include "xlite/tpu/memory_config.hpp"
#include "xlite/tpu/report.hpp"

namespace xlite::tpu {

// Element sizes of the array's operands and accumulators, for off-chip bytes.
struct element_bytes {
  std::int64_t in = 2;  // bf16
  std::int64_t acc = 4; // fp32
};

namespace detail {

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept { return (a + b - 1) / b; }

inline void check_gemm_shape(const gemm_shape& g) {
  if (g.m < 0 || g.k < 0 || g.n < 0) {
    throw shape_error(
        xlite::detail::message("tpu::gemm: negative size in (M, K, N) = (", g.m, ", ", g.k, ", ", g.n, ")"));
  }
}

// Counts in 64 bits, checked: past them `fail` throws, so that a count too large is an
// error, not a wrapped number.
template <class Fail>
struct checked_counts {
  Fail fail;

  std::int64_t mul(std::int64_t a, std::int64_t b) const {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) fail();
    return r;
  }
  std::int64_t add(std::int64_t a, std::int64_t b) const {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) fail();
    return r;
  }
};
template <class Fail>
checked_counts(Fail) -> checked_counts<Fail>; // clang 14 deduces no aggregate's arguments

} // namespace detail

template <std::int64_t Rows, std::int64_t Cols, dataflow_kind D>
gemm_report estimate(const gemm_shape& g, timing mode, const memory_config& memory, element_bytes bytes = {}) {
  static_assert(Rows > 0 && Cols > 0, "xlite: a systolic array needs at least one row and one column");
  detail::check_gemm_shape(g);
  memory.validate();
  const detail::checked_counts count{[&] {
    throw value_error(xlite::detail::message("tpu::gemm: (M, K, N) = (", g.m, ", ", g.k, ", ", g.n,
                                             ") has more cycles or bytes than 64 bits count"));
  }};
  // Bytes fetched for an operand: once if it fits its SRAM, else once per pass reading it.
  const auto fetched_bytes = [&](std::int64_t elements, std::int64_t reads, std::int64_t size,
                                 std::int64_t sram_bytes) {
    return count.mul(count.mul(elements, size) <= sram_bytes ? elements : reads, size);
  };
  gemm_report r;
  r.mode = mode;
  r.macs = count.mul(count.mul(g.m, g.k), g.n);
  if (r.macs == 0) return r; // nothing streams: no folds, no cycles (C is zeros)

  const spatial_mapping s = map_gemm<D>(g);
  r.row_folds = detail::ceil_div(s.rows, Rows);
  r.col_folds = detail::ceil_div(s.cols, Cols);
  const std::int64_t folds = count.mul(r.row_folds, r.col_folds);
  const std::int64_t fold_cycles = count.add(2 * Rows + Cols - 2, s.steps);
  r.compute_cycles = mode == timing::scalesim ? count.mul(folds, fold_cycles)
                                              : count.add(count.mul(folds - 1, std::max(s.steps, Rows)), fold_cycles);
  r.mapping_efficiency =
      static_cast<double>(s.rows) * static_cast<double>(s.cols) / (static_cast<double>(folds) * Rows * Cols);

  const std::int64_t a = count.mul(g.m, g.k), b = count.mul(g.k, g.n), c = count.mul(g.m, g.n);
  if constexpr (std::same_as<D, dataflow::output_stationary>) {
    r.input.reads = count.mul(r.col_folds, a);
    r.weight.reads = count.mul(r.row_folds, b);
    r.output.writes = c;
  } else if constexpr (std::same_as<D, dataflow::weight_stationary>) {
    r.input.reads = count.mul(r.col_folds, a);
    r.weight.reads = b;
    r.output.writes = count.mul(r.row_folds, c);
    r.output.reads = count.mul(r.row_folds - 1, c);
  } else {
    r.input.reads = a;
    r.weight.reads = count.mul(r.col_folds, b);
    r.output.writes = count.mul(r.row_folds, c);
    r.output.reads = count.mul(r.row_folds - 1, c);
  }
  // Partial sums stay on chip if C's accumulators fit the output SRAM; else every later
  // row fold writes them out and reads them back.
  const bool partials_fit = count.mul(c, bytes.acc) <= memory.output_sram_bytes;
  r.offchip_bytes = count.add(count.add(fetched_bytes(a, r.input.reads, bytes.in, memory.input_sram_bytes),
                                        fetched_bytes(b, r.weight.reads, bytes.in, memory.weight_sram_bytes)),
                              count.mul(partials_fit ? c : count.add(r.output.writes, r.output.reads), bytes.acc));
  const double transfer_cycles = std::ceil(static_cast<double>(r.offchip_bytes) / memory.offchip_bytes_per_cycle);
  if (!(transfer_cycles < 0x1p62)) count.fail(); // a link so slow the cycles do not fit
  r.stall_cycles = std::max<std::int64_t>(0, static_cast<std::int64_t>(transfer_cycles) - r.compute_cycles);
  r.total_cycles = r.compute_cycles + r.stall_cycles;
  r.utilization = static_cast<double>(r.macs) / (static_cast<double>(r.total_cycles) * Rows * Cols);
  r.seconds = static_cast<double>(r.total_cycles) / memory.clock_hz;
  r.flops_per_second = 2.0 * static_cast<double>(r.macs) / r.seconds;
  return r;
}

} // namespace xlite::tpu
