// Constant folding with the runtime's arithmetic: every element-wise op, every dtype it
// takes, special values (signed zeros, NaN, infinities, subnormals, integer extremes),
// folded at compile time, bitwise equal to the same op computed by a kernel from
// parameters holding the same values; on the SIMD path and on the scalar one.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "xlite/lazy.hpp"

using namespace xlite;

namespace {

lazy::tensor constant_of(double v, dtype t) {
  const auto value = is_floating_point(t) ? ir::literal::of(v) : ir::literal::of(static_cast<std::int64_t>(v));
  return lazy::tensor(xlite::device(), ir::constant(value, t));
}

// Whether dtype t holds v exactly (NaN counts for floating types).
bool holds(dtype t, double v) {
  return visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (std::isnan(v)) return std::numeric_limits<T>::has_quiet_NaN;
    if (!is_floating_point(t) && (std::isinf(v) || v < static_cast<double>(std::numeric_limits<T>::lowest()) ||
                                  v > static_cast<double>(std::numeric_limits<T>::max()))) {
      return false;
    }
    return static_cast<double>(static_cast<T>(v)) == v;
  });
}

std::vector<double> values_of(dtype t) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> candidates{0, -0.0, 1, -1, 0.5, -2.5, 7, 100, 255, -128, 1e30, 0x1p-140, nan, inf, -inf};
  std::vector<double> held;
  for (const double v : candidates) {
    if (holds(t, v)) held.push_back(v);
  }
  return held;
}

// The operand tuples of an op of `arity` over `values`: all of them for one and two
// operands, the cube of the first five for three.
std::vector<std::vector<double>> tuples_of(std::size_t arity, const std::vector<double>& values) {
  std::vector<std::vector<double>> tuples{{}};
  for (std::size_t k = 0; k < arity; ++k) {
    const std::size_t count = arity == 3 ? std::min<std::size_t>(5, values.size()) : values.size();
    std::vector<std::vector<double>> longer;
    for (const auto& t : tuples) {
      for (std::size_t i = 0; i < count; ++i) {
        longer.push_back(t);
        longer.back().push_back(values[i]);
      }
    }
    tuples = std::move(longer);
  }
  return tuples;
}

lazy::tensor parameter_of(const std::vector<double>& values, dtype t) {
  return visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    xlite::tensor<T> host(shape{static_cast<std::int64_t>(values.size())});
    for (std::size_t i = 0; i < values.size(); ++i) host.data()[i] = static_cast<T>(values[i]);
    return lazy::tensor::from(host);
  });
}

lazy::tensor apply_op(op o, const std::vector<lazy::tensor>& operands) {
  switch (operands.size()) {
  case 1:
    return lazy::elementwise(o, {operands[0]});
  case 2:
    return lazy::elementwise(o, {operands[0], operands[1]});
  default:
    return lazy::elementwise(o, {operands[0], operands[1], operands[2]});
  }
}

// The bytes of element i of t.
std::vector<unsigned char> element_bytes(const lazy::tensor& t, std::int64_t i) {
  return visit_dtype(t.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const xlite::tensor<T> host = t.to_host<T>();
    std::vector<unsigned char> bytes(sizeof(T));
    std::memcpy(bytes.data(), host.data() + i, sizeof(T));
    return bytes;
  });
}

// Checks op o over operands of dtype t: returns how many values were compared.
std::size_t check_op(op o, dtype t) {
  const std::size_t arity = info(o).arity;
  const auto tuples = tuples_of(arity, values_of(t));
  // where's condition is a bool; its data operands are of dtype t.
  const auto operand_type = [&](std::size_t k) { return o == op::where && k == 0 ? dtype::boolean : t; };
  // A kernel computes every element on SIMD batches, a column's end in one padded batch, so
  // a folded constant equals the kernel's value wherever it sits (the columns' lengths are
  // not whole batches; sin and cos pick their range reduction for a whole batch, and these
  // values give the same bits mixed in one as alone).
  std::vector<lazy::tensor> parameters;
  for (std::size_t k = 0; k < arity; ++k) {
    std::vector<double> column;
    for (const auto& tuple : tuples) column.push_back(o == op::where && k == 0 ? tuple[k] != 0 : tuple[k]);
    parameters.push_back(parameter_of(column, operand_type(k)));
  }
  std::optional<lazy::tensor> computed;
  try {
    computed = apply_op(o, parameters);
  } catch (const xlite::error&) { // an op that does not take dtype t
    return 0;
  }
  std::vector<lazy::tensor> folded;
  for (const auto& tuple : tuples) {
    std::vector<lazy::tensor> constants;
    for (std::size_t k = 0; k < arity; ++k) {
      constants.push_back(constant_of(o == op::where && k == 0 ? tuple[k] != 0 : tuple[k], operand_type(k)));
    }
    folded.push_back(apply_op(o, constants));
  }
  mark_step(); // one graph: the kernel over the parameters, and every folded constant
  for (std::size_t i = 0; i < tuples.size(); ++i) {
    INFO(name(o) << " on " << name(t) << ", operands " << Catch::Detail::stringify(tuples[i]));
    REQUIRE(folded[i].type() == computed->type());
    CHECK(element_bytes(folded[i], 0) == element_bytes(*computed, static_cast<std::int64_t>(i)));
  }
  return tuples.size();
}

template <class F>
void on_each_path(F&& body) {
  SECTION("simd path") { body(); }
  SECTION("scalar path") {
    scoped_max_isa cap(isa::portable);
    body();
  }
}

} // namespace

TEST_CASE("a folded constant is bitwise the value the kernel computes, for every op and dtype", "[lazy][fold]") {
  on_each_path([] {
    const dtype types[] = {dtype::f32, dtype::f64, dtype::bf16, dtype::f16,    dtype::i32,
                           dtype::i64, dtype::i8,  dtype::u8,   dtype::boolean};
    std::size_t compared = 0;
#define XLITE_CHECK_OP(op_name, arity, kind, rule)                                                                     \
  if constexpr (op_kind::kind == op_kind::elementwise && op::op_name != op::cast) {                                    \
    for (const dtype t : types) compared += check_op(op::op_name, t);                                                  \
  }
    XLITE_OP_LIST(XLITE_CHECK_OP)
#undef XLITE_CHECK_OP
    CHECK(compared > 5000);
  });
}

TEST_CASE("casts between every pair of dtypes fold as the kernel converts", "[lazy][fold]") {
  on_each_path([] {
    const dtype types[] = {dtype::f32, dtype::f64, dtype::bf16, dtype::f16,    dtype::i32,
                           dtype::i64, dtype::i8,  dtype::u8,   dtype::boolean};
    for (const dtype from : types) {
      // Values every target holds or converts without undefined behaviour: C++ leaves a
      // float to int conversion out of range (NaN, inf, 1e30) undefined, as does the kernel.
      std::vector<double> values;
      for (const double v : values_of(from)) {
        if (std::isfinite(v) && std::abs(v) <= 100) values.push_back(v);
      }
      for (const dtype to : types) {
        const lazy::tensor computed = lazy::cast(parameter_of(values, from), to);
        std::vector<lazy::tensor> folded;
        for (const double v : values) folded.push_back(lazy::cast(constant_of(v, from), to));
        mark_step();
        for (std::size_t i = 0; i < values.size(); ++i) {
          INFO("cast " << values[i] << " from " << name(from) << " to " << name(to));
          CHECK(element_bytes(folded[i], 0) == element_bytes(computed, static_cast<std::int64_t>(i)));
        }
      }
    }
  });
}

TEST_CASE("the compiler folds chains of ops on constants, and nothing that reads a parameter", "[lazy][fold]") {
  const auto one = ir::constant(ir::literal::of(1.0), dtype::f32);
  const auto two = ir::elementwise(op::add, {one, one});
  const auto e = ir::elementwise(op::exp, {ir::elementwise(op::mul, {two, two})});
  auto x = lazy::tensor::from(xlite::tensor<float>(shape{3}, 0.25f));
  const std::vector<ir::node_ptr> outputs{e, ir::elementwise(op::mul, {x.node(), e})};
  // As a barrier compiles.
  const auto exe = runtime::find_or_compile(ir::numbered_trace(outputs), {"test", {}, xlite::device()});
  CHECK(exe->pass_log.find("fold: 3 folded") != std::string::npos);
  const ir::instruction& out = exe->program.instructions[exe->program.outputs[0]];
  REQUIRE(out.code == op::constant);
  // What a kernel computes for exp(4) in a full batch.
  const float expected = lazy::exp(lazy::tensor::from(xlite::tensor<float>(shape{64}, 4.0f))).to_host<float>()(0);
  CHECK(out.attrs.value.real == static_cast<double>(expected));
  CHECK(exe->program.instructions[exe->program.outputs[1]].code == op::mul); // x * exp(4) stays

  // Through a traced step: the result is the one the kernel computes.
  const lazy::tensor folded(xlite::device(), e);
  CHECK(folded.item<float>() == expected);
}
