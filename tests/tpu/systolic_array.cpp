// The systolic array's results and its cell-by-cell simulation (tpu/systolic_array.hpp):
// in both timings the simulation's cycles equal the analytic model's and its bits equal
// gemm()'s on every ISA path; pipelined folds are as close as they can be; and results are
// within the accumulation order's error bound of a float64 product.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "xlite/core/cpu_features.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/tpu/systolic_array.hpp"

namespace {

using namespace xlite::tpu;

template <class T>
matrix<T> random_matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  matrix<T> m(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) m.data()[i] = static_cast<T>(normal(rng));
  return m;
}

template <class T>
bool same_bits(const matrix<T>& x, const matrix<T>& y) {
  return x.shape() == y.shape() &&
         std::memcmp(x.data(), y.data(), static_cast<std::size_t>(x.rows() * x.cols()) * sizeof(T)) == 0;
}

// Every ISA the machine has, and the portable path.
std::vector<xlite::isa> isa_paths() {
  std::vector<xlite::isa> paths{xlite::isa::portable};
  if (xlite::detected_isa() >= xlite::isa::avx2) paths.push_back(xlite::isa::avx2);
  if (xlite::detected_isa() >= xlite::isa::avx512) paths.push_back(xlite::isa::avx512);
  return paths;
}

// Random shapes on one array: the simulation against the model and against gemm().
template <std::int64_t R, std::int64_t C, class D, class In = xlite::bfloat16, class Acc = float>
void check_simulation_against_model(std::mt19937& rng, int cases) {
  const systolic_array<R, C, D, In, Acc> array;
  std::uniform_int_distribution<std::int64_t> size(1, 3 * std::max(R, C) + 2);
  for (int c = 0; c < cases; ++c) {
    const std::int64_t m = size(rng), k = size(rng), n = size(rng);
    INFO(R << "x" << C << " " << D::name << ": M=" << m << " K=" << k << " N=" << n);
    const matrix<float> a = random_matrix<float>(m, k, rng), b = random_matrix<float>(k, n, rng);
    for (const timing mode : {timing::scalesim, timing::pipelined}) {
      INFO("timing " << name(mode));
      const simulation<Acc> sim = array.simulate(a, b, mode);
      const gemm_report model = array.cost({m, k, n}, mode);
      CHECK(sim.cycles == model.compute_cycles);
      CHECK(sim.folds == model.row_folds * model.col_folds);
      CHECK(sim.macs == m * k * n);
      for (const xlite::isa path : isa_paths()) {
        const xlite::scoped_max_isa cap(path);
        INFO("ISA " << xlite::name(path));
        const auto [out, report] = array.gemm(a, b, mode);
        CHECK(same_bits(out, sim.out));
        CHECK(report.compute_cycles == model.compute_cycles);
        if constexpr (!std::is_same_v<Acc, float>) break; // one path: std::fma in double
      }
    }
  }
}

// Pipelined folds scheduled one cycle closer than the cost model's max(T, Rows) collide
// somewhere in the array: the model's gap is the shortest that works.
template <std::int64_t R, std::int64_t C, class D>
void check_gap_is_tight(const gemm_shape& g) {
  INFO(R << "x" << C << " " << D::name << ": M=" << g.m << " K=" << g.k << " N=" << g.n);
  const std::vector<float> a(static_cast<std::size_t>(g.m * g.k), 1.0f), b(static_cast<std::size_t>(g.k * g.n), 1.0f);
  const std::int64_t gap = std::max(map_gemm<D>(g).steps, R);
  const simulation<float> fits = detail::simulate_cells<R, C, D>(a, b, g, timing::pipelined, gap);
  CHECK(fits.cycles == estimate<R, C, D>(g, timing::pipelined, memory_config::unlimited()).compute_cycles);
  REQUIRE(fits.folds > 1);
  std::string hazard = "none";
  try {
    detail::simulate_cells<R, C, D>(a, b, g, timing::pipelined, gap - 1);
  } catch (const std::logic_error& e) {
    hazard = e.what();
  }
  CHECK_THAT(hazard, Catch::Contains("systolic array simulation:"));
  CHECK_THAT(hazard, !Catch::Contains("does not finish"));
}

} // namespace

TEST_CASE("tpu systolic array: the cell-by-cell simulation has the model's cycles and gemm's bits") {
  std::mt19937 rng(20261125);
  using os = dataflow::output_stationary;
  using ws = dataflow::weight_stationary;
  using is = dataflow::input_stationary;
  SECTION("output stationary") {
    check_simulation_against_model<4, 4, os>(rng, 12);
    check_simulation_against_model<8, 32, os>(rng, 4);
    check_simulation_against_model<5, 2, os>(rng, 8);
    check_simulation_against_model<1, 1, os>(rng, 4);
  }
  SECTION("weight stationary") {
    check_simulation_against_model<4, 4, ws>(rng, 12);
    check_simulation_against_model<8, 32, ws>(rng, 4);
    check_simulation_against_model<3, 7, ws>(rng, 8);
    check_simulation_against_model<1, 1, ws>(rng, 4);
  }
  SECTION("input stationary") {
    check_simulation_against_model<4, 4, is>(rng, 12);
    check_simulation_against_model<32, 8, is>(rng, 4);
    check_simulation_against_model<2, 5, is>(rng, 8);
    check_simulation_against_model<1, 1, is>(rng, 4);
  }
  SECTION("float inputs, double sums") {
    check_simulation_against_model<4, 4, os, float, double>(rng, 4);
    check_simulation_against_model<4, 4, ws, float, double>(rng, 4);
  }
}

TEST_CASE("tpu systolic array: pipelined folds cannot come closer than max(T, Rows)") {
  using os = dataflow::output_stationary;
  using ws = dataflow::weight_stationary;
  using is = dataflow::input_stationary;
  // T longer than the array: the operand streams would overlap.
  check_gap_is_tight<4, 4, os>({9, 7, 6});
  check_gap_is_tight<4, 4, ws>({9, 7, 6});
  check_gap_is_tight<4, 4, is>({6, 7, 9});
  // T shorter: a sum would be parked over an undrained one (output-stationary), or the
  // next fold's weights would overwrite ones not yet used.
  check_gap_is_tight<4, 4, os>({9, 2, 6});
  check_gap_is_tight<4, 4, ws>({2, 9, 6});
  check_gap_is_tight<4, 4, is>({9, 9, 2});
  check_gap_is_tight<8, 3, ws>({3, 20, 4});
}

TEST_CASE("tpu systolic array: gemm() sums in the documented order on every path, threaded and k-blocked") {
  // Large enough that kernels::gemm splits K into blocks and the work over 2 threads; the
  // reference is the order written out as scalar loops, independent of the kernels.
  std::mt19937 rng(3);
  const std::int64_t m = 70, k = 600, n = 300, rows = 128;
  const matrix<float> a = random_matrix<float>(m, k, rng), b = random_matrix<float>(k, n, rng);
  const auto cell = [](float x) { return static_cast<float>(xlite::bfloat16(x)); };
  matrix<float> chained(m, n), folded(m, n);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f, sum = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) acc = std::fma(cell(a(i, p)), cell(b(p, j)), acc);
      for (std::int64_t k0 = 0; k0 < k; k0 += rows) {
        float partial = 0.0f;
        for (std::int64_t p = k0; p < std::min(k, k0 + rows); ++p)
          partial = std::fma(cell(a(i, p)), cell(b(p, j)), partial);
        sum = k0 == 0 ? partial : sum + partial;
      }
      chained(i, j) = acc;
      folded(i, j) = sum;
    }
  }
  xlite::thread_pool pool(2);
  const xlite::scoped_thread_pool use(pool);
  for (const xlite::isa path : isa_paths()) {
    const xlite::scoped_max_isa cap(path);
    INFO("ISA " << xlite::name(path));
    CHECK(same_bits(systolic_array<128, 128, dataflow::output_stationary>().gemm(a, b).first, chained));
    CHECK(same_bits(systolic_array<128, 64, dataflow::weight_stationary>().gemm(a, b).first, folded));
    CHECK(same_bits(systolic_array<128, 32, dataflow::input_stationary>().gemm(a, b).first, folded));
  }
}

TEST_CASE("tpu systolic array: NaN and infinities reach the result in gemm() and in the cells") {
  matrix<float> a(2, 3), b(3, 2);
  const float in[] = {1, std::numeric_limits<float>::quiet_NaN(), 2, std::numeric_limits<float>::infinity(), 1, 1};
  for (int i = 0; i < 6; ++i) a.data()[i] = in[i];
  for (int i = 0; i < 6; ++i) b.data()[i] = 1.0f;
  b(2, 1) = -std::numeric_limits<float>::infinity();
  const auto check = [&](const matrix<float>& c) {
    CHECK(std::isnan(c(0, 0)));
    CHECK(std::isnan(c(0, 1)));
    CHECK(c(1, 0) == std::numeric_limits<float>::infinity());
    CHECK(std::isnan(c(1, 1))); // inf - inf
  };
  check(systolic_array<2, 2, dataflow::output_stationary>().gemm(a, b).first);
  check(systolic_array<2, 2, dataflow::weight_stationary>().gemm(a, b).first);
  check(systolic_array<2, 2, dataflow::input_stationary>().gemm(a, b).first);
  check(systolic_array<2, 2, dataflow::output_stationary>().simulate(a, b).out);
  check(systolic_array<2, 2, dataflow::weight_stationary>().simulate(a, b).out);
  check(systolic_array<2, 2, dataflow::input_stationary>().simulate(a, b).out);
}

TEST_CASE("tpu systolic array: results are bf16 products summed in fp32, within the order's error bound") {
  std::mt19937 rng(7);
  const systolic_array<16, 16, dataflow::weight_stationary> ws;
  const systolic_array<16, 16, dataflow::output_stationary> os;
  for (const std::int64_t k : {1, 15, 16, 17, 100, 333}) {
    const std::int64_t m = 23, n = 37;
    const matrix<float> a = random_matrix<float>(m, k, rng), b = random_matrix<float>(k, n, rng);
    const auto [w, wr] = ws.gemm(a, b);
    const auto [o, orep] = os.gemm(a, b);
    // gamma(k) bounds any order of k fp32 additions of exact products (bf16 x bf16 fits fp32).
    const double u = std::ldexp(1.0, -24), gamma = k * u / (1 - k * u);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double exact = 0, magnitude = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double x = static_cast<float>(xlite::bfloat16(a(i, p)));
          const double y = static_cast<float>(xlite::bfloat16(b(p, j)));
          exact += x * y;
          magnitude += std::abs(x * y);
        }
        INFO("K=" << k << " C(" << i << ", " << j << ")");
        CHECK(std::abs(w(i, j) - exact) <= gamma * magnitude);
        CHECK(std::abs(o(i, j) - exact) <= gamma * magnitude);
      }
    }
    CHECK(wr.macs == m * k * n);
    CHECK(orep.macs == m * k * n);
  }
}

TEST_CASE("tpu systolic array: the first row fold writes, later folds add, from +0") {
  // K = 4 on 2 rows is two row folds. Products 1, 0, 2^-24, 2^-24 (exact: bf16 squares).
  // Weight- and input-stationary sum (1 + 0) + (2^-24 + 2^-24) = 1 + 2^-23; output-
  // stationary adds them one by one, and 1 + 2^-24 rounds back to 1 twice.
  const float e = std::ldexp(1.0f, -12);
  matrix<float> a(1, 4), b(4, 1);
  const float av[] = {1.0f, 0.0f, e, e};
  const float bv[] = {1.0f, 1.0f, e, e};
  for (int p = 0; p < 4; ++p) {
    a(0, p) = av[p];
    b(p, 0) = bv[p];
  }
  const float folded = 1.0f + std::ldexp(1.0f, -23);
  CHECK(systolic_array<2, 2, dataflow::weight_stationary>().gemm(a, b).first(0, 0) == folded);
  CHECK(systolic_array<2, 2, dataflow::input_stationary>().gemm(a, b).first(0, 0) == folded);
  CHECK(systolic_array<2, 2, dataflow::output_stationary>().gemm(a, b).first(0, 0) == 1.0f);
  // With 4 rows it is one fold, summed in order like output-stationary.
  CHECK(systolic_array<4, 2, dataflow::weight_stationary>().gemm(a, b).first(0, 0) == 1.0f);
  // A product of -0 into a partial sum that enters as +0 gives +0, in gemm and in the cells.
  matrix<float> z(1, 1), w(1, 1);
  z(0, 0) = -0.0f;
  w(0, 0) = 1.0f;
  CHECK(!std::signbit(systolic_array<2, 2, dataflow::weight_stationary>().gemm(z, w).first(0, 0)));
  CHECK(!std::signbit(systolic_array<2, 2, dataflow::weight_stationary>().simulate(z, w).out(0, 0)));
  CHECK(!std::signbit(systolic_array<2, 2, dataflow::output_stationary>().gemm(z, w).first(0, 0)));
  CHECK(!std::signbit(systolic_array<2, 2, dataflow::output_stationary>().simulate(z, w).out(0, 0)));
}

TEST_CASE("tpu systolic array: operands come from xlite and xtensor containers; bad ones are errors") {
  const xlite::tensor<xlite::bfloat16> a{{1, 2, 3}, {4, 5, 6}};
  const xlite::tensor<xlite::bfloat16> b{{1, 0}, {0, 1}, {1, 1}};
  const systolic_array<4, 4, dataflow::output_stationary> array;
  const auto [c, report] = array.gemm(a, b);
  CHECK(c.shape() == std::array<std::int64_t, 2>{2, 2});
  CHECK(c(0, 0) == 4);
  CHECK(c(0, 1) == 5);
  CHECK(c(1, 0) == 10);
  CHECK(c(1, 1) == 11);
  CHECK(report.macs == 12);
  CHECK(report.mode == timing::pipelined);

  const xlite::tensor<xlite::bfloat16> wrong{{1, 2}, {3, 4}};
  CHECK_THROWS_WITH(array.gemm(a, wrong), Catch::Contains("A is (2, 3) and B is (2, 2)"));
  CHECK_THROWS_AS(array.simulate(a, wrong), xlite::shape_error);
  const xlite::tensor<xlite::bfloat16> cube(xlite::shape{2, 2, 2});
  CHECK_THROWS_WITH(array.gemm(cube, b), Catch::Contains("rank 2, got rank 3"));
  CHECK_THROWS_WITH((systolic_array<4, 4, dataflow::output_stationary>(memory_config{.clock_hz = 0})),
                    Catch::Contains("clock_hz"));
  const xt::xtensor<float, 2, xt::layout_type::column_major> column_major = {{1, 2}, {3, 4}};
  const matrix<float> two(2, 2);
  CHECK_THROWS_WITH(array.gemm(column_major, two), Catch::Contains("must be row-major and contiguous"));
  const xt::xtensor<float, 2> row_major = {{1, 2}, {3, 4}};
  CHECK(array.gemm(row_major, two).first == matrix<float>(2, 2));
  CHECK_THROWS_AS(matrix<float>(std::int64_t{1} << 40, std::int64_t{1} << 40), xlite::shape_error);

  // Empty products: zeros and no cycles.
  const matrix<float> e(3, 0), f(0, 2);
  const auto [zeros, none] = array.gemm(e, f);
  CHECK(zeros == matrix<float>(3, 2));
  CHECK(none.total_cycles == 0);
  CHECK(array.simulate(e, f).cycles == 0);
}
