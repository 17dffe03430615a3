#pragma once

// What a GEMM costs on a systolic array: cycles, folds, how busy the cells were, and the
// traffic of each operand. Cycle fields are counts (SCALE-Sim prints the index of the last
// cycle, one less).

#include <cstdint>
#include <ostream>

namespace xlite::tpu {

// How consecutive folds follow each other (docs/tpu.md):
//   scalesim   each fold pays its whole fill and drain, folds run back to back (SCALE-Sim);
//   pipelined  the next fold's operands load while the current one streams and drains, as a
//              double-buffered MXU does: a fold after the first costs max(T, Rows) cycles.
enum class timing { scalesim, pipelined };

constexpr const char* name(timing t) noexcept { return t == timing::scalesim ? "scalesim" : "pipelined"; }

// Element counts read from and written to an operand's on-chip SRAM.
struct sram_traffic {
  std::int64_t reads = 0;
  std::int64_t writes = 0;
};

struct gemm_report {
  timing mode = timing::pipelined;
  std::int64_t macs = 0;           // M * K * N
  std::int64_t compute_cycles = 0; // the array busy: fills, streams, drains of every fold
  std::int64_t stall_cycles = 0;   // waiting for off-chip traffic beyond compute_cycles
  std::int64_t total_cycles = 0;   // compute_cycles + stall_cycles
  std::int64_t row_folds = 0;
  std::int64_t col_folds = 0;
  double utilization = 0;        // macs / (total_cycles * Rows * Cols)
  double mapping_efficiency = 0; // cells holding work, averaged over folds
  sram_traffic input;            // A
  sram_traffic weight;           // B
  sram_traffic output;           // C: partial sums of later row folds are read back and added
  std::int64_t offchip_bytes = 0;
  double seconds = 0;          // total_cycles at the memory_config's clock
  double flops_per_second = 0; // 2 * macs / seconds
};

inline std::ostream& operator<<(std::ostream& os, const gemm_report& r) {
  return os << "gemm (" << name(r.mode) << "): " << r.macs << " MACs, " << r.total_cycles << " cycles ("
            << r.compute_cycles << " compute, " << r.stall_cycles << " stalled), folds " << r.row_folds << " x "
            << r.col_folds << ", utilization " << r.utilization << ", mapping efficiency " << r.mapping_efficiency
            << ", SRAM reads A " << r.input.reads << " B " << r.weight.reads << " C " << r.output.reads << ", writes C "
            << r.output.writes << ", off-chip " << r.offchip_bytes << " bytes";
}

} // namespace xlite::tpu
