#pragma once

// Executables as bytes, for the persistent compilation cache. The encoding is a plain
// little-endian walk of the structs (no padding, no pointers); subgraphs and subprograms
// nest. Decoding trusts nothing: every count is checked against the bytes left, every enum
// against its range and every index against what it indexes, so a damaged entry is a
// format_error, never a crash or an executable that reads out of bounds.

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::compile {

static_assert(std::endian::native == std::endian::little, "the cache's encoding is the host's little-endian layout");

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

inline constexpr std::size_t dtype_count = static_cast<std::size_t>(dtype::f64) + 1;

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

inline ir::graph read_graph(reader& r) {
  ir::graph g;
  g.instructions.resize(r.get_count(8));
  for (std::size_t id = 0; id < g.instructions.size(); ++id) {
    ir::instruction& ins = g.instructions[id];
    ins.code = r.get_enum<op>(op_count);
    ins.type = r.get_enum<dtype>(dtype_count);
    const auto dims = r.get_all<std::int64_t>();
    check(dims.size() <= max_rank, "a shape of too high a rank");
    for (const std::int64_t d : dims) check(d >= 0, "a negative dimension");
    ins.shape = xlite::shape(dims);
    ins.operands = r.get_all<ir::value_id>();
    for (const ir::value_id operand : ins.operands) check(operand < id, "an operand that does not come first");
    ins.attrs.ints = r.get_all<std::int64_t>();
    ins.attrs.flag = r.get_bool();
    ins.attrs.value = r.get<ir::literal>();
    const std::size_t subgraphs = r.get_count(8);
    for (std::size_t k = 0; k < subgraphs; ++k) ins.attrs.subgraphs.push_back(std::make_shared<ir::graph>(read_graph(r)));
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
    }
    w.put(k.result_register);
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

inline executable_ptr read_executable(reader& r) {
  auto exe = std::make_shared<executable>();
  exe->hash = r.get<std::uint64_t>();
  exe->program = read_graph(r);
  const std::size_t values = exe->program.instructions.size();
  const auto in_program = [&](const std::vector<ir::value_id>& ids) {
    for (const ir::value_id v : ids) check(v < values, "a kernel value out of range");
  };
  exe->kernels.resize(r.get_count(8));
  for (kernel& k : exe->kernels) {
    k.group.root = r.get<ir::value_id>();
    check(k.group.root < values, "a kernel root out of range");
    in_program(k.group.members = r.get_all<ir::value_id>());
    in_program(k.group.inputs = r.get_all<ir::value_id>());
    k.group.elementwise = r.get_bool();
    k.group.matmul_epilogue = r.get_bool();
    k.program.resize(r.get_count(8));
    for (register_step& step : k.program) {
      step.what = r.get_enum<register_step::kind>(2);
      step.code = r.get_enum<op>(op_count);
      step.type = r.get_enum<dtype>(dtype_count);
      step.operand_type = r.get_enum<dtype>(dtype_count);
      step.input = r.get<std::uint16_t>();
      step.operands = r.get_all<register_id>();
      step.result = r.get<register_id>();
      step.attrs.ints = r.get_all<std::int64_t>();
      step.attrs.flag = r.get_bool();
      step.attrs.value = r.get<ir::literal>();
    }
    k.result_register = r.get<register_id>();
    k.register_count = r.get<std::uint16_t>();
    for (const register_step& step : k.program) {
      check(step.result < k.register_count, "a register out of range");
      for (const register_id operand : step.operands) check(operand < k.register_count, "a register out of range");
      check(step.what != register_step::kind::load || step.input < k.group.inputs.size(), "a load out of range");
    }
    check(k.program.empty() || k.result_register < k.register_count, "a result register out of range");
    const std::size_t subprograms = r.get_count(8);
    for (std::size_t s = 0; s < subprograms; ++s) k.subprograms.push_back(read_executable(r));
  }
  passes::buffer_plan& plan = exe->buffers;
  plan.slot_of = r.get_all<std::size_t>();
  plan.slot_bytes = r.get_all<std::int64_t>();
  const auto is_output = r.get_all<std::uint8_t>();
  plan.slot_is_output.assign(is_output.begin(), is_output.end());
  plan.in_place_count = static_cast<std::size_t>(r.get<std::uint64_t>());
  check(plan.slot_of.size() == values && plan.slot_is_output.size() == plan.slot_bytes.size(),
        "a buffer plan of the wrong size");
  for (const std::size_t slot : plan.slot_of) {
    check(slot == passes::buffer_plan::no_slot || slot < plan.slot_bytes.size(), "a buffer slot out of range");
  }
  exe->pass_log = r.get_text();
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

// Throws format_error for bytes that are not a whole, valid record.
inline cache_record deserialize(std::span<const char> bytes) {
  detail::reader r(bytes);
  cache_record record;
  try {
    record.context = r.get_text();
    record.source = detail::read_graph(r);
    record.compiled = detail::read_executable(r);
  } catch (const format_error&) {
    throw;
  } catch (const error& e) { // a shape the shape class refuses, say
    throw format_error(xlite::detail::message("compiled program: ", e.what()));
  }
  if (!r.done()) detail::reader::fail("bytes after the end");
  return record;
}

} // namespace xlite::compile
