#pragma once

// A broadcast over every row of a row-major matrix x of rows x cols floats, on the shapes
// of the row reductions (row_reductions.hpp), the same work for every impl:
//
//   case          computes                                     bytes (read, written)
//   row_bias      y[r, c] = x[r, c] + b[c]                     4 rows cols + 4 rows cols
//   row_sigmoid   y[r, c] = 1 / (1 + exp(-(x[r, c] + b[c])))   4 rows cols + 4 rows cols
//   row_center    y[r, c] = x[r, c] - m[r]                     4 rows cols + 4 rows cols
//
// A layer's bias (and its activation) over a batch of short feature rows: where a row's end
// costs as much as its batches, so how a loop ends a row decides. row_center subtracts one
// value per row, as x - mean(x, {1}, true) does in a softmax or a normalisation: a leaf
// broadcast along the rows instead of across them. Each impl checks its result after the
// timed loop: the sums and differences exactly, the sigmoids within 1e-6 of a double
// computation (a few float ULPs).

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "bench_common.hpp"
#include "row_reductions.hpp"

namespace xlite::bench {

// The bias row of a shape: deterministic data of its own seed.
inline const aligned_floats& row_bias_input(row_shape s) {
  static std::map<std::int64_t, aligned_floats> made;
  auto found = made.find(s.cols);
  if (found == made.end()) found = made.emplace(s.cols, deterministic_floats(s.cols, 11)).first;
  return found->second;
}

// One value per row, subtracted by row_center: deterministic data of its own seed.
inline const aligned_floats& row_center_input(row_shape s) {
  static std::map<std::int64_t, aligned_floats> made;
  auto found = made.find(s.rows);
  if (found == made.end()) found = made.emplace(s.rows, deterministic_floats(s.rows, 12)).first;
  return found->second;
}

enum class row_broadcast { bias, sigmoid, center };

// The timed loop: evaluate() writes y, which the check then reads back.
template <class Evaluate>
void time_row_broadcast(benchmark::State& state, row_broadcast kind, const float* y, Evaluate&& evaluate) {
  const row_shape s = row_shape_arg(state);
  for (auto _ : state) {
    evaluate();
    benchmark::ClobberMemory();
  }
  report_bytes(state, 8 * s.rows * s.cols);
  const float* x = row_input(s, false).data();
  const float* b = row_bias_input(s).data();
  const float* m = row_center_input(s).data();
  for (std::int64_t i = 0; i < s.rows * s.cols; ++i) {
    const float sum = x[i] + b[i % s.cols]; // correctly rounded in every impl
    const double logistic = 1 / (1 + std::exp(-static_cast<double>(sum)));
    bool right = y[i] == sum;
    if (kind == row_broadcast::sigmoid) right = std::abs(static_cast<double>(y[i]) - logistic) <= 1e-6;
    if (kind == row_broadcast::center) right = y[i] == x[i] - m[i / s.cols];
    if (!right) return state.SkipWithError(("wrong element " + std::to_string(i)).c_str());
  }
}

} // namespace xlite::bench
