#pragma once

// The row reductions, over a row-major matrix x of rows x cols floats, the same work for
// every impl:
//
//   case        computes                                      bytes (read, written)
//   row_sum     out[r] = sum of x[r, c] over c                 4 rows cols + 4 rows
//   row_argmax  out[r] = the first c where x[r, c] is largest  4 rows cols + 8 rows
//   col_sum     out[c] = sum of x[r, c] over r                 4 rows cols + 4 cols
//
// From short rows, where what an output costs beyond its elements decides (a softmax's
// denominators, a classifier's argmax over its classes), to long ones, where the read
// bandwidth does. col_sum folds the same matrix down its columns (a bias's gradient, a
// batch's mean): few columns leave less than a SIMD batch across them. Rows are named
// "<case>/<impl>/rows:<r>/cols:<c>/threads:<t>". Each impl checks its result after the
// timed loop and fails the benchmark if it is wrong.

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench_common.hpp"

namespace xlite::bench {

struct row_shape {
  std::int64_t rows, cols;
};

inline const std::vector<row_shape> row_shapes = {{16384, 10}, {16384, 16}, {4096, 100}, {256, 4096}};
// col_sum's, and one slice out of every cache (64 MiB), whose columns are still exact sums.
inline const std::vector<row_shape> column_shapes = {{16384, 10}, {16384, 16}, {4096, 100}, {256, 4096}, {16384, 1024}};

inline row_shape row_shape_arg(const benchmark::State& state) { return {state.range(0), state.range(1)}; }
inline int row_threads_arg(const benchmark::State& state) { return static_cast<int>(state.range(2)); }

// Registers fn as "<case_name>/<impl>/rows:<r>/cols:<c>/threads:<t>" for every shape and t.
template <class Function>
benchmark::internal::Benchmark* register_rows(std::string_view case_name, std::string_view impl, Function fn,
                                              const std::vector<std::int64_t>& threads = thread_counts,
                                              const std::vector<row_shape>& shapes = row_shapes) {
  benchmark::internal::Benchmark* b = register_case(case_name, impl, fn)->ArgNames({"rows", "cols", "threads"});
  for (const row_shape& s : shapes) {
    for (const std::int64_t t : threads) b->Args({s.rows, s.cols, t});
  }
  return b->MinTime(0.2);
}

// The matrix of a case and shape, made once: deterministic data in [-1, 1), for the sums
// rounded to multiples of 2^-10 (in [-1, 1]), so that every partial sum of a row or a
// column (at most 16384 in magnitude: at most 2^24 units of 2^-10) is a float, and any order of summation
// gives the exact sum, which the checks demand; argmax's keep all 24 bits, so that ties at
// a maximum stay rare.
inline const aligned_floats& row_input(row_shape s, bool argmax) {
  static std::map<std::tuple<std::int64_t, std::int64_t, bool>, aligned_floats> made;
  const auto key = std::tuple(s.rows, s.cols, argmax);
  auto found = made.find(key);
  if (found == made.end()) {
    aligned_floats x = deterministic_floats(s.rows * s.cols, 7);
    if (!argmax) {
      for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = std::round(x.data()[i] * 0x1p10f) * 0x1p-10f;
    }
    found = made.emplace(key, std::move(x)).first;
  }
  return found->second;
}

// The timed loop: evaluate() computes all `outputs` results and returns where they are.
template <class Out, class Evaluate>
const Out* time_outputs(benchmark::State& state, std::int64_t outputs, Evaluate&& evaluate) {
  const row_shape s = row_shape_arg(state);
  const Out* out = nullptr;
  for (auto _ : state) {
    out = evaluate();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() *
                          (s.rows * s.cols * std::int64_t{sizeof(float)} + outputs * std::int64_t{sizeof(Out)}));
  return out;
}

// Times a row case; checks every row's result against the exact sum (a double loop) or the
// first maximum.
template <class Out, class Evaluate>
void time_rows(benchmark::State& state, Evaluate&& evaluate) {
  const row_shape s = row_shape_arg(state);
  const Out* out = time_outputs<Out>(state, s.rows, evaluate);
  const float* x = row_input(s, !std::is_same_v<Out, float>).data();
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const float* row = x + r * s.cols;
    if constexpr (std::is_same_v<Out, float>) {
      double sum = 0;
      for (std::int64_t c = 0; c < s.cols; ++c) sum += row[c];
      if (static_cast<double>(out[r]) != sum) {
        return state.SkipWithError(("wrong sum of row " + std::to_string(r)).c_str());
      }
    } else {
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < s.cols; ++c) best = row[c] > row[best] ? c : best;
      if (out[r] != best) return state.SkipWithError(("wrong argmax of row " + std::to_string(r)).c_str());
    }
  }
}

// Times col_sum; checks every column's sum against the exact one (a double loop).
template <class Evaluate>
void time_columns(benchmark::State& state, Evaluate&& evaluate) {
  const row_shape s = row_shape_arg(state);
  const float* out = time_outputs<float>(state, s.cols, evaluate);
  const float* x = row_input(s, false).data();
  for (std::int64_t c = 0; c < s.cols; ++c) {
    double sum = 0;
    for (std::int64_t r = 0; r < s.rows; ++r) sum += x[r * s.cols + c];
    if (static_cast<double>(out[c]) != sum) {
      return state.SkipWithError(("wrong sum of column " + std::to_string(c)).c_str());
    }
  }
}

} // namespace xlite::bench
