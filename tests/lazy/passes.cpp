// The passes: each on small graphs whose right answer is known.

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <optional>

#include "xlite/compile/compiler.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/passes/buffer_plan.hpp"
#include "xlite/passes/cse.hpp"
#include "xlite/passes/dce.hpp"
#include "xlite/passes/fold.hpp"
#include "xlite/passes/fusion.hpp"
#include "xlite/passes/simplify.hpp"

#include "ir_nodes.hpp"

using namespace xlite;

namespace {

using namespace ir_nodes;

ir::node_ptr binary(op o, ir::node_ptr a, ir::node_ptr b) { return ir::elementwise(o, {std::move(a), std::move(b)}); }

ir::graph graph_of(std::initializer_list<ir::node_ptr> outputs) {
  return ir::capture(std::vector<ir::node_ptr>(outputs)).program;
}

} // namespace

TEST_CASE("simplify drops the identities that keep IEEE semantics", "[passes]") {
  const auto x = param(dtype::f32, shape{4});
  auto g = graph_of({binary(op::div, binary(op::mul, x, constant(1)), constant(1))});
  CHECK(passes::simplify(g) == 2);
  passes::eliminate_dead_code(g);
  CHECK(g.instructions.size() == 1); // the parameter alone
  CHECK(g.outputs[0] == 0);

  // x + 0 turns -0.0 into +0.0 and x * 0 turns NaN into NaN, not 0: both stay.
  auto kept = graph_of({binary(op::add, x, constant(0)), binary(op::mul, x, constant(0))});
  CHECK(passes::simplify(kept) == 0);
  // For integers x + 0 is x.
  const auto i = param(dtype::i64, shape{4});
  auto integers = graph_of({binary(op::add, i, constant(0, dtype::i64))});
  CHECK(passes::simplify(integers) == 1);
  // x * 1 where 1 broadcasts x to a larger shape changes the shape: it stays.
  auto widening = graph_of({binary(op::mul, x, ir::broadcast_to(constant(1), shape{3, 4}))});
  passes::simplify(widening);
  CHECK(widening.instructions[widening.outputs[0]].shape == shape{3, 4});
  // -(-x) is x.
  auto negation = graph_of({ir::elementwise(op::neg, {ir::elementwise(op::neg, {x})})});
  CHECK(passes::simplify(negation) == 1);
}

TEST_CASE("constant folding replaces ops on constants, chains included, by the evaluator's values", "[passes]") {
  // An evaluator that adds in double and declines everything else.
  std::size_t asked = 0;
  const passes::constant_evaluator add_only = [&](const ir::graph& g, const ir::instruction& ins) {
    ++asked;
    std::optional<ir::literal> value;
    if (ins.code == op::add) {
      value = ir::literal::of(g.instructions[ins.operands[0]].attrs.value.real +
                              g.instructions[ins.operands[1]].attrs.value.real);
    }
    return value;
  };
  const auto x = param(dtype::f32, shape{4});
  const auto three = binary(op::add, binary(op::add, constant(1), constant(1)), constant(1));
  auto g = graph_of({binary(op::mul, x, three), ir::elementwise(op::exp, {three}),
                     binary(op::add, ir::broadcast_to(constant(1), shape{4}), constant(1))});
  CHECK(passes::fold_constants(g, add_only) == 2);
  CHECK(asked == 3); // the two adds and exp; nothing that reads x or a broadcast
  const ir::instruction& folded = g.instructions[g.instructions[g.outputs[0]].operands[1]];
  CHECK(folded.code == op::constant);
  CHECK(folded.attrs.value.real == 3);
  CHECK(folded.operands.empty());
  CHECK(g.instructions[g.outputs[1]].code == op::exp); // declined: it stays
  CHECK(g.instructions[g.outputs[2]].code == op::add); // reads a broadcast: it stays
  passes::eliminate_dead_code(g);
  // 3, and the two 1s of the add that stays; the 1s that made 3 are dead.
  CHECK(std::ranges::count(g.instructions, op::constant, &ir::instruction::code) == 3);
}

TEST_CASE("CSE merges equal instructions and DCE removes what no output needs", "[passes]") {
  const auto x = param(dtype::f32, shape{4});
  const auto y = param(dtype::f32, shape{4});
  // exp(x) * y computed twice from separately traced nodes.
  auto g = graph_of({binary(op::add, binary(op::mul, ir::elementwise(op::exp, {x}), y),
                            binary(op::mul, ir::elementwise(op::exp, {x}), y))});
  CHECK(g.instructions.size() == 7);
  CHECK(passes::eliminate_common_subexpressions(g) == 2);
  CHECK(passes::eliminate_dead_code(g) == 2);
  CHECK(g.instructions.size() == 5);
  const auto& add = g.instructions[g.outputs[0]];
  CHECK(add.operands[0] == add.operands[1]);
  // Parameters are never merged, nor removed (positions must keep matching the buffers).
  auto unused = graph_of({x, y});
  unused.outputs = {0};
  CHECK(passes::eliminate_dead_code(unused) == 0);
  CHECK(unused.parameter_count == 2);
}

TEST_CASE("a chain of element-wise ops fuses into one kernel; reductions and matmul are kernels of their own",
          "[passes]") {
  const auto x = param(dtype::f32, shape{1 << 10});
  auto chain = x;
  for (int i = 0; i < 10; ++i) chain = ir::elementwise(i % 2 ? op::exp : op::neg, {binary(op::mul, chain, x)});
  auto g = graph_of({chain});
  const auto plan = passes::fuse_elementwise(g);
  REQUIRE(plan.kernels.size() == 1);
  CHECK(plan.kernels[0].members.size() == 20);
  CHECK(plan.kernels[0].inputs == std::vector<ir::value_id>{0});

  // relu(matmul(a, b) + bias) then a row sum: matmul | add+relu+sum (the sum over the
  // innermost axis computes its operand as it goes).
  const auto a = param(dtype::f32, shape{8, 16});
  const auto b = param(dtype::f32, shape{16, passes::min_fused_run});
  const auto bias = param(dtype::f32, shape{passes::min_fused_run});
  const std::vector<std::int64_t> axes{1};
  auto h = ir::elementwise(op::relu, {binary(op::add, ir::matmul(a, b), bias)});
  auto g2 = graph_of({ir::reduce(op::sum, h, axes, false)});
  const auto plan2 = passes::fuse_elementwise(g2);
  REQUIRE(plan2.kernels.size() == 2);
  CHECK(g2.instructions[plan2.kernels[0].root].code == op::matmul);
  CHECK(g2.instructions[plan2.kernels[1].root].code == op::sum);
  CHECK(plan2.kernels[1].members.size() == 3);
  // Rows shorter than min_fused_run: the program would start once per row, so relu(...) is
  // computed into memory first.
  const auto narrow = ir::elementwise(op::relu, {ir::slice(h, std::vector<ir::slice_range>{{0, 8, 1}, {0, 2, 1}})});
  auto g_narrow = graph_of({ir::reduce(op::sum, narrow, axes, false)});
  const auto narrow_plan = passes::fuse_elementwise(g_narrow);
  CHECK(g_narrow.instructions[narrow_plan.kernels.back().root].code == op::sum);
  CHECK(narrow_plan.kernels.back().members.size() == 1);
  // A column sum reads its operand across rows: relu(...) is a kernel of its own.
  const std::vector<std::int64_t> columns{0};
  auto g4 = graph_of({ir::reduce(op::sum, h, columns, false)});
  const auto plan4 = passes::fuse_elementwise(g4);
  REQUIRE(plan4.kernels.size() == 3);
  // ... and relu(matmul + bias) runs as the matmul's epilogue, right after it.
  CHECK(g4.instructions[plan4.kernels[0].root].code == op::matmul);
  CHECK(plan4.kernels[1].matmul_epilogue);
  CHECK(plan4.kernels[1].root == g4.instructions[plan4.kernels[2].root].operands[0]);
  // Not when the epilogue reads a value computed after the matmul: it could not run yet.
  auto late = graph_of({ir::elementwise(op::relu, {binary(op::add, ir::matmul(a, b), ir::elementwise(op::exp, {bias}))})});
  const auto late_plan = passes::fuse_elementwise(late);
  REQUIRE(late_plan.kernels.size() == 3);
  CHECK_FALSE(late_plan.kernels[2].matmul_epilogue);
  // Nor when another kernel reads the product too.
  const auto product = ir::matmul(a, b);
  auto shared = graph_of({ir::elementwise(op::relu, {product}), ir::reduce(op::sum, product, columns, false)});
  for (const auto& k : passes::fuse_elementwise(shared).kernels) CHECK_FALSE(k.matmul_epilogue);

  // A value two kernels read is written once, not recomputed.
  const auto e = ir::elementwise(op::exp, {x});
  auto g3 = graph_of({ir::reduce(op::sum, e, {}, false), ir::reduce(op::max, e, {}, false)});
  CHECK(passes::fuse_elementwise(g3).kernels.size() == 3);
}

TEST_CASE("multi-output fusion: kernels over one index space that share inputs write their results in one pass",
          "[passes]") {
  // Adam's update of one weight: m, v and w from the same gradient, and w's bf16 copy.
  const shape s{64, 64};
  const auto g = param(dtype::f32, s), m = param(dtype::f32, s), v = param(dtype::f32, s), w = param(dtype::f32, s);
  const auto lr = param(dtype::f32, shape{});
  const auto m2 = binary(op::add, binary(op::mul, m, constant(0.9)), binary(op::mul, g, constant(0.1)));
  const auto v2 =
      binary(op::add, binary(op::mul, v, constant(0.999)), binary(op::mul, binary(op::mul, g, g), constant(0.001)));
  const auto w2 = binary(op::sub, w, binary(op::mul, lr, binary(op::div, m2, ir::elementwise(op::sqrt, {v2}))));
  auto adam = graph_of({m2, v2, w2, ir::cast(w2, dtype::bf16)});
  const auto plan = passes::fuse_elementwise(adam);
  REQUIRE(plan.kernels.size() == 1);
  const passes::kernel_group& k = plan.kernels[0];
  CHECK(k.root == adam.outputs[0]);
  CHECK(k.extra_results == std::vector<ir::value_id>{adam.outputs[1], adam.outputs[2], adam.outputs[3]});
  CHECK(k.inputs.size() == 5); // m, g, v, w, lr: each read once
  CHECK(std::ranges::is_sorted(k.members));
  const auto buffers = passes::plan_buffers(adam, plan);
  CHECK(buffers.slot_bytes.size() == 4); // four outputs, four buffers
  const auto exe = compile::compile_graph(adam);
  REQUIRE(exe->kernels.size() == 1);
  CHECK(exe->kernels[0].result_registers.size() == 4);
  // lr and the constants are the same in every chunk: loaded or made once per range.
  const auto& program = exe->kernels[0].program;
  for (const auto& step : program) {
    const bool scalar_load =
        step.what == compile::register_step::kind::load && adam.instructions[k.inputs[step.input]].shape.numel() == 1;
    CHECK(step.invariant == (scalar_load || step.code == op::constant));
  }
  // ... into registers no other step writes, since later chunks skip those steps.
  for (const auto& invariant : program) {
    if (!invariant.invariant) continue;
    for (const auto& step : program) CHECK((&step == &invariant || step.result != invariant.result));
  }

  // Not merged: a kernel that reads a value computed after the earlier kernel (the sum),
  // one over another index space, and one that shares only a small input.
  const auto x = param(dtype::f32, shape{passes::min_fused_run});
  const auto a = ir::elementwise(op::exp, {x});
  const auto total = ir::reduce(op::sum, a, std::vector<std::int64_t>{}, false);
  auto late = graph_of({a, binary(op::mul, x, total)});
  CHECK(passes::fuse_elementwise(late).kernels.size() == 3);
  const auto row = param(dtype::f32, shape{64});
  auto other_space = graph_of({ir::elementwise(op::exp, {row}), binary(op::add, g, row)});
  CHECK(passes::fuse_elementwise(other_space).kernels.size() == 2);
  auto small_shared = graph_of({binary(op::mul, g, lr), binary(op::mul, m, lr)});
  CHECK(passes::fuse_elementwise(small_shared).kernels.size() == 2);
  // A reader of a result: the producer-consumer case, where the result is written and used
  // from the register.
  auto chained = graph_of({a, ir::elementwise(op::tanh, {a})});
  const auto chained_plan = passes::fuse_elementwise(chained);
  REQUIRE(chained_plan.kernels.size() == 1);
  CHECK(chained_plan.kernels[0].inputs == std::vector<ir::value_id>{0});
  // A value only the merged kernel reads is no longer written: exp(x) feeds both results.
  const auto h = ir::elementwise(op::exp, {x});
  auto internal = graph_of({ir::elementwise(op::tanh, {h}), binary(op::mul, h, h)});
  const auto internal_plan = passes::fuse_elementwise(internal);
  REQUIRE(internal_plan.kernels.size() == 1);
  CHECK(internal_plan.kernels[0].root == internal.outputs[0]);
  CHECK(internal_plan.kernels[0].extra_results == std::vector<ir::value_id>{internal.outputs[1]});
  CHECK(passes::plan_buffers(internal, internal_plan).slot_bytes.size() == 2);
  // A kernel takes at most max_merged_results results: 20 outputs of a chain make 3 kernels.
  std::vector<ir::node_ptr> chain_outputs{ir::elementwise(op::exp, {x})};
  while (chain_outputs.size() < 20) chain_outputs.push_back(ir::elementwise(op::tanh, {chain_outputs.back()}));
  auto long_chain = ir::capture(chain_outputs).program;
  CHECK(passes::fuse_elementwise(long_chain).kernels.size() == 3);
}

TEST_CASE("buffer planning reuses dead buffers and writes in place", "[passes]") {
  const auto x = param(dtype::f32, shape{64});
  const std::vector<std::int64_t> all{};
  // Four kernels in a row (each split by a reduction it feeds) over 64-float values.
  auto v = ir::elementwise(op::exp, {x});
  auto s1 = ir::reduce(op::sum, v, all, true);
  auto w = ir::elementwise(op::div, {v, s1});
  auto s2 = ir::reduce(op::sum, w, all, true);
  auto z = ir::elementwise(op::mul, {w, s2});
  auto g = graph_of({z});
  const auto fusion = passes::fuse_elementwise(g);
  REQUIRE(fusion.kernels.size() == 5);
  const auto plan = passes::plan_buffers(g, fusion);
  // exp -> slot A; sum -> B; div over exp's dying A in place; sum -> B again (sum 1 died); mul
  // is the output: a slot of its own.
  CHECK(plan.in_place_count == 1);
  CHECK(plan.slot_bytes.size() == 3);
  CHECK(plan.slot_is_output == std::vector<bool>{false, false, true});
}

TEST_CASE("the compiler runs the passes and lowers kernels to register programs", "[passes]") {
  const auto x = param(dtype::f32, shape{32});
  auto y = binary(op::add, binary(op::mul, x, constant(1)), binary(op::mul, x, x));
  y = binary(op::sub, y, ir::elementwise(op::exp, {binary(op::mul, x, x)}));
  const auto exe = compile::compile_graph(graph_of({y}));
  CHECK(exe->kernels.size() == 1);
  // x*1 -> x, x*x once (CSE): load x, mul, add, exp, sub.
  CHECK(exe->kernels[0].program.size() == 5);
  CHECK(exe->kernels[0].register_count <= 3);
  CHECK(exe->pass_log.find("simplify: 1") != std::string::npos);
}
