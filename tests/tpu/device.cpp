// The tpu device (tpu/device.hpp): lazy graphs on "tpu:0" run their matmuls with the
// systolic array's numerics, bit for bit the array's own gemm (and the CPU's bf16 autocast
// where the accumulation order does not matter), and each step is priced and
// reported as tpu::estimate_step prices its graph. Each test case runs in a process of its
// own (catch_discover_tests), so the first one sees a process with no TPU core yet.

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "xlite/amp.hpp"
#include "xlite/lazy.hpp"
#include "xlite/lazy/tpu_cost.hpp"
#include "xlite/tpu/device.hpp"
#include "xlite/tpu/systolic_array.hpp"

namespace {

using namespace xlite;
using Catch::Matchers::Contains;

using mxu_128 = tpu::systolic_array<128, 128, tpu::dataflow::weight_stationary>;

xlite::tensor<float> random_host_matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  xlite::tensor<float> t(shape{rows, cols});
  for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = normal(rng);
  return t;
}

std::vector<std::uint32_t> bits_of(const xlite::tensor<float>& t) {
  std::vector<std::uint32_t> bits(static_cast<std::size_t>(t.size()));
  std::memcpy(bits.data(), t.data(), bits.size() * sizeof(float));
  return bits;
}

template <class Matrix>
std::vector<std::uint32_t> bits_of(const Matrix& m, std::int64_t count) {
  std::vector<std::uint32_t> bits(static_cast<std::size_t>(count));
  std::memcpy(bits.data(), m.data(), bits.size() * sizeof(float));
  return bits;
}

xlite::tensor<float> transposed(const xlite::tensor<float>& t) {
  xlite::tensor<float> out(shape{t.shape()[1], t.shape()[0]});
  for (std::int64_t i = 0; i < t.shape()[0]; ++i) {
    for (std::int64_t j = 0; j < t.shape()[1]; ++j) out(j, i) = t(i, j);
  }
  return out;
}

// relu(x @ w + b) on device d, and x^T @ w^T's transposes folded into the matmul.
struct products {
  xlite::tensor<float> with_epilogue, with_transposes;
};

products run_on(const xlite::device& d, const xlite::tensor<float>& x, const xlite::tensor<float>& w,
                const xlite::tensor<float>& b) {
  const auto lx = lazy::tensor::from(x, d), lw = lazy::tensor::from(w, d), lb = lazy::tensor::from(b, d);
  const lazy::tensor y = lazy::relu(lazy::matmul(lx, lw) + lb);
  const lazy::tensor yt = lazy::matmul(lazy::transpose(lw), lazy::transpose(lx));
  mark_step();
  return {y.to_host<float>(), yt.to_host<float>()};
}

// For one array type: random shapes against the array's gemm, bitwise.
template <class Array>
void check_against_array(std::mt19937& rng) {
  tpu::configure<Array>();
  const Array array;
  const xlite::device tpu0("tpu:0");
  std::uniform_int_distribution<std::int64_t> size(1, 70);
  for (int trial = 0; trial < 4; ++trial) {
    const std::int64_t m = size(rng), k = size(rng), n = size(rng);
    CAPTURE(Array::rows, Array::cols, m, k, n);
    const xlite::tensor<float> x = random_host_matrix(m, k, rng), w = random_host_matrix(k, n, rng),
                               b = random_host_matrix(1, n, rng);
    const products got = run_on(tpu0, x, w, b);

    const auto [product, report] = array.gemm(x, w);
    xlite::tensor<float> expected(shape{m, n});
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) expected(i, j) = std::max(product(i, j) + b(0, j), 0.0f);
    }
    CHECK(bits_of(got.with_epilogue) == bits_of(expected));
    const auto [product_t, report_t] = array.gemm(transposed(w), transposed(x));
    CHECK(bits_of(got.with_transposes) == bits_of(product_t, n * m));
  }
}

} // namespace

TEST_CASE("tpu device: it exists once tpu::configure gave the process a TPU core") {
  CHECK_THROWS_AS(xlite::device("tpu:0"), config_error);
  CHECK_THROWS_WITH(xlite::device("tpu:0"), Contains("tpu::configure"));
  tpu::configure<mxu_128>(tpu::memory_config::tpu_v1());
  const xlite::device tpu0("tpu:0");
  CHECK(tpu0.kind() == device_kind::tpu);
  CHECK(tpu0.type() == "tpu");
  CHECK(tpu0.to_string() == "tpu:0");
  CHECK(xlite::device("tpu") == tpu0);
  CHECK(tpu0 != xlite::device("cpu:0"));
  CHECK(tpu0.ordinal() == 0);
  CHECK_THROWS_WITH(xlite::device("tpu:1"), Contains("there are 1 tpu devices"));
  CHECK_THROWS_WITH(xlite::device("tpu:x"), Contains("is not a device name"));
  CHECK_THROWS_WITH(xlite::device("gpu:0"), Contains("unknown device"));
  CHECK_THROWS_AS(tpu::configure<mxu_128>(tpu::memory_config::unlimited(), {.lanes = 0}), value_error);

  // Tensors of cpu:0 and tpu:0 do not mix.
  const auto a = lazy::tensor::from(xlite::tensor<float>(shape{2, 2}, 1.0f), tpu0);
  const auto c = lazy::tensor::from(xlite::tensor<float>(shape{2, 2}, 1.0f));
  CHECK_THROWS_WITH(a + c, Contains("tpu:0") && Contains("cpu:0"));
  CHECK_THROWS_WITH(tpu::last_step_report(tpu0), Contains("has not run a priced step"));
  CHECK_THROWS_WITH(tpu::last_step_report(xlite::device("cpu:0")), Contains("is not a tpu device"));
}

TEST_CASE("tpu device: matmuls are the array's gemm bit for bit, with epilogues, transposes and batches") {
  std::mt19937 rng(20261125);
  check_against_array<tpu::systolic_array<8, 32, tpu::dataflow::weight_stationary>>(rng);
  check_against_array<tpu::systolic_array<16, 8, tpu::dataflow::input_stationary>>(rng);
  check_against_array<tpu::systolic_array<4, 4, tpu::dataflow::output_stationary>>(rng);

  // A batch whose weight broadcasts, bf16 operands and result: each product the array's,
  // rounded to bf16.
  using array = tpu::systolic_array<8, 8, tpu::dataflow::weight_stationary>;
  tpu::configure<array>();
  const xlite::device tpu0("tpu:0");
  const xlite::tensor<float> x = random_host_matrix(3 * 5, 20, rng), w = random_host_matrix(20, 7, rng);
  const auto lx = lazy::reshape(lazy::cast(lazy::tensor::from(x, tpu0), dtype::bf16), shape{3, 5, 20});
  const auto lw = lazy::cast(lazy::tensor::from(w, tpu0), dtype::bf16);
  const xlite::tensor<bfloat16> got = lazy::matmul(lx, lw).to_host<bfloat16>();
  const auto [product, report] = array().gemm(x, w);
  for (std::int64_t i = 0; i < 15; ++i) {
    for (std::int64_t j = 0; j < 7; ++j) {
      CAPTURE(i, j);
      CHECK(got(i / 5, i % 5, j).bits() == bfloat16(product(i, j)).bits());
    }
  }
}

TEST_CASE("tpu device: broadcast batches, one transposed operand, float16 operands; integers on the host") {
  using array = tpu::systolic_array<8, 8, tpu::dataflow::input_stationary>;
  tpu::configure<array>();
  const array mxu;
  const xlite::device tpu0("tpu:0");
  std::mt19937 rng(5);
  const auto random = [&](const shape& s) {
    std::normal_distribution<float> normal;
    xlite::tensor<float> t(s);
    for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = normal(rng);
    return t;
  };
  // (2, 1, 5, 20) x (1, 3, 20, 7): product (i, j) is a[i] b[j].
  const xlite::tensor<float> a = random(shape{2, 1, 5, 20}), b = random(shape{1, 3, 20, 7});
  const xlite::tensor<float> batched =
      lazy::matmul(lazy::tensor::from(a, tpu0), lazy::tensor::from(b, tpu0)).to_host<float>();
  REQUIRE(batched.shape() == shape{2, 3, 5, 7});
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      const auto [product, report] = mxu.gemm(tpu::matrix_view<float>(a.data() + i * 100, 5, 20),
                                              tpu::matrix_view<float>(b.data() + j * 140, 20, 7));
      CAPTURE(i, j);
      CHECK(std::equal(product.data(), product.data() + 35, batched.data() + (i * 3 + j) * 35, [](float x, float y) {
        return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
      }));
    }
  }

  // x v^T, v stored (7, 20): only b transposed.
  const xlite::tensor<float> x = random_host_matrix(5, 20, rng), v = random_host_matrix(7, 20, rng);
  const xlite::tensor<float> xvt =
      lazy::matmul(lazy::tensor::from(x, tpu0), lazy::transpose(lazy::tensor::from(v, tpu0))).to_host<float>();
  const auto [expected_xvt, report_xvt] = mxu.gemm(x, transposed(v));
  CHECK(bits_of(xvt) == bits_of(expected_xvt, 35));

  // float16 operands and result: widened exactly, rounded to the array's bf16, the float
  // sum rounded to float16.
  const auto half = [](const xlite::tensor<float>& t) {
    xlite::tensor<float> out(t.shape());
    for (std::int64_t i = 0; i < t.size(); ++i) out.data()[i] = static_cast<float>(float16(t.data()[i]));
    return out;
  };
  const xlite::tensor<float16> in_half = lazy::matmul(lazy::cast(lazy::tensor::from(x, tpu0), dtype::f16),
                                                      lazy::cast(lazy::tensor::from(transposed(v), tpu0), dtype::f16))
                                             .to_host<float16>();
  const auto [from_halves, report_half] = mxu.gemm(half(x), half(transposed(v)));
  for (std::int64_t i = 0; i < 35; ++i) CHECK(in_half.data()[i].bits() == float16(from_halves.data()[i]).bits());

  // Integers: no integer matrix unit, so the host's exact product.
  xlite::tensor<std::int32_t> m(shape{3, 4}), n(shape{4, 2});
  for (std::int64_t i = 0; i < 12; ++i) m.data()[i] = static_cast<std::int32_t>(i * 1000 + 1);
  for (std::int64_t i = 0; i < 8; ++i) n.data()[i] = static_cast<std::int32_t>(i * 977 - 3000);
  const xlite::tensor<std::int32_t> mn =
      lazy::matmul(lazy::tensor::from(m, tpu0), lazy::tensor::from(n, tpu0)).to_host<std::int32_t>();
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t j = 0; j < 2; ++j) {
      std::int32_t exact = 0;
      for (std::int64_t q = 0; q < 4; ++q) exact += m(i, q) * n(q, j);
      CHECK(mn(i, j) == exact);
    }
  }
}

TEST_CASE("tpu device: the CPU's bf16 autocast, bit for bit where every order gives the same sum") {
  // Operands a little off small integers: both devices round them to the same bf16
  // integers, whose products and sums are exact in float, so any accumulation order gives
  // the same bits. Random operands differ by the order only, within bf16's error.
  tpu::configure<tpu::systolic_array<32, 32, tpu::dataflow::weight_stationary>>();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> integer(-8, 8);
  std::uniform_real_distribution<float> nudge(-0x1p-10f, 0x1p-10f); // under half of bf16's relative spacing
  const auto near_integers = [&](std::int64_t rows, std::int64_t cols) {
    xlite::tensor<float> t(shape{rows, cols});
    for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<float>(integer(rng)) * (1 + nudge(rng));
    return t;
  };
  const xlite::tensor<float> x = near_integers(37, 300), w = near_integers(300, 45), b = random_host_matrix(1, 45, rng);
  const products on_tpu = run_on(xlite::device("tpu:0"), x, w, b);
  const amp::policy_scope autocast({amp::mode::autocast});
  const products on_cpu = run_on(xlite::device("cpu:0"), x, w, b);
  CHECK(bits_of(on_tpu.with_epilogue) == bits_of(on_cpu.with_epilogue));
  CHECK(bits_of(on_tpu.with_transposes) == bits_of(on_cpu.with_transposes));

  // Random operands: the two differ by the order of the float sums only, so by at most
  // 2 K u sum |a b| (u = 2^-24) on the bf16-rounded operands; an operand not rounded to
  // bf16 on one side would differ by about 2^-9 of that sum.
  const xlite::tensor<float> rx = random_host_matrix(37, 300, rng), rw = random_host_matrix(300, 45, rng);
  const products random_tpu = run_on(xlite::device("tpu:0"), rx, rw, b);
  const products random_cpu = run_on(xlite::device("cpu:0"), rx, rw, b);
  for (std::int64_t i = 0; i < 45; ++i) {
    for (std::int64_t j = 0; j < 37; ++j) {
      double magnitude = 0;
      for (std::int64_t q = 0; q < 300; ++q) {
        magnitude += std::abs(double(bfloat16(rw(q, i))) * double(bfloat16(rx(j, q))));
      }
      CAPTURE(i, j);
      CHECK(std::abs(random_tpu.with_transposes(i, j) - random_cpu.with_transposes(i, j)) <=
            2 * 300 * 0x1p-24 * magnitude);
    }
  }
}

TEST_CASE("tpu device: each step is priced as tpu::estimate_step prices its graph, and reported") {
  using array = tpu::systolic_array<128, 128, tpu::dataflow::weight_stationary>;
  const tpu::vector_unit_config vpu{.lanes = 512, .cycles_per_op = 2, .cycles_per_transcendental = 8};
  tpu::configure<array>(tpu::memory_config::tpu_v1(), vpu);
  const xlite::device tpu0("tpu:0");
  metrics::clear_all();
  std::mt19937 rng(3);
  const auto x = lazy::tensor::from(random_host_matrix(64, 256, rng), tpu0);
  const auto w = lazy::tensor::from(random_host_matrix(256, 128, rng), tpu0);
  mark_step(); // the transfers' step: nothing to compute
  const lazy::tensor y = lazy::sum(lazy::tanh(lazy::matmul(x, w)));
  const tpu::step_report expected = lazy::tpu_step_cost(array(tpu::memory_config::tpu_v1()), vpu);
  REQUIRE(expected.macs == 64 * 256 * 128);
  mark_step();
  wait_device_ops();
  const tpu::step_report got = tpu::last_step_report(tpu0);
  CHECK(got.cycles == expected.cycles);
  CHECK(got.mxu_cycles == expected.mxu_cycles);
  CHECK(got.vector_cycles == expected.vector_cycles);
  CHECK(got.macs == expected.macs);
  CHECK(got.offchip_bytes == expected.offchip_bytes);
  CHECK(got.mfu == expected.mfu);

  const auto cycles = metrics::metric_data("TpuStepCycles");
  REQUIRE(cycles);
  CHECK(cycles->accumulator == static_cast<double>(expected.cycles));
  const std::string report = metrics::report();
  for (const char* name :
       {"TpuStepCycles", "TpuStepTime", "TpuMxuUtilization", "TpuGflopPerSecond", "TpuMfu", "TpuOffChipBytes"}) {
    CHECK_THAT(report, Contains(name));
  }
  CHECK(std::isfinite(y.item<float>()));

  // A step on cpu:0 is not priced.
  const auto c = lazy::tensor::from(random_host_matrix(8, 8, rng));
  CHECK(lazy::matmul(c, c).to_host<float>().size() == 64);
  CHECK(metrics::metric_data("TpuStepCycles")->total_samples == cycles->total_samples);
}

TEST_CASE("tpu device: a step with control flow runs, counted as unpriced") {
  tpu::configure<mxu_128>();
  const xlite::device tpu0("tpu:0");
  metrics::clear_all();
  const auto m = lazy::tensor::from(xlite::tensor<float>({{1.0f, 1.0f}, {0.0f, 1.0f}}), tpu0);
  const auto start = lazy::tensor::from(xlite::tensor<float>({{1.0f, 0.0f}, {0.0f, 1.0f}}), tpu0);
  // m^3 by repeated products in a loop: [[1, 3], [0, 1]].
  const auto i0 = lazy::tensor::from(xlite::tensor<std::int64_t>(shape{}, 0), tpu0);
  const auto result = lazy::while_loop([](const auto& s) { return s[0] < 3; },
                                       [&](const auto& s) {
                                         return std::vector{s[0] + 1, lazy::matmul(s[1], m)};
                                       },
                                       {i0, start});
  const xlite::tensor<float> host = result[1].to_host<float>();
  CHECK(host(0, 1) == 3.0f);
  CHECK(metrics::counter_value("TpuUnpricedSteps") == 1);
}

// Run with XLITE_USE_SPMD=1 (tests/tpu/CMakeLists.txt): SPMD mode is for the whole process.
TEST_CASE("tpu device: SPMD mode refuses tpu tensors, which then hold the error", "[.spmd]") {
  REQUIRE(runtime::is_spmd());
  tpu::configure<mxu_128>();
  const auto x = lazy::tensor::from(xlite::tensor<float>(shape{4, 4}, 1.0f), xlite::device("tpu:0"));
  const lazy::tensor y = lazy::matmul(x, x);
  CHECK_THROWS_WITH(mark_step(), Contains("SPMD mode runs on the cpu devices") && Contains("tpu:0"));
  CHECK_THROWS_AS(y.to_host<float>(), config_error);
}
