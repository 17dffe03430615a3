#pragma once

// A model of a TPU's matrix unit: a Rows x Cols grid of multiply-accumulate cells with the
// given dataflow, In products and Acc sums.
//
//   xlite::tpu::systolic_array<128, 128, xlite::tpu::dataflow::weight_stationary> mxu(
//       xlite::tpu::memory_config::unlimited());
//   auto [c, report] = mxu.gemm(a, b);                      // timing::pipelined
//   auto scalesim = mxu.cost({4096, 4096, 4096}, xlite::tpu::timing::scalesim);
//
// gemm() computes with the array's numerics at the speed of the CPU's GEMM kernels and
// prices the work with the analytic model; simulate() steps every cell (for tests and
// for looking inside). docs/tpu.md describes the model and its agreement with SCALE-Sim.

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "xlite/core/bfloat16.hpp"
#include "xlite/core/error.hpp"
#include "xlite/tpu/cost_model.hpp"
#include "xlite/tpu/cycle_simulation.hpp"
#include "xlite/tpu/dataflow.hpp"
#include "xlite/tpu/dataflow_product.hpp"
#include "xlite/tpu/matrix.hpp"
#include "xlite/tpu/memory_config.hpp"
#include "xlite/tpu/report.hpp"

namespace xlite::tpu {

template <std::int64_t Rows, std::int64_t Cols, dataflow_kind Dataflow, class In = bfloat16, class Acc = float>
class systolic_array {
  static_assert(Rows > 0 && Cols > 0, "xlite: a systolic array needs at least one row and one column");
  static_assert(std::same_as<Acc, float> || std::same_as<Acc, double>,
                "xlite: a systolic array accumulates in float or double");
  static_assert(std::numeric_limits<In>::is_specialized && !std::numeric_limits<In>::is_integer &&
                    std::numeric_limits<In>::digits <= std::numeric_limits<Acc>::digits &&
                    std::numeric_limits<In>::max_exponent <= std::numeric_limits<Acc>::max_exponent,
                "xlite: the array's input type must be a floating-point type that its accumulator type holds "
                "exactly (bfloat16, float16 or float into float; any of them or double into double)");

public:
  static constexpr std::int64_t rows = Rows;
  static constexpr std::int64_t cols = Cols;
  using dataflow_type = Dataflow;
  using input_type = In;
  using accumulator_type = Acc;

  explicit systolic_array(memory_config memory = memory_config::unlimited()) : memory_(memory) { memory_.validate(); }

  const memory_config& memory() const noexcept { return memory_; }

  // What a GEMM of this shape costs, without computing it.
  gemm_report cost(const gemm_shape& g, timing mode = timing::pipelined) const {
    return estimate<Rows, Cols, Dataflow>(g, mode, memory_, {sizeof(In), sizeof(Acc)});
  }

  // C = A B, A of shape (M, K) and B of shape (K, N), any contiguous row-major containers
  // (xlite::tensor, xt::xtensor, tpu::matrix); elements are rounded to In first.
  template <class MatrixA, class MatrixB>
  std::pair<matrix<Acc>, gemm_report> gemm(const MatrixA& a, const MatrixB& b, timing mode = timing::pipelined) const {
    const auto va = view_of(a);
    const auto vb = view_of(b);
    const gemm_shape g = checked_shape(va.rows, va.cols, vb.rows, vb.cols);
    return {detail::dataflow_product<Rows, Dataflow, In, Acc>(va, vb), cost(g, mode)};
  }

  // The same product with every cell stepped and every hazard checked, folds scheduled as
  // `mode` says: its cycles equal cost(shape, mode).compute_cycles and its result gemm()'s.
  // Rows x Cols work per cycle: for small shapes.
  template <class MatrixA, class MatrixB>
  simulation<Acc> simulate(const MatrixA& a, const MatrixB& b, timing mode = timing::pipelined) const {
    const auto va = view_of(a);
    const auto vb = view_of(b);
    checked_shape(va.rows, va.cols, vb.rows, vb.cols);
    return simulate_cells<Rows, Cols, Dataflow, In, Acc>(va, vb, mode);
  }

private:
  static gemm_shape checked_shape(std::int64_t m, std::int64_t k, std::int64_t k2, std::int64_t n) {
    if (k != k2) {
      throw shape_error(xlite::detail::message("tpu::gemm: A is (", m, ", ", k, ") and B is (", k2, ", ", n,
                                               "); B needs as many rows as A has columns"));
    }
    return {m, k, n};
  }

  memory_config memory_;
};

} // namespace xlite::tpu
