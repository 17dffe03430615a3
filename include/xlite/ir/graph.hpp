#pragma once

// A graph: the part of a trace a barrier compiles, flattened into instructions in
// topological order. Operands are indices, not pointers, so a graph is a value that the
// passes rewrite and the compiler keeps, independent of the trace it came from.
//
// Parameters are numbered in the order a depth-first walk from the outputs meets them;
// their values (device buffers) stay outside the graph, so two steps that run the same
// program on different data capture equal graphs with equal hashes.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/hash.hpp"
#include "xlite/ir/node.hpp"

namespace xlite::ir {

using value_id = std::uint32_t;

struct instruction {
  op code;
  dtype type;
  xlite::shape shape;
  std::vector<value_id> operands;
  attributes attrs; // for op::parameter, ints = {position}
  friend bool operator==(const instruction&, const instruction&) = default;
};

struct graph {
  std::vector<instruction> instructions; // each operand comes before its users
  std::vector<value_id> outputs;         // what the barrier asked for, in its order
  std::size_t parameter_count = 0;
  friend bool operator==(const graph&, const graph&) = default;
};

inline bool operator==(const attributes& a, const attributes& b) {
  return a.ints == b.ints && a.flag == b.flag && a.value == b.value &&
         std::ranges::equal(a.subgraphs, b.subgraphs, [](const auto& x, const auto& y) { return *x == *y; });
}

namespace detail {

// value ids by pointer, for capture: an open-addressing table in one allocation, since a
// node-based map's allocation per entry is most of a small graph's capture time.
class pointer_index {
public:
  // The id of `key`, or nullptr.
  const value_id* find(const void* key) const noexcept {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return &slots_[i].id;
      if (slots_[i].key == nullptr) return nullptr;
    }
  }
  bool contains(const void* key) const noexcept { return find(key) != nullptr; }
  value_id at(const void* key) const noexcept { return *find(key); }

  // Adds key -> id unless key is present; returns the id key maps to.
  value_id insert(const void* key, value_id id) {
    if (2 * (count_ + 1) > slots_.size()) grow();
    for (std::size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return slots_[i].id;
      if (slots_[i].key == nullptr) {
        slots_[i] = {key, id};
        ++count_;
        return id;
      }
    }
  }

private:
  struct slot {
    const void* key = nullptr;
    value_id id = 0;
  };

  std::size_t slot_of(const void* key) const noexcept {
    // Fibonacci hashing: node addresses differ in their middle bits.
    const auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(key)) * 0x9e3779b97f4a7c15ULL;
    return static_cast<std::size_t>(bits >> (64 - shift_));
  }

  void grow() {
    std::vector<slot> old = std::exchange(slots_, std::vector<slot>(slots_.empty() ? 64 : 2 * slots_.size()));
    shift_ = static_cast<unsigned>(std::countr_zero(slots_.size()));
    count_ = 0;
    for (const slot& s : old) {
      if (s.key) insert(s.key, s.id);
    }
  }

  std::vector<slot> slots_;
  std::size_t count_ = 0;
  unsigned shift_ = 0;
};

} // namespace detail

// Calls visit(n) for each node reachable from `root` that known(n) does not yet know, after
// its operands; visit must make n known. Iterative: a trace of 10^5 steps without a barrier
// must not overflow the stack. A node is asked about once per edge that reaches it: one on
// the stack cannot become known before it is popped, since the graph is acyclic.
template <class Known, class Visit>
void walk_post_order(const node* root, Known&& known, Visit&& visit) {
  if (known(root)) return;
  std::vector<std::pair<const node*, std::size_t>> stack{{root, 0}}; // node, next operand to visit
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next < n->operands().size()) {
      const node* operand = n->operands()[next++].get();
      if (!known(operand)) stack.emplace_back(operand, 0);
      continue;
    }
    const node* done = n;
    stack.pop_back();
    visit(done);
  }
}

// A graph and the buffers its parameters read, by position.
struct captured_graph {
  graph program;
  std::vector<std::shared_ptr<const parameter_source>> parameters;
  // Where each instruction's node was made, by value id (null for a node made with
  // debugging off); empty when no node of the graph has an origin.
  std::vector<std::shared_ptr<const call_stack>> origins;
};

// ---- structural hash --------------------------------------------------------------------------

inline std::uint64_t structural_hash(const graph& g);

namespace detail {

// One instruction's words. Counts share words and operand ids go two to a word: the hash
// is on every barrier's path, and each word costs a multiplication's latency.
inline void hash_instruction(hasher& h, op code, dtype type, const xlite::shape& shape,
                             std::span<const value_id> operands, std::span<const std::int64_t> ints, bool flag,
                             const literal& value, std::span<const std::shared_ptr<const graph>> subgraphs) {
  const auto real = std::bit_cast<std::uint64_t>(value.real);
  const bool has_value = real != 0 || value.integer != 0;
  h.add(static_cast<std::uint64_t>(code) | static_cast<std::uint64_t>(type) << 8 |
        static_cast<std::uint64_t>(shape.rank()) << 16 | static_cast<std::uint64_t>(flag) << 24 |
        static_cast<std::uint64_t>(has_value) << 25 | static_cast<std::uint64_t>(operands.size()) << 32);
  h.add(ints.size() | static_cast<std::uint64_t>(subgraphs.size()) << 32);
  for (const std::int64_t dim : shape) h.add(static_cast<std::uint64_t>(dim));
  for (std::size_t i = 0; i < operands.size(); i += 2) {
    h.add(operands[i] | (i + 1 < operands.size() ? std::uint64_t{operands[i + 1]} << 32 : 0));
  }
  for (const std::int64_t v : ints) h.add(static_cast<std::uint64_t>(v));
  if (has_value) {
    h.add(real);
    h.add(static_cast<std::uint64_t>(value.integer));
  }
  for (const auto& sub : subgraphs) h.add(structural_hash(*sub));
}

inline void hash_outputs(hasher& h, std::span<const value_id> outputs) {
  h.add(outputs.size());
  for (const value_id out : outputs) h.add(out);
}

} // namespace detail

// Covers ops, dtypes, shapes, attributes (constants and subgraphs included), operand
// wiring, parameter positions and outputs; not parameter values. Equal graphs hash equal.
inline std::uint64_t structural_hash(const graph& g) {
  hasher h;
  h.add(g.instructions.size());
  for (const instruction& ins : g.instructions) {
    detail::hash_instruction(h, ins.code, ins.type, ins.shape, ins.operands, ins.attrs.ints, ins.attrs.flag,
                             ins.attrs.value, ins.attrs.subgraphs);
  }
  detail::hash_outputs(h, g.outputs);
  return h.state;
}

// ---- capture --------------------------------------------------------------------------------

// The nodes of the graph that computes `outputs` from a trace, numbered in instruction
// order: the first half of capture. It is all a cache hit needs (the hash, the comparison
// with the cached graph, the parameters' buffers), so a hit allocates no instruction; a
// miss builds the graph from it. It holds its outputs and boundary, so the nodes it
// numbers live as long as it does.
//
// Nodes reached along several paths get one number; so do parameter nodes that read one
// buffer. The `boundary` nodes, whatever they compute, become parameters 0, 1, ... in that
// order, and the walk does not go below them: this is how a control op's subgraph reads the
// values it is given.
class numbered_trace {
public:
  explicit numbered_trace(std::span<const node_ptr> outputs, std::span<const node_ptr> boundary = {})
      : roots_(outputs.begin(), outputs.end()) {
    roots_.insert(roots_.end(), boundary.begin(), boundary.end());
    detail::pointer_index parameter_ids; // by parameter source
    const auto number = [&](const node* n, bool parameter) {
      ids_.insert(n, static_cast<value_id>(nodes_.size()));
      nodes_.push_back(n);
      if (!parameter) {
        for (const node_ptr& operand : n->operands()) operand_ids_.push_back(ids_.at(operand.get()));
      }
      operands_end_.push_back(static_cast<std::uint32_t>(operand_ids_.size()));
      parameter_count_ += parameter;
    };
    for (const node_ptr& b : boundary) {
      if (!ids_.contains(b.get())) number(b.get(), true);
    }
    boundary_count_ = nodes_.size();
    for (const node_ptr& out : outputs) {
      walk_post_order(
          out.get(), [&](const node* n) { return ids_.contains(n); },
          [&](const node* n) {
            const bool parameter = n->code() == op::parameter;
            if (parameter) {
              if (const value_id* known = parameter_ids.find(n->source().get())) {
                ids_.insert(n, *known);
                return;
              }
              parameter_ids.insert(n->source().get(), static_cast<value_id>(nodes_.size()));
            }
            number(n, parameter);
          });
      outputs_.push_back(ids_.at(out.get()));
    }
  }

  std::size_t size() const noexcept { return nodes_.size(); }
  std::size_t parameter_count() const noexcept { return parameter_count_; }

  // The buffers parameters 0, 1, ... read (null for a boundary node that is not a parameter).
  std::vector<std::shared_ptr<const parameter_source>> parameters() const {
    std::vector<std::shared_ptr<const parameter_source>> sources;
    sources.reserve(parameter_count_);
    for (std::size_t id = 0; id < size(); ++id) {
      if (reads_parameter(id)) sources.push_back(nodes_[id]->code() == op::parameter ? nodes_[id]->source() : nullptr);
    }
    return sources;
  }

  // Equal to structural_hash(to_graph().program).
  std::uint64_t hash() const {
    hasher h;
    h.add(size());
    std::int64_t position = 0;
    for (std::size_t id = 0; id < size(); ++id) {
      const node& n = *nodes_[id];
      if (reads_parameter(id)) {
        const std::int64_t ints[] = {position++};
        detail::hash_instruction(h, op::parameter, n.type(), n.shape(), {}, ints, false, {}, {});
      } else {
        const attributes& a = n.attrs();
        detail::hash_instruction(h, n.code(), n.type(), n.shape(), operands(id), a.ints, a.flag, a.value, a.subgraphs);
      }
    }
    detail::hash_outputs(h, outputs_);
    return h.state;
  }

  // Whether to_graph().program would equal g.
  bool equals(const graph& g) const {
    if (g.instructions.size() != size() || g.parameter_count != parameter_count_ ||
        !std::ranges::equal(g.outputs, outputs_)) {
      return false;
    }
    std::int64_t position = 0;
    for (std::size_t id = 0; id < size(); ++id) {
      const node& n = *nodes_[id];
      const instruction& ins = g.instructions[id];
      if (ins.type != n.type() || ins.shape != n.shape()) return false;
      const bool same = reads_parameter(id) ? is_parameter_instruction(ins, position++)
                                            : ins.code == n.code() && std::ranges::equal(ins.operands, operands(id)) &&
                                                  ins.attrs == n.attrs();
      if (!same) return false;
    }
    return true;
  }

  captured_graph to_graph() const {
    captured_graph result;
    graph& g = result.program;
    g.instructions.reserve(size());
    for (std::size_t id = 0; id < size(); ++id) {
      const node& n = *nodes_[id];
      if (reads_parameter(id)) {
        g.instructions.push_back(
            parameter_instruction(n.type(), n.shape(), static_cast<std::int64_t>(g.parameter_count++)));
      } else {
        // Filled in place: a temporary moved in costs a store-forwarding stall per instruction.
        instruction& ins = g.instructions.emplace_back();
        ins.code = n.code();
        ins.type = n.type();
        ins.shape = n.shape();
        ins.attrs = n.attrs();
        ins.operands.assign(operands(id).begin(), operands(id).end());
      }
      if (n.origin() && result.origins.empty()) result.origins.resize(size());
      if (!result.origins.empty()) result.origins[id] = n.origin();
    }
    g.outputs = outputs_;
    result.parameters = parameters();
    return result;
  }

private:
  bool reads_parameter(std::size_t id) const { return id < boundary_count_ || nodes_[id]->code() == op::parameter; }
  std::span<const value_id> operands(std::size_t id) const {
    const std::uint32_t begin = id == 0 ? 0 : operands_end_[id - 1];
    return std::span(operand_ids_).subspan(begin, operands_end_[id] - begin);
  }
  static instruction parameter_instruction(dtype type, const xlite::shape& shape, std::int64_t position) {
    instruction ins{op::parameter, type, shape, {}, {}};
    ins.attrs.ints = {position};
    return ins;
  }
  // Whether ins, of a parameter's type and shape, is parameter_instruction(.., position);
  // compared field by field, since a hit must not allocate.
  static bool is_parameter_instruction(const instruction& ins, std::int64_t position) {
    const attributes& a = ins.attrs;
    return ins.code == op::parameter && ins.operands.empty() && a.ints.size() == 1 && a.ints[0] == position &&
           !a.flag && a.value == literal{} && a.subgraphs.empty();
  }

  std::vector<node_ptr> roots_;    // the outputs and the boundary, which keep nodes_ alive
  std::vector<const node*> nodes_; // by value id
  detail::pointer_index ids_;      // value id by node
  std::vector<value_id> operand_ids_;
  std::vector<std::uint32_t> operands_end_; // where each node's operand ids end in operand_ids_
  std::vector<value_id> outputs_;
  std::size_t boundary_count_ = 0;
  std::size_t parameter_count_ = 0;
};

// The graph that computes `outputs` from a trace (see numbered_trace).
inline captured_graph capture(std::span<const node_ptr> outputs, std::span<const node_ptr> boundary = {}) {
  return numbered_trace(outputs, boundary).to_graph();
}

} // namespace xlite::ir
