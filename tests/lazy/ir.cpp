// The IR: nodes made with their shapes and dtypes inferred, the errors of bad operands,
// capture into a graph, the structural hash and the printer.

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "xlite/ir/build.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/ir/print.hpp"

#include "../thrown.hpp"
#include "ir_nodes.hpp"

using namespace xlite;

namespace {

using namespace ir_nodes;
using Catch::Matchers::Contains;
using xlite_test::message_of;

} // namespace

TEST_CASE("element-wise nodes broadcast, promote and insert casts", "[ir]") {
  const auto a = param(dtype::i32, shape{3, 1});
  const auto b = param(dtype::f32, shape{4});
  const auto sum = ir::elementwise(op::add, {a, b});
  CHECK(sum->shape() == shape{3, 4});
  CHECK(sum->type() == dtype::f32);
  REQUIRE(sum->operands()[0]->code() == op::cast); // the int32 operand computes in float
  CHECK(sum->operands()[0]->type() == dtype::f32);
  CHECK(sum->operands()[1] == b);

  const auto less = ir::elementwise(op::less, {a, b});
  CHECK(less->type() == dtype::boolean);
  CHECK(less->operands()[0]->type() == dtype::f32); // compared in the common type

  const auto e = ir::elementwise(op::exp, {a});
  CHECK(e->type() == dtype::f32); // exp of an integer is floating point, as in PyTorch

  const auto w = ir::elementwise(op::where, {less, a, b});
  CHECK(w->type() == dtype::f32);
  CHECK(w->operands()[0]->type() == dtype::boolean);
}

TEST_CASE("bad operands are errors that name the op and the shapes", "[ir]") {
  const auto a = param(dtype::f32, shape{2, 3});
  const auto b = param(dtype::f32, shape{4});
  const auto error = [](auto&& f) { return message_of<xlite::error>(f); };
  CHECK_THAT(error([&] { ir::elementwise(op::mul, {a, b}); }), Contains("mul: shapes (2, 3) and (4,)"));
  // Three operands: all are named, and the two that disagree; (2, 3) and (4, 1, 3) broadcast
  // to (4, 2, 3), a shape no operand has.
  const auto c = param(dtype::f32, shape{4, 1, 3});
  CHECK_THAT(error([&] {
               ir::elementwise(op::fma, {a, c, b});
             }),
             Contains("fma: shapes (2, 3), (4, 1, 3) and (4,) cannot be broadcast together: "
                      "dimension -1 is 3 in (2, 3) and 4 in (4,)"));
  // A scalar (rank 0) broadcasts against anything and is left out, as the static front end
  // leaves out a number: clamp(a, 0, b) reads the same from both.
  const auto scalar = param(dtype::f32, shape{});
  CHECK_THAT(error([&] {
               ir::elementwise(op::clamp, {a, scalar, b});
             }),
             Contains("clamp: shapes (2, 3) and (4,) cannot be broadcast together"));
  CHECK_THAT(error([&] { ir::matmul(a, a); }), Contains("matmul: shapes (2, 3) and (2, 3)"));
  CHECK_THAT(error([&] { ir::reshape(a, shape{5}); }), Contains("reshape: cannot reshape (2, 3)"));
  CHECK_THAT(error([&] { ir::reduce(op::sum, a, std::vector<std::int64_t>{2}, false); }), Contains("sum: axis 2"));
  CHECK_THAT(error([&] { ir::concat({a, b}, 0); }), Contains("concat: shapes (2, 3) and (4,)"));
  const auto flags = param(dtype::boolean, shape{3});
  CHECK_THAT(error([&] { ir::elementwise(op::add, {flags, flags}); }), Contains("add: arithmetic on bool"));
  const auto empty = param(dtype::f32, shape{0, 3});
  CHECK_THAT(error([&] { ir::reduce(op::max, empty, std::vector<std::int64_t>{0}, false); }), Contains("is empty"));
  CHECK_NOTHROW(ir::reduce(op::sum, empty, std::vector<std::int64_t>{0}, false));
}

TEST_CASE("reductions, layout ops and matmul infer their shapes", "[ir]") {
  const auto x = param(dtype::i32, shape{2, 3, 4});
  const std::vector<std::int64_t> axes{-1, 0};
  const auto s = ir::reduce(op::sum, x, axes, false);
  CHECK(s->shape() == shape{3});
  CHECK(s->type() == dtype::i64); // integer sums widen, as torch.sum
  CHECK(ir::reduce(op::max, x, axes, true)->shape() == shape{1, 3, 1});
  CHECK(ir::reduce(op::mean, x, {}, false)->type() == dtype::f32);
  const std::vector<std::int64_t> perm{2, 0, 1};
  CHECK(ir::permute(x, perm)->shape() == shape{4, 2, 3});
  const std::vector<ir::slice_range> ranges{{0, 2, 1}, {1, 3, 1}, {0, 4, 3}};
  CHECK(ir::slice(x, ranges)->shape() == shape{2, 2, 2});
  const auto batch = param(dtype::f32, shape{5, 1, 3, 4});
  const auto rhs = param(dtype::f32, shape{2, 4, 6});
  CHECK(ir::matmul(batch, rhs)->shape() == shape{5, 2, 3, 6});
}

TEST_CASE("the structural hash covers structure, not parameter values", "[ir]") {
  const auto program = [](ir::node_ptr a, ir::node_ptr b, double c) {
    const auto y = ir::elementwise(op::mul, {ir::elementwise(op::add, {a, b}), ir::constant(ir::literal::of(c), dtype::f32)});
    const ir::node_ptr outputs[] = {y};
    return ir::capture(outputs);
  };
  const auto g1 = program(param(dtype::f32, shape{8}), param(dtype::f32, shape{8}), 1.0);
  const auto g2 = program(param(dtype::f32, shape{8}), param(dtype::f32, shape{8}), 1.0);
  CHECK(g1.program == g2.program);
  CHECK(ir::structural_hash(g1.program) == ir::structural_hash(g2.program));
  CHECK(g1.parameters.size() == 2);
  CHECK(g1.parameters[0] != g2.parameters[0]);
  // A different shape, dtype, constant or wiring is a different graph.
  const auto h = ir::structural_hash(g1.program);
  CHECK(ir::structural_hash(program(param(dtype::f32, shape{9}), param(dtype::f32, shape{9}), 1.0).program) != h);
  CHECK(ir::structural_hash(program(param(dtype::f64, shape{8}), param(dtype::f64, shape{8}), 1.0).program) != h);
  CHECK(ir::structural_hash(program(param(dtype::f32, shape{8}), param(dtype::f32, shape{8}), 0.0).program) != h);
  const auto shared = param(dtype::f32, shape{8});
  CHECK(ir::structural_hash(program(shared, shared, 1.0).program) != h); // a + a reads one parameter
}

TEST_CASE("capture walks deep traces without recursion and prints them", "[ir]") {
  auto x = param(dtype::f32, shape{2});
  for (int i = 0; i < 100000; ++i) x = ir::elementwise(op::neg, {x});
  const ir::node_ptr outputs[] = {x};
  const auto captured = ir::capture(outputs);
  CHECK(captured.program.instructions.size() == 100001);

  const auto a = param(dtype::f32, shape{2, 3});
  const std::vector<std::int64_t> axes{1};
  const ir::node_ptr outs[] = {ir::reduce(op::sum, ir::elementwise(op::mul, {a, a}), axes, false)};
  CHECK(ir::to_text(ir::capture(outs).program) == "%0 = float32[2,3] parameter(0)\n"
                                                   "%1 = float32[2,3] mul(%0, %0)\n"
                                                   "%2 = float32[2] sum(%1), axes={1}\n"
                                                   "outputs: %2\n");
}
