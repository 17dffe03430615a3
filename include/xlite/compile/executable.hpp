#pragma once

// An executable: what compiling a graph produces and the runtime runs. It holds the
// optimised graph, its kernels in running order, and the buffer plan. Element-wise kernels
// are lowered to a register program: the runtime evaluates it chunk by chunk, each step one
// SIMD loop over a chunk of the kernel's result held in a small register buffer, so a chain
// of ops reads its inputs and writes its result once, as the static layer's fused loop does.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/passes/buffer_plan.hpp"
#include "xlite/passes/fusion.hpp"

namespace xlite::compile {

// The dtype a value is computed in: narrow storage types compute in a wider one and are
// rounded back after each op, so results equal op-by-op evaluation in the storage type.
constexpr dtype compute_dtype(dtype t) {
  switch (t) {
  case dtype::u8:
  case dtype::i8:
    return dtype::i32;
  case dtype::f16:
  case dtype::bf16:
    return dtype::f32;
  default:
    return t;
  }
}

using register_id = std::uint16_t;

// The runtime evaluates a program over a chunk of this many elements at a time; the
// program's invariant steps over a range's first chunk.
inline constexpr std::int64_t program_chunk_elements = 1024;

// One step of an element-wise kernel's program.
struct register_step {
  enum class kind : std::uint8_t {
    load,    // register <- kernel input `input`, broadcast to the kernel's shape
    compute, // register <- code(operands), in `type`'s compute dtype
  };
  kind what = kind::compute;
  op code = op::add;
  dtype type = dtype::f32;  // the value's dtype (its storage dtype)
  dtype operand_type = dtype::f32; // the data operands' dtype (where's are operands 1 and 2)
  std::uint16_t input = 0;  // load: index into the kernel's inputs
  std::vector<register_id> operands;
  register_id result = 0;
  ir::attributes attrs;     // constant's value, iota's axis (of the kernel's index space)
  // The same in every chunk (a constant, a scalar input, ops of those): computed in a
  // range's first chunk only, into a register nothing else uses.
  bool invariant = false;
};

struct executable;
using executable_ptr = std::shared_ptr<const executable>;

struct native_kernel; // compile/native_abi.hpp

struct kernel {
  passes::kernel_group group;
  std::vector<register_step> program; // element-wise kernels and fused reductions
  // Where the program leaves its results: an element-wise kernel's root, then its
  // group.extra_results; a fused reduction's operand.
  std::vector<register_id> result_registers;
  std::uint16_t register_count = 0;
  std::vector<executable_ptr> subprograms; // a control op's subgraphs, compiled
  // The program as C++ source and, once the runtime has built it in the background
  // (runtime/native_kernels.hpp), as machine code; until then the runtime interprets the
  // program. Only for the kernels compile/native_source.hpp accepts. Not serialized: it is
  // made again from the program when an executable is read.
  std::shared_ptr<native_kernel> native;
};

struct executable {
  std::uint64_t hash = 0;   // of the graph as captured, before the passes: the cache key
  ir::graph program;        // after the passes
  std::vector<kernel> kernels;
  passes::buffer_plan buffers;
  std::string pass_log;     // what each pass did, for debugging
};

} // namespace xlite::compile
