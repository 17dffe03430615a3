// xlite's expression cases, written as a user writes them: xlite::tensor<float> operands,
// `z = <expression>;` into an existing tensor of the same shape (evaluated in place, one
// fused pass), xlite::sum(x * y) and xlite::argmax(x * y) for the reductions, and a thread pool of the row's thread
// count installed with scoped_thread_pool. The benchmark fails if an assignment replaces
// z's storage: that would mean a temporary in the timed loop.

#include <algorithm>
#include <cstdint>

#include "bench_common.hpp"
#include "expressions.hpp"
#include "row_broadcasts.hpp"
#include "row_reductions.hpp"
#include "xlite/expr.hpp"
#include "xlite_cases.hpp"

namespace {

using namespace xlite::bench;

// A copy of one of the shared inputs as a tensor of shape s, by default 1-D.
xlite::tensor<float> tensor_of(const aligned_floats& values, const xlite::shape& s) {
  xlite::tensor<float> t(xlite::tensor<float>::uninitialized, s);
  std::copy_n(values.data(), t.size(), t.data());
  return t;
}
xlite::tensor<float> tensor_of(const aligned_floats& values) { return tensor_of(values, xlite::shape{values.size()}); }

void run_expression_xlite(benchmark::State& state, const expression_case& c) {
  using in = expression_inputs;
  const std::int64_t n = size_arg(state);
  const in& inputs = in::of_size(n);
  const xlite::tensor<float> x = tensor_of(inputs.x);
  const xlite::tensor<float> y = tensor_of(inputs.y);
  const xlite::tensor<float> w = tensor_of(inputs.w);
  xlite::tensor<float> z(xlite::shape{n});
  xlite::thread_pool pool(static_cast<std::size_t>(threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  const float* const storage = z.data();
  const auto evaluate = [&] { return evaluate_xlite_case(c.which, x, y, w, [&](const auto& e) { z = e; }); };
  if (c.which == expression::sum_xy) return check_sum(state, time_sum(state, c, evaluate), n);
  time_elementwise(state, c, evaluate);
  if (z.data() != storage) return state.SkipWithError("the assignment replaced z's storage: a temporary");
  check_elements(state, c.which, z.data(), n);
}

void run_argmax_xlite(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  const xlite::tensor<float> x = tensor_of(expression_inputs::of_size(n).x);
  const xlite::tensor<float> y = tensor_of(expression_inputs::of_size(n).y);
  xlite::thread_pool pool(static_cast<std::size_t>(threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  time_argmax(state, [&] { return xlite::argmax(x * y)(); });
}

// row_sum and row_argmax as xlite::sum(x, {1}) and xlite::argmax(x, {1}), each into the
// new tensor a reduction returns, as a user writes them.
template <bool Argmax>
void run_rows_xlite(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  const xlite::tensor<float> x = tensor_of(row_input(s, Argmax), xlite::shape{s.rows, s.cols});
  xlite::thread_pool pool(static_cast<std::size_t>(row_threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  if constexpr (Argmax) {
    xlite::tensor<std::int64_t> out;
    time_rows<std::int64_t>(state, [&] {
      out = xlite::argmax(x, {1});
      return out.data();
    });
  } else {
    xlite::tensor<float> out;
    time_rows<float>(state, [&] {
      out = xlite::sum(x, {1});
      return out.data();
    });
  }
}

// col_sum as xlite::sum(x, {0}), into the new tensor it returns.
void run_columns_xlite(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  const xlite::tensor<float> x = tensor_of(row_input(s, false), xlite::shape{s.rows, s.cols});
  xlite::thread_pool pool(static_cast<std::size_t>(row_threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  xlite::tensor<float> out;
  time_columns(state, [&] {
    out = xlite::sum(x, {0});
    return out.data();
  });
}

// row_bias, row_sigmoid and row_center as y = x + b, y = xlite::sigmoid(x + b) and
// y = x - m, into an existing y.
template <row_broadcast Case>
void run_row_broadcast_xlite(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  const xlite::tensor<float> x = tensor_of(row_input(s, false), xlite::shape{s.rows, s.cols});
  const xlite::tensor<float> b = tensor_of(row_bias_input(s), xlite::shape{s.cols});
  const xlite::tensor<float> m = tensor_of(row_center_input(s), xlite::shape{s.rows, 1});
  xlite::tensor<float> y(xlite::tensor<float>::uninitialized, xlite::shape{s.rows, s.cols});
  xlite::thread_pool pool(static_cast<std::size_t>(row_threads_arg(state)));
  xlite::scoped_thread_pool use(pool);
  time_row_broadcast(state, Case, y.data(), [&] {
    if constexpr (Case == row_broadcast::bias) y = x + b;
    if constexpr (Case == row_broadcast::sigmoid) y = xlite::sigmoid(x + b);
    if constexpr (Case == row_broadcast::center) y = x - m;
  });
}

} // namespace

void xlite::bench::register_xlite_expressions() {
  register_expressions("xlite", run_expression_xlite);
  register_sized("argmax_xy", "xlite", run_argmax_xlite, expression_sizes)->MinTime(expression_min_time);
  register_rows("row_sum", "xlite", run_rows_xlite<false>);
  register_rows("row_argmax", "xlite", run_rows_xlite<true>);
  register_rows("col_sum", "xlite", run_columns_xlite, thread_counts, column_shapes);
  register_rows("row_bias", "xlite", run_row_broadcast_xlite<row_broadcast::bias>);
  register_rows("row_sigmoid", "xlite", run_row_broadcast_xlite<row_broadcast::sigmoid>);
  register_rows("row_center", "xlite", run_row_broadcast_xlite<row_broadcast::center>);
}
