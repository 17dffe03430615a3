// Eigen's triad: a = b + s * c over Eigen::Map views of the same buffers, with noalias()
// so Eigen writes straight into a. Eigen does not parallelise coefficient-wise
// expressions (Eigen::setNbThreads reaches its matrix products only), so the triad runs on
// one thread only.
//
// The expression cases: coefficient-wise expressions over Eigen::Map<ArrayXf> views of the
// same buffers. An array assignment is already one pass with no temporary (noalias() is a
// matrix-product matter, and ArrayBase has none). With two threads, each one maps and
// assigns its half of the range (the label says so).

#include <Eigen/Core>
#include <Eigen/Dense>

#include <cstdint>
#include <vector>

#include "bench_common.hpp"
#include "expressions.hpp"
#include "gemm.hpp"
#include "row_broadcasts.hpp"
#include "row_reductions.hpp"
#include "triad.hpp"

namespace {

using namespace xlite::bench;

using aligned_vector = Eigen::Map<Eigen::VectorXf, Eigen::Aligned64>;
using const_aligned_vector = Eigen::Map<const Eigen::VectorXf, Eigen::Aligned64>;
static_assert(aligned_floats::alignment == 64, "the maps promise Eigen 64-byte alignment");

void run_triad_eigen(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  triad_operands triad(n);
  aligned_vector a(triad.a.data(), n);
  const const_aligned_vector b(triad.b.data(), n);
  const const_aligned_vector c(triad.c.data(), n);
  for (auto _ : state) {
    a.noalias() = b + triad_operands::s * c;
    benchmark::ClobberMemory();
  }
  report_bytes(state, triad_bytes(n));
}

// The elements [begin, end) of a buffer as an Eigen array. Parts start on thread_team's
// 4 KiB boundaries, so the maps keep the 64-byte alignment.
Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> part(aligned_floats& buffer, std::int64_t begin, std::int64_t end) {
  return {buffer.data() + begin, end - begin};
}
Eigen::Map<const Eigen::ArrayXf, Eigen::Aligned64> part(const aligned_floats& buffer, std::int64_t begin,
                                                        std::int64_t end) {
  return {buffer.data() + begin, end - begin};
}
static_assert(thread_team::part_alignment * sizeof(float) % aligned_floats::alignment == 0);

constexpr float a = expression_inputs::a;
constexpr float b = expression_inputs::b;
constexpr float c = expression_inputs::c;

struct eigen_kernels {
  static void e1(expression_operands& o, std::int64_t begin, std::int64_t end) {
    part(o.z, begin, end) = a * part(o.x, begin, end) + part(o.y, begin, end);
  }
  static void e2(expression_operands& o, std::int64_t begin, std::int64_t end) {
    part(o.z, begin, end) = a * part(o.x, begin, end) + b * part(o.y, begin, end) - c * part(o.w, begin, end);
  }
  static void e3(expression_operands& o, std::int64_t begin, std::int64_t end) {
    const auto x = part(o.x, begin, end);
    part(o.z, begin, end) = (-x * x).exp() * part(o.y, begin, end) + part(o.w, begin, end).tanh();
  }
  static void e4(expression_operands& o, std::int64_t begin, std::int64_t end) {
    part(o.z, begin, end) = (part(o.x, begin, end) * part(o.y, begin, end) + part(o.w, begin, end)).max(0.0f);
  }
  static float sum_xy(const expression_operands& o, std::int64_t begin, std::int64_t end) {
    return (part(o.x, begin, end) * part(o.y, begin, end)).sum();
  }
};

// argmax_xy as (x * y).maxCoeff(&index), one pass; on one thread, as Eigen runs it.
void run_argmax_eigen(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  const expression_inputs& in = expression_inputs::of_size(n);
  const auto x = part(in.x, 0, n);
  const auto y = part(in.y, 0, n);
  time_argmax(state, [&] {
    Eigen::Index index = 0;
    (x * y).maxCoeff(&index);
    return static_cast<std::int64_t>(index);
  });
}

// row_sum as rowwise().sum() of a row-major map, written into a map of the outputs;
// row_argmax as maxCoeff(&index) of each row (Eigen has no rowwise argmax). One thread.
template <bool Argmax>
void run_rows_eigen(benchmark::State& state) {
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const row_shape s = row_shape_arg(state);
  const Eigen::Map<const matrix> x(row_input(s, Argmax).data(), s.rows, s.cols);
  if constexpr (Argmax) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(s.rows));
    time_rows<std::int64_t>(state, [&] {
      for (Eigen::Index r = 0; r < s.rows; ++r) {
        Eigen::Index index = 0;
        x.row(r).maxCoeff(&index);
        out[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(index);
      }
      return out.data();
    });
  } else {
    aligned_floats out(s.rows);
    Eigen::Map<Eigen::VectorXf> sums(out.data(), s.rows);
    time_rows<float>(state, [&] {
      sums.noalias() = x.rowwise().sum();
      return out.data();
    });
  }
}

// col_sum as colwise().sum() of the row-major map, into a map of the outputs. One thread.
void run_columns_eigen(benchmark::State& state) {
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const row_shape s = row_shape_arg(state);
  const Eigen::Map<const matrix> x(row_input(s, false).data(), s.rows, s.cols);
  aligned_floats out(s.cols);
  Eigen::Map<Eigen::RowVectorXf> sums(out.data(), s.cols);
  time_columns(state, [&] {
    sums.noalias() = x.colwise().sum();
    return out.data();
  });
}

// row_bias as x.rowwise() + b, row_sigmoid as its logistic in array form (Eigen has no
// sigmoid) and row_center as x.colwise() - m, into a map of y. One thread.
template <row_broadcast Case>
void run_row_broadcast_eigen(benchmark::State& state) {
  using matrix = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using row = Eigen::Array<float, 1, Eigen::Dynamic>;
  using column = Eigen::Array<float, Eigen::Dynamic, 1>;
  const row_shape s = row_shape_arg(state);
  const Eigen::Map<const matrix> x(row_input(s, false).data(), s.rows, s.cols);
  const Eigen::Map<const row> b(row_bias_input(s).data(), s.cols);
  const Eigen::Map<const column> m(row_center_input(s).data(), s.rows);
  aligned_floats out(s.rows * s.cols);
  Eigen::Map<matrix> y(out.data(), s.rows, s.cols);
  time_row_broadcast(state, Case, out.data(), [&] {
    if constexpr (Case == row_broadcast::bias) y = x.rowwise() + b;
    if constexpr (Case == row_broadcast::sigmoid) y = ((-(x.rowwise() + b)).exp() + 1.0f).inverse();
    if constexpr (Case == row_broadcast::center) y = x.colwise() - m;
  });
}

// sgemm as a product of row-major Eigen::Map matrices with noalias(). Eigen parallelises
// products only when built with OpenMP, which this peer is not: one thread.
void run_sgemm_eigen(benchmark::State& state) {
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const gemm_shape s = gemm_shape_arg(state);
  gemm_operands g(s);
  const Eigen::Map<const matrix> a(g.a.data(), s.m, s.k);
  const Eigen::Map<const matrix> b(g.b.data(), s.k, s.n);
  Eigen::Map<matrix> c(g.c.data(), s.m, s.n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::ClobberMemory();
  }
  report_flops(state, gemm_flops(s));
  check_gemm(state, g, g.c.data(), as_is, 2e-6 * static_cast<double>(s.k));
}

} // namespace

void xlite::bench::register_eigen() {
  register_gemm("sgemm", "eigen", run_sgemm_eigen, {1});
  register_sized("triad", "eigen", run_triad_eigen, triad_sizes, {1});
  register_split_expressions<eigen_kernels>("eigen");
  register_sized("argmax_xy", "eigen", run_argmax_eigen, expression_sizes, {1})->MinTime(expression_min_time);
  register_rows("row_sum", "eigen", run_rows_eigen<false>, {1});
  register_rows("row_argmax", "eigen", run_rows_eigen<true>, {1});
  register_rows("col_sum", "eigen", run_columns_eigen, {1}, column_shapes);
  register_rows("row_bias", "eigen", run_row_broadcast_eigen<row_broadcast::bias>, {1});
  register_rows("row_sigmoid", "eigen", run_row_broadcast_eigen<row_broadcast::sigmoid>, {1});
  register_rows("row_center", "eigen", run_row_broadcast_eigen<row_broadcast::center>, {1});
}
