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
// must not overflow the stack.
template <class Known, class Visit>
void walk_post_order(const node* root, Known&& known, Visit&& visit) {
  std::vector<std::pair<const node*, std::size_t>> stack{{root, 0}}; // node, next operand to visit
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (known(n)) {
      stack.pop_back();
      continue;
    }
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

// The graph that computes `outputs` from a trace. Nodes reached along several paths appear
// once; so does a parameter source held by several parameter nodes. The `boundary` nodes,
// whatever they compute, become parameters 0, 1, ... in that order, and the walk does not go
// below them: this is how a control op's subgraph reads the values it is given.
inline captured_graph capture(std::span<const node_ptr> outputs, std::span<const node_ptr> boundary = {}) {
  captured_graph result;
  graph& g = result.program;
  detail::pointer_index index, parameter_index; // by node, by parameter source
  const auto add_instruction = [&](instruction ins, const node& n) {
    g.instructions.push_back(std::move(ins));
    if (n.origin() || !result.origins.empty()) {
      result.origins.resize(g.instructions.size());
      result.origins.back() = n.origin();
    }
    return static_cast<value_id>(g.instructions.size() - 1);
  };
  const auto add_parameter = [&](const node& n) {
    instruction ins{op::parameter, n.type(), n.shape(), {}, {}};
    ins.attrs.ints = {static_cast<std::int64_t>(g.parameter_count++)};
    result.parameters.push_back(n.code() == op::parameter ? n.source() : nullptr);
    return add_instruction(std::move(ins), n);
  };
  for (const node_ptr& b : boundary) {
    if (!index.contains(b.get())) index.insert(b.get(), add_parameter(*b));
  }
  for (const node_ptr& out : outputs) {
    walk_post_order(
        out.get(), [&](const node* n) { return index.contains(n); },
        [&](const node* n) {
          if (n->code() == op::parameter) {
            const value_id* known = parameter_index.find(n->source().get());
            index.insert(n, known ? *known : parameter_index.insert(n->source().get(), add_parameter(*n)));
            return;
          }
          instruction ins{n->code(), n->type(), n->shape(), {}, n->attrs()};
          ins.operands.reserve(n->operands().size());
          for (const node_ptr& operand : n->operands()) ins.operands.push_back(index.at(operand.get()));
          index.insert(n, add_instruction(std::move(ins), *n));
        });
    g.outputs.push_back(index.at(out.get()));
  }
  return result;
}

// ---- structural hash --------------------------------------------------------------------------

namespace detail {

// The high and low halves of a 64 x 64-bit product, folded (wyhash's mixing step): one
// multiplication mixes every input bit into the result.
__extension__ typedef unsigned __int128 uint128; // GCC and Clang; __extension__ quiets -Wpedantic

constexpr std::uint64_t fold_multiply(std::uint64_t a, std::uint64_t b) {
  const uint128 product = static_cast<uint128>(a) * b;
  return static_cast<std::uint64_t>(product >> 64) ^ static_cast<std::uint64_t>(product);
}

} // namespace detail

// A 64-bit hash fed word by word: the structural hash, the cache key and the disk cache's
// checksum. Fast and well mixed, not cryptographic.
struct hasher {
  std::uint64_t state = 0x6a09e667f3bcc908ULL;
  void add(std::uint64_t word) {
    state = detail::fold_multiply(state ^ word, 0x9e3779b97f4a7c15ULL) + 0xa0761d6478bd642fULL;
  }
};

// Covers ops, dtypes, shapes, attributes (constants and subgraphs included), operand
// wiring, parameter positions and outputs; not parameter values. Equal graphs hash equal.
inline std::uint64_t structural_hash(const graph& g) {
  hasher h;
  h.add(g.instructions.size());
  for (const instruction& ins : g.instructions) {
    h.add(static_cast<std::uint64_t>(ins.code) << 8 | static_cast<std::uint64_t>(ins.type));
    h.add(ins.shape.rank());
    for (const std::int64_t dim : ins.shape) h.add(static_cast<std::uint64_t>(dim));
    h.add(ins.operands.size());
    for (const value_id operand : ins.operands) h.add(operand);
    h.add(ins.attrs.ints.size());
    for (const std::int64_t v : ins.attrs.ints) h.add(static_cast<std::uint64_t>(v));
    h.add(ins.attrs.flag);
    h.add(std::bit_cast<std::uint64_t>(ins.attrs.value.real));
    h.add(static_cast<std::uint64_t>(ins.attrs.value.integer));
    h.add(ins.attrs.subgraphs.size());
    for (const auto& sub : ins.attrs.subgraphs) h.add(structural_hash(*sub));
  }
  h.add(g.outputs.size());
  for (const value_id out : g.outputs) h.add(out);
  return h.state;
}

} // namespace xlite::ir
