#pragma once

// The autocast pass: rewrites a graph so each instruction computes in the dtype the policy
// gives it (amp/policy.hpp), with casts where a value crosses precisions. The graph's
// parameters and outputs keep their declared dtypes, so device buffers and what the user
// reads back are as traced; only the computation between them changes.
//
// Per instruction, for a declared floating dtype t and the policy's storage s = storage(t):
//   matmul            operands cast to bf16, result float32: bf16 products, fp32 sums
//   keeps_fp32 ops    operands cast to float32, result float32 (t when t is wider)
//   other arithmetic  operands cast to s, result s (comparisons: bool, as declared)
//   cast              to storage(target)
//   layout ops        move their operand in whatever dtype it has (window ops too)
//   unfold            bf16 when only matmuls read it (a convolution's patches), so the
//                     cast runs on its input, KH*KW times smaller than the patches
//   constants         s; parameters, iota, random draws: as declared
//   control flow      operands and results as declared; bodies as traced
// Casts are made once per value and dtype; the later passes fuse them into their kernels.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "xlite/amp/policy.hpp"
#include "xlite/core/op.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::amp {

namespace detail {

class rewriter {
public:
  rewriter(const ir::graph& source, policy p)
      : source_(source), policy_(p), value_(source.instructions.size()),
        only_matmuls_read_(source.instructions.size(), true) {
    for (const ir::instruction& ins : source.instructions) {
      for (const ir::value_id v : ins.operands) only_matmuls_read_[v] = only_matmuls_read_[v] && ins.code == op::matmul;
    }
    for (const ir::value_id out : source.outputs) only_matmuls_read_[out] = false;
  }

  ir::graph run() {
    for (std::size_t i = 0; i < source_.instructions.size(); ++i) value_[i] = rewrite(source_.instructions[i]);
    for (const ir::value_id out : source_.outputs) result_.outputs.push_back(as(out, declared(out)));
    result_.parameter_count = source_.parameter_count;
    return std::move(result_);
  }

private:
  ir::value_id source_id(const ir::instruction& ins) const {
    return static_cast<ir::value_id>(&ins - source_.instructions.data());
  }
  dtype declared(ir::value_id v) const { return source_.instructions[v].type; }
  dtype actual(ir::value_id v) const { return result_.instructions[value_[v]].type; }

  ir::value_id emit(ir::instruction ins) {
    result_.instructions.push_back(std::move(ins));
    return static_cast<ir::value_id>(result_.instructions.size() - 1);
  }

  // Source value v in dtype t: the rewritten value, or one cast of it, made once.
  ir::value_id as(ir::value_id v, dtype t) {
    if (actual(v) == t) return value_[v];
    const auto [slot, fresh] = casts_.try_emplace({v, t}, 0);
    if (fresh) slot->second = emit({op::cast, t, source_.instructions[v].shape, {value_[v]}, {}});
    return slot->second;
  }

  ir::value_id rewrite(const ir::instruction& ins) {
    ir::instruction out = ins;
    const auto operands_as = [&](dtype t, std::size_t first = 0) {
      for (std::size_t k = 0; k < ins.operands.size(); ++k) {
        out.operands[k] = k < first ? value_[ins.operands[k]] : as(ins.operands[k], t);
      }
    };
    const auto operands_unchanged = [&] {
      for (std::size_t k = 0; k < ins.operands.size(); ++k) out.operands[k] = value_[ins.operands[k]];
    };
    const bool lowered = is_floating_point(ins.type) && policy_.storage(ins.type) != ins.type;
    const op_info& i = info(ins.code);
    if (ins.code == op::matmul && (ins.type == dtype::f32 || lowered)) {
      operands_as(dtype::bf16);
      out.type = dtype::f32;
    } else if (ins.code == op::unfold && (ins.type == dtype::f32 || lowered) && only_matmuls_read_[source_id(ins)]) {
      // A convolution's patches: cast its input, not the KH*KW times larger patches.
      operands_as(dtype::bf16);
      out.type = dtype::bf16;
    } else if (i.kind == op_kind::elementwise && ins.code != op::cast) {
      const ir::value_id data = ins.operands.back(); // where's operand 0 is its condition
      const dtype compute = declared(data);
      const bool to_fp32 = policy::keeps_fp32(ins.code) && policy_.storage(compute) != compute;
      const dtype run_in = to_fp32 ? dtype::f32 : policy_.storage(compute);
      operands_as(run_in, ins.code == op::where ? 1 : 0);
      if (ins.type != dtype::boolean) out.type = run_in;
    } else if (ins.code == op::cast) {
      operands_unchanged();
      out.type = policy_.storage(ins.type);
      if (out.type == actual(ins.operands[0])) return out.operands[0];
    } else if (i.kind == op_kind::reduction && ins.code != op::argmax) {
      const bool to_fp32 = policy::keeps_fp32(ins.code) && lowered;
      out.type = to_fp32 ? dtype::f32 : policy_.storage(ins.type);
      operands_as(out.type);
    } else if (i.kind == op_kind::layout || i.kind == op_kind::window) {
      // Data operands first (concat's parts share one dtype), then gather's index as is.
      const std::size_t data_count = takes_index(ins.code) ? 1 : ins.operands.size();
      const dtype t = actual(ins.operands[0]);
      for (std::size_t k = 0; k < ins.operands.size(); ++k) {
        out.operands[k] = k < data_count ? as(ins.operands[k], t) : value_[ins.operands[k]];
      }
      out.type = t;
    } else if (ins.code == op::constant) {
      out.type = policy_.storage(ins.type);
    } else if (i.kind == op_kind::control || i.kind == op_kind::contraction || i.kind == op_kind::random ||
               i.kind == op_kind::collective || ins.code == op::argmax) {
      for (std::size_t k = 0; k < ins.operands.size(); ++k) out.operands[k] = as(ins.operands[k], declared(ins.operands[k]));
      if (ins.code == op::argmax) out.operands[0] = value_[ins.operands[0]];
    }
    return emit(std::move(out));
  }

  const ir::graph& source_;
  policy policy_;
  std::vector<ir::value_id> value_; // source value -> rewritten value
  std::map<std::pair<ir::value_id, dtype>, ir::value_id> casts_;
  std::vector<bool> only_matmuls_read_; // source value -> whether every reader is a matmul
  ir::graph result_;
};

} // namespace detail

// g rewritten for policy p; g itself when p is fp32.
inline ir::graph apply(const ir::graph& g, policy p) {
  if (p.mode == mode::fp32) return g;
  return detail::rewriter(g, p).run();
}

} // namespace xlite::amp
