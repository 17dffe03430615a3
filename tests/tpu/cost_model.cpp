// The analytic model (tpu/cost_model.hpp): a table of shapes whose cycles are worked out by
// hand from SCALE-Sim v2's code (docs/tpu.md), pipelined timing, memory stalls, bad input.

#include <catch2/catch.hpp>

#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "xlite/tpu/cost_model.hpp"

namespace {

using namespace xlite::tpu;

template <std::int64_t R, std::int64_t C, class D>
gemm_report scalesim(gemm_shape g) {
  return estimate<R, C, D>(g, timing::scalesim, memory_config::unlimited());
}

template <std::int64_t R, std::int64_t C, class D>
gemm_report pipelined(gemm_shape g) {
  return estimate<R, C, D>(g, timing::pipelined, memory_config::unlimited());
}

// One row of the agreement table, worked out by hand. scalesim_cycles is what SCALE-Sim v2
// prints: the index of its last cycle (folds x fold length - 1), with output-stationary
// folds that leave out the accumulators' drain. xlite reports counts, drain included.
struct agreement {
  std::string what;
  gemm_report report;           // timing::scalesim
  gemm_report pipelined_report; // timing::pipelined
  std::int64_t array_rows, cells;
  bool output_stationary;
  std::int64_t row_folds, col_folds;
  std::int64_t scalesim_cycles;
  double mapping_efficiency;
  std::int64_t xlite_cycles, pipelined_cycles;
};

template <std::int64_t R, std::int64_t C, class D>
agreement row(std::string what, gemm_shape g, std::int64_t row_folds, std::int64_t col_folds,
              std::int64_t scalesim_cycles, double mapping_efficiency, std::int64_t xlite_cycles,
              std::int64_t pipelined_cycles) {
  return {std::move(what),
          scalesim<R, C, D>(g),
          pipelined<R, C, D>(g),
          R,
          R * C,
          std::same_as<D, dataflow::output_stationary>,
          row_folds,
          col_folds,
          scalesim_cycles,
          mapping_efficiency,
          xlite_cycles,
          pipelined_cycles};
}

using os = dataflow::output_stationary;
using ws = dataflow::weight_stationary;
using is = dataflow::input_stationary;

} // namespace

TEST_CASE("tpu cost model: compute cycles, folds and mapping efficiency as SCALE-Sim v2's code counts them") {
  const agreement table[] = {
      // 4x4, M=8 K=5 N=6. OS: M and N on the array, T = K = 5; fold 4+4+5-2 = 11 in SCALE-Sim, 15 with the drain.
      row<4, 4, os>("4x4 os 8,5,6", {8, 5, 6}, 2, 2, 43, 48.0 / 64, 60, 3 * 5 + 15),
      // WS: K and N on the array, T = M = 8; fold 2*4+4+8-2 = 18.
      row<4, 4, ws>("4x4 ws 8,5,6", {8, 5, 6}, 2, 2, 71, 30.0 / 64, 72, 3 * 8 + 18),
      // IS: K and M on the array, T = N = 6; fold 16.
      row<4, 4, is>("4x4 is 8,5,6", {8, 5, 6}, 2, 2, 63, 40.0 / 64, 64, 3 * 6 + 16),
      // SCALE-Sim issue 125's case: one fold of 10 cycles, printed as 9.
      row<4, 4, os>("4x4 os 4,4,4", {4, 4, 4}, 1, 1, 9, 1.0, 14, 14),
      // SCALE-Sim's GEMM example (M=256 N=128 K=256) on 32x32: 8 x 4 folds of 318 (350 with the drain).
      row<32, 32, os>("32x32 os 256,256,128", {256, 256, 128}, 8, 4, 10175, 1.0, 11200, 31 * 256 + 350),
      // Non-square 8x32: K=20 over 8 rows (3 folds), N=70 over 32 columns (3 folds), T = M = 100; fold 146.
      row<8, 32, ws>("8x32 ws 100,20,70", {100, 20, 70}, 3, 3, 1313, 1400.0 / 2304, 1314, 8 * 100 + 146),
      // 16x8 OS: M=30 over 16 rows, N=17 over 8 columns, T = K = 7; fold 29 (SCALE-Sim), 45 (xlite).
      row<16, 8, os>("16x8 os 30,7,17", {30, 7, 17}, 2, 3, 173, 510.0 / 768, 270, 5 * 16 + 45),
      // A TPU-sized IS layer: K=1024 over 128 rows, M=4096 over 128 columns, T = N = 64; fold 446.
      row<128, 128, is>("128x128 is 4096,1024,64", {4096, 1024, 64}, 8, 32, 114175, 1.0, 114176, 255 * 128 + 446),
      // T shorter than the array: the next fold's weights take Rows = 32 cycles to load, so
      // a pipelined fold costs 32, not T = 8.
      row<32, 32, ws>("32x32 ws 8,64,32", {8, 64, 32}, 2, 1, 203, 1.0, 204, 32 + 102),
  };
  for (const agreement& r : table) {
    INFO(r.what);
    CHECK(r.report.row_folds == r.row_folds);
    CHECK(r.report.col_folds == r.col_folds);
    CHECK(r.report.mapping_efficiency == Approx(r.mapping_efficiency).epsilon(1e-12));
    CHECK(r.report.compute_cycles == r.xlite_cycles);
    const std::int64_t drain = r.output_stationary ? r.row_folds * r.col_folds * r.array_rows : 0;
    CHECK(r.scalesim_cycles + 1 + drain == r.report.compute_cycles);
    CHECK(r.report.stall_cycles == 0);
    CHECK(r.report.total_cycles == r.report.compute_cycles);
    CHECK(r.report.utilization ==
          Approx(static_cast<double>(r.report.macs) / static_cast<double>(r.report.total_cycles * r.cells)));
    CHECK(r.pipelined_report.compute_cycles == r.pipelined_cycles);
    CHECK(r.pipelined_report.mapping_efficiency == r.report.mapping_efficiency);
  }
}

// Outputs SCALE-Sim v2 printed, as committed in public repositories: compute cycles (its
// "Total Cycles" minus "Stall Cycles"; stalls come from its memory model) and mapping
// efficiency. SCALE-Sim's GEMM row "M, N, K" is a 1-pixel-wide convolution, so its rows are
// M and its contraction K; its convolution output is ceil((H - KH + S) / S) wide.
struct published {
  std::string source;
  gemm_report report;
  std::int64_t printed_cycles;
  double mapping_percent;
  std::int64_t drain_rows = 0; // output-stationary: the array's rows, whose drain SCALE-Sim leaves out
};

TEST_CASE("tpu cost model: SCALE-Sim v2's published outputs are xlite's counts minus one") {
  const published outputs[] = {
      // scale-sim-v2 test/general/golden_trace_user_{ws,os,is}/COMPUTE_REPORT.csv: 32x32,
      // topologies/GEMM_mnk/test_mnk_input.csv "Test 1, 256, 128, 256," (M=256 N=128 K=256).
      {"golden ws", scalesim<32, 32, ws>({256, 256, 128}), 52447 - 41248, 100.0},
      {"golden os", scalesim<32, 32, os>({256, 256, 128}), 52447 - 42272, 100.0, 32},
      {"golden is", scalesim<32, 32, is>({256, 256, 128}), 19984 - 5777, 100.0},
      // scale-sim-v2 test/golden_trace/COMPUTE_REPORT.csv: 32x32 ws, alexnet_part Conv1
      // (224x224x3, 11x11, 96 filters, stride 4): 55x55 windows of 363 taps.
      {"golden alexnet conv1", scalesim<32, 32, ws>({55 * 55, 11 * 11 * 3, 96}), 112283, 94.53125},
      // SCALE-Sim issue 125: 4x4 os, M = N = K = 4, "Compute cycles: 9".
      {"issue 125", scalesim<4, 4, os>({4, 4, 4}), 9, 100.0, 4},
      // yutation/SCALE-SIM_Validation trace_matmul/COMPUTE_REPORT.csv: a 128x128 ws sweep.
      {"sweep 2,2,2", scalesim<128, 128, ws>({2, 2, 2}), 383, 0.0244140625},
      {"sweep 2,2,512", scalesim<128, 128, ws>({2, 512, 2}), 1535, 1.5625},
      {"sweep 2,512,2", scalesim<128, 128, ws>({2, 2, 512}), 1535, 1.5625},
      {"sweep 32,32,32", scalesim<128, 128, ws>({32, 32, 32}), 413, 6.25},
      {"sweep 128,128,128", scalesim<128, 128, ws>({128, 128, 128}), 509, 100.0},
      {"sweep 512,128,128", scalesim<128, 128, ws>({512, 128, 128}), 893, 100.0},
      {"sweep 512,512,512", scalesim<128, 128, ws>({512, 512, 512}), 14303, 100.0},
  };
  for (const published& p : outputs) {
    INFO(p.source);
    const std::int64_t drain = p.report.row_folds * p.report.col_folds * p.drain_rows;
    CHECK(p.report.compute_cycles == p.printed_cycles + 1 + drain);
    CHECK(100 * p.report.mapping_efficiency == Approx(p.mapping_percent).epsilon(1e-12));
  }
}

TEST_CASE("tpu cost model: SRAM traffic per operand, as each dataflow reads and writes it") {
  // M=8 K=5 N=6 on 4x4: 2 x 2 folds in every dataflow; A has 40 elements, B 30, C 48.
  const gemm_report o = scalesim<4, 4, os>({8, 5, 6});
  CHECK(o.input.reads == 2 * 40);  // each column fold streams all of A
  CHECK(o.weight.reads == 2 * 30); // each row fold streams all of B
  CHECK(o.output.writes == 48);
  CHECK(o.output.reads == 0);
  const gemm_report w = scalesim<4, 4, ws>({8, 5, 6});
  CHECK(w.input.reads == 2 * 40);
  CHECK(w.weight.reads == 30);      // each weight loaded once
  CHECK(w.output.writes == 2 * 48); // each row fold's partial sums
  CHECK(w.output.reads == 48);      // read back to be added to by the second row fold
  const gemm_report i = scalesim<4, 4, is>({8, 5, 6});
  CHECK(i.input.reads == 40);
  CHECK(i.weight.reads == 2 * 30);
  CHECK(i.output.writes == 2 * 48);
  CHECK(i.output.reads == 48);
}

TEST_CASE("tpu cost model: off-chip traffic beyond the compute time stalls the array") {
  // M=8 K=5 N=6, weight-stationary on 4x4, bf16 in and fp32 sums; 72 compute cycles.
  memory_config roomy{.offchip_bytes_per_cycle = 1.0};
  gemm_report r = estimate<4, 4, ws>({8, 5, 6}, timing::scalesim, roomy);
  CHECK(r.offchip_bytes == 40 * 2 + 30 * 2 + 48 * 4); // everything fits: each operand moves once
  CHECK(r.compute_cycles == 72);
  CHECK(r.stall_cycles == 332 - 72);
  CHECK(r.total_cycles == 332);
  CHECK(r.utilization == Approx(240.0 / (332.0 * 16)));
  CHECK(r.seconds == Approx(332 / 1e9));
  CHECK(r.flops_per_second == Approx(480 / r.seconds));

  // A does not fit its SRAM: fetched for each of the 2 column folds. C's partial sums do
  // not fit either: both row folds write them, and the second reads them back.
  memory_config tight{.input_sram_bytes = 79, .output_sram_bytes = 191, .offchip_bytes_per_cycle = 10.0};
  r = estimate<4, 4, ws>({8, 5, 6}, timing::scalesim, tight);
  CHECK(r.offchip_bytes == 2 * 40 * 2 + 30 * 2 + (2 * 48 + 48) * 4);
  CHECK(r.stall_cycles == (r.offchip_bytes + 9) / 10 - 72);

  // With bandwidth to spare nothing stalls.
  r = estimate<4, 4, ws>({8, 5, 6}, timing::scalesim, memory_config{.offchip_bytes_per_cycle = 100.0});
  CHECK(r.stall_cycles == 0);
}

TEST_CASE("tpu cost model: empty products cost nothing, and a 4096^3 GEMM on 128x128 is a closed form") {
  for (const gemm_shape g : {gemm_shape{0, 5, 6}, gemm_shape{8, 0, 6}, gemm_shape{8, 5, 0}}) {
    const gemm_report r = scalesim<4, 4, ws>(g);
    CHECK(r.macs == 0);
    CHECK(r.total_cycles == 0);
    CHECK(r.row_folds * r.col_folds == 0);
    CHECK(r.utilization == 0);
  }
  // 32 x 32 folds of 2*128+128+4096-2 = 4478 cycles back to back; pipelined, 1023 folds of
  // 4096 then the last one whole.
  const gemm_report s = scalesim<128, 128, ws>({4096, 4096, 4096});
  CHECK(s.compute_cycles == 1024 * 4478);
  CHECK(pipelined<128, 128, ws>({4096, 4096, 4096}).compute_cycles == 1023 * 4096 + 4478);
  CHECK(s.mapping_efficiency == 1.0);
}

TEST_CASE("tpu cost model: bad shapes and memory configurations are errors that say which") {
  const auto shape_error = [](gemm_shape g) {
    try {
      scalesim<4, 4, os>(g);
    } catch (const xlite::shape_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(shape_error({-1, 2, 3}), Catch::Contains("(M, K, N) = (-1, 2, 3)"));
  CHECK_THAT(shape_error({2, -3, 3}), Catch::Contains("(M, K, N) = (2, -3, 3)"));
  const auto config_error = [](memory_config m) {
    try {
      m.validate();
    } catch (const xlite::value_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(config_error({.input_sram_bytes = 0}), Catch::Contains("input_sram_bytes"));
  CHECK_THAT(config_error({.weight_sram_bytes = -5}), Catch::Contains("weight_sram_bytes"));
  CHECK_THAT(config_error({.output_sram_bytes = 0}), Catch::Contains("output_sram_bytes"));
  CHECK_THAT(config_error({.offchip_bytes_per_cycle = 0}), Catch::Contains("offchip_bytes_per_cycle"));
  CHECK_THAT(config_error({.offchip_bytes_per_cycle = std::numeric_limits<double>::quiet_NaN()}),
             Catch::Contains("offchip_bytes_per_cycle"));
  CHECK_THAT(config_error({.clock_hz = -1}), Catch::Contains("clock_hz"));
  CHECK(config_error(memory_config::tpu_v1()) == "no error");
  // Counts that do not fit 64 bits are errors, not wrapped numbers.
  const auto count_error = [](gemm_shape g, memory_config m) {
    try {
      estimate<4, 4, ws>(g, timing::scalesim, m);
    } catch (const xlite::value_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(count_error({1 << 22, 1 << 21, 1 << 21}, {}), Catch::Contains("than 64 bits count"));
  CHECK_THAT(count_error({8, 5, 6}, {.offchip_bytes_per_cycle = 1e-300}), Catch::Contains("(8, 5, 6)"));
  CHECK(count_error({1 << 20, 1 << 20, 1 << 20}, {}) == "no error");
  CHECK(config_error(memory_config::unlimited()) == "no error");
}
