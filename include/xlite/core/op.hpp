#pragma once

// xlite's op set: the one list of operations. The static expression layer (expr/) and the
// lazy IR (ir/) are two front ends of it, and the kernels (kernels/) implement it, so the
// three cannot drift apart: each is checked against this list at compile time.
//
// For each op: its name, its arity, its kind, and the rule that gives its result dtype from
// its operands' dtypes (PyTorch's rules). The static layer fuses the element-wise ops and
// the reductions; the lazy IR has all of them, plus the graph's sources (parameters,
// constants, iota), the ops that move data (reshape, permute, gather, ...), matmul, the
// window ops of convolution and pooling, the random number generators, control flow,
// the collectives between devices and the SPMD partitioner's sharding ops (ir/sharding_ops.hpp).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"

namespace xlite {

// How an op's result dtype follows from its operands' dtypes.
enum class dtype_rule : std::uint8_t {
  promote,       // promote_types over the operands (add, mul, min, ...)
  promote_data,  // promote_types over operands 1.. (where: operand 0 is the condition)
  to_floating,   // the operand's dtype if floating point, else float32 (exp, true division, mean)
  to_boolean,    // bool (comparisons, logical ops)
  to_index,      // int64 (argmax)
  first,         // operand 0's dtype (gather: operand 1 holds indices)
  accumulate,    // integral and bool widen to int64, floating stays (sum, prod: as torch.sum)
  explicit_type, // chosen by the caller (cast, and the sources of a graph)
};

enum class op_kind : std::uint8_t {
  elementwise, // one result element from the operands' elements at the same (broadcast) index
  reduction,   // combines the elements along chosen axes
  source,      // no operands: a graph's parameters and constants
  layout,      // moves elements: reshape, permute, slice, gather, ... (and gather's and
               // index_select's adjoints, which add the elements that land on one place)
  contraction, // matmul
  random,      // draws each element from a counter-based generator keyed by the operand
  control,     // runs subgraphs (while_loop, cond) and picks one of their results
  window,      // works on sliding windows over (N, C, H, W): unfold, fold, max pooling (ir/window.hpp)
  collective,  // depends on the device that runs it: exchanges values between devices (all_reduce,
               // all_gather, ...: ir/collective.hpp) or takes the device's tile (local_shard)
};

// The arity of an op that takes any number (at least one) of operands: concat.
inline constexpr std::size_t variadic = static_cast<std::size_t>(-1);

// X(name, arity, kind, dtype_rule). Names are the lower-case names users see.
#define XLITE_OP_LIST(X)                                                                                               \
  X(add, 2, elementwise, promote)                                                                                      \
  X(sub, 2, elementwise, promote)                                                                                      \
  X(mul, 2, elementwise, promote)                                                                                      \
  X(div, 2, elementwise, to_floating)                                                                                  \
  X(neg, 1, elementwise, promote)                                                                                      \
  X(equal, 2, elementwise, to_boolean)                                                                                 \
  X(not_equal, 2, elementwise, to_boolean)                                                                             \
  X(less, 2, elementwise, to_boolean)                                                                                  \
  X(less_equal, 2, elementwise, to_boolean)                                                                            \
  X(greater, 2, elementwise, to_boolean)                                                                               \
  X(greater_equal, 2, elementwise, to_boolean)                                                                         \
  X(logical_and, 2, elementwise, to_boolean)                                                                           \
  X(logical_or, 2, elementwise, to_boolean)                                                                            \
  X(logical_not, 1, elementwise, to_boolean)                                                                           \
  X(where, 3, elementwise, promote_data)                                                                               \
  X(fma, 3, elementwise, promote)                                                                                      \
  X(minimum, 2, elementwise, promote)                                                                                  \
  X(maximum, 2, elementwise, promote)                                                                                  \
  X(clamp, 3, elementwise, promote)                                                                                    \
  X(pow, 2, elementwise, to_floating)                                                                                  \
  X(abs, 1, elementwise, promote)                                                                                      \
  X(exp, 1, elementwise, to_floating)                                                                                  \
  X(log, 1, elementwise, to_floating)                                                                                  \
  X(log1p, 1, elementwise, to_floating)                                                                                \
  X(sqrt, 1, elementwise, to_floating)                                                                                 \
  X(rsqrt, 1, elementwise, to_floating)                                                                                \
  X(tanh, 1, elementwise, to_floating)                                                                                 \
  X(sigmoid, 1, elementwise, to_floating)                                                                              \
  X(relu, 1, elementwise, promote)                                                                                     \
  X(gelu, 1, elementwise, to_floating)                                                                                 \
  X(sin, 1, elementwise, to_floating)                                                                                  \
  X(cos, 1, elementwise, to_floating)                                                                                  \
  X(floor, 1, elementwise, promote)                                                                                    \
  X(ceil, 1, elementwise, promote)                                                                                     \
  X(round, 1, elementwise, promote)                                                                                    \
  X(cast, 1, elementwise, explicit_type)                                                                               \
  X(sum, 1, reduction, accumulate)                                                                                     \
  X(mean, 1, reduction, to_floating)                                                                                   \
  X(max, 1, reduction, promote)                                                                                        \
  X(min, 1, reduction, promote)                                                                                        \
  X(prod, 1, reduction, accumulate)                                                                                    \
  X(argmax, 1, reduction, to_index)                                                                                    \
  X(parameter, 0, source, explicit_type)                                                                               \
  X(constant, 0, source, explicit_type)                                                                                \
  X(iota, 0, source, explicit_type)                                                                                    \
  X(reshape, 1, layout, promote)                                                                                       \
  X(permute, 1, layout, promote)                                                                                       \
  X(broadcast_to, 1, layout, promote)                                                                                  \
  X(slice, 1, layout, promote)                                                                                         \
  X(concat, variadic, layout, promote)                                                                                 \
  X(pad, 1, layout, promote)                                                                                           \
  X(gather, 2, layout, first)                                                                                          \
  X(index_select, 2, layout, first)                                                                                    \
  X(scatter_add, 2, layout, first)                                                                                     \
  X(index_add, 2, layout, first)                                                                                       \
  X(unfold, 1, window, first)                                                                                          \
  X(fold, 1, window, first)                                                                                            \
  X(select_window_max, 2, window, first)                                                                               \
  X(scatter_window_max, 2, window, first)                                                                              \
  X(matmul, 2, contraction, promote)                                                                                   \
  X(random_uniform, 1, random, explicit_type)                                                                          \
  X(random_normal, 1, random, explicit_type)                                                                           \
  X(while_loop, variadic, control, explicit_type)                                                                      \
  X(cond, variadic, control, explicit_type)                                                                            \
  X(tuple_element, 1, control, explicit_type)                                                                          \
  X(all_reduce, 1, collective, first)                                                                                  \
  X(all_gather, 1, collective, first)                                                                                  \
  X(reduce_scatter, 1, collective, first)                                                                              \
  X(all_to_all, 1, collective, first)                                                                                  \
  X(collective_permute, 1, collective, first)                                                                          \
  X(mark_sharding, 1, layout, first)                                                                                   \
  X(local_shard, 1, collective, first)

enum class op : std::uint8_t {
#define XLITE_OP_ENUM(name, arity, kind, rule) name,
  XLITE_OP_LIST(XLITE_OP_ENUM)
#undef XLITE_OP_ENUM
};

struct op_info {
  std::string_view name;
  std::size_t arity;
  op_kind kind;
  dtype_rule rule;
};

inline constexpr std::array op_table{
#define XLITE_OP_INFO(name, arity, kind, rule) op_info{#name, arity, op_kind::kind, dtype_rule::rule},
    XLITE_OP_LIST(XLITE_OP_INFO)
#undef XLITE_OP_INFO
};

inline constexpr std::size_t op_count = op_table.size();

constexpr const op_info& info(op o) { return op_table[static_cast<std::size_t>(o)]; }
constexpr std::string_view name(op o) { return info(o).name; }

// The most operands an element-wise op takes (where, fma and clamp take three), for arrays of them.
inline constexpr std::size_t max_elementwise_arity = [] {
  std::size_t most = 0;
  for (const op_info& i : op_table) {
    if (i.kind == op_kind::elementwise) most = std::max(most, i.arity);
  }
  return most;
}();
static_assert(max_elementwise_arity != variadic, "an element-wise op takes a fixed number of operands");

// Whether operand 1 is an int64 index along an axis (attrs.ints[0]) rather than data.
constexpr bool takes_index(op o) {
  return o == op::gather || o == op::index_select || o == op::scatter_add || o == op::index_add;
}

inline std::ostream& operator<<(std::ostream& out, op o) { return out << name(o); }

// The result dtype of `o` applied to operands of the given dtypes; `explicit_type` ops
// (cast) take their result from the caller and are a dtype_error here.
constexpr dtype result_dtype(op o, std::span<const dtype> operands) {
  const op_info& i = info(o);
  if (i.arity == variadic ? operands.empty() : operands.size() != i.arity) {
    throw dtype_error(detail::message(i.name, ": takes ", i.arity == variadic ? "at least 1" : std::to_string(i.arity),
                                      " operands, got ", operands.size()));
  }
  switch (i.rule) {
  case dtype_rule::promote:
  case dtype_rule::promote_data: {
    const std::size_t first = i.rule == dtype_rule::promote_data ? 1 : 0;
    dtype result = operands[first];
    for (std::size_t k = first + 1; k < operands.size(); ++k) result = promote_types(result, operands[k]);
    return result;
  }
  case dtype_rule::to_floating: {
    dtype result = operands[0];
    for (std::size_t k = 1; k < operands.size(); ++k) result = promote_types(result, operands[k]);
    return is_floating_point(result) ? result : default_floating_dtype;
  }
  case dtype_rule::to_boolean:
    return dtype::boolean;
  case dtype_rule::to_index:
    return dtype::i64;
  case dtype_rule::first:
    return operands[0];
  case dtype_rule::accumulate:
    return is_floating_point(operands[0]) ? operands[0] : dtype::i64;
  case dtype_rule::explicit_type:
    break;
  }
  throw dtype_error(detail::message(i.name, ": the result dtype is chosen by the caller"));
}

} // namespace xlite
