// A compiled lazy step priced on the array and the vector unit (tpu/step_cost.hpp and
// lazy/tpu_cost.hpp), worked out by hand: a matmul with a fused epilogue, a reduction with
// a fused exp, multi-output kernels, constants, empty and too large products.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include "xlite/compile/compiler.hpp"
#include "xlite/lazy.hpp"
#include "xlite/lazy/tpu_cost.hpp"
#include "xlite/tpu/step_cost.hpp"
#include "xlite/tpu/systolic_array.hpp"

namespace {

using namespace xlite;

// relu(x @ w + b) and sum(exp(of it)), x (128, 256), w (256, 128), b (128,), as one step.
compile::executable_ptr mlp_step() {
  const auto x = lazy::tensor::from(xlite::tensor<float>(shape{128, 256}, 0.5f));
  const auto w = lazy::tensor::from(xlite::tensor<float>(shape{256, 128}, 0.25f));
  const auto b = lazy::tensor::from(xlite::tensor<float>(shape{128}, 1.0f));
  const lazy::tensor y = lazy::relu(lazy::matmul(x, w) + b);
  const lazy::tensor outputs[] = {y, lazy::sum(lazy::exp(y))};
  return compile::compile_graph(debug::detail::pending_graph(outputs).program);
}

std::int64_t compute_steps(const compile::kernel& k) {
  std::int64_t n = 0;
  for (const compile::register_step& s : k.program) n += s.what == compile::register_step::kind::compute;
  return n;
}

} // namespace

// The array's cost of the MLP's product, its operands and result at float's 4 bytes.
tpu::gemm_report mlp_product(const tpu::memory_config& memory) {
  return tpu::estimate<128, 128, tpu::dataflow::weight_stationary>({128, 256, 128}, tpu::timing::pipelined, memory,
                                                                   {.in = 4, .acc = 4});
}

TEST_CASE("tpu step cost: a matmul with its epilogue and a fused reduction, by hand") {
  const compile::executable_ptr exe = mlp_step();
  // The compiler's kernels, which the figures below assume: the matmul, its epilogue
  // (add the broadcast bias, relu: 2 ops per element), and the sum with exp fused (1 op).
  REQUIRE(exe->kernels.size() == 3);
  const ir::graph& g = exe->program;
  REQUIRE(g.instructions[exe->kernels[0].group.root].code == op::matmul);
  REQUIRE(exe->kernels[1].group.matmul_epilogue);
  REQUIRE(compute_steps(exe->kernels[1]) == 2);
  REQUIRE(g.instructions[exe->kernels[2].group.root].code == op::sum);
  REQUIRE(compute_steps(exe->kernels[2]) == 1);

  const tpu::systolic_array<128, 128, tpu::dataflow::weight_stationary> mxu;
  const tpu::gemm_report product = mlp_product(mxu.memory());
  const tpu::step_report r = tpu::estimate_step(*exe, mxu);
  CHECK(r.macs == 128 * 256 * 128);
  // 16384 elements are 16 vector steps: the epilogue's 2 ops each hide under the array's
  // cycles; the sum's exp (4) and add (1) follow.
  CHECK(r.mxu_cycles == std::max<std::int64_t>(product.compute_cycles, 16 * 2));
  CHECK(r.vector_cycles == 16 * 5);
  CHECK(r.cycles == r.mxu_cycles + r.vector_cycles);
  // The product stays on chip for the epilogue, which reads the bias and writes y; the sum
  // reads y and writes one float.
  CHECK(r.offchip_bytes == (product.offchip_bytes - 65536) + (512 + 65536) + (65536 + 4));
  CHECK(r.mxu_utilization == Approx(static_cast<double>(r.macs) / (r.mxu_cycles * 16384.0)));
  CHECK(r.mfu == Approx(static_cast<double>(r.macs) / (r.cycles * 16384.0)));
  CHECK(r.seconds == Approx(r.cycles / 1e9));
  CHECK(r.flops_per_second == Approx(2.0 * r.macs / r.seconds));

  // On a 1 byte/cycle link each kernel waits for its bytes; the epilogue's write of y
  // replaces the product's, so fusing it costs no traffic.
  const tpu::systolic_array<128, 128, tpu::dataflow::weight_stationary> slow(
      tpu::memory_config{.offchip_bytes_per_cycle = 1.0});
  const tpu::step_report s = tpu::estimate_step(*exe, slow);
  CHECK(s.mxu_cycles == mlp_product(slow.memory()).offchip_bytes + 512);
  CHECK(s.vector_cycles == 65536 + 4);

  // A wider vector unit with dearer transcendentals.
  const tpu::step_report v = tpu::estimate_step(*exe, mxu, {.lanes = 4096, .cycles_per_transcendental = 10});
  CHECK(v.vector_cycles == 4 * 11);
}

TEST_CASE("tpu step cost: kernels rooted at an iota count, constants are set up once") {
  // arange's kernel (iota + start: one add) also computes exp(tanh(t)) (multi-output
  // fusion): 64 steps of 1 + 4 + 4 cycles, two results written.
  const lazy::tensor t = lazy::arange(0.0f, 65536.0f);
  const lazy::tensor outputs[] = {t, lazy::exp(lazy::tanh(t))};
  const tpu::systolic_array<8, 8, tpu::dataflow::output_stationary> mxu;
  const tpu::step_report r = lazy::tpu_step_cost(outputs, mxu);
  CHECK(r.vector_cycles == 64 * 9);
  CHECK(r.offchip_bytes == 2 * 65536 * 4);
  CHECK(r.macs == 0);
  CHECK(r.mfu == 0);

  // exp(x) * 3: the constant is not an op per element: 4 + 1 cycles per step.
  const auto x = lazy::tensor::from(xlite::tensor<float>(shape{64, 1024}, 0.5f));
  const lazy::tensor y[] = {lazy::exp(x) * 3.0f};
  CHECK(lazy::tpu_step_cost(y, mxu).vector_cycles == 64 * 5);
}

TEST_CASE("tpu step cost: empty products and steps too large to count") {
  const tpu::systolic_array<8, 8, tpu::dataflow::weight_stationary> mxu;
  // K = 0: the product is zeros, no traffic of its own; the epilogue reads b and writes y.
  const auto x = lazy::tensor::from(xlite::tensor<float>(shape{4, 0}));
  const auto w = lazy::tensor::from(xlite::tensor<float>(shape{0, 4}));
  const auto b = lazy::tensor::from(xlite::tensor<float>(shape{4}, 1.0f));
  const lazy::tensor y[] = {lazy::relu(lazy::matmul(x, w) + b)};
  const tpu::step_report r = lazy::tpu_step_cost(y, mxu);
  CHECK(r.macs == 0);
  CHECK(r.offchip_bytes == 16 + 64);
  // 2^20 products of (1024 x 1024) (1024 x 2^24): 2^64 multiply-adds.
  const lazy::tensor big_a = lazy::broadcast_to(lazy::full({1, 1024, 1024}, 1.0f), {1 << 20, 1024, 1024});
  const lazy::tensor big_b = lazy::broadcast_to(lazy::full({1024, 1}, 1.0f), {1024, 1 << 24});
  const lazy::tensor huge[] = {lazy::matmul(big_a, big_b)};
  CHECK_THROWS_WITH(lazy::tpu_step_cost(huge, mxu), Catch::Contains("more cycles or bytes than 64 bits"));
}

TEST_CASE("tpu step cost: all pending work, as mark_step() would run it") {
  xlite::mark_step(); // nothing else pending from earlier cases
  const auto x = lazy::tensor::from(xlite::tensor<float>(shape{64, 1024}, 0.5f));
  const lazy::tensor y = lazy::exp(x) * 3.0f;
  const tpu::systolic_array<8, 8, tpu::dataflow::output_stationary> mxu;
  const lazy::tensor just_y[] = {y};
  CHECK(lazy::tpu_step_cost(mxu).cycles == lazy::tpu_step_cost(just_y, mxu).cycles);
  xlite::mark_step();
  CHECK(lazy::tpu_step_cost(mxu).cycles == 0);
  xlite::wait_device_ops(); // the step runs on the device's worker: done before the process ends
}

TEST_CASE("tpu step cost: a vector unit that cannot work is an error naming its fields") {
  const compile::executable_ptr exe = mlp_step();
  const tpu::systolic_array<8, 8, tpu::dataflow::output_stationary> mxu;
  CHECK_THROWS_WITH(tpu::estimate_step(*exe, mxu, {.lanes = 0}), Catch::Contains("lanes (0)"));
  CHECK_THROWS_WITH(tpu::estimate_step(*exe, mxu, {.cycles_per_op = -1}), Catch::Contains("cycles_per_op (-1)"));
}
