// Executables as bytes, for the persistent cache: a round trip keeps everything, and
// damaged bytes are a format_error, never a crash (the sanitizer build checks the "never").

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "xlite/compile/cache.hpp"
#include "xlite/compile/compiler.hpp"
#include "xlite/compile/disk_cache.hpp"
#include "xlite/compile/serialize.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/ir/control.hpp"
#include "xlite/ir/diff.hpp"
#include "xlite/ir/graph.hpp"

using namespace xlite;

namespace {

struct fake_source : ir::parameter_source {};

ir::node_ptr param(dtype t, const shape& s) { return ir::parameter(std::make_shared<fake_source>(), t, s); }
ir::node_ptr constant(double v, dtype t = dtype::f32) { return ir::constant(ir::literal::of(v), t); }

// Graphs with every part an executable can have: element-wise kernels with constants and
// iota, a reduction with its operand fused, a matmul with an epilogue, layout ops, a while
// loop whose body is a subprogram, folded constants, and a kernel with two results (last).
// The outputs of sample programs: every kind of attribute, a loop's subgraphs, constants,
// parameters read twice and multi-output kernels.
std::vector<std::vector<ir::node_ptr>> sample_traces() {
  std::vector<std::vector<ir::node_ptr>> traces;
  const auto x = param(dtype::f32, shape{8, 16});
  const auto w = param(dtype::f32, shape{16, 4});
  const auto bias = param(dtype::f32, shape{4});
  const auto product = ir::matmul(x, w);
  const auto relu = ir::elementwise(op::maximum, {ir::elementwise(op::add, {product, bias}), constant(0)});
  const std::int64_t last_axis[] = {1};
  const auto total = ir::reduce(op::sum, ir::elementwise(op::exp, {relu}), last_axis, true);
  const auto indices = ir::iota(dtype::i64, shape{8, 4}, 1);
  traces.push_back({total, ir::cast(indices, dtype::bf16)});

  const std::int64_t perm[] = {1, 0};
  const ir::padding widths[] = {{1, 2}, {0, 3}};
  traces.push_back({ir::pad(ir::permute(x, perm), widths, ir::literal::of(-1.5))});

  const auto counter = ir::placeholder(dtype::i64, shape{});
  const auto state = ir::placeholder(dtype::f32, shape{8, 16});
  const std::vector<ir::node_ptr> placeholders{counter, state};
  const auto looped = ir::while_loop(
      std::vector{constant(0, dtype::i64), x}, placeholders,
      ir::elementwise(op::less, {counter, constant(3, dtype::i64)}),
      std::vector{ir::elementwise(op::add, {counter, constant(1, dtype::i64)}),
                  ir::elementwise(op::mul, {state, constant(0.5)})});
  traces.push_back({looped[1]});

  // Constants to fold: (1 + 1) * 0.5 becomes one constant; exp(1) stays (see fold_add_mul).
  const auto folded = ir::elementwise(op::mul, {ir::elementwise(op::add, {constant(1), constant(1)}), constant(0.5)});
  traces.push_back(
      {ir::elementwise(op::add, {ir::elementwise(op::mul, {x, folded}), ir::elementwise(op::exp, {constant(1)})})});

  // Two results of one multi-output kernel.
  traces.push_back({ir::elementwise(op::tanh, {x}), ir::elementwise(op::mul, {ir::elementwise(op::exp, {x}), x})});
  return traces;
}

std::vector<ir::graph> sample_graphs() {
  std::vector<ir::graph> graphs;
  for (const auto& outputs : sample_traces()) graphs.push_back(ir::capture(outputs).program);
  return graphs;
}

// Folds add and mul of f32 constants in double and declines the rest: a stand-in for
// runtime::evaluate_constant that gives the same values on every machine.
std::optional<ir::literal> fold_add_mul(const ir::graph& g, const ir::instruction& ins) {
  if ((ins.code != op::add && ins.code != op::mul) || ins.type != dtype::f32) return std::nullopt;
  const double a = g.instructions[ins.operands[0]].attrs.value.real;
  const double b = g.instructions[ins.operands[1]].attrs.value.real;
  return ir::literal::of(ins.code == op::add ? a + b : a * b);
}

compile::cache_record record_of(const ir::graph& g) {
  return {"test context", g, compile::compile_graph(g, {}, fold_add_mul)};
}

namespace fs = std::filesystem;

struct scratch_directory {
  fs::path path = fs::temp_directory_path() / ("xlite-disk-cache-test-" + std::to_string(::getpid()));
  scratch_directory() { fs::remove_all(path); }
  ~scratch_directory() { fs::remove_all(path); }
};

} // namespace

TEST_CASE("a compiled program survives serialization unchanged", "[compile][serialize]") {
  for (const ir::graph& g : sample_graphs()) {
    const compile::cache_record original = record_of(g);
    const std::string bytes = compile::serialize(original);
    const compile::cache_record copy = compile::deserialize(bytes);
    CHECK(copy.context == original.context);
    CHECK(copy.source == g);
    CHECK(copy.compiled->program == original.compiled->program);
    CHECK(copy.compiled->hash == original.compiled->hash);
    CHECK(copy.compiled->kernels.size() == original.compiled->kernels.size());
    CHECK(copy.compiled->buffers.slot_bytes == original.compiled->buffers.slot_bytes);
    CHECK(copy.compiled->pass_log == original.compiled->pass_log);
    // Everything else too: the copy encodes to the same bytes.
    CHECK(compile::serialize(copy) == bytes);
  }
  // The last sample is one kernel with two results.
  const auto multi_output = compile::deserialize(compile::serialize(record_of(sample_graphs().back())));
  REQUIRE(multi_output.compiled->kernels.size() == 1);
  CHECK(multi_output.compiled->kernels[0].group.extra_results.size() == 1);
  CHECK(multi_output.compiled->kernels[0].result_registers.size() == 2);
}

TEST_CASE("every truncation of a serialized program is a format_error", "[compile][serialize]") {
  for (const ir::graph& g : sample_graphs()) {
    const std::string bytes = compile::serialize(record_of(g));
    for (std::size_t length = 0; length < bytes.size(); ++length) {
      INFO("length " << length << " of " << bytes.size());
      CHECK_THROWS_AS(compile::deserialize(std::span(bytes.data(), length)), compile::format_error);
    }
    CHECK_THROWS_AS(compile::deserialize(bytes + '\0'), compile::format_error);
  }
}

TEST_CASE("random damage to a serialized program never crashes", "[compile][serialize]") {
  std::mt19937_64 random(20261123);
  std::size_t rejected = 0, trials = 0;
  for (const ir::graph& g : sample_graphs()) {
    const std::string bytes = compile::serialize(record_of(g));
    for (int trial = 0; trial < 3000; ++trial, ++trials) {
      std::string damaged = bytes;
      const int flips = 1 + static_cast<int>(random() % 4);
      for (int f = 0; f < flips; ++f) damaged[random() % damaged.size()] = static_cast<char>(random());
      try {
        compile::deserialize(damaged); // a damaged constant or flag can still decode
      } catch (const compile::format_error&) {
        ++rejected;
      }
    }
  }
  CHECK(rejected > trials / 10); // most damage to counts, enums and indices is caught
}

TEST_CASE("graphs whose keys collide never share an executable in memory", "[compile][cache]") {
  const auto graphs = sample_graphs();
  compile::compilation_cache cache(4);
  cache.insert(42, graphs[0], compile::compile_graph(graphs[0]));
  CHECK(cache.find(42, graphs[0]) != nullptr);
  CHECK(cache.find(42, graphs[1]) == nullptr); // same key, another graph
  CHECK(cache.find(43, graphs[0]) == nullptr);
}

TEST_CASE("a barrier's trace hashes and compares as the graph it would build", "[ir][cache]") {
  const auto traces = sample_traces();
  const auto graphs = sample_graphs();
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const ir::numbered_trace trace(traces[i]);
    CHECK(trace.hash() == ir::structural_hash(graphs[i]));
    CHECK(trace.to_graph().program == graphs[i]);
    for (std::size_t j = 0; j < graphs.size(); ++j) CHECK(trace.equals(graphs[j]) == (i == j));
    // Any one field changed is another graph.
    for (std::size_t k = 0; k < graphs[i].instructions.size(); ++k) {
      auto changed = graphs[i];
      ir::instruction& ins = changed.instructions[k];
      if (ins.code == op::parameter) {
        ins.attrs.ints[0] += 1;
      } else if (!ins.operands.empty()) {
        ins.operands[0] = ins.operands[0] == 0 ? 1 : 0;
      } else {
        ins.attrs.value.real += 1;
      }
      CHECK_FALSE(trace.equals(changed));
      auto reshaped = graphs[i];
      reshaped.instructions[k].shape = shape{7};
      CHECK_FALSE(trace.equals(reshaped));
    }
  }
  // A subgraph's boundary: the values it is given are its parameters 0, 1, ..., whatever
  // computes them.
  const auto given = ir::elementwise(op::neg, {param(dtype::i64, shape{})});
  const auto outside = param(dtype::i64, shape{});
  const std::vector<ir::node_ptr> body{ir::elementwise(op::add, {given, outside})}, boundary{given, outside};
  const ir::numbered_trace bounded(body, boundary);
  const auto g = bounded.to_graph();
  CHECK(g.program.parameter_count == 2);
  CHECK(bounded.hash() == ir::structural_hash(g.program));
  CHECK(bounded.equals(g.program));
  CHECK(bounded.parameters().size() == 2);
  CHECK(bounded.parameters()[0] == nullptr); // a computed value reads no buffer
  CHECK(bounded.parameters()[1] == outside->source());
}

TEST_CASE("equal graphs compare equal through their subgraphs, not their pointers", "[ir]") {
  const auto a = sample_graphs();
  const auto b = sample_graphs(); // traced again: new subgraph objects
  CHECK(a[2] == b[2]);
  CHECK(ir::structural_hash(a[2]) == ir::structural_hash(b[2]));
  CHECK_FALSE(ir::describe_difference(a[2], b[2]).has_value());
  CHECK(ir::describe_difference(a[0], a[1]).has_value());
}

TEST_CASE("the compiler's output for a sample is what compiler_revision was bumped for", "[compile][serialize]") {
  // A digest of the compiled samples. When it changes, entries that older builds wrote to a
  // persistent cache would run a different program: bump compile::compiler_revision
  // (compile/compiler.hpp), then set this digest to the new one printed below.
  constexpr std::uint64_t digest_at_revision = 12295744442585864174u;
  static_assert(compile::compiler_revision == 6);
  ir::hasher h;
  for (const ir::graph& g : sample_graphs()) {
    for (const char c : compile::serialize(record_of(g))) h.add(static_cast<unsigned char>(c));
  }
  INFO("digest of the compiled samples: " << h.state);
  CHECK(h.state == digest_at_revision);
}

TEST_CASE("the disk cache: a key collision or another context is a miss, not damage", "[compile][cache]") {
  const auto graphs = sample_graphs();
  scratch_directory dir;
  compile::disk_cache cache(dir.path, false);
  REQUIRE(cache.store(1, record_of(graphs[0])));
  fs::copy_file(cache.entry_path(1), cache.entry_path(2)); // graph 0's entry under graph 1's key
  CHECK(cache.find(1, "test context", graphs[0]).result == compile::disk_cache::outcome::hit);
  CHECK(cache.find(2, "test context", graphs[1]).result == compile::disk_cache::outcome::miss);
  CHECK(cache.find(1, "another context", graphs[0]).result == compile::disk_cache::outcome::miss);
  CHECK(cache.find(3, "test context", graphs[0]).result == compile::disk_cache::outcome::miss);
}

TEST_CASE("the disk cache: readers running beside a writer never see half an entry", "[compile][cache]") {
  const auto graphs = sample_graphs();
  const auto record = record_of(graphs[2]);
  scratch_directory dir;
  compile::disk_cache(dir.path, false).store(7, record);
  std::atomic<bool> done{false};
  std::atomic<int> damaged{0}, hits{0};
  std::thread writer([&] {
    compile::disk_cache cache(dir.path, false); // as another process would
    for (int k = 0; k < 200; ++k) cache.store(7, record);
    done = true;
  });
  compile::disk_cache reader(dir.path, true);
  while (!done) {
    const auto found = reader.find(7, "test context", graphs[2]);
    if (found.result == compile::disk_cache::outcome::damaged) ++damaged;
    if (found.result == compile::disk_cache::outcome::hit) ++hits;
  }
  writer.join();
  CHECK(damaged == 0);
  CHECK(hits > 0);
}

TEST_CASE("the disk cache: a crashed writer's temporary file is ignored, and removed after an hour",
          "[compile][cache]") {
  const auto graphs = sample_graphs();
  scratch_directory dir;
  fs::create_directories(dir.path);
  compile::disk_cache cache(dir.path, false);
  const fs::path fresh = cache.entry_path(5).string() + ".tmp.123.0.42";
  const fs::path stale = cache.entry_path(6).string() + ".tmp.123.1.42";
  std::ofstream(fresh) << "half an ent";
  std::ofstream(stale) << "half an ent";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  CHECK(cache.find(5, "test context", graphs[0]).result == compile::disk_cache::outcome::miss);
  CHECK(cache.size_bytes() == 0);
  compile::disk_cache readonly(dir.path, true);
  CHECK_FALSE(readonly.store(1, record_of(graphs[0])));
  CHECK(fs::exists(stale)); // read-only mode removes nothing
  REQUIRE(cache.store(1, record_of(graphs[0])));
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(fresh)); // its writer may still be at work
}

TEST_CASE("the disk cache does not store an entry larger than its bound", "[compile][cache]") {
  const auto graphs = sample_graphs();
  scratch_directory dir;
  compile::disk_cache tiny(dir.path, false, 64);
  CHECK_FALSE(tiny.store(1, record_of(graphs[0])));
  CHECK(tiny.size_bytes() == 0);
}

TEST_CASE("the memory cache evicts the least recently used", "[compile][cache]") {
  const auto graphs = sample_graphs();
  compile::compilation_cache cache(2);
  const auto compiled = [&](std::size_t k) { return compile::compile_graph(graphs[k]); };
  cache.insert(0, graphs[0], compiled(0));
  cache.insert(1, graphs[1], compiled(1));
  CHECK(cache.find(0, graphs[0]) != nullptr); // 0 is now the most recent
  cache.insert(2, graphs[2], compiled(2));
  CHECK(cache.find(1, graphs[1]) == nullptr);
  CHECK(cache.find(0, graphs[0]) != nullptr);
  CHECK(cache.find(2, graphs[2]) != nullptr);
  CHECK(cache.size() == 2);
}
