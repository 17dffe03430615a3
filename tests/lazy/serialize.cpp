// Executables as bytes, for the persistent cache: a round trip keeps everything, and
// damaged bytes are a format_error, never a crash (the sanitizer build checks the "never").

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
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

#include "ir_nodes.hpp"

using namespace xlite;

namespace {

using namespace ir_nodes;

// The outputs of programs with every part an executable can have: element-wise kernels
// with constants and iota, a reduction with its operand fused, a matmul with an epilogue,
// layout ops, a while loop whose body is a subprogram, folded constants, and a kernel with
// two results (last).
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

namespace {

// capture as its definition says, recursively and with ordered maps: the reference the
// barrier's numbering (ir::numbered_trace) is checked against.
ir::graph reference_capture(const std::vector<ir::node_ptr>& outputs, const std::vector<ir::node_ptr>& boundary) {
  ir::graph g;
  std::map<const ir::node*, ir::value_id> ids;
  std::map<const ir::parameter_source*, ir::value_id> by_source;
  const auto add_parameter = [&](const ir::node& n) {
    ir::instruction ins{op::parameter, n.type(), n.shape(), {}, {}};
    ins.attrs.ints = {static_cast<std::int64_t>(g.parameter_count++)};
    g.instructions.push_back(ins);
    return static_cast<ir::value_id>(g.instructions.size() - 1);
  };
  for (const auto& b : boundary) {
    if (!ids.contains(b.get())) ids[b.get()] = add_parameter(*b);
  }
  std::function<ir::value_id(const ir::node&)> visit = [&](const ir::node& n) {
    if (const auto known = ids.find(&n); known != ids.end()) return known->second;
    ir::value_id id = 0;
    if (n.code() == op::parameter) {
      const auto known = by_source.find(n.source().get());
      id = known != by_source.end() ? known->second : (by_source[n.source().get()] = add_parameter(n));
    } else {
      ir::instruction ins{n.code(), n.type(), n.shape(), {}, n.attrs()};
      for (const auto& operand : n.operands()) ins.operands.push_back(visit(*operand));
      g.instructions.push_back(ins);
      id = static_cast<ir::value_id>(g.instructions.size() - 1);
    }
    return ids[&n] = id;
  };
  for (const auto& out : outputs) g.outputs.push_back(visit(*out));
  return g;
}

// Copies of g with one field changed each: every one is another graph.
std::vector<ir::graph> one_field_changed(const ir::graph& g) {
  std::vector<ir::graph> changed;
  const auto with = [&](auto&& change) {
    changed.push_back(g);
    change(changed.back());
  };
  for (std::size_t k = 0; k < g.instructions.size(); ++k) {
    const auto at = [k](ir::graph& c) -> ir::instruction& { return c.instructions[k]; };
    with([&](ir::graph& c) { at(c).code = at(c).code == op::add ? op::sub : op::add; });
    with([&](ir::graph& c) { at(c).type = at(c).type == dtype::f64 ? dtype::f32 : dtype::f64; });
    with([&](ir::graph& c) { at(c).shape = shape{7}; });
    with([&](ir::graph& c) { at(c).attrs.ints.push_back(1); });
    with([&](ir::graph& c) { at(c).attrs.flag = !at(c).attrs.flag; });
    with([&](ir::graph& c) { at(c).attrs.value.real += 1; });
    if (!g.instructions[k].operands.empty()) {
      with([&](ir::graph& c) { at(c).operands[0] = at(c).operands[0] == 0 ? 1 : 0; });
    }
    if (!g.instructions[k].attrs.subgraphs.empty()) {
      with([&](ir::graph& c) {
        auto body = *at(c).attrs.subgraphs[0];
        body.outputs.push_back(0);
        at(c).attrs.subgraphs[0] = std::make_shared<const ir::graph>(std::move(body));
      });
    }
  }
  if (!g.outputs.empty()) with([](ir::graph& c) { c.outputs[0] = c.outputs[0] == 0 ? 1 : 0; });
  with([](ir::graph& c) { c.outputs.push_back(0); });
  with([](ir::graph& c) { ++c.parameter_count; });
  return changed;
}

} // namespace

TEST_CASE("a barrier's trace hashes and compares as the graph it would build", "[ir][cache]") {
  struct program {
    std::vector<ir::node_ptr> outputs, boundary;
  };
  std::vector<program> programs;
  for (auto& outputs : sample_traces()) programs.push_back({std::move(outputs), {}});
  // Two parameter nodes of one buffer are one parameter.
  const auto buffer = std::make_shared<fake_source>();
  const auto a = ir::parameter(buffer, dtype::f32, shape{4}), b = ir::parameter(buffer, dtype::f32, shape{4});
  programs.push_back({{ir::elementwise(op::mul, {a, ir::elementwise(op::add, {b, param(dtype::f32, shape{4})})})}, {}});
  // A subgraph's boundary: given values are parameters 0, 1, ... whatever computes them,
  // also when the walk reaches them again or they are outputs themselves.
  const auto given = ir::elementwise(op::neg, {param(dtype::f32, shape{4})});
  programs.push_back({{ir::elementwise(op::add, {given, a}), given, given}, {given, b}});
  programs.push_back({{}, {}}); // no outputs

  for (const auto& [outputs, boundary] : programs) {
    const ir::graph expected = reference_capture(outputs, boundary);
    const ir::numbered_trace trace(outputs, boundary);
    CHECK(trace.to_graph().program == expected);
    CHECK(trace.hash() == ir::structural_hash(expected));
    CHECK(trace.equals(expected));
    CHECK(trace.parameter_count() == expected.parameter_count);
    for (const ir::graph& other : one_field_changed(expected)) CHECK_FALSE(trace.equals(other));
  }
  // Parameters' buffers by position: none for a computed boundary value.
  const ir::numbered_trace bounded(programs.back().outputs, std::vector{given, b});
  CHECK(bounded.parameters() == std::vector<std::shared_ptr<const ir::parameter_source>>{nullptr, buffer});
  CHECK_THROWS_AS(ir::parameter(nullptr, dtype::f32, shape{1}), value_error);
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
