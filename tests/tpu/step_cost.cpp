// A compiled lazy step priced on the array and the vector unit (tpu/step_cost.hpp): a
// matmul with a fused epilogue and a reduction with a fused exp, worked out by hand.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "xlite/compile/compiler.hpp"
#include "xlite/lazy.hpp"
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

TEST_CASE("tpu step cost: a matmul with its epilogue and a fused reduction, by hand") {
  const compile::executable_ptr exe = mlp_step();
  // The compiler's kernels, which the figures below assume: the matmul, its epilogue
  // (add the broadcast bias, relu: 2 ops), and the sum with exp fused (1 op).
  REQUIRE(exe->kernels.size() == 3);
  const ir::graph& g = exe->program;
  REQUIRE(g.instructions[exe->kernels[0].group.root].code == op::matmul);
  REQUIRE(exe->kernels[1].group.matmul_epilogue);
  REQUIRE(compute_steps(exe->kernels[1]) == 2);
  REQUIRE(g.instructions[exe->kernels[2].group.root].code == op::sum);
  REQUIRE(compute_steps(exe->kernels[2]) == 1);

  const tpu::systolic_array<128, 128, tpu::dataflow::weight_stationary> mxu;
  const tpu::gemm_report product = mxu.cost({128, 256, 128});
  const tpu::step_report r = tpu::estimate_step(*exe, mxu);
  CHECK(r.macs == 128 * 256 * 128);
  CHECK(r.mxu_cycles == product.total_cycles);
  // 16384 elements are 16 vector steps: the epilogue 2 ops each, the sum exp (4) + add (1).
  CHECK(r.vector_cycles == 16 * 2 + 16 * 5);
  CHECK(r.cycles == r.mxu_cycles + r.vector_cycles);
  // The product stays on chip for the epilogue, which reads the bias and writes y; the sum
  // reads y and writes one float.
  CHECK(r.offchip_bytes == (product.offchip_bytes - 128 * 128 * 4) + (512 + 65536) + (65536 + 4));
  CHECK(r.mxu_utilization == Approx(static_cast<double>(r.macs) / (r.mxu_cycles * 16384.0)));
  CHECK(r.mfu == Approx(static_cast<double>(r.macs) / (r.cycles * 16384.0)));
  CHECK(r.seconds == Approx(r.cycles / 1e9));
  CHECK(r.flops_per_second == Approx(2.0 * r.macs / r.seconds));

  // On a 1 byte/cycle link the vector kernels wait for their bytes.
  const tpu::systolic_array<128, 128, tpu::dataflow::weight_stationary> slow(
      tpu::memory_config{.offchip_bytes_per_cycle = 1.0});
  const tpu::step_report s = tpu::estimate_step(*exe, slow);
  CHECK(s.vector_cycles == (512 + 65536) + (65536 + 4));
  CHECK(s.mxu_cycles == slow.cost({128, 256, 128}).total_cycles);

  // A wider vector unit with dearer transcendentals.
  const tpu::step_report v = tpu::estimate_step(*exe, mxu, {.lanes = 4096, .cycles_per_transcendental = 10});
  CHECK(v.vector_cycles == 4 * 2 + 4 * 11);
}

TEST_CASE("tpu step cost: a vector unit that cannot work is an error naming its fields") {
  const compile::executable_ptr exe = mlp_step();
  const tpu::systolic_array<8, 8, tpu::dataflow::output_stationary> mxu;
  CHECK_THROWS_WITH(tpu::estimate_step(*exe, mxu, {.lanes = 0}), Catch::Contains("lanes (0)"));
  CHECK_THROWS_WITH(tpu::estimate_step(*exe, mxu, {.cycles_per_op = -1}), Catch::Contains("cycles_per_op (-1)"));
}
