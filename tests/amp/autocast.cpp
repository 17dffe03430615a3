// The mixed-precision policy and its compile pass: which dtype each instruction computes in,
// the numbers that come out (against independent references), the cache keeping policies
// apart, and the environment variables.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "xlite/amp.hpp"
#include "xlite/autodiff.hpp"
#include "xlite/compile/serialize.hpp"
#include "xlite/lazy.hpp"
#include "xlite/runtime/metrics.hpp"

#include "../lazy/ir_nodes.hpp"

using namespace xlite;
using L = lazy::tensor;

namespace {

using ir_nodes::param;

// exp(x @ w + 1) > 0.5, and sum(x @ w) over axis 1: a matmul, an ordinary op, a kept-fp32 op,
// a comparison and a reduction.
ir::graph sample() {
  const auto x = param(dtype::f32, shape{4, 3}), w = param(dtype::f32, shape{3, 5});
  const auto product = ir::matmul(x, w);
  const auto shifted = ir::elementwise(op::add, {product, ir::constant(ir::literal::of(1.0), dtype::f32)});
  const auto grown = ir::elementwise(op::exp, {shifted});
  const auto mask = ir::elementwise(op::greater, {grown, ir::constant(ir::literal::of(0.5), dtype::f32)});
  const std::int64_t axis[] = {1};
  return ir::capture(std::vector{grown, mask, ir::reduce(op::sum, product, axis, false)}).program;
}

const ir::instruction& only(const ir::graph& g, op code) {
  const auto found = std::ranges::find_if(g.instructions, [&](const ir::instruction& i) { return i.code == code; });
  REQUIRE(found != g.instructions.end());
  return *found;
}

dtype operand_type(const ir::graph& g, const ir::instruction& ins, std::size_t k = 0) {
  return g.instructions[ins.operands[k]].type;
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> d(-2, 2);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

xlite::tensor<float> host(const shape& s, std::uint64_t seed) {
  xlite::tensor<float> t(s);
  const auto v = random_floats(static_cast<std::size_t>(s.numel()), seed);
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

float bf16_round(float x) { return static_cast<float>(bfloat16(x)); }

} // namespace

TEST_CASE("fp32 leaves a graph as traced", "[amp]") {
  const ir::graph g = sample();
  CHECK(amp::apply(g, {amp::mode::fp32}) == g);
}

TEST_CASE("autocast: matmuls multiply bf16 and give float32; nothing else changes", "[amp]") {
  const ir::graph g = amp::apply(sample(), {amp::mode::autocast});
  const ir::instruction& mm = only(g, op::matmul);
  CHECK(mm.type == dtype::f32);
  CHECK(operand_type(g, mm, 0) == dtype::bf16);
  CHECK(operand_type(g, mm, 1) == dtype::bf16);
  CHECK(only(g, op::add).type == dtype::f32);
  CHECK(only(g, op::exp).type == dtype::f32);
  for (const ir::value_id out : g.outputs) CHECK(g.instructions[out].type != dtype::bf16);
}

TEST_CASE("use_bf16: arithmetic in bf16, the fp32 list in float32, outputs as declared", "[amp]") {
  const ir::graph source = sample();
  const ir::graph g = amp::apply(source, {amp::mode::use_bf16});
  CHECK(only(g, op::matmul).type == dtype::f32);
  CHECK(only(g, op::add).type == dtype::bf16);
  CHECK(operand_type(g, only(g, op::add), 1) == dtype::bf16); // the constant 1 is a bf16 constant
  CHECK(only(g, op::exp).type == dtype::f32);
  CHECK(operand_type(g, only(g, op::exp)) == dtype::f32);
  CHECK(only(g, op::greater).type == dtype::boolean);
  CHECK(operand_type(g, only(g, op::greater)) == dtype::bf16);
  CHECK(only(g, op::sum).type == dtype::f32);
  REQUIRE(g.outputs.size() == source.outputs.size());
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    CHECK(g.instructions[g.outputs[k]].type == source.instructions[source.outputs[k]].type);
  }
  // Parameters keep their declared dtypes: device buffers are as traced.
  for (const auto& ins : g.instructions) {
    if (ins.code == op::parameter) CHECK(ins.type == dtype::f32);
  }
}

TEST_CASE("downcast_bf16: float32 in bf16, float64 in float32", "[amp]") {
  const auto x = param(dtype::f64, shape{3}), y = param(dtype::f32, shape{3});
  const auto g = amp::apply(ir::capture(std::vector{ir::elementwise(op::mul, {x, x}), ir::elementwise(op::mul, {y, y})})
                                .program,
                            {amp::mode::downcast_bf16});
  std::vector<dtype> products;
  for (const auto& ins : g.instructions) {
    if (ins.code == op::mul) products.push_back(ins.type);
  }
  CHECK(products == std::vector<dtype>{dtype::f32, dtype::bf16});
}

TEST_CASE("an autocast matmul is bf16 products summed in float32", "[amp]") {
  amp::policy_scope scope({amp::mode::autocast});
  const std::int64_t m = 37, k = 70, n = 19;
  const auto a = host(shape{m, k}, 1), b = host(shape{k, n}, 2);
  const auto got = lazy::matmul(L::from(a), L::from(b)).to_host<float>();
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double exact = 0, magnitude = 0; // of the bf16-rounded operands, in float64
      for (std::int64_t q = 0; q < k; ++q) {
        const double p = static_cast<double>(bf16_round(a(i, q))) * static_cast<double>(bf16_round(b(q, j)));
        exact += p;
        magnitude += std::abs(p);
      }
      // fp32 accumulation of k products: within k ulps of the magnitude (the inputs' rounding
      // to bf16 is part of the reference, so a float32 product would fail this by far).
      CHECK(std::abs(got(i, j) - exact) <= static_cast<double>(k) * 0x1p-24 * magnitude);
    }
  }
}

TEST_CASE("use_bf16 rounds each element-wise result to bf16 and reports float32", "[amp]") {
  amp::policy_scope scope({amp::mode::use_bf16});
  const auto a = host(shape{64}, 3), b = host(shape{64}, 4);
  const L sum = L::from(a) * L::from(b) + 0.25f;
  CHECK(sum.type() == dtype::f32);
  const auto got = sum.to_host<float>();
  for (std::int64_t i = 0; i < 64; ++i) {
    const float expected = bf16_round(bf16_round(bf16_round(a(i)) * bf16_round(b(i))) + 0.25f);
    CHECK(got(i) == expected);
  }
}

TEST_CASE("each policy is compiled and cached on its own", "[amp]") {
  const auto a = host(shape{8, 8}, 5);
  const auto run = [&] { return lazy::matmul(L::from(a), L::from(a)).to_host<float>(); };
  const auto uncached = [] { return metrics::counter_value("UncachedCompile"); };
  const auto fp32 = run();
  const std::int64_t before = uncached();
  xlite::tensor<float> mixed;
  {
    amp::policy_scope scope({amp::mode::autocast});
    mixed = run();
  }
  CHECK(uncached() == before + 1); // not the fp32 executable
  CHECK(std::memcmp(run().data(), fp32.data(), sizeof(float) * 64) == 0);
  CHECK(uncached() == before + 1); // the fp32 one again, from the cache
  CHECK(std::memcmp(mixed.data(), fp32.data(), sizeof(float) * 64) != 0);
}

TEST_CASE("an autocast executable survives serialization", "[amp]") {
  const ir::graph g = sample();
  const compile::cache_record original{"test", g, compile::compile_graph(g, {amp::mode::use_bf16})};
  const std::string bytes = compile::serialize(original);
  const compile::cache_record copy = compile::deserialize(bytes);
  CHECK(copy.compiled->program == original.compiled->program);
  CHECK(compile::serialize(copy) == bytes);
}

TEST_CASE("training under autocast follows the fp32 loss within bf16 error", "[amp]") {
  const auto x = host(shape{32, 16}, 6), target = host(shape{32, 4}, 7), w0 = host(shape{16, 4}, 8);
  const auto train = [&](amp::mode m) {
    amp::policy_scope scope({m});
    L w = L::from(w0);
    const L inputs = L::from(x), wanted = L::from(target);
    std::vector<float> losses;
    for (int step = 0; step < 20; ++step) {
      const L loss = lazy::mean(lazy::pow(lazy::matmul(inputs, w) - wanted, 2.0f));
      w = w - grad(loss, {w})[0] * 0.05f;
      lazy::mark_step();
      losses.push_back(loss.item<float>());
    }
    return losses;
  };
  const auto exact = train(amp::mode::fp32), mixed = train(amp::mode::autocast);
  CHECK(exact.back() < 0.5f * exact.front());
  for (std::size_t s = 0; s < exact.size(); ++s) CHECK(mixed[s] == Approx(exact[s]).epsilon(0.02));
}

TEST_CASE("[.amp_env] XLITE_USE_BF16 sets the policy", "[.amp_env]") {
  CHECK(amp::current_policy().mode == amp::mode::use_bf16);
}

TEST_CASE("[.amp_env_both] XLITE_USE_BF16 with XLITE_DOWNCAST_BF16 is a config_error", "[.amp_env_both]") {
  CHECK_THROWS_AS(amp::current_policy(), config_error);
  CHECK_THROWS_WITH(amp::current_policy(), Catch::Contains("XLITE_USE_BF16 and XLITE_DOWNCAST_BF16"));
}
