#pragma once

// The memory around a systolic array: on-chip SRAM for each operand, the off-chip link's
// bandwidth and the clock. The cost model (tpu/cost_model.hpp) charges off-chip traffic
// against it: an operand that fits its SRAM is fetched once, one that does not is fetched
// again for every pass that reads it, and transfers overlap compute (double buffering),
// so only traffic beyond the compute time stalls the array.

#include <cstdint>
#include <limits>

#include "xlite/core/error.hpp"

namespace xlite::tpu {

struct memory_config {
  std::int64_t input_sram_bytes = std::numeric_limits<std::int64_t>::max();
  std::int64_t weight_sram_bytes = std::numeric_limits<std::int64_t>::max();
  std::int64_t output_sram_bytes = std::numeric_limits<std::int64_t>::max();
  double offchip_bytes_per_cycle = std::numeric_limits<double>::infinity();
  double clock_hz = 1e9;

  // SCALE-Sim's default bandwidth mode ("CALC"): every operand fits on chip and the link
  // delivers what the array asks for, so the array never stalls.
  static memory_config unlimited() { return {}; }

  // TPU v1 (Jouppi et al., ISCA 2017): a 24 MiB unified buffer for activations, 4 MiB of
  // accumulators, a weight FIFO four 64 KiB tiles deep fed from DDR3 at 30 GB/s, 700 MHz.
  // Pair it with a 256 x 256 array.
  static memory_config tpu_v1() {
    return {.input_sram_bytes = 24LL << 20,
            .weight_sram_bytes = 4 * (64LL << 10),
            .output_sram_bytes = 4LL << 20,
            .offchip_bytes_per_cycle = 30e9 / 700e6,
            .clock_hz = 700e6};
  }

  // Throws value_error naming the first field that cannot describe a memory.
  void validate() const {
    const auto fail = [](const char* field, auto value) {
      throw value_error(xlite::detail::message("tpu::memory_config: ", field, " must be positive, got ", value));
    };
    if (input_sram_bytes <= 0) fail("input_sram_bytes", input_sram_bytes);
    if (weight_sram_bytes <= 0) fail("weight_sram_bytes", weight_sram_bytes);
    if (output_sram_bytes <= 0) fail("output_sram_bytes", output_sram_bytes);
    if (!(offchip_bytes_per_cycle > 0)) fail("offchip_bytes_per_cycle", offchip_bytes_per_cycle);
    if (!(clock_hz > 0) || clock_hz == std::numeric_limits<double>::infinity()) fail("clock_hz", clock_hz);
  }
};

} // namespace xlite::tpu
