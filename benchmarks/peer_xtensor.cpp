// xtensor's expression cases in xtensor's fastest forms: built with XTENSOR_USE_XSIMD (CMake
// defines it for every file of the program that includes xtensor: this one and
// paired_expressions.cpp), 1-D adaptors over the shared buffers (xt::adapt, no copy), and
// xt::noalias(z) = ..., one SIMD pass; a plain z = ... evaluates into a temporary first and
// runs at a fraction of the rate (half in cache, a sixth from DRAM, measured while writing
// this). The sum is xt::sum(x * y)(), the lazy reduction of the lazy product: xtensor 0.24's
// reducers have no SIMD path, so it is a scalar loop, and evaluation_strategy::immediate or
// an explicit axis is slower still. xtensor runs on one thread unless built with TBB or
// OpenMP, which Debian's is not, so with two threads each one adapts and assigns its half of
// the range.

#ifndef XTENSOR_USE_XSIMD
#error "peer_xtensor.cpp is xtensor at its best, with xsimd: compile it with -DXTENSOR_USE_XSIMD"
#endif

// g++ 12's -Warray-bounds flags svector::insert inside xt::argmax, where it checks whether
// the inserted value lives in the vector, on the column-major branch, which a row-major
// argmax never takes. It reports it at xtensor's own line, which only a pragma before the
// headers covers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif

#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xsort.hpp>
#include <xtensor/xtensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench_common.hpp"
#include "expressions.hpp"
#include "row_broadcasts.hpp"
#include "row_reductions.hpp"

namespace {

using namespace xlite::bench;

// The elements [begin, end) of a buffer as a 1-D xtensor, without copying.
template <class T>
auto part(T* data, std::int64_t begin, std::int64_t end) {
  const auto size = static_cast<std::size_t>(end - begin);
  return xt::adapt(data + begin, size, xt::no_ownership(), std::array<std::size_t, 1>{size});
}

constexpr float a = expression_inputs::a;
constexpr float b = expression_inputs::b;
constexpr float c = expression_inputs::c;

struct xtensor_kernels {
  static void e1(expression_operands& o, std::int64_t begin, std::int64_t end) {
    auto z = part(o.z.data(), begin, end);
    const auto x = part(o.x.data(), begin, end);
    const auto y = part(o.y.data(), begin, end);
    xt::noalias(z) = a * x + y;
  }
  static void e2(expression_operands& o, std::int64_t begin, std::int64_t end) {
    auto z = part(o.z.data(), begin, end);
    const auto x = part(o.x.data(), begin, end);
    const auto y = part(o.y.data(), begin, end);
    const auto w = part(o.w.data(), begin, end);
    xt::noalias(z) = a * x + b * y - c * w;
  }
  static void e3(expression_operands& o, std::int64_t begin, std::int64_t end) {
    auto z = part(o.z.data(), begin, end);
    const auto x = part(o.x.data(), begin, end);
    const auto y = part(o.y.data(), begin, end);
    const auto w = part(o.w.data(), begin, end);
    xt::noalias(z) = xt::exp(-x * x) * y + xt::tanh(w);
  }
  static void e4(expression_operands& o, std::int64_t begin, std::int64_t end) {
    auto z = part(o.z.data(), begin, end);
    const auto x = part(o.x.data(), begin, end);
    const auto y = part(o.y.data(), begin, end);
    const auto w = part(o.w.data(), begin, end);
    xt::noalias(z) = xt::maximum(x * y + w, 0.0f);
  }
  static float sum_xy(const expression_operands& o, std::int64_t begin, std::int64_t end) {
    const auto x = part(o.x.data(), begin, end);
    const auto y = part(o.y.data(), begin, end);
    return xt::sum(x * y)();
  }
};

// row_sum as xt::noalias(out) = xt::sum(x, {1}) and row_argmax as xt::argmax(x, 1), over
// a 2-D adaptor of the shared matrix, into adaptors of the outputs. One thread.
template <bool Argmax>
void run_rows_xtensor(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  const auto rows = static_cast<std::size_t>(s.rows);
  const auto x = xt::adapt(row_input(s, Argmax).data(), rows * static_cast<std::size_t>(s.cols), xt::no_ownership(),
                           std::array<std::size_t, 2>{rows, static_cast<std::size_t>(s.cols)});
  if constexpr (Argmax) {
    std::vector<std::int64_t> buffer(rows);
    auto out = xt::adapt(buffer.data(), rows, xt::no_ownership(), std::array<std::size_t, 1>{rows});
    time_rows<std::int64_t>(state, [&] {
      xt::noalias(out) = xt::argmax(x, 1);
      return buffer.data();
    });
  } else {
    aligned_floats buffer(s.rows);
    auto out = xt::adapt(buffer.data(), rows, xt::no_ownership(), std::array<std::size_t, 1>{rows});
    time_rows<float>(state, [&] {
      xt::noalias(out) = xt::sum(x, {1});
      return buffer.data();
    });
  }
}

// col_sum as xt::noalias(out) = xt::sum(x, {0}), over adaptors. One thread.
void run_columns_xtensor(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  const auto rows = static_cast<std::size_t>(s.rows);
  const auto cols = static_cast<std::size_t>(s.cols);
  const auto x =
      xt::adapt(row_input(s, false).data(), rows * cols, xt::no_ownership(), std::array<std::size_t, 2>{rows, cols});
  aligned_floats buffer(s.cols);
  auto out = xt::adapt(buffer.data(), cols, xt::no_ownership(), std::array<std::size_t, 1>{cols});
  time_columns(state, [&] {
    xt::noalias(out) = xt::sum(x, {0});
    return buffer.data();
  });
}

// row_bias as xt::noalias(y) = x + b, row_sigmoid as 1 / (1 + exp(-(x + b))) (xtensor has
// no sigmoid) and row_center as xt::noalias(y) = x - m, over adaptors. One thread.
template <row_broadcast Case>
void run_row_broadcast_xtensor(benchmark::State& state) {
  const row_shape s = row_shape_arg(state);
  const auto rows = static_cast<std::size_t>(s.rows), cols = static_cast<std::size_t>(s.cols);
  const auto x =
      xt::adapt(row_input(s, false).data(), rows * cols, xt::no_ownership(), std::array<std::size_t, 2>{rows, cols});
  const auto b = xt::adapt(row_bias_input(s).data(), cols, xt::no_ownership(), std::array<std::size_t, 1>{cols});
  const auto m = xt::adapt(row_center_input(s).data(), rows, xt::no_ownership(), std::array<std::size_t, 2>{rows, 1});
  aligned_floats buffer(s.rows * s.cols);
  auto y = xt::adapt(buffer.data(), rows * cols, xt::no_ownership(), std::array<std::size_t, 2>{rows, cols});
  time_row_broadcast(state, Case, buffer.data(), [&] {
    if constexpr (Case == row_broadcast::bias) xt::noalias(y) = x + b;
    if constexpr (Case == row_broadcast::sigmoid) xt::noalias(y) = 1.0f / (1.0f + xt::exp(-(x + b)));
    if constexpr (Case == row_broadcast::center) xt::noalias(y) = x - m;
  });
}

} // namespace

void xlite::bench::register_xtensor() {
  register_split_expressions<xtensor_kernels>("xtensor");
  register_rows("row_sum", "xtensor", run_rows_xtensor<false>, {1});
  register_rows("row_argmax", "xtensor", run_rows_xtensor<true>, {1});
  register_rows("col_sum", "xtensor", run_columns_xtensor, {1}, column_shapes);
  register_rows("row_bias", "xtensor", run_row_broadcast_xtensor<row_broadcast::bias>, {1});
  register_rows("row_sigmoid", "xtensor", run_row_broadcast_xtensor<row_broadcast::sigmoid>, {1});
  register_rows("row_center", "xtensor", run_row_broadcast_xtensor<row_broadcast::center>, {1});
}
