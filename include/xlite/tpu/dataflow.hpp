#pragma once

// How a systolic array maps a GEMM C(M, N) = A(M, K) B(K, N) onto its Rows x Cols cells,
// named as SCALE-Sim names them (docs/tpu.md):
//
//   dataflow            stays in the cells       on the rows   on the columns   streamed (T)
//   output_stationary   C's accumulators         M             N                K
//   weight_stationary   B ("weights")            K             N                M
//   input_stationary    A ("inputs")             K             M                N
//
// A GEMM larger than the array runs in folds: ceil(rows / Rows) x ceil(cols / Cols) tiles,
// each one pass of T operands through the array.

#include <concepts>
#include <cstdint>
#include <string_view>

namespace xlite::tpu {

namespace dataflow {
struct output_stationary {
  static constexpr std::string_view name = "output_stationary";
};
struct weight_stationary {
  static constexpr std::string_view name = "weight_stationary";
};
struct input_stationary {
  static constexpr std::string_view name = "input_stationary";
};
} // namespace dataflow

template <class D>
concept dataflow_kind = std::same_as<D, dataflow::output_stationary> || std::same_as<D, dataflow::weight_stationary> ||
    std::same_as<D, dataflow::input_stationary>;

// The GEMM's sizes.
struct gemm_shape {
  std::int64_t m = 0;
  std::int64_t k = 0;
  std::int64_t n = 0;
  std::int64_t macs() const noexcept { return m * k * n; }
};

// The GEMM as the array sees it: `rows` and `cols` of work spread over the cells, `steps`
// operands streamed through each fold.
struct spatial_mapping {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t steps = 0;
};

template <dataflow_kind D>
constexpr spatial_mapping map_gemm(const gemm_shape& g) noexcept {
  if constexpr (std::same_as<D, dataflow::output_stationary>) {
    return {g.m, g.n, g.k};
  } else if constexpr (std::same_as<D, dataflow::weight_stationary>) {
    return {g.k, g.n, g.m};
  } else {
    return {g.k, g.m, g.n};
  }
}

} // namespace xlite::tpu
