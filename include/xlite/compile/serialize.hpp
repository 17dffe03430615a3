#pragma once

// Executables as bytes, for the persistent compilation cache. The encoding is a plain
// little-endian walk of the structs (no padding, no pointers); subgraphs and subprograms
// nest. Decoding checks what damage could make unsafe to decode or to look up: every count
// against the bytes left, every enum against its range, indices against what they index,
// nesting depth, and that the program returns what the traced graph returns. It does not
// re-verify the compiler's work (which registers a program reads before writing, which op
// takes how many operands): the checksum in front of the bytes catches accidental damage,
// and a cache directory is trusted as the program's own files are.

#include <bit>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/compile/native_source.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::compile {

static_assert(std::endian::native == std::endian::little, "the cache's encoding is the host's little-endian layout");
static_assert(sizeof(std::size_t) == 8, "the buffer plan's size_t fields are encoded as 8 bytes");

// Bytes that do not decode to a valid executable.
class format_error : public error {
public:
  using error::error;
};

namespace detail {

class writer {
public:
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void put(T value) {
    const auto* bytes = reinterpret_cast<const char*>(&value);
    out_.append(bytes, sizeof(T));
  }
  void put_count(std::size_t n) { put(static_cast<std::uint64_t>(n)); }
  template <class T>
  void put_all(const std::vector<T>& values) {
    put_count(values.size());
    for (const T& v : values) put(v);
  }
  void put_text(std::string_view text) {
    put_count(text.size());
    out_.append(text);
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
};

class reader {
public:
  explicit reader(std::span<const char> bytes) : bytes_(bytes) {}

  template <class T>
    requires std::is_trivially_copyable_v<T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  // A count of items of at least `item_bytes` each: more than the bytes left is damage, and
  // must not become a huge allocation.
  std::size_t get_count(std::size_t item_bytes = 1) {
    const auto n = get<std::uint64_t>();
    if (n > (bytes_.size() - at_) / item_bytes) fail("a count larger than the entry");
    return static_cast<std::size_t>(n);
  }
  template <class T>
  std::vector<T> get_all() {
    std::vector<T> values(get_count(sizeof(T)));
    for (T& v : values) v = get<T>();
    return values;
  }
  std::string get_text() {
    const std::size_t n = get_count();
    std::string text(bytes_.data() + at_, n);
    at_ += n;
    return text;
  }
  bool get_bool() {
    const auto raw = get<std::uint8_t>();
    if (raw > 1) fail("a flag that is neither 0 nor 1");
    return raw == 1;
  }
  template <class Enum>
  Enum get_enum(std::size_t count) {
    const auto raw = get<std::underlying_type_t<Enum>>();
    if (static_cast<std::size_t>(raw) >= count) fail("an enumerator out of range");
    return static_cast<Enum>(raw);
  }
  bool done() const { return at_ == bytes_.size(); }
  [[noreturn]] static void fail(std::string_view what) {
    throw format_error(xlite::detail::message("compiled program: ", what));
  }

private:
  void need(std::size_t n) const {
    if (bytes_.size() - at_ < n) fail("the entry ends early");
  }
  std::span<const char> bytes_;
  std::size_t at_ = 0;
};

// The fewest bytes each item encodes to, so a count is checked against the bytes left
// before anything is allocated for it.
inline constexpr std::size_t min_instruction_bytes = 51;
inline constexpr std::size_t min_graph_bytes = 24;
inline constexpr std::size_t min_kernel_bytes = 56;
inline constexpr std::size_t min_step_bytes = 42;
inline constexpr std::size_t min_executable_bytes = 80;
inline constexpr std::size_t register_step_kinds = 2; // load, compute
// Loops in loops in loops: far beyond any real program, far below what overflows the stack.
inline constexpr int max_nesting = 64;

inline void check(bool ok, std::string_view what) {
  if (!ok) reader::fail(what);
}

// ---- graphs ----

inline void write_graph(writer& w, const ir::graph& g) {
  w.put_count(g.instructions.size());
  for (const ir::instruction& ins : g.instructions) {
    w.put(ins.code);
    w.put(ins.type);
    w.put_all(std::vector<std::int64_t>(ins.shape.begin(), ins.shape.end()));
    w.put_all(ins.operands);
    w.put_all(ins.attrs.ints);
    w.put(ins.attrs.flag);
    w.put(ins.attrs.value);
    w.put_count(ins.attrs.subgraphs.size());
    for (const auto& sub : ins.attrs.subgraphs) write_graph(w, *sub);
  }
  w.put_all(g.outputs);
  w.put_count(g.parameter_count);
}

inline ir::graph read_graph(reader& r, int depth) {
  check(depth <= max_nesting, "subgraphs nested too deep");
  ir::graph g;
  g.instructions.resize(r.get_count(min_instruction_bytes));
  for (std::size_t id = 0; id < g.instructions.size(); ++id) {
    ir::instruction& ins = g.instructions[id];
    ins.code = r.get_enum<op>(op_count);
    ins.type = r.get_enum<dtype>(all_dtypes.size());
    const auto dims = r.get_all<std::int64_t>();
    check(dims.size() <= max_rank, "a shape of too high a rank");
    for (const std::int64_t d : dims) check(d >= 0, "a negative dimension");
    ins.shape = xlite::shape(dims);
    ins.operands = r.get_all<ir::value_id>();
    for (const ir::value_id operand : ins.operands) check(operand < id, "an operand that does not come first");
    ins.attrs.ints = r.get_all<std::int64_t>();
    ins.attrs.flag = r.get_bool();
    ins.attrs.value = r.get<ir::literal>();
    const std::size_t subgraphs = r.get_count(min_graph_bytes);
    for (std::size_t k = 0; k < subgraphs; ++k) {
      ins.attrs.subgraphs.push_back(std::make_shared<ir::graph>(read_graph(r, depth + 1)));
    }
  }
  g.outputs = r.get_all<ir::value_id>();
  for (const ir::value_id out : g.outputs) check(out < g.instructions.size(), "an output out of range");
  g.parameter_count = static_cast<std::size_t>(r.get<std::uint64_t>());
  check(g.parameter_count <= g.instructions.size(), "more parameters than instructions");
  for (const ir::instruction& ins : g.instructions) {
    if (ins.code != op::parameter) continue;
    check(ins.attrs.ints.size() == 1 && ins.attrs.ints[0] >= 0 &&
              static_cast<std::size_t>(ins.attrs.ints[0]) < g.parameter_count,
          "a parameter position out of range");
  }
  return g;
}

// ---- executables ----

inline void write_executable(writer& w, const executable& exe) {
  w.put(exe.hash);
  write_graph(w, exe.program);
  w.put_count(exe.kernels.size());
  for (const kernel& k : exe.kernels) {
    w.put(k.group.root);
    w.put_all(k.group.extra_results);
    w.put_all(k.group.members);
    w.put_all(k.group.inputs);
    w.put(k.group.elementwise);
    w.put(k.group.matmul_epilogue);
    w.put_count(k.program.size());
    for (const register_step& step : k.program) {
      w.put(step.what);
      w.put(step.code);
      w.put(step.type);
      w.put(step.operand_type);
      w.put(step.input);
      w.put_all(step.operands);
      w.put(step.result);
      w.put_all(step.attrs.ints);
      w.put(step.attrs.flag);
      w.put(step.attrs.value);
      w.put(step.invariant);
    }
    w.put_all(k.result_registers);
    w.put(k.register_count);
    w.put_count(k.subprograms.size());
    for (const auto& sub : k.subprograms) write_executable(w, *sub);
  }
  w.put_all(exe.buffers.slot_of);
  w.put_all(exe.buffers.slot_bytes);
  w.put_all(std::vector<std::uint8_t>(exe.buffers.slot_is_output.begin(), exe.buffers.slot_is_output.end()));
  w.put_count(exe.buffers.in_place_count);
  w.put_text(exe.pass_log);
}

inline executable_ptr read_executable(reader& r, int depth) {
  check(depth <= max_nesting, "subprograms nested too deep");
  auto exe = std::make_shared<executable>();
  exe->hash = r.get<std::uint64_t>();
  exe->program = read_graph(r, depth);
  const std::size_t values = exe->program.instructions.size();
  const auto in_program = [&](const std::vector<ir::value_id>& ids) {
    for (const ir::value_id v : ids) check(v < values, "a kernel value out of range");
  };
  exe->kernels.resize(r.get_count(min_kernel_bytes));
  for (kernel& k : exe->kernels) {
    k.group.root = r.get<ir::value_id>();
    check(k.group.root < values, "a kernel root out of range");
    in_program(k.group.extra_results = r.get_all<ir::value_id>());
    in_program(k.group.members = r.get_all<ir::value_id>());
    in_program(k.group.inputs = r.get_all<ir::value_id>());
    k.group.elementwise = r.get_bool();
    k.group.matmul_epilogue = r.get_bool();
    k.program.resize(r.get_count(min_step_bytes));
    for (register_step& step : k.program) {
      step.what = r.get_enum<register_step::kind>(register_step_kinds);
      step.code = r.get_enum<op>(op_count);
      step.type = r.get_enum<dtype>(all_dtypes.size());
      step.operand_type = r.get_enum<dtype>(all_dtypes.size());
      step.input = r.get<std::uint16_t>();
      step.operands = r.get_all<register_id>();
      step.result = r.get<register_id>();
      step.attrs.ints = r.get_all<std::int64_t>();
      step.attrs.flag = r.get_bool();
      step.attrs.value = r.get<ir::literal>();
      step.invariant = r.get_bool();
    }
    k.result_registers = r.get_all<register_id>();
    k.register_count = r.get<std::uint16_t>();
    for (const register_step& step : k.program) {
      check(step.result < k.register_count, "a register out of range");
      for (const register_id operand : step.operands) check(operand < k.register_count, "a register out of range");
      check(step.what != register_step::kind::load || step.input < k.group.inputs.size(), "a load out of range");
    }
    check(k.group.elementwise || k.group.extra_results.empty(), "extra results of a kernel that is not element-wise");
    const std::size_t results = k.group.elementwise ? 1 + k.group.extra_results.size() : k.program.empty() ? 0 : 1;
    check((!k.group.elementwise || !k.program.empty()) && k.result_registers.size() == results,
          "a kernel's result registers do not match its results");
    for (const register_id result : k.result_registers) {
      check(result < k.register_count, "a result register out of range");
    }
    const std::size_t subprograms = r.get_count(min_executable_bytes);
    for (std::size_t s = 0; s < subprograms; ++s) k.subprograms.push_back(read_executable(r, depth + 1));
  }
  passes::buffer_plan& plan = exe->buffers;
  plan.slot_of = r.get_all<std::size_t>();
  plan.slot_bytes = r.get_all<std::int64_t>();
  const auto is_output = r.get_all<std::uint8_t>();
  for (const std::uint8_t flag : is_output) check(flag <= 1, "a flag that is neither 0 nor 1");
  plan.slot_is_output.assign(is_output.begin(), is_output.end());
  plan.in_place_count = static_cast<std::size_t>(r.get<std::uint64_t>());
  check(plan.slot_of.size() == values && plan.slot_is_output.size() == plan.slot_bytes.size(),
        "a buffer plan of the wrong size");
  for (const std::size_t slot : plan.slot_of) {
    check(slot == passes::buffer_plan::no_slot || slot < plan.slot_bytes.size(), "a buffer slot out of range");
  }
  for (const kernel& k : exe->kernels) {
    const std::size_t root_slot = plan.slot_of[k.group.root];
    check(root_slot != passes::buffer_plan::no_slot, "a kernel result without a buffer slot");
    // The runtime writes every result over the root's index space, each to its own slot.
    check(!k.group.matmul_epilogue || k.group.extra_results.empty(), "an epilogue with several results");
    std::vector<std::size_t> result_slots{root_slot};
    for (const ir::value_id v : k.group.extra_results) {
      const ir::instruction& result = exe->program.instructions[v];
      check(result.code != op::parameter && result.shape == exe->program.instructions[k.group.root].shape,
            "an extra result that is not a computed value of the root's shape");
      check(plan.slot_of[v] != passes::buffer_plan::no_slot &&
                std::ranges::find(result_slots, plan.slot_of[v]) == result_slots.end(),
            "a kernel result without a buffer slot of its own");
      result_slots.push_back(plan.slot_of[v]);
    }
  }
  exe->pass_log = r.get_text();
  for (kernel& k : exe->kernels) attach_native_source(exe->program, k);
  return exe;
}

} // namespace detail

// What the persistent cache stores for a graph: the graph as captured (compared on a hit, so
// two graphs whose keys collide never share an executable), the context it was compiled
// for, and the executable.
struct cache_record {
  std::string context;
  ir::graph source;
  executable_ptr compiled;
};

inline std::string serialize(const cache_record& record) {
  detail::writer w;
  w.put_text(record.context);
  detail::write_graph(w, record.source);
  detail::write_executable(w, *record.compiled);
  return w.take();
}

// Whether `compiled` returns what `source` does: as many outputs, each of the same dtype and
// shape. The runtime hands them to the traced tensors by position.
inline bool returns_what(const executable& compiled, const ir::graph& source) {
  const ir::graph& g = compiled.program;
  if (g.outputs.size() != source.outputs.size()) return false;
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const ir::instruction& got = g.instructions[g.outputs[k]];
    const ir::instruction& want = source.instructions[source.outputs[k]];
    if (got.type != want.type || got.shape != want.shape) return false;
  }
  return true;
}

// Throws format_error for bytes that are not a whole, valid record.
inline cache_record deserialize(std::span<const char> bytes) {
  detail::reader r(bytes);
  cache_record record;
  try {
    record.context = r.get_text();
    record.source = detail::read_graph(r, 0);
    record.compiled = detail::read_executable(r, 0);
  } catch (const format_error&) {
    throw;
  } catch (const std::exception& e) { // a shape the shape class refuses; an allocation that fails
    throw format_error(xlite::detail::message("compiled program: ", e.what()));
  }
  if (!r.done()) detail::reader::fail("bytes after the end");
  if (!returns_what(*record.compiled, record.source)) detail::reader::fail("outputs that differ from its graph's");
  return record;
}

} // namespace xlite::compile
