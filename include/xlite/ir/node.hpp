#pragma once

// A node of a trace: what the lazy front end records for each op, before a barrier turns
// the trace into a graph (ir/graph.hpp). Nodes are immutable and shared: a lazy tensor
// holds the node that computes it, and each node holds its operands, so a trace is a DAG
// kept alive by the tensors that can still reach it.
//
// A node knows its result's dtype and shape from the moment it is made (ir/infer.hpp), so
// errors surface at the line that traced the op, not at the barrier.
//
// With XLITE_IR_DEBUG=1 (or ir::set_debug(true)) a node also keeps the call stack that made
// it, and printed graphs say which line of the program each instruction comes from.

#include <atomic>
#include <bit>
#include <cstdint>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "xlite/core/call_stack.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/core/env.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"

namespace xlite::ir {

namespace detail {
inline std::atomic<bool>& debug_flag() {
  static std::atomic<bool> flag{env_integer("XLITE_IR_DEBUG", 0, 1).value_or(0) == 1};
  return flag;
}
} // namespace detail

// Whether new nodes record where they were made: XLITE_IR_DEBUG=1, or set_debug(true). A
// malformed XLITE_IR_DEBUG is a config_error at the first traced op.
inline bool debug_enabled() { return detail::debug_flag().load(std::memory_order_relaxed); }
inline void set_debug(bool on) { detail::debug_flag().store(on, std::memory_order_relaxed); }

// Where a graph parameter's value comes from: a device buffer, which the IR does not know
// about. The runtime derives its buffers from this so parameter nodes can hold them.
class parameter_source {
public:
  virtual ~parameter_source() = default;
};

// A scalar held by a constant node. Integers and bool are kept exactly as int64, floating
// values as double; `dtype` of the node says which is meant.
struct literal {
  double real = 0;
  std::int64_t integer = 0;

  // The integer of a value outside int64's range (NaN, inf, 1e300) is 0: converting it would
  // be undefined behaviour, and no integer node can hold it anyway.
  static literal of(double value) {
    const bool fits = value >= -0x1p63 && value < 0x1p63;
    return {value, fits ? static_cast<std::int64_t>(value) : 0};
  }
  static literal of(std::int64_t value) { return {static_cast<double>(value), value}; }
  // Bitwise, as the structural hash sees it: a NaN fill equals itself (else a graph with one
  // never hits a cache), and -0.0 differs from 0.0.
  friend bool operator==(const literal& a, const literal& b) {
    return std::bit_cast<std::uint64_t>(a.real) == std::bit_cast<std::uint64_t>(b.real) && a.integer == b.integer;
  }
};

// What an op needs besides its operands, by op:
//   reductions      ints = the reduced axes (sorted, non-negative), flag = keepdims
//   permute         ints = the permutation
//   slice           ints = start, stop, step for each axis in turn
//   concat          ints = {axis}
//   pad             ints = low, high padding for each axis in turn, value = the fill
//   gather,         ints = {axis}
//   index_select,
//   scatter_add,
//   index_add
//   iota            ints = {axis}: the element's index along it
//   matmul          ints = {transpose_a, transpose_b}, each 0 or 1
//   window ops      ints = the window2d's (ir/window.hpp)
//   constant        value
//   while_loop      ints = {loop variables}, subgraphs = {cond, body}
//   cond            subgraphs = {on_true, on_false}
//   tuple_element   ints = {which result of its while_loop or cond operand}
// Shapes (reshape, broadcast_to) are the node's own shape.
struct graph;

struct attributes {
  std::vector<std::int64_t> ints;
  bool flag = false;
  literal value;
  // The programs a control op runs. Parameter k of each reads the control op's k-th operand
  // (cond's after its predicate).
  std::vector<std::shared_ptr<const graph>> subgraphs;
  // Subgraphs compare by content, not by pointer: a loop traced twice holds two equal
  // bodies. Defined in ir/graph.hpp, where a graph is complete.
  friend inline bool operator==(const attributes&, const attributes&);
};

class node;
using node_ptr = std::shared_ptr<const node>;

class node {
public:
  node(op code, dtype type, xlite::shape result_shape, std::vector<node_ptr> operands, attributes attrs = {},
       std::shared_ptr<const parameter_source> source = nullptr)
      : code_(code), type_(type), shape_(result_shape), operands_(std::move(operands)), attrs_(std::move(attrs)),
        source_(std::move(source)), origin_(debug_enabled() ? call_stack::capture() : nullptr) {}

  // A trace left without a barrier can be a chain of 10^5 nodes; the implicit destructor would
  // recurse once per node and overflow the stack. The operands that die with this node are
  // unlinked on a heap worklist instead. A use count of 1 is final: no weak pointers to nodes
  // exist, so no other thread can take a new reference.
  ~node() {
    std::vector<node_ptr> dying = std::move(operands_);
    while (!dying.empty()) {
      node_ptr last = std::move(dying.back());
      dying.pop_back();
      if (last.use_count() == 1) {
        // use_count() is a relaxed load: order the other owners' past reads before our writes.
        std::atomic_thread_fence(std::memory_order_acquire);
        auto& inherited = last->operands_;
        dying.insert(dying.end(), std::make_move_iterator(inherited.begin()), std::make_move_iterator(inherited.end()));
        inherited.clear();
      }
    }
  }
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  op code() const noexcept { return code_; }
  dtype type() const noexcept { return type_; }
  const xlite::shape& shape() const noexcept { return shape_; }
  const std::vector<node_ptr>& operands() const noexcept { return operands_; }
  const attributes& attrs() const noexcept { return attrs_; }
  // For op::parameter: the buffer that supplies the value.
  const std::shared_ptr<const parameter_source>& source() const noexcept { return source_; }
  // Where the program made this node, if ir::debug_enabled() was on then.
  const std::shared_ptr<const call_stack>& origin() const noexcept { return origin_; }

private:
  op code_;
  dtype type_;
  xlite::shape shape_;
  mutable std::vector<node_ptr> operands_; // mutable only for the destructor's unlinking
  attributes attrs_;
  std::shared_ptr<const parameter_source> source_;
  std::shared_ptr<const call_stack> origin_;
};

} // namespace xlite::ir
