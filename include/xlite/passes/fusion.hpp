#pragma once

// Element-wise fusion: partitions a graph into kernels. An element-wise kernel evaluates a
// DAG of element-wise ops (with the constants, iotas, random draws, casts and broadcasts
// they read) in one pass over its result, so only its root is written to memory. A
// reduction over an innermost axis of at least min_fused_run elements (sum, mean, prod,
// max, min) is a fusion sink: the element-wise ops that feed it are computed piece by
// piece as it reduces, never stored. Every other op (argmax,
// other reductions, layout, matmul) is a kernel of its own. Parameters are not kernels:
// their buffers exist.
//
// An instruction joins the kernel of its users when all of them are in that kernel, it is
// not an output of the graph, and it does not repeat work: an op with fewer elements than
// the kernel's result (a (n,) value under a (m, n) result) would be computed m times, so it
// is a kernel of its own, unless it is a cheap source (constant, iota) or a broadcast.
//
// A matmul's epilogue: an element-wise kernel over the product's shape (relu(matmul(a, b) +
// bias)) that is the product's only reader runs on each region of the product as the GEMM
// finishes it, so the product is never read back from memory. It moves up to just after
// the matmul, which needs its other inputs to be ready before the matmul runs.
//
// Multi-output fusion (XLA's sibling and producer-consumer fusion): an element-wise kernel
// over the same index space as an earlier one that reads one of its full-size inputs or
// results joins it, and the kernel writes several results. An optimizer's update of one
// parameter (m, v and the weight from the same gradient) is then one pass that reads the
// gradient and the state once, not three that read them again.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "xlite/core/op.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::passes {

struct kernel_group {
  ir::value_id root; // the value the kernel writes
  // Multi-output fusion: the further values an element-wise kernel writes, of root's shape.
  std::vector<ir::value_id> extra_results;
  std::vector<ir::value_id> members; // in topological order; root last unless there are extra results
  std::vector<ir::value_id> inputs;  // values it reads from memory, each once, in first-use order
  bool elementwise = false;          // an element-wise kernel (else a single other op)
  // An element-wise kernel that runs as the epilogue of the matmul kernel just before it:
  // on each region of the product as the GEMM finishes it, while it is in cache.
  bool matmul_epilogue = false;
};

struct fusion_plan {
  std::vector<kernel_group> kernels; // in an order that runs each after its inputs' kernels
};

// Whether an instruction can be part of an element-wise kernel.
inline bool fusible(const ir::instruction& ins) {
  const op_kind kind = info(ins.code).kind;
  return kind == op_kind::elementwise || kind == op_kind::random || ins.code == op::broadcast_to ||
         ins.code == op::constant || ins.code == op::iota;
}

// Runs shorter than this are computed into memory first: the fused program would start
// once per run, and for a pooling window of 2 its start-up costs ten times the work.
inline constexpr std::int64_t min_fused_run = 64;

// Whether reduction instruction `ins` can compute its operand as it goes: it reads its
// operand in contiguous runs along the innermost axis (runtime/reduce.hpp), so only when
// that axis is reduced and long enough.
inline bool reduction_sink(const ir::graph& g, const ir::instruction& ins) {
  if (info(ins.code).kind != op_kind::reduction || ins.code == op::argmax) return false;
  const shape& operand = g.instructions[ins.operands[0]].shape;
  if (operand.rank() == 0) return true;
  const auto last = static_cast<std::int64_t>(operand.rank() - 1);
  return std::ranges::find(ins.attrs.ints, last) != ins.attrs.ints.end() &&
         operand[operand.rank() - 1] >= min_fused_run;
}

namespace detail {

inline void place_matmul_epilogues(const ir::graph& g, fusion_plan& plan,
                                   const std::vector<std::vector<ir::value_id>>& users,
                                   const std::vector<bool>& is_output) {
  for (std::size_t e = 0; e < plan.kernels.size(); ++e) {
    kernel_group& epilogue = plan.kernels[e];
    if (!epilogue.elementwise) continue;
    const ir::instruction& root = g.instructions[epilogue.root];
    for (const ir::value_id product : epilogue.inputs) {
      const ir::instruction& mm = g.instructions[product];
      const auto member = [&](ir::value_id u) {
        return std::ranges::find(epilogue.members, u) != epilogue.members.end();
      };
      const bool ready_before = std::ranges::all_of(epilogue.inputs, [&](ir::value_id v) {
        return v == product || v < product || g.instructions[v].code == op::parameter;
      });
      if (mm.code != op::matmul || is_output[product] || mm.shape != root.shape ||
          !std::ranges::all_of(users[product], member) || !ready_before) {
        continue;
      }
      const auto producer =
          std::ranges::find_if(plan.kernels, [&](const kernel_group& k) { return k.root == product; });
      const auto at = static_cast<std::size_t>(producer - plan.kernels.begin());
      epilogue.matmul_epilogue = true;
      std::rotate(plan.kernels.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                  plan.kernels.begin() + static_cast<std::ptrdiff_t>(e),
                  plan.kernels.begin() + static_cast<std::ptrdiff_t>(e) + 1);
      break;
    }
  }
}

// The most results and instructions a merged kernel takes: its result and invariant
// registers are never reused (compile/compiler.hpp), so an unbounded merge would grow each
// thread's scratch without bound.
inline constexpr std::size_t max_merged_results = 8;
inline constexpr std::size_t max_merged_members = 256;

// Merges each element-wise kernel into the first earlier one it may join (see above): one
// that reads or writes one of its full-size inputs, where all it reads is ready (a
// parameter, a value of a kernel before it, or one of that kernel's results). Candidates
// come from the kernels touching each input, so the pass costs the graph's reads, not the
// number of kernels squared. Epilogues stay as they are. Afterwards a result that only its
// own kernel read is a register, no longer written to memory.
inline void merge_multi_output(const ir::graph& g, fusion_plan& plan,
                               const std::vector<std::vector<ir::value_id>>& users,
                               const std::vector<bool>& is_output) {
  std::vector<std::size_t> produced_by(g.instructions.size(), 0); // kernel index + 1; 0 for parameters
  for (std::size_t k = 0; k < plan.kernels.size(); ++k) produced_by[plan.kernels[k].root] = k + 1;
  std::vector<std::vector<std::size_t>> touching(g.instructions.size()); // kernels reading or writing a value
  const auto mergeable = [&](const kernel_group& k) { return k.elementwise && !k.matmul_epilogue; };
  std::vector<bool> merged(plan.kernels.size(), false);
  for (std::size_t j = 0; j < plan.kernels.size(); ++j) {
    kernel_group& later = plan.kernels[j];
    const shape& space = g.instructions[later.root].shape;
    std::size_t into = j;
    if (mergeable(later)) {
      std::vector<std::size_t> candidates;
      for (const ir::value_id v : later.inputs) {
        if (g.instructions[v].shape == space)
          candidates.insert(candidates.end(), touching[v].begin(), touching[v].end());
      }
      std::ranges::sort(candidates);
      for (const std::size_t i : candidates) {
        const kernel_group& earlier = plan.kernels[i];
        const bool fits = earlier.extra_results.size() + 1 < max_merged_results &&
                          earlier.members.size() + later.members.size() <= max_merged_members;
        const bool ready = std::ranges::all_of(later.inputs, [&](ir::value_id v) { return produced_by[v] <= i + 1; });
        if (mergeable(earlier) && g.instructions[earlier.root].shape == space && fits && ready) {
          into = i;
          break;
        }
      }
    }
    if (into != j) {
      kernel_group& earlier = plan.kernels[into];
      earlier.extra_results.push_back(later.root);
      earlier.members.insert(earlier.members.end(), later.members.begin(), later.members.end());
      std::ranges::sort(earlier.members); // value ids are a topological order
      for (const ir::value_id v : later.inputs) {
        if (produced_by[v] != into + 1 && std::ranges::find(earlier.inputs, v) == earlier.inputs.end()) {
          earlier.inputs.push_back(v);
        }
      }
      produced_by[later.root] = into + 1;
      merged[j] = true;
    }
    for (const ir::value_id v : later.inputs) touching[v].push_back(into);
    touching[later.root].push_back(into);
  }
  std::size_t k = 0;
  std::erase_if(plan.kernels, [&](const kernel_group&) { return merged[k++]; });

  for (kernel_group& kernel : plan.kernels) {
    if (kernel.extra_results.empty()) continue;
    const auto read_outside = [&](ir::value_id r) {
      return is_output[r] || std::ranges::any_of(users[r], [&](ir::value_id u) {
               return !std::ranges::binary_search(kernel.members, u);
             });
    };
    // The last result has a reader outside (it is read after every member), so one stays.
    std::vector<ir::value_id> results{kernel.root};
    results.insert(results.end(), kernel.extra_results.begin(), kernel.extra_results.end());
    std::erase_if(results, [&](ir::value_id r) { return !read_outside(r); });
    kernel.root = results.front();
    kernel.extra_results.assign(results.begin() + 1, results.end());
  }
}

} // namespace detail

inline fusion_plan fuse_elementwise(const ir::graph& g) {
  const std::size_t count = g.instructions.size();
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  std::vector<std::vector<ir::value_id>> users(count);
  for (std::size_t i = 0; i < count; ++i) {
    for (const ir::value_id operand : g.instructions[i].operands)
      users[operand].push_back(static_cast<ir::value_id>(i));
  }
  std::vector<bool> is_output(count, false);
  for (const ir::value_id out : g.outputs) is_output[out] = true;

  std::vector<std::size_t> group_of(count, none);
  std::vector<ir::value_id> roots;
  for (std::size_t i = count; i-- > 0;) {
    const ir::instruction& ins = g.instructions[i];
    if (ins.code == op::parameter) continue;
    if (fusible(ins) && !is_output[i] && !users[i].empty()) {
      const std::size_t target = group_of[users[i][0]];
      const bool one_kernel = std::ranges::all_of(users[i], [&](ir::value_id u) { return group_of[u] == target; });
      const ir::instruction& root = g.instructions[roots[target]];
      const bool sink = reduction_sink(g, root);
      // The index space the kernel's program runs over: its result's, or its reduction's operand's.
      const std::int64_t space = sink ? g.instructions[root.operands[0]].shape.numel() : root.shape.numel();
      const bool cheap = ins.code == op::constant || ins.code == op::iota || ins.code == op::broadcast_to;
      if (one_kernel && (fusible(root) || sink) && (cheap || ins.shape.numel() == space)) {
        group_of[i] = target;
        continue;
      }
    }
    group_of[i] = roots.size();
    roots.push_back(static_cast<ir::value_id>(i));
  }

  fusion_plan plan;
  plan.kernels.resize(roots.size());
  for (std::size_t k = 0; k < roots.size(); ++k) {
    plan.kernels[k].root = roots[k];
    plan.kernels[k].elementwise = fusible(g.instructions[roots[k]]);
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (group_of[i] == none) continue;
    kernel_group& kernel = plan.kernels[group_of[i]];
    kernel.members.push_back(static_cast<ir::value_id>(i));
    for (const ir::value_id operand : g.instructions[i].operands) {
      if (group_of[operand] != group_of[i] && std::ranges::find(kernel.inputs, operand) == kernel.inputs.end()) {
        kernel.inputs.push_back(operand);
      }
    }
  }
  // Roots were found from the last instruction back; a kernel's inputs are roots (or
  // parameters) before its own root, so ascending roots is a valid order.
  std::ranges::reverse(plan.kernels);
  detail::place_matmul_epilogues(g, plan, users, is_output);
  detail::merge_multi_output(g, plan, users, is_output);
  return plan;
}

} // namespace xlite::passes
