#pragma once

// The tpu device: a modelled TPU core, one systolic array and one vector unit, on which
// lazy graphs run.
//
//   using mxu = xlite::tpu::systolic_array<128, 128, xlite::tpu::dataflow::weight_stationary>;
//   xlite::tpu::configure<mxu>(xlite::tpu::memory_config::tpu_v1(), {});
//   const xlite::device tpu("tpu:0");
//   auto w = xlite::lazy::tensor::from(host_w, tpu);     // ... trace a step on tpu:0
//   xlite::mark_step();
//   xlite::wait_device_ops();
//   std::cout << xlite::tpu::last_step_report(tpu);      // cycles, MXU utilization, MFU, ...
//
// A graph on "tpu:k" compiles as it would on cpu:k (same passes, same cache entry) and runs
// on cpu:k's worker, with one difference in the numbers: its float16, bfloat16 and float32
// matmuls, and so the convolutions that lower to them, compute with the array's numerics
// (operands rounded to In, fused products accumulated in Acc in the dataflow's order:
// tpu/dataflow_product.hpp), at the speed of the CPU's kernels. Element-wise work computes
// as on the CPU; the vector unit only prices it. Operands round to bf16 as a cast does, so
// where every order of accumulation gives the same sum (exact sums) a tpu:k matmul gives
// the bits of a cpu:k matmul under bf16 autocast; otherwise the two differ by the order
// (the CPU's bf16 GEMM takes k in pairs, and AMX hardware its own way: docs/matrix.md).
//
// After each step the device prices it with tpu::estimate_step and reports it: see
// last_step_report, and the metrics report's Tpu* entries. A step the model cannot price
// (control flow, collectives) counts in TpuUnpricedSteps instead.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/matrix_unit.hpp"
#include "xlite/runtime/metrics.hpp"
#include "xlite/tpu/dataflow_product.hpp"
#include "xlite/tpu/matrix.hpp"
#include "xlite/tpu/memory_config.hpp"
#include "xlite/tpu/step_cost.hpp"
#include "xlite/tpu/systolic_array.hpp"

namespace xlite::tpu {

template <class T>
inline constexpr bool is_systolic_array_v = false;
template <std::int64_t Rows, std::int64_t Cols, dataflow_kind Dataflow, class In, class Acc>
inline constexpr bool is_systolic_array_v<systolic_array<Rows, Cols, Dataflow, In, Acc>> = true;

namespace detail {

// The last priced step of each tpu device, by ordinal. Never destroyed: a step still
// running on a device's worker at exit reports into it.
struct step_reports {
  std::mutex mutex;
  std::vector<std::optional<step_report>> by_device;
};
inline step_reports& last_reports() {
  static auto* const reports = new step_reports;
  return *reports;
}

inline void report_step(const step_report& r, const xlite::device& on) {
  static const metrics::metric cycles("TpuStepCycles", metrics::unit::count);
  static const metrics::metric time("TpuStepTime");
  static const metrics::metric utilization("TpuMxuUtilization", metrics::unit::fraction);
  static const metrics::metric gflops("TpuGflopPerSecond", metrics::unit::count);
  static const metrics::metric mfu("TpuMfu", metrics::unit::fraction);
  static const metrics::metric offchip("TpuOffChipBytes", metrics::unit::bytes);
  cycles.record(static_cast<double>(r.cycles));
  time.record(r.seconds * 1e9);
  utilization.record(r.mxu_utilization);
  gflops.record(r.flops_per_second / 1e9);
  mfu.record(r.mfu);
  offchip.record(static_cast<double>(r.offchip_bytes));
  step_reports& reports = last_reports();
  std::scoped_lock lock(reports.mutex);
  const auto slot = static_cast<std::size_t>(on.ordinal());
  if (reports.by_device.size() <= slot) reports.by_device.resize(slot + 1);
  reports.by_device[slot] = r;
}

template <class Array>
class array_unit final : public runtime::matrix_unit {
public:
  array_unit(const memory_config& memory, const vector_unit_config& vpu) : array_(memory), vpu_(vpu) {
    vpu_.validate();
  }

  void product(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k,
               std::int64_t n) const override {
    using Acc = typename Array::accumulator_type;
    const matrix<Acc> result =
        dataflow_product<Array::rows, typename Array::dataflow_type, typename Array::input_type, Acc>(
            matrix_view<float>(a, m, k), matrix_view<float>(b, k, n));
    std::transform(result.data(), result.data() + m * n, c, [](Acc x) { return static_cast<float>(x); });
  }

  // The step computed its results: a price the model cannot give (control flow,
  // collectives) leaves it unpriced, not failed.
  void account_step(const compile::executable& exe, const xlite::device& on) const override {
    try {
      report_step(estimate_step(exe, array_, vpu_), on);
    } catch (...) {
      metrics::increment("TpuUnpricedSteps");
    }
  }

private:
  Array array_;
  vector_unit_config vpu_;
};

} // namespace detail

// Gives this process a TPU core: a systolic array of type Array (tpu::systolic_array<...>)
// with `memory`, and the vector unit `vpu`. Afterwards "tpu:0" to "tpu:N-1" exist (N the cpu
// device count). Called again, it replaces the core for the steps launched from then on.
template <class Array>
void configure(const memory_config& memory = memory_config::unlimited(), const vector_unit_config& vpu = {}) {
  static_assert(is_systolic_array_v<Array>,
                "xlite: tpu::configure<Array> takes the array's type, a tpu::systolic_array<Rows, Cols, Dataflow>");
  runtime::install_matrix_unit(std::make_shared<const detail::array_unit<Array>>(memory, vpu));
}

// The price of the last step tpu device `d` ran (wait for it first: xlite::wait_device_ops).
inline step_report last_step_report(const xlite::device& d) {
  if (d.kind() != device_kind::tpu) {
    throw value_error(xlite::detail::message("tpu::last_step_report: ", d, " is not a tpu device"));
  }
  detail::step_reports& reports = detail::last_reports();
  std::scoped_lock lock(reports.mutex);
  const auto slot = static_cast<std::size_t>(d.ordinal());
  if (slot >= reports.by_device.size() || !reports.by_device[slot]) {
    throw value_error(xlite::detail::message("tpu::last_step_report: ", d, " has not run a priced step yet"));
  }
  return *reports.by_device[slot];
}

} // namespace xlite::tpu
