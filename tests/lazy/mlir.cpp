// xlite::debug::mlir_text: the exported module passes Debian's mlir-opt-16 verifier, and,
// lowered with MLIR's standard pipeline and run by mlir-cpu-runner-16, computes what xlite
// computes, op by op and for the Fashion-MNIST MLP's forward graph. The cases that need
// the tools warn and pass where mlir-16-tools is missing (scripts/install-deps.sh installs it).

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../../examples/fashion_mnist_models.hpp"
#include "xlite/lazy.hpp"

namespace lazy = xlite::lazy;
using xlite::dtype;
using xlite::shape;
using xlite::tensor;

namespace {

bool mlir_tools_present() {
  for (const char* path : {XLITE_MLIR_OPT, XLITE_MLIR_CPU_RUNNER, XLITE_MLIR_RUNNER_UTILS, XLITE_MLIR_C_RUNNER_UTILS}) {
    if (std::string(path).empty()) return false;
  }
  return true;
}

const char* const missing_tools =
    "skipped: mlir-16-tools and libmlir-16 are not installed (scripts/install-deps.sh installs them)";

std::filesystem::path scratch_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("xlite-mlir-" + std::to_string(::getpid()) + "-" + name);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `command` with its output to a file; the exit status and what it printed.
std::pair<int, std::string> run(const std::string& command) {
  const auto log = scratch_file("log.txt");
  const int status = std::system((command + " > '" + log.string() + "' 2>&1").c_str());
  std::string output = read_file(log);
  std::filesystem::remove(log);
  return {status, output};
}

// mlir-opt-16's verdict on `module`: exit status and diagnostics.
std::pair<int, std::string> verify(const std::string& module) {
  const auto path = scratch_file("verify.mlir");
  std::ofstream(path) << module;
  auto result = run(std::string(XLITE_MLIR_OPT) + " '" + path.string() + "' -o /dev/null");
  std::filesystem::remove(path);
  return result;
}

// A tensor's elements as a dense constant, exactly: its bytes in hex.
std::string dense(const xlite::runtime::buffer& value) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string text = "dense<\"0x";
  for (std::int64_t k = 0; k < value.byte_size(); ++k) {
    const auto byte = static_cast<unsigned>(value.data()[k]);
    text += hex[byte >> 4];
    text += hex[byte & 15];
  }
  return text + "\">";
}

// Exports the graph of `outputs` (float32 tensors), appends an entry function that passes
// the values of its parameters as constants and prints each result, lowers it with the
// pipeline of docs/io.md and runs it. Returns the printed elements of each output.
std::vector<std::vector<double>> run_lowered(const std::vector<lazy::tensor>& outputs) {
  std::vector<xlite::ir::node_ptr> nodes;
  for (const auto& t : outputs) nodes.push_back(t.node());
  const xlite::ir::captured_graph captured = xlite::ir::capture(nodes);
  std::string module = xlite::ir::to_mlir(captured.program);
  module.resize(module.rfind('}')); // reopen the module for the entry function

  const auto& program = captured.program;
  std::string entry = "  func.func private @printMemrefF32(tensor<*xf32>) attributes { llvm.emit_c_interface }\n"
                      "  func.func @entry() {\n";
  std::vector<std::string> arguments(program.parameter_count), types(program.parameter_count);
  for (const auto& ins : program.instructions) {
    if (ins.code != xlite::op::parameter) continue;
    const auto k = static_cast<std::size_t>(ins.attrs.ints[0]);
    const auto* source = dynamic_cast<const xlite::runtime::device_data*>(captured.parameters[k].get());
    REQUIRE(source);
    types[k] = xlite::ir::detail::tensor_type(ins.type, ins.shape);
    arguments[k] = "%p" + std::to_string(k);
    entry += "    " + arguments[k] + " = arith.constant " + dense(*source->wait()) + " : " + types[k] + "\n";
  }
  std::string results, call_types, argument_list, argument_types;
  for (std::size_t k = 0; k < arguments.size(); ++k) {
    argument_list += (k ? ", " : "") + arguments[k];
    argument_types += (k ? ", " : "") + types[k];
  }
  for (std::size_t k = 0; k < program.outputs.size(); ++k) {
    const auto& out = program.instructions[program.outputs[k]];
    REQUIRE(out.type == dtype::f32);
    results += (k ? ", %r" : "%r") + std::to_string(k);
    call_types += (k ? ", " : "") + xlite::ir::detail::tensor_type(out.type, out.shape);
  }
  entry +=
      "    " + results + " = call @main(" + argument_list + ") : (" + argument_types + ") -> (" + call_types + ")\n";
  for (std::size_t k = 0; k < program.outputs.size(); ++k) {
    const auto& out = program.instructions[program.outputs[k]];
    entry += "    %u" + std::to_string(k) + " = tensor.cast %r" + std::to_string(k) + " : " +
             xlite::ir::detail::tensor_type(out.type, out.shape) + " to tensor<*xf32>\n";
    entry += "    call @printMemrefF32(%u" + std::to_string(k) + ") : (tensor<*xf32>) -> ()\n";
  }
  module += entry + "    return\n  }\n}\n";

  const auto path = scratch_file("run.mlir");
  std::ofstream(path) << module;
  const auto [status, printed] = run(
      std::string(XLITE_MLIR_OPT) + " '" + path.string() +
      "' --empty-tensor-to-alloc-tensor '--one-shot-bufferize=bufferize-function-boundaries=1 allow-return-allocs=1'"
      " --convert-linalg-to-loops --convert-scf-to-cf --expand-strided-metadata --lower-affine"
      " --convert-math-to-llvm --convert-math-to-libm --convert-arith-to-llvm --convert-memref-to-llvm"
      " --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts | " +
      XLITE_MLIR_CPU_RUNNER + " -e entry -entry-point-result=void -shared-libs=" + XLITE_MLIR_RUNNER_UTILS + "," +
      XLITE_MLIR_C_RUNNER_UTILS);
  INFO(module);
  INFO(printed);
  REQUIRE(status == 0);
  std::filesystem::remove(path);

  std::vector<std::vector<double>> values;
  const std::regex number(R"(-?(nan|inf|[0-9]+(\.[0-9]*)?(e[-+]?[0-9]+)?))");
  std::size_t at = 0;
  while ((at = printed.find("data =", at)) != std::string::npos) {
    const std::size_t end = std::min(printed.find("Unranked", at), printed.size());
    const std::string data = printed.substr(at + 6, end - at - 6);
    values.emplace_back();
    for (std::sregex_iterator it(data.begin(), data.end(), number), last; it != last; ++it) {
      values.back().push_back(std::strtod(it->str().c_str(), nullptr));
    }
    at = end;
  }
  REQUIRE(values.size() == outputs.size());
  return values;
}

tensor<float> random_floats(const shape& s, std::uint64_t seed, float low = -2, float high = 2) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  tensor<float> t(s);
  for (float& v : t) v = dist(rng);
  return t;
}

// Each output of `outputs` as MLIR computes it against xlite's own values: within 2e-5
// relative (MLIR prints 6 significant digits, its math functions are libm's and its sums
// run in another order), NaN where xlite has NaN.
void check_against_xlite(const std::vector<lazy::tensor>& outputs) {
  const auto lowered = run_lowered(outputs);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const tensor<float> expected = outputs[k].to_host<float>();
    INFO("output " << k << " of shape " << outputs[k].shape());
    REQUIRE(lowered[k].size() == static_cast<std::size_t>(expected.size()));
    for (std::int64_t i = 0; i < expected.size(); ++i) {
      const double want = expected.data()[i], got = lowered[k][static_cast<std::size_t>(i)];
      INFO("element " << i << ": xlite " << want << ", MLIR " << got);
      if (std::isnan(want)) {
        CHECK(std::isnan(got));
      } else {
        CHECK(std::abs(got - want) <= 2e-5 * std::max(1.0, std::abs(want)));
      }
    }
  }
}

} // namespace

TEST_CASE("mlir_text: the module is a function of the parameters in upstream dialects", "[mlir]") {
  const auto x = lazy::tensor::from(tensor<float>{{1, -2, 3}, {4, 5, -6}});
  const auto b = lazy::tensor::from(tensor<float>{0.5f, 1, 2});
  const auto y = lazy::relu(lazy::matmul(x, lazy::transpose(x)) * 3.0f) + lazy::sum(b);
  const std::string text = xlite::debug::mlir_text({y, lazy::tanh(x + b)});
  CHECK_THAT(text, Catch::Matchers::StartsWith("module {\n  func.func @main(%arg0: tensor<2x3xf32>, "));
  CHECK_THAT(text, Catch::Matchers::Contains(") -> (tensor<2x2xf32>, tensor<2x3xf32>) {"));
  CHECK_THAT(text, Catch::Matchers::Contains("math.fma"));
  CHECK_THAT(text, Catch::Matchers::Contains("iterator_types = [\"parallel\", \"parallel\", \"reduction\"]"));
  CHECK_THAT(text, Catch::Matchers::Contains("math.tanh"));
  CHECK_THAT(text, Catch::Matchers::Contains("affine_map<(d0, d1) -> (d1)>")); // b broadcast over the rows
  if (!mlir_tools_present()) {
    WARN(missing_tools);
    return;
  }
  const auto [status, diagnostics] = verify(text);
  INFO(text << diagnostics);
  CHECK(status == 0);
}

TEST_CASE("mlir_text: ops without an MLIR form are named", "[mlir]") {
  const auto x = lazy::tensor::from(tensor<float>{1, 2, 3});
  CHECK_THROWS_MATCHES(xlite::debug::mlir_text({lazy::argmax(x)}), xlite::value_error,
                       Catch::Matchers::Message(
                           "mlir_text: op 'argmax' has no MLIR form yet (exported: element-wise ops, casts, reductions "
                           "but argmax, matmul, reshape, permute, broadcast_to, slice, concat, pad, iota, constants)"));
}

TEST_CASE("mlir_text: every exported op, lowered and run, computes what xlite computes", "[mlir]") {
  if (!mlir_tools_present()) {
    WARN(missing_tools);
    return;
  }
  const auto a = lazy::tensor::from(random_floats({2, 3}, 1));
  const auto b = lazy::tensor::from(random_floats({3}, 2));
  const auto c = lazy::tensor::from(random_floats({1, 3}, 3));
  const auto positive = lazy::abs(a) + 0.25f;
  const auto halves = lazy::tensor::from(tensor<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f});
  const auto f32 = [](const lazy::tensor& t) { return lazy::cast(t, dtype::f32); };

  SECTION("arithmetic with broadcasting") {
    check_against_xlite({a + b, a - c, a * b, a / c, -a, lazy::minimum(a, b), lazy::maximum(a, c),
                         lazy::clamp(a, c, lazy::tensor::from(tensor<float>{1.0f})), lazy::fma(a, b, c),
                         lazy::pow(positive, b), lazy::where(a > b, a, c)});
  }
  SECTION("math functions") {
    check_against_xlite({lazy::exp(a), lazy::log(positive), lazy::log1p(positive), lazy::sqrt(positive),
                         lazy::rsqrt(positive), lazy::tanh(a), lazy::sigmoid(a), lazy::relu(a), lazy::gelu(a),
                         lazy::sin(a), lazy::cos(a), lazy::abs(a), lazy::floor(a * 3.0f), lazy::ceil(a * 3.0f),
                         lazy::round(halves), lazy::log(a)}); // log of negatives: NaN on both sides
  }
  SECTION("comparisons, logic and casts") {
    check_against_xlite({f32(a < b), f32(a <= c), f32(a > b), f32(a >= c), f32(a == a), f32(a != b),
                         f32((a > b) && !(a > c)), f32((a > b) || (a > c)), f32(lazy::cast(a * 10.0f, dtype::i32)),
                         f32(lazy::cast(a * 50.0f, dtype::i8)), f32(lazy::cast(positive * 50.0f, dtype::u8)),
                         f32(lazy::cast(a, dtype::boolean)), f32(lazy::cast(a, dtype::f64) * 3.0),
                         f32(lazy::cast(a * 10.0f, dtype::i64) * 3)});
  }
  SECTION("casts that leave a type's range wrap as xlite's do, and 8-bit integers keep their sign") {
    const auto wide = a * 150.0f; // -300 to 300: outside int8 and uint8
    const auto bytes = lazy::cast(positive * 100.0f, dtype::u8);
    check_against_xlite({f32(lazy::cast(wide, dtype::i8)), f32(lazy::cast(wide, dtype::u8)), f32(lazy::abs(bytes)),
                         f32(lazy::abs(lazy::cast(wide, dtype::i8))), f32(lazy::amax(bytes)),
                         f32(lazy::amin(bytes, {1})),
                         f32(bytes > lazy::cast(lazy::tensor::from(tensor<float>{100.0f}), dtype::u8))});
  }
  SECTION("to bfloat16 and float16 through float32, as xlite rounds") {
    // 1 + 2^-8 + 2^-40 is just above a bfloat16 tie: rounded once it goes up to 1 + 2^-7;
    // through float32 it first becomes the tie 1 + 2^-8, which goes to even, 1. Likewise
    // 2^40 + 2^32 + 1 from int64.
    const auto near_tie = lazy::tensor::from(tensor<double>{1.0 + 0x1p-8 + 0x1p-40, -(1.0 + 0x1p-8 + 0x1p-40)});
    const auto big =
        lazy::tensor::from(tensor<std::int64_t>{(std::int64_t{1} << 40) + (std::int64_t{1} << 32) + 1, 257});
    check_against_xlite({f32(lazy::cast(near_tie, dtype::bf16)), f32(lazy::cast(big, dtype::bf16)),
                         f32(lazy::cast(lazy::cast(big, dtype::i32), dtype::f16))});
  }
  SECTION("int64 reductions start from the type's extremes") {
    const auto longs = lazy::tensor::from(tensor<std::int64_t>{{-5, 7, -9}, {4, -2, 8}});
    check_against_xlite({f32(lazy::amax(longs, {1})), f32(lazy::amin(longs, {0})), f32(lazy::amax(longs))});
  }
  SECTION("bfloat16 and float16, computed in float32 and rounded per op") {
    const auto ah = lazy::cast(a, dtype::bf16), bh = lazy::cast(b, dtype::bf16);
    const auto a16 = lazy::cast(a, dtype::f16);
    check_against_xlite({f32(ah * bh + ah), f32(lazy::exp(ah)), f32(a16 * a16 - a16), f32(lazy::sum(ah, {1})),
                         f32(lazy::matmul(ah, lazy::transpose(ah)))});
  }
  SECTION("reductions") {
    const auto ints = lazy::cast(a * 10.0f, dtype::i32);
    check_against_xlite({lazy::sum(a, {1}), lazy::mean(a), lazy::amax(a, {0}, true), lazy::amin(a, {1}, true),
                         lazy::prod(a, {0}), f32(lazy::sum(ints, {0})), f32(lazy::amax(ints)), f32(lazy::sum(a > b))});
  }
  SECTION("matmuls: transposed, batched, broadcast over the batch") {
    const auto x = lazy::tensor::from(random_floats({2, 4, 3}, 4));
    const auto w = lazy::tensor::from(random_floats({3, 5}, 5));
    const auto v = lazy::tensor::from(random_floats({2, 3, 5}, 6));
    check_against_xlite({lazy::matmul(a, lazy::transpose(a)), lazy::matmul(lazy::transpose(a), a), lazy::matmul(x, w),
                         lazy::matmul(x, v), lazy::matmul(lazy::transpose(v), lazy::transpose(x))});
  }
  SECTION("layout: reshape, permute, broadcast, slice, concat, pad, iota") {
    const auto x = lazy::tensor::from(random_floats({2, 3, 4}, 7));
    const auto labels = lazy::tensor::from(tensor<std::int32_t>{2, 0, 4});
    check_against_xlite({lazy::reshape(x, {4, 6}), lazy::reshape(x, {24}), lazy::permute(x, {2, 0, 1}),
                         lazy::broadcast_to(b, {4, 3}), lazy::slice(x, 2, 1, 4, 2), lazy::concat({a, c, a}, 0),
                         lazy::pad(a, {{1, 0}, {2, 1}}, 7.5f), f32(lazy::one_hot(labels, 5)),
                         lazy::reshape(lazy::sum(a), {1, 1})});
  }
}

TEST_CASE("mlir_text: the Fashion-MNIST MLP's forward graph verifies, and runs to xlite's logits", "[mlir]") {
  lazy::set_rng_state(3);
  const fashion_mnist::model m = fashion_mnist::mlp();
  xlite::mark_step(); // the parameters exist: they become the function's arguments
  const auto images = lazy::tensor::from(random_floats({4, 28, 28}, 8));
  const lazy::tensor logits = m.forward(m.params, images);
  const std::string text = xlite::debug::mlir_text({logits});
  CHECK_THAT(text, Catch::Matchers::StartsWith("module {\n  func.func @main(%arg0: tensor<4x28x28xf32>, %arg1: "
                                               "tensor<784x256xf32>"));
  CHECK_THAT(text, Catch::Matchers::Contains("-> (tensor<4x10xf32>)"));
  if (!mlir_tools_present()) {
    WARN(missing_tools);
    return;
  }
  const auto [status, diagnostics] = verify(text);
  INFO(diagnostics);
  CHECK(status == 0);
  check_against_xlite({logits});
}
