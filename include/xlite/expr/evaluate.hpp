#pragma once

// Evaluating a static expression: one fused pass over memory.
//
// 1. Plan the loop (plan_broadcast): the output shape, each memory leaf's broadcast strides
//    against it, and adjacent dimensions merged wherever every leaf allows, so that
//    broadcasts keep the longest inner rows. Same-shape operands are one flat run, which
//    the SIMD path binds and runs without a plan (bind_flat).
// 2. Bind (bound<E>): a mirror of the expression tree holding, per leaf, where its current
//    row starts; per node, the kernel functor of its op (kernels/elementwise.hpp).
// 3. Run (evaluate_into): chunks of the flat output range on the thread pool; in each row,
//    full SIMD batches of the arch `dispatch` picks (kernels/simd.hpp), then the row's end
//    as one more batch, loaded and stored under a mask; a scalar loop where there is no
//    SIMD path.
//
// Every output element is computed from the same inputs by the same operations whatever
// the chunking, so the result is bitwise the same for any number of threads. If the
// destination overlaps an operand in any way other than being that operand (a = a * 2 + b
// is fine), the expression is evaluated into a temporary first.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xlite/core/shape.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/expr/graph.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/kernels/elementwise.hpp"
#include "xlite/kernels/simd.hpp"

namespace xlite::expr {

// ---- what the type of E says about how to evaluate it --------------------------------------

// The element type whose lanes every batch of the loop has: the first non-bool element
// type in the tree (int32 lanes for an all-bool expression).
template <class PostOrder>
struct first_non_bool {
  using type = std::int32_t;
};
template <class S, class... Rest>
struct first_non_bool<type_list<S, Rest...>>
    : std::conditional_t<std::is_same_v<typename S::value_type, bool>, first_non_bool<type_list<Rest...>>,
                         std::type_identity<typename S::value_type>> {};
template <class E>
using lane_type_t = typename first_non_bool<post_order_t<E>>::type;

// Whether E can run in SIMD batches: all its element types have batches of the lane
// type's width (a cast between float and double, or int8 data, takes the scalar loop).
template <class V, class L>
inline constexpr bool fits_lanes_v = std::is_same_v<V, bool> || (kernels::simd_element_v<V> && sizeof(V) == sizeof(L));
template <class L, class PostOrder>
inline constexpr bool simd_lanes_v = false;
template <class L, class... Ts>
inline constexpr bool simd_lanes_v<L, type_list<Ts...>> = (fits_lanes_v<typename Ts::value_type, L> && ...);
template <class E>
inline constexpr bool simd_evaluable_v = simd_lanes_v<lane_type_t<E>, post_order_t<E>>;

// Whether Arch is the scalar path of an expression that also has a SIMD one, which runs only
// under an ISA cap below this translation unit's (tests, XLITE_ISA=portable) or on a CPU
// without its instruction set: there one loop, the strided one, takes every layout, rather
// than three copies of the expression's scalar code, which cost 0.2 s of the compile time
// of a file that evaluates E3.
template <class Arch, class E>
inline constexpr bool scalar_fallback_v =
    simd_evaluable_v<E> && !std::is_same_v<kernels::simd_arch, kernels::scalar_arch> &&
    std::is_same_v<Arch, kernels::scalar_arch>;

// ---- memory leaves, in tree order -------------------------------------------------------------

template <class E, class F>
void for_each_memory_leaf(const E& e, F&& f) {
  if constexpr (is_memory_leaf_v<E>) {
    f(e.data, e.shape, sizeof(typename E::value_type));
  } else if constexpr (requires { e.operands; }) {
    unpack([&](const auto&... operand) { (for_each_memory_leaf(operand, f), ...); }, e.operands);
  } else if constexpr (requires { e.operand; }) {
    for_each_memory_leaf(e.operand, f);
  }
}

// How many memory leaves E has (a tensor used twice counts twice).
template <class E>
struct memory_leaf_count : std::integral_constant<std::size_t, is_memory_leaf_v<E>> {};
template <op O, class T, class... Operands>
struct memory_leaf_count<node<O, T, Operands...>>
    : std::integral_constant<std::size_t, (memory_leaf_count<Operands>::value + ... + 0)> {};
template <class To, class Operand>
struct memory_leaf_count<cast_node<To, Operand>> : memory_leaf_count<Operand> {};
template <class E>
inline constexpr std::size_t memory_leaf_count_v = memory_leaf_count<E>::value;

// How many distinct arrays E reads: its memory leaves, those on the same data once.
template <class E>
std::size_t distinct_memory_leaves(const E& e) {
  std::array<const void*, memory_leaf_count_v<E>> seen{};
  std::size_t count = 0;
  for_each_memory_leaf(e, [&](const void* data, const xlite::shape&, std::size_t) {
    if (std::find(seen.begin(), seen.begin() + count, data) == seen.begin() + count) seen[count++] = data;
  });
  return count;
}

// S's operands, as a type_list (none for a leaf).
template <class S>
struct operand_list {
  using type = type_list<>;
};
template <op O, class T, class... Operands>
struct operand_list<node<O, T, Operands...>> {
  using type = type_list<Operands...>;
};
template <class To, class Operand>
struct operand_list<cast_node<To, Operand>> {
  using type = type_list<Operand>;
};
template <class S>
using operand_list_t = typename operand_list<S>::type;

// How many of E's nodes approximate a function (kernels::approximates), each occurrence
// counted (approximations_computed counts a shared one once).
template <class S>
inline constexpr bool approximating_node_v = false;
template <op O, class T, class... Operands>
inline constexpr bool approximating_node_v<node<O, T, Operands...>> = kernels::approximates(O);
template <class Nodes>
inline constexpr std::size_t approximation_count_of = 0;
template <class... Ts>
inline constexpr std::size_t approximation_count_of<type_list<Ts...>> = (std::size_t{approximating_node_v<Ts>} + ... +
                                                                         0);
template <class E>
inline constexpr std::size_t approximation_count_v = approximation_count_of<post_order_t<E>>;

// ---- the loop plan ----------------------------------------------------------------------------

using strides_t = std::array<std::int64_t, max_rank>;

// A loop nest over dimensions, the last fastest.
struct loop_nest {
  std::size_t rank = 1; // at least 1
  strides_t dims{};
  std::array<std::uint8_t, max_rank> group{}; // which group of make_plan each dimension came from
  bool contiguous = true;      // one flat run that every leaf walks with stride 1
  bool rows_contiguous = true; // every leaf walks the innermost dimension with stride 1 (none broadcast in it)

  // The dimensions of one group, as [first, last).
  std::pair<std::size_t, std::size_t> span_of(std::uint8_t g) const {
    std::size_t first = 0;
    while (first < rank && group[first] < g) ++first;
    std::size_t last = first;
    while (last < rank && group[last] == g) ++last;
    return {first, last};
  }
  std::int64_t count(std::pair<std::size_t, std::size_t> dims_span) const {
    std::int64_t n = 1;
    for (std::size_t d = dims_span.first; d < dims_span.second; ++d) n *= dims[d];
    return n;
  }
};

// The loop nest with each memory leaf's stride in each dimension (0 where broadcast).
template <std::size_t Leaves>
struct loop_plan : loop_nest {
  std::array<strides_t, Leaves> leaf_strides{}; // per memory leaf, in elements
};

// The strides with which a leaf of shape `leaf` is read when broadcast to `target`.
inline strides_t broadcast_strides(const xlite::shape& target, const xlite::shape& leaf) {
  strides_t strides{};
  std::int64_t stride = 1;
  for (std::size_t i = 0; i < target.rank(); ++i) { // i counts from the last dimension
    const std::size_t d = target.rank() - 1 - i;
    const std::int64_t dim = i < leaf.rank() ? leaf[leaf.rank() - 1 - i] : 1;
    strides[d] = dim == 1 && target[d] != 1 ? 0 : stride;
    stride *= dim;
  }
  return strides;
}

// The strides with which a leaf of shape `leaf` is read when broadcast to `target`, with
// dimension d taken from dimension order[d] of target. Out of line, as make_plan.
[[gnu::noinline]] inline strides_t ordered_broadcast_strides(const xlite::shape& target, const xlite::shape& leaf,
                                                             std::span<const std::size_t> order) {
  const strides_t full = broadcast_strides(target, leaf);
  strides_t strides{};
  for (std::size_t d = 0; d < order.size(); ++d) strides[d] = full[order[d]];
  return strides;
}

// The loop over `target`'s dimensions taken in `order` (dimension d from dimension order[d]
// of target): drops length-1 dimensions and merges each dimension into the one before it
// wherever every leaf steps through the pair as through one dimension, within a group only.
// `group` gives each dimension's group, non-decreasing; a group left with no dimension (all
// length 1) is given one of length 1, so that every group has a place in the plan. In place:
// `leaf_strides` holds each leaf's strides over the ordered dimensions, and then over the
// plan's. Planning runs once per evaluation: out of line and for any number of leaves, it is
// compiled once per file, not unrolled for every expression's leaves.
[[gnu::noinline]] inline void make_plan(loop_nest& plan, std::span<strides_t> leaf_strides, const xlite::shape& target,
                                        std::span<const std::size_t> order, std::span<const std::uint8_t> group) {
  std::size_t kept = 0;
  const auto keep = [&](std::int64_t dim, std::uint8_t g, std::size_t source) { // source >= kept
    plan.dims[kept] = dim;
    plan.group[kept] = g;
    for (strides_t& st : leaf_strides) st[kept] = dim == 1 ? 0 : st[source];
    ++kept;
  };
  for (std::size_t d = 0; d < order.size(); ++d) {
    const std::int64_t dim = target[order[d]];
    const bool last_of_group = d + 1 == order.size() || group[d + 1] != group[d];
    if (dim != 1) {
      keep(dim, group[d], d);
    } else if (last_of_group && (kept == 0 || plan.group[kept - 1] != group[d])) {
      keep(1, group[d], d); // the group's only place
    }
  }
  if (kept == 0) keep(1, 0, 0);
  std::size_t write = 0;
  for (std::size_t d = 1; d < kept; ++d) {
    const bool merges = plan.group[d] == plan.group[write] &&
                        std::all_of(leaf_strides.begin(), leaf_strides.end(),
                                    [&](const strides_t& st) { return st[write] == st[d] * plan.dims[d]; });
    if (!merges) ++write;
    plan.group[write] = plan.group[d];
    plan.dims[write] = merges ? plan.dims[write] * plan.dims[d] : plan.dims[d];
    for (strides_t& st : leaf_strides) st[write] = st[d];
  }
  plan.rank = write + 1;
  plan.rows_contiguous = std::all_of(leaf_strides.begin(), leaf_strides.end(),
                                     [&](const strides_t& st) { return st[plan.rank - 1] == 1; });
  plan.contiguous = plan.rank == 1 && plan.rows_contiguous;
}

// make_plan for e's memory leaves broadcast to `target`, written into `plan` in place: a copy
// of a plan just written would wait on its stores.
template <class E>
void plan_leaves(loop_plan<memory_leaf_count_v<E>>& plan, const E& e, const xlite::shape& target,
                 std::span<const std::size_t> order, std::span<const std::uint8_t> group) {
  std::size_t leaf = 0;
  for_each_memory_leaf(e, [&](const void*, const xlite::shape& s, std::size_t) {
    plan.leaf_strides[leaf++] = ordered_broadcast_strides(target, s, order);
  });
  make_plan(plan, plan.leaf_strides, target, order, group);
}

// One flat run of `count` elements that every leaf walks with stride 1: the plan when all
// memory leaves have the output's shape, made without make_plan.
template <std::size_t Leaves>
loop_plan<Leaves> flat_plan(std::int64_t count) {
  loop_plan<Leaves> plan;
  plan.dims[0] = count;
  for (strides_t& st : plan.leaf_strides) st[0] = 1;
  return plan;
}

// The plan of an expression whose leaves are broadcast. Out of line: the common case, every
// leaf of the output's shape, runs before it and stays a few cache lines of code. After a pass
// over as much data as L2 holds, each line of code a call runs comes from L3 again; inlined,
// this made plan_elementwise 4 KiB long.
template <class E>
[[gnu::noinline]] loop_plan<memory_leaf_count_v<E>> plan_broadcast(const E& e) {
  static constexpr std::array<std::size_t, max_rank> same_order{0, 1, 2, 3, 4, 5, 6, 7};
  static_assert(max_rank == 8);
  const xlite::shape& target = shape_of(e);
  const std::array<std::uint8_t, max_rank> one_group{};
  loop_plan<memory_leaf_count_v<E>> plan;
  plan_leaves(plan, e, target, std::span(same_order.data(), target.rank()), std::span(one_group.data(), target.rank()));
  return plan;
}

// Whether every memory leaf of e has shape s: nothing is broadcast, and all leaves walk one
// flat run together.
template <class E>
bool memory_leaves_have_shape(const E& e, const xlite::shape& s) {
  bool same = true;
  for_each_memory_leaf(e, [&](const void*, const xlite::shape& leaf, std::size_t) { same = same && leaf == s; });
  return same;
}

// The loop for writing e element by element into a tensor of e's shape.
template <class E>
loop_plan<memory_leaf_count_v<E>> plan_elementwise(const E& e) {
  const xlite::shape& target = shape_of(e);
  if (memory_leaves_have_shape(e, target)) return flat_plan<memory_leaf_count_v<E>>(target.numel());
  return plan_broadcast(e);
}

// ---- bound expressions ---------------------------------------------------------------------

// Whether two xsimd types hold the same register type. (Comparing vector types as template
// arguments makes GCC warn that their alignment attributes are ignored, which is harmless
// for a type identity test.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <class A, class B>
inline constexpr bool same_register_v = std::is_same_v<typename A::register_type, typename B::register_type>;
#pragma GCC diagnostic pop

// The same lanes' truth values as a mask of another element type of the same width. With
// AVX-512 and NEON the two mask types share a register type; with SSE and AVX a mask is a
// vector of all-ones or all-zeros lanes, whose bits are the same whatever the lane type.
template <class To, class From, class A>
xsimd::batch_bool<To, A> convert_mask(const xsimd::batch_bool<From, A>& m) {
  using target = xsimd::batch_bool<To, A>;
  if constexpr (std::is_same_v<To, From>) {
    return m;
  } else if constexpr (same_register_v<target, xsimd::batch_bool<From, A>>) {
    return target(m.data);
  } else {
    return target(xsimd::bitwise_cast<xsimd::batch<To, A>>(xsimd::bitwise_cast(m)).data);
  }
}

// ---- common subexpressions ------------------------------------------------------------------

// Whether two subexpressions of one type compute the same values: the same leaves, by
// address and shape (one buffer seen as (3,) and as (2, 3) is two leaves), and scalars of
// the same bits.
template <class E>
bool same_computation(const E& a, const E& b) {
  if constexpr (is_memory_leaf_v<E>) {
    return a.data == b.data && shape_of(a) == shape_of(b);
  } else if constexpr (is_scalar_leaf_v<E>) {
    return std::memcmp(&a.value, &b.value, sizeof a.value) == 0;
  } else if constexpr (requires { a.operands; }) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (same_computation(std::get<I>(a.operands), std::get<I>(b.operands)) && ...);
    }(std::make_index_sequence<std::tuple_size_v<decltype(a.operands)>>{});
  } else {
    return same_computation(a.operand, b.operand);
  }
}

// Calls f(s) for every occurrence s of node type S in e, in tree order.
template <class S, class E, class F>
void for_each_occurrence(const E& e, F& f) {
  if constexpr (std::is_same_v<S, E>) f(e);
  if constexpr (requires { e.operands; }) {
    unpack([&](const auto&... o) { (for_each_occurrence<S>(o, f), ...); }, e.operands);
  } else if constexpr (requires { e.operand; }) {
    for_each_occurrence<S>(e.operand, f);
  }
}

template <class E>
inline constexpr std::size_t repeated_count_v = repeated_t<E>::size;

// Whether all occurrences of node type S in e are the same computation.
template <class S, class E>
bool occurrences_agree(const E& e) {
  const S* first = nullptr;
  bool same = true;
  auto compare = [&](const S& occurrence) {
    if (first == nullptr) {
      first = &occurrence;
    } else {
      same = same && same_computation(*first, occurrence);
    }
  };
  for_each_occurrence<S>(e, compare);
  return same;
}

// For each node type that occurs more than once in e, whether all its occurrences are the
// same computation, so that the evaluator computes it once per element and reuses it.
template <class E>
std::array<bool, repeated_count_v<E>> find_shared(const E& e) {
  return [&]<class... S>(type_list<S...>) {
    return std::array<bool, sizeof...(S)>{occurrences_agree<S>(e)...};
  }(repeated_t<E>{});
}

// S's place in a list of types, or the list's size when S is not in it.
template <class S, class... Ts>
constexpr std::size_t index_in(type_list<Ts...>) {
  constexpr bool same[] = {std::is_same_v<S, Ts>..., true};
  std::size_t k = 0;
  while (!same[k]) ++k;
  return k;
}

// The approximated functions the evaluator computes per element in S, a subexpression of E:
// each occurrence, but a shared one (find_shared) once, at the first of them.
template <class E, class S, std::size_t N>
std::size_t approximations_computed(const std::array<bool, N>& shared, std::array<bool, N>& counted) {
  if constexpr (approximation_count_v<S> == 0) {
    return 0;
  } else {
    constexpr std::size_t k = index_in<S>(repeated_t<E>{});
    if constexpr (k < N) {
      if (shared[k] && std::exchange(counted[k], true)) return 0;
    }
    return std::size_t{approximating_node_v<S>} + [&]<class... Operands>(type_list<Operands...>) {
      return (approximations_computed<E, Operands>(shared, counted) + ... + std::size_t{0});
    }(operand_list_t<S>{});
  }
}

template <class E>
std::size_t approximations_computed(const E& e) {
  const auto shared = find_shared(e);
  std::array<bool, repeated_count_v<E>> counted{};
  return approximations_computed<E, E>(shared, counted);
}

// How many subexpressions of e the evaluator computes once and reuses (for tests and for
// users checking that a repeated term is shared).
template <expression E>
std::size_t shared_subexpression_count(const E& e) {
  const auto shared = find_shared(e);
  return static_cast<std::size_t>(std::count(shared.begin(), shared.end(), true));
}

// What one element (or batch) of a node of element type T is under Arch.
template <class T, class L, class Arch>
using value_t = std::conditional_t<std::is_same_v<T, bool>, kernels::mask_t<L, Arch>, kernels::batch_t<T, Arch>>;

// The values of shared subexpressions at the current position: created afresh for every
// element or batch, so a value is computed at its first use and read at the others.
template <class Arch, class L, class Repeated>
struct sharing_context;
template <class Arch, class L, class... Repeated>
struct sharing_context<Arch, L, type_list<Repeated...>> {
  static constexpr std::size_t count = sizeof...(Repeated);
  const std::array<bool, count>& shared;
  std::array<bool, count> ready{};
  std::tuple<value_t<typename Repeated::value_type, L, Arch>...> values{};

  // S's slot, or count when S is not a repeated type.
  template <class S>
  static constexpr std::size_t index_of() {
    return index_in<S>(type_list<Repeated...>{});
  }
};

// The context of a batch of which only the first `valid` lanes are in the row: memory
// leaves read those lanes alone (bound_root::get_first).
template <class Sharing>
struct first_lanes_context : Sharing {
  std::size_t valid;
};

// ---- bound expressions ---------------------------------------------------------------------

template <class E>
struct bound;

// A memory leaf. Its strides stay in the loop plan, found by the leaf's number there rather
// than by a pointer, so that whoever holds the plan passes it: a task the pool copies for
// its workers (strided_task, the closures of reduce_rows and reduce_columns) reads them
// from that copy, in the pool's lines, instead of from the calling thread's stack.
template <class T>
struct bound_memory {
  const T* base;
  const T* row;
  // Along the innermost dimension: 1, or 0 where broadcast.
  std::int64_t inner_stride;
  std::size_t leaf; // in tree order: the plan's leaf_strides[leaf]

  template <class F>
  void for_each_leaf(F& f) {
    f(*this);
  }

  // Asks for the lines the batch of `Lanes` elements at j reads, kernels::prefetch_distance
  // bytes ahead.
  template <std::size_t Lanes>
  void prefetch(std::int64_t j) const {
    kernels::prefetch_ahead<Lanes * sizeof(T)>(row + j);
  }

  template <class Arch, class L, bool Contiguous, class Context>
  auto eval(std::int64_t j, const Context& context) const {
    if constexpr (std::is_same_v<Arch, kernels::scalar_arch>) {
      return Contiguous ? row[j] : row[j * inner_stride];
    } else {
      using batch = value_t<T, L, Arch>; // a batch_bool of L's lanes for bools
      if (!Contiguous && inner_stride == 0) return batch(*row);
      if constexpr (requires { context.valid; }) {
        return kernels::load_first<batch>(row + j, context.valid);
      } else {
        return batch::load_unaligned(row + j);
      }
    }
  }
};

template <class T>
struct bound<tensor_ref<T>> : bound_memory<T> {};
template <class T>
struct bound<tensor_owner<T>> : bound_memory<T> {};

template <class T>
struct bound<scalar<T>> {
  T value;
  template <class F>
  void for_each_leaf(F&) {}
  template <class Arch, class L, bool Contiguous, class Context>
  auto eval(std::int64_t, Context&) const {
    return value_t<T, L, Arch>(value);
  }
};

// The value of a bound subexpression at position j: a leaf's, or an inner node's computed
// once per position if shared, else computed. One function for every kind of node, rather
// than an eval of each that called it: fewer functions for g++ to compile per node, for each
// way an expression is evaluated (arch, layout, context).
template <class Arch, class L, bool Contiguous, class Bound, class Context>
auto value_at(const Bound& b, std::int64_t j, Context& context) {
  if constexpr (requires { typename Bound::expression_type; }) {
    using S = typename Bound::expression_type;
    using V = value_t<typename S::value_type, L, Arch>;
    constexpr std::size_t k = Context::template index_of<S>();
    if constexpr (k < std::tuple_size_v<decltype(context.values)>) {
      if (context.shared[k]) {
        if (!context.ready[k]) {
          std::get<k>(context.values) = V(b.template compute<Arch, L, Contiguous>(j, context));
          context.ready[k] = true;
        }
        return std::get<k>(context.values);
      }
    }
    return V(b.template compute<Arch, L, Contiguous>(j, context));
  } else {
    return b.template eval<Arch, L, Contiguous>(j, context);
  }
}

template <op O, class T, class... Operands>
struct bound<node<O, T, Operands...>> {
  using expression_type = node<O, T, Operands...>;
  std::tuple<bound<Operands>...> operands;

  template <class F>
  void for_each_leaf(F& f) {
    for_each_leaf_of(f, std::index_sequence_for<Operands...>{});
  }

  // Each op's value is rounded on its own, as the native kernels' step() does: an op whose
  // last step is a product (gelu; exp without AVX-512) would otherwise, inlined into the
  // loop, be fused into one fma with an addition that uses it, on FMA targets only.
  template <class Arch, class L, bool Contiguous, class Context>
  auto compute(std::int64_t j, Context& context) const {
    return compute_of<Arch, L, Contiguous>(j, context, std::index_sequence_for<Operands...>{});
  }

  // Whether operand I is a number that the op takes by kernels::detail::maximum_with_number
  // or minimum_with_number, known from the expression's type: for max and min, a scalar
  // beside a non-scalar; for clamp, a scalar bound (lo, I = 1, or hi, I = 2) of a
  // non-scalar x. Floating point only.
  template <std::size_t I>
  static constexpr bool takes_number() {
    using Types = std::tuple<Operands...>;
    if constexpr (!std::is_floating_point_v<T> || I >= sizeof...(Operands)) {
      return false;
    } else if constexpr (O == op::maximum || O == op::minimum) {
      return is_scalar_leaf_v<std::tuple_element_t<I, Types>> && !is_scalar_leaf_v<std::tuple_element_t<1 - I, Types>>;
    } else {
      return O == op::clamp && I > 0 && is_scalar_leaf_v<std::tuple_element_t<I, Types>> &&
             !is_scalar_leaf_v<std::tuple_element_t<0, Types>>;
    }
  }

private:
  template <class F, std::size_t... I>
  void for_each_leaf_of(F& f, std::index_sequence<I...>) {
    (std::get<I>(operands).for_each_leaf(f), ...);
  }

  template <class Arch, class L, bool Contiguous, class Context, std::size_t... I>
  auto compute_of(std::int64_t j, Context& context, std::index_sequence<I...>) const {
    auto value = op_value<Arch, L, Contiguous>(j, context, std::index_sequence<I...>{});
    if constexpr (std::is_same_v<T, bool> && !std::is_same_v<Arch, kernels::scalar_arch>) {
      return convert_mask<L>(value); // a comparison of non-L operands gives their mask type
    } else {
      kernels::detail::round_separately(value);
      return value;
    }
  }

  // The op's value, by its functor, or by bounded where an operand is a number.
  template <class Arch, class L, bool Contiguous, class Context, std::size_t... I>
  auto op_value(std::int64_t j, Context& context, std::index_sequence<I...>) const {
    constexpr bool simd = !std::is_same_v<Arch, kernels::scalar_arch>;
    if constexpr (simd && (O == op::maximum || O == op::minimum) && (takes_number<0>() || takes_number<1>())) {
      constexpr std::size_t other = takes_number<0>() ? 1 : 0;
      const auto x = value_at<Arch, L, Contiguous>(std::get<other>(operands), j, context);
      return bounded<O, 1 - other, Arch, L, Contiguous>(x, j, context);
    } else if constexpr (simd && O == op::clamp && (takes_number<1>() || takes_number<2>())) {
      const auto x = value_at<Arch, L, Contiguous>(std::get<0>(operands), j, context);
      return bounded<op::minimum, 2, Arch, L, Contiguous>(bounded<op::maximum, 1, Arch, L, Contiguous>(x, j, context),
                                                          j, context);
    } else {
      return kernels::elementwise<O>{}(value_at<Arch, L, Contiguous>(std::get<I>(operands), j, context)...);
    }
  }

  // maximum or minimum (Bound) of x and operand N: in fewer instructions where N is a
  // number, with the same bits but for which NaN.
  template <op Bound, std::size_t N, class Arch, class L, bool Contiguous, class Context, class V>
  V bounded(const V& x, std::int64_t j, Context& context) const {
    if constexpr (takes_number<N>() && Bound == op::maximum) {
      return kernels::detail::maximum_with_number(x, std::get<N>(operands).value);
    } else if constexpr (takes_number<N>()) {
      return kernels::detail::minimum_with_number(x, std::get<N>(operands).value);
    } else {
      return kernels::elementwise<Bound>{}(x, V(value_at<Arch, L, Contiguous>(std::get<N>(operands), j, context)));
    }
  }
};

// Whether X is a where node; over a condition of type C.
template <class X>
inline constexpr bool is_where_node_v = false;
template <class T, class C, class A, class B>
inline constexpr bool is_where_node_v<node<op::where, T, C, A, B>> = true;
template <class C, class X>
inline constexpr bool is_where_on_v = false;
template <class C, class T, class A, class B>
inline constexpr bool is_where_on_v<C, node<op::where, T, C, A, B>> = true;

template <class T, class C, class A, class B>
struct bound<node<op::where, T, C, A, B>> {
  using expression_type = node<op::where, T, C, A, B>;
  std::tuple<bound<C>, bound<A>, bound<B>> operands;
  // where(c, where(c, a, b), d) is where(c, a, d) and where(c, a, where(c, b, d)) is
  // where(c, a, d): set by bind when a branch is a where whose condition is the same
  // computation as this one's, so that the branch never taken is not computed.
  bool true_branch_merged = false;
  bool false_branch_merged = false;

  template <class F>
  void for_each_leaf(F& f) {
    std::get<0>(operands).for_each_leaf(f);
    std::get<1>(operands).for_each_leaf(f);
    std::get<2>(operands).for_each_leaf(f);
  }

  template <class Arch, class L, bool Contiguous, class Context>
  auto compute(std::int64_t j, Context& context) const {
    const auto mask = value_at<Arch, L, Contiguous>(std::get<0>(operands), j, context);
    const auto if_true = branch<1, Arch, L, Contiguous>(true_branch_merged, j, context);
    const auto if_false = branch<2, Arch, L, Contiguous>(false_branch_merged, j, context);
    if constexpr (std::is_same_v<Arch, kernels::scalar_arch>) {
      return kernels::elementwise<op::where>{}(mask, if_true, if_false);
    } else if constexpr (std::is_same_v<T, bool>) {
      return (mask & if_true) | (~mask & if_false);
    } else {
      return kernels::elementwise<op::where>{}(convert_mask<T>(mask), if_true, if_false);
    }
  }

private:
  // Operand I (1: if true, 2: if false), or, when merged, the inner where's operand I.
  template <std::size_t I, class Arch, class L, bool Contiguous, class Context>
  auto branch(bool merged, std::int64_t j, Context& context) const {
    const auto& operand = std::get<I>(operands);
    using V = value_t<T, L, Arch>;
    if constexpr (is_where_on_v<C, std::tuple_element_t<I, std::tuple<C, A, B>>>) {
      if (merged) return V(value_at<Arch, L, Contiguous>(std::get<I>(operand.operands), j, context));
    }
    return V(value_at<Arch, L, Contiguous>(operand, j, context));
  }
};

template <class To, class Operand>
struct bound<cast_node<To, Operand>> {
  using expression_type = cast_node<To, Operand>;
  using From = typename Operand::value_type;
  bound<Operand> operand;

  template <class F>
  void for_each_leaf(F& f) {
    operand.for_each_leaf(f);
  }

  template <class Arch, class L, bool Contiguous, class Context>
  auto compute(std::int64_t j, Context& context) const {
    auto x = value_at<Arch, L, Contiguous>(operand, j, context);
    if constexpr (!std::is_same_v<Arch, kernels::scalar_arch> && requires { context.valid; }) {
      // A row's end: the lanes past the row cast from zero, as the lazy runtime's padding
      // does (runtime/elementwise.hpp), and never from what no integer holds (1 / 0).
      if constexpr (std::is_same_v<From, bool>) {
        x = x && kernels::first_lanes_mask<typename decltype(x)::batch_type::value_type, Arch>(context.valid);
      } else {
        x = xsimd::select(kernels::first_lanes_mask<From, Arch>(context.valid), x, decltype(x)(From(0)));
      }
    }
    if constexpr (std::is_same_v<Arch, kernels::scalar_arch>) {
      return kernels::detail::scalar_cast<To>(x);
    } else if constexpr (std::is_same_v<From, bool>) { // a mask to 0 / 1
      using batch = kernels::batch_t<To, Arch>;
      return xsimd::select(convert_mask<To>(x), batch(To(1)), batch(To(0)));
    } else if constexpr (std::is_same_v<To, bool>) { // non-zero is true, NaN too: the op's !=
      return convert_mask<L>(kernels::elementwise<op::not_equal>{}(x, kernels::batch_t<From, Arch>(From(0))));
    } else {
      return kernels::cast_to<To>{}(x);
    }
  }
};

// The whole bound expression: what the loops call, one position at a time.
template <class E>
struct bound_root {
  using expression = E;
  bound<E> tree;
  std::array<bool, repeated_count_v<E>> shared;

  template <class F>
  void for_each_leaf(F& f) {
    tree.for_each_leaf(f);
  }

  template <class Arch, class L, bool Contiguous>
  auto get(std::int64_t j) const {
    sharing_context<Arch, L, repeated_t<E>> context{shared};
    return value_at<Arch, L, Contiguous>(tree, j, context);
  }

  // get's batch at j when only its first `count` lanes are in the row (a row's end): memory
  // leaves read nothing past them (and give zeros in the other lanes), where the
  // expression computes whatever it makes of them (raising floating-point flags, maybe:
  // xlite, like xsimd's math, does not keep them), for the caller to set aside.
  template <class Arch, class L, bool Contiguous>
  auto get_first(std::int64_t j, std::size_t count) const {
    first_lanes_context<sharing_context<Arch, L, repeated_t<E>>> context{{shared}, count};
    return value_at<Arch, L, Contiguous>(tree, j, context);
  }
};

// Whether `branch` is a where over the same condition, computed from the same leaves.
template <class C, class X>
bool is_nested_where_on(const C& condition, const X& branch) {
  if constexpr (is_where_on_v<C, X>) {
    return same_computation(condition, std::get<0>(branch.operands));
  } else {
    return false;
  }
}

// How many branches of where nodes in e the evaluator skips because they are wheres over
// the same condition (for tests and for users checking that the rule applies).
template <expression E>
std::size_t merged_where_count(const E& e) {
  std::size_t merged = 0;
  if constexpr (is_where_node_v<E>) {
    const auto& [condition, if_true, if_false] = e.operands;
    merged += is_nested_where_on(condition, if_true) + is_nested_where_on(condition, if_false);
  }
  if constexpr (requires { e.operands; }) {
    unpack([&](const auto&... o) { ((merged += merged_where_count(o)), ...); }, e.operands);
  } else if constexpr (requires { e.operand; }) {
    merged += merged_where_count(e.operand);
  }
  return merged;
}

// e with its memory leaves bound in tree order: leaf n reads along the innermost dimension
// with stride leaf_strides[n][inner_dim], or 1 where there are no leaf_strides (one flat run).
template <class E>
bound<E> bind_tree(const E& e, const strides_t* leaf_strides, std::size_t inner_dim, std::size_t& leaf) {
  if constexpr (is_memory_leaf_v<E>) {
    const std::size_t number = leaf++;
    return bound<E>{{e.data, e.data, leaf_strides != nullptr ? leaf_strides[number][inner_dim] : 1, number}};
  } else if constexpr (is_scalar_leaf_v<E>) {
    return bound<E>{static_cast<typename E::value_type>(e.value)};
  } else if constexpr (is_where_node_v<E>) {
    const auto& [condition, if_true, if_false] = e.operands;
    return bound<E>{{bind_tree(condition, leaf_strides, inner_dim, leaf),
                     bind_tree(if_true, leaf_strides, inner_dim, leaf),
                     bind_tree(if_false, leaf_strides, inner_dim, leaf)},
                    is_nested_where_on(condition, if_true),
                    is_nested_where_on(condition, if_false)};
  } else if constexpr (requires { e.operands; }) {
    return unpack([&](const auto&... o) { return bound<E>{{bind_tree(o, leaf_strides, inner_dim, leaf)...}}; },
                  e.operands);
  } else {
    return bound<E>{bind_tree(e.operand, leaf_strides, inner_dim, leaf)};
  }
}

// Binds e to a loop plan: each memory leaf takes its strides, in tree order.
template <class E, std::size_t Leaves>
bound_root<E> bind(const E& e, const loop_plan<Leaves>& plan) {
  std::size_t leaf = 0;
  return bound_root<E>{bind_tree(e, plan.leaf_strides.data(), plan.rank - 1, leaf), find_shared(e)};
}

// bind(e, flat_plan(...)) without the plan, for e whose memory leaves all have its shape.
// Building the plan zeroes every leaf's eight strides: 344 bytes for E3's four leaves, with
// `rep stosq` (g++ 12, -march=native on Intel), 11 of the 56 ns E3 took on 16 floats.
template <class E>
bound_root<E> bind_flat(const E& e) {
  std::size_t leaf = 0;
  return bound_root<E>{bind_tree(e, nullptr, 0, leaf), find_shared(e)};
}

// ---- the loop ------------------------------------------------------------------------------

// Outputs of at least this many elements are split over the thread pool, in tasks of about
// `parallel_grain` elements (a multiple of every batch width, see parallel_rows).
inline constexpr std::int64_t parallel_threshold = 1 << 15;
inline constexpr std::int64_t parallel_grain = 1 << 14;

// How many consecutive tasks of `task_elements` elements each a thread claims at once: as
// many as give every thread one claim, up to parallel_chunk elements, so that on a long loop
// a thread that is done early takes over chunks from a late one. (On a short loop a thread
// still takes over a claim that a late one has not made yet.) A claim and its call cost tens
// of ns: at 2^16 floats on 2 threads, 4 claims of 2^14 made e1 and e4 3-5% slower than 2 of
// 2^15. Chunking is not what keeps results independent of the thread count (the tasks'
// boundaries are), so a kernel may take it from the pool's size.
inline constexpr std::int64_t parallel_chunk = 1 << 16;
inline std::int64_t tasks_per_chunk(std::int64_t tasks, std::int64_t task_elements, std::size_t threads) {
  const auto t = std::max<std::int64_t>(1, static_cast<std::int64_t>(threads));
  const std::int64_t longest = std::max<std::int64_t>(1, parallel_chunk / std::max<std::int64_t>(1, task_elements));
  return std::max<std::int64_t>(1, std::min((tasks + t - 1) / t, longest));
}

// How run_row stores a row: plainly, into the cache; past it, with streaming stores, for an
// output larger than the cache (kernels::streaming_pays) from a loop that does not compute
// as long as it moves (store_path_for); and then also asking for the
// operands' lines ahead, where that pays (kernels::prefetch_pays). Decided once per
// evaluation, on the calling thread, where a bad XLITE_PREFETCH fails before any store.
enum class store_path : std::uint8_t { cached, streamed, streamed_asking_ahead };

// For an output of `output_bytes` from a loop that reads `arrays` distinct arrays and
// evaluates `approximations` approximated functions (kernels::approximates) per element,
// split over `threads` threads.
//
// Streaming saves the read of each output line, but a streaming store holds one of the
// core's few line buffers until memory takes the line, and a loop that computes between
// its stores stalls on them instead of computing while they drain. Measured on Zen 5 over
// 2^26 floats (docs/benchmarks.md), rates storing plainly over streaming: on one thread, a
// loop with an approximation for every two arrays it moves (its output counted) ran faster
// plainly: tanh(x) 1.10-1.34x, sin(x) 1.34-1.37x, e3 = exp(-x * x) * y + tanh(w)
// 1.01-1.23x, sigmoid(x) * y + sigmoid(w) 1.05-1.15x; one with fewer ran faster streaming
// in most runs: exp(x) + y 0.75-0.89x, sigmoid(x) * y 0.87-0.91x, e1 = a * x + y
// 0.77-0.88x. On two threads, which share memory, e3 and loops like it moved with the
// machine's phase from 0.84x to 1.26x (one build against itself: 0.80-1.12x), so there a
// loop stores plainly only with an approximation for every array it reads (tanh(x)
// 1.01-1.29x). Measured on floats; doubles follow the same rule. Where streaming asks
// ahead (XLITE_PREFETCH=1, the default on Intel's CPUs) the loop keeps streaming: that was
// measured there, storing plainly was not.
inline store_path store_path_for(std::size_t output_bytes, std::size_t approximations, std::size_t arrays,
                                 std::size_t threads) {
  if (!kernels::streaming_pays(output_bytes)) return store_path::cached;
  if (kernels::prefetch_pays()) return store_path::streamed_asking_ahead;
  const bool computes_as_long_as_it_moves =
      approximations > 0 && (threads == 1 ? 2 * approximations >= arrays + 1 : approximations >= arrays);
  return computes_as_long_as_it_moves ? store_path::cached : store_path::streamed;
}

// The same for evaluating e, counting only where that can matter: not for expressions with
// no approximated function, nor on the many evaluations too small to stream.
template <class E>
store_path store_path_for(const E& e, std::size_t output_bytes, std::size_t threads) {
  if constexpr (approximation_count_v<E> == 0) {
    return store_path_for(output_bytes, 0, 0, threads);
  } else {
    if (!kernels::streaming_pays(output_bytes)) return store_path::cached;
    return store_path_for(output_bytes, approximations_computed(e), distinct_memory_leaves(e), threads);
  }
}

// Flattened: the whole expression, down to each op's SIMD code, is inlined into the loop at
// any optimisation level. Otherwise g++ -O2 calls a node that occurs three times, or exp,
// once per batch (e2 and e3 ran 1.4-1.6x slower than at -O3), and even -O3 calls a shared
// subexpression's node (a CSE expression ran 2.8x slower). The reduction loops are too.
template <class Arch, class L, bool Contiguous, class B, class T>
[[gnu::flatten]] void run_row(const B& bound_expr, T* out, std::int64_t begin, std::int64_t end, store_path path) {
  // A local copy, which the stores to `out` cannot alias: the compiler keeps its pointers,
  // scalars and sharing flags in registers instead of reloading them after every store.
  B expr = bound_expr;
  constexpr auto width = static_cast<std::int64_t>(kernels::lanes<L, Arch>);
  std::int64_t j = begin;
  if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
    if constexpr (Contiguous && !std::is_same_v<T, bool>) {
      // Streaming stores need whole aligned batches. An unaligned output is stored plainly
      // rather than after a scalar prologue: that would compute a few elements of each
      // task by the scalar form, and their bits would depend on the thread count.
      constexpr std::size_t alignment = sizeof(T) * static_cast<std::size_t>(width);
      if (path != store_path::cached && reinterpret_cast<std::uintptr_t>(out + j) % alignment == 0) {
        // The hardware prefetcher alone may not keep the operands coming while the core
        // computes (kernels::prefetch_pays). A test in the loop, not a second loop: one copy
        // of the expression's code, and the branch always goes one way.
        const bool ahead = path == store_path::streamed_asking_ahead;
        auto prefetch = [&](const auto& leaf) { leaf.template prefetch<width>(j); };
        for (; j + width <= end; j += width) {
          if (ahead) expr.for_each_leaf(prefetch);
          kernels::store_streaming(out + j, expr.template get<Arch, L, Contiguous>(j));
        }
        kernels::streaming_fence();
      }
    }
    for (; j + width <= end; j += width) {
      const auto v = expr.template get<Arch, L, Contiguous>(j);
      v.store_unaligned(out + j);
    }
    // The row's end, fewer elements than a batch: one batch over its first lanes, stored
    // under a mask, as the reductions end their rows. A scalar loop computed each element
    // on its own, by the scalar form (a libm call for exp), which for rows shorter than a
    // batch, as x + bias over 10 features, was every element. Inline: out of line, one
    // copy for all the row loops, it made x + bias over rows of 10 and 100 floats take 2x
    // and 1.3x as long.
    if (j < end) {
      const auto count = static_cast<std::size_t>(end - j);
      kernels::store_first(out + j, expr.template get_first<Arch, L, Contiguous>(j, count), count);
    }
  } else {
    for (; j < end; ++j) out[j] = expr.template get<kernels::scalar_arch, L, Contiguous>(j);
  }
}

// The bookkeeping of a walk over rows: where a range starts, where the next row starts when
// a dimension wraps, where a leaf's row starts. In a walk each runs once per task or once
// per wrap, not per row, and is out of line: inlined into every loop over rows, unrolled
// for up to max_rank dimensions (and leaves), it made 8% of the instructions g++ -O3 runs
// on a file that evaluates E3.

// Steps index over dimensions [span.first, span.second) to the next position (the last of
// them fastest), back to all zeros after the last.
[[gnu::noinline]] inline void next_index(const loop_nest& plan, std::pair<std::size_t, std::size_t> span,
                                         std::array<std::int64_t, max_rank>& index) {
  for (std::size_t d = span.second; d-- > span.first;) {
    if (++index[d] < plan.dims[d]) return;
    index[d] = 0;
  }
}

// Sets index[first, rank - 1) to the row of flat position `position` of dimensions
// [first, rank), and returns the position's place in its row.
[[gnu::noinline]] inline std::int64_t locate_row(const loop_nest& plan, std::size_t first, std::int64_t position,
                                                 std::array<std::int64_t, max_rank>& index) {
  const std::size_t inner_dim = plan.rank - 1;
  std::int64_t rest = position / plan.dims[inner_dim];
  for (std::size_t d = inner_dim; d-- > first;) {
    index[d] = rest % plan.dims[d];
    rest /= plan.dims[d];
  }
  return position % plan.dims[inner_dim];
}

// Where the row at outer_index (the positions of the outer_rank dimensions before the
// innermost) starts in a leaf of these strides, in elements from the leaf's start.
[[gnu::noinline]] inline std::int64_t row_offset(const strides_t& strides, const std::int64_t* outer_index,
                                                 std::size_t outer_rank) {
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < outer_rank; ++d) offset += outer_index[d] * strides[d];
  return offset;
}

// Points each memory leaf of a bound expression at the start of the row at outer_index.
template <class B>
void start_row(B& expr, const strides_t* leaf_strides, const std::int64_t* outer_index, std::size_t outer_rank) {
  auto to_row = [&]<class T>(bound_memory<T>& leaf) {
    leaf.row = leaf.base + row_offset(leaf_strides[leaf.leaf], outer_index, outer_rank);
  };
  expr.for_each_leaf(to_row);
}

// Moves each memory leaf's row one step along dimension `dim`.
template <class B>
void step_row(B& expr, const strides_t* leaf_strides, std::size_t dim) {
  auto step = [&]<class T>(bound_memory<T>& leaf) { leaf.row += leaf_strides[leaf.leaf][dim]; };
  expr.for_each_leaf(step);
}

// Walks the flat range [begin, end) of dimensions [first, rank) of the plan, with
// index[0, first) fixed by the caller: for each run along the innermost dimension, points
// the expression at the row and calls run(j_begin, j_end, offset), where offset is the
// run's first position relative to `begin`. run must leave the expression's rows where it
// found them. With first == inner_dim, [begin, end) must lie within the one row. On return,
// index and the rows are at the last row run.
template <class B, std::size_t Leaves, class F>
void walk_rows(B& expr, const loop_plan<Leaves>& plan, std::array<std::int64_t, max_rank>& index, std::size_t first,
               std::int64_t begin, std::int64_t end, F&& run) {
  const std::size_t inner_dim = plan.rank - 1;
  const std::int64_t inner = plan.dims[inner_dim];
  // [begin, end) within one row (first == inner_dim) needs no divisions to place.
  std::int64_t j = first == inner_dim ? begin : locate_row(plan, first, begin, index);
  start_row(expr, plan.leaf_strides.data(), index.data(), inner_dim);
  // run is called from one place: each call is inlined, a copy of the expression's row
  // code, and a second call for the single-row case cost 2.5% of the instructions g++ -O3
  // runs on a file that evaluates E3.
  for (std::int64_t position = begin;;) {
    const std::int64_t stop = std::min(inner, j + (end - position));
    run(j, stop, position - begin);
    position += stop - j;
    if (position >= end) return; // so a single row (first == inner_dim) never steps below
    // Rows follow each other along row_dim: the next is one step along it (an addition per
    // leaf), and only where row_dim wraps is the row found from the index again.
    const std::size_t row_dim = inner_dim - 1;
    j = 0;
    if (++index[row_dim] < plan.dims[row_dim]) {
      step_row(expr, plan.leaf_strides.data(), row_dim);
    } else {
      index[row_dim] = 0;
      next_index(plan, {first, row_dim}, index);
      start_row(expr, plan.leaf_strides.data(), index.data(), inner_dim);
    }
  }
}

// Calls run(begin, end) on the pool over ranges that tile [0, count), a whole number of rows
// of `row` elements, each a run of consecutive tasks: whole rows when rows are short, else
// pieces of parallel_grain elements from a row's start. Batches then start where they start
// in one pass over each row, so an element is computed by the same batch (a whole one, or
// the masked one at a row's end) and gets the same bits whatever the number of threads.
//
// `run` is taken by value and kept, with all the loop reads, in the one closure the pool's
// threads call: a worker that joins fetches it from the caller's core in a few cache-line
// transfers instead of one per reference it would otherwise follow (e4 at 2^16 floats on 2
// threads: 2-5% faster), which the pool copies into lines of its own (workers_may_copy).
template <class Run>
void parallel_rows(thread_pool& pool, std::int64_t count, std::int64_t row, Run run) {
  const std::int64_t pieces = row < parallel_grain ? 1 : (row + parallel_grain - 1) / parallel_grain;
  const std::int64_t tasks = count / row * pieces;
  const std::int64_t chunk = tasks_per_chunk(tasks, std::min(row, parallel_grain), pool.num_threads());
  pool.parallel_for(
      tasks, chunk,
      [run = std::move(run), pieces, row](std::int64_t first, std::int64_t last) {
        const auto task_start = [&](std::int64_t task) { return task / pieces * row + task % pieces * parallel_grain; };
        run(task_start(first), task_start(last));
      },
      thread_pool::workers_may_copy);
}

// Evaluates the flat output range [begin, end) of the plan's loop nest with plain stores, row
// by row. Callers give a plan that is one flat run to run_row directly (a copy of the
// expression's code less here), except on the scalar fallback; such a plan is one row here.
// Flattened, with the rows walked on a local copy of the expression and the choice of row
// loop made once: the parameter lives in the caller's frame, where every store of a result
// could alias it, so its row pointers went through memory from row to row, and a row of 16
// floats cost a call and 40 instructions (x + b over 16384 x 16 floats took 80 us, now 41).
template <class Arch, class L, class B, std::size_t Leaves, class T>
[[gnu::flatten]] void run_range(const B& expr, const loop_plan<Leaves>& plan, T* out, std::int64_t begin,
                                std::int64_t end) {
  B rows = expr;
  std::array<std::int64_t, max_rank> index{};
  const auto walk = [&]<bool RowsContiguous>() {
    walk_rows(rows, plan, index, 0, begin, end, [&](std::int64_t j, std::int64_t stop, std::int64_t offset) {
      run_row<Arch, L, RowsContiguous>(rows, out + (begin + offset - j), j, stop, store_path::cached);
    });
  };
  if constexpr (!scalar_fallback_v<Arch, typename B::expression>) {
    if (plan.rows_contiguous) { // broadcasting in outer dimensions only, as x + bias
      walk.template operator()<true>();
      return;
    }
  }
  walk.template operator()<false>();
}

// Evaluates a flat output range of one expression: everything a task of the loop reads, by
// value. A loop that is one flat run never reads the leaves' strides, and its task leaves
// the plan out (flat_task); any other holds the plan with them (strided_task).
template <class Arch, class L, class B, class T>
struct flat_task {
  B expr;
  T* out;
  store_path path;

  void operator()(std::int64_t begin, std::int64_t end) const { run_row<Arch, L, true>(expr, out, begin, end, path); }
};
// The strided task runs the run_range of the path dispatch took through a pointer, so that
// the SIMD path and the scalar fallback share one parallel loop (the pool's job posting and
// the workers' closure, compiled once rather than per path: 1% of the instructions g++ -O3
// runs on a file that evaluates E3). The call is once per claim of tasks, not per row.
template <class B, std::size_t Leaves, class T>
struct strided_task {
  B expr;
  loop_plan<Leaves> plan;
  T* out;
  void (*run)(const B&, const loop_plan<Leaves>&, T*, std::int64_t, std::int64_t);

  void operator()(std::int64_t begin, std::int64_t end) const { run(expr, plan, out, begin, end); }
};

// Writes the elements of `e` (of shape e.shape) to `out`, which must not overlap any
// operand except by being exactly it.
template <class E, class T>
void evaluate_into(const E& e, T* out) {
  const std::int64_t count = shape_of(e).numel();
  if (count == 0) return;
  const bool flat = memory_leaves_have_shape(e, shape_of(e));
  kernels::dispatch<simd_evaluable_v<E>>([&](auto arch) {
    using Arch = decltype(arch);
    using L = lane_type_t<E>;
    thread_pool& pool = current_thread_pool();
    const bool serial = count < parallel_threshold || pool.num_threads() == 1;
    const auto run_flat = [&](const bound_root<E>& bound_expr) {
      const std::size_t threads = serial ? 1 : pool.num_threads();
      const flat_task<Arch, L, bound_root<E>, T> task{
          bound_expr, out, store_path_for(e, static_cast<std::size_t>(count) * sizeof(T), threads)};
      if (serial) {
        task(0, count);
      } else {
        parallel_rows(pool, count, count, task);
      }
    };
    if constexpr (!scalar_fallback_v<Arch, E>) {
      if (flat) return run_flat(bind_flat(e));
    }
    const auto plan = flat ? flat_plan<memory_leaf_count_v<E>>(count) : plan_broadcast(e);
    if constexpr (!scalar_fallback_v<Arch, E>) {
      if (plan.contiguous) return run_flat(bind(e, plan)); // broadcast only along dimensions of length 1
    }
    if (serial) { // the plan where it is: a copy would wait on the stores that made it
      run_range<Arch, L>(bind(e, plan), plan, out, 0, count);
    } else {
      using B = bound_root<E>;
      constexpr std::size_t leaves = memory_leaf_count_v<E>;
      parallel_rows(pool, count, plan.dims[plan.rank - 1],
                    strided_task<B, leaves, T>{bind(e, plan), plan, out, &run_range<Arch, L, B, leaves, T>});
    }
  });
}

// Whether the operand of shape s at `data` overlaps `out` and is not exactly the output:
// `output` is the output's shape, or null where no operand may be the output. Out of line,
// compiled once per file rather than once per leaf of every expression.
[[gnu::noinline]] inline bool overlaps(const void* data, const xlite::shape& s, std::size_t element_size,
                                       std::span<const unsigned char> out, const xlite::shape* output) {
  const auto* begin = static_cast<const unsigned char*>(data);
  const auto* end = begin + s.numel() * static_cast<std::int64_t>(element_size);
  const bool disjoint = end <= out.data() || out.data() + out.size() <= begin;
  const bool same = output != nullptr && begin == out.data() && s == *output;
  return !disjoint && !same;
}

// Whether writing to [out, out + count) could change an operand before it is read: it
// overlaps a leaf that is not exactly the output itself, or any leaf at all of an
// expression with deferred leaves (a fused matmul writes the whole output before the
// element-wise part reads its leaves, and reads its own operands while it writes).
template <class E, class T>
bool overlaps_operand(const E& e, const T* out, std::int64_t count) {
  bool overlap = false;
  const std::span out_bytes(reinterpret_cast<const unsigned char*>(out), static_cast<std::size_t>(count) * sizeof(T));
  const xlite::shape* output = deferred_count_v<E> == 0 ? &shape_of(e) : nullptr;
  const auto check = [&](const void* data, const xlite::shape& s, std::size_t element_size, bool may_be_output) {
    overlap = overlaps(data, s, element_size, out_bytes, may_be_output ? output : nullptr) || overlap;
  };
  const auto visit = [&](const auto& self, const auto& sub) -> void {
    using S = std::remove_cvref_t<decltype(sub)>;
    if constexpr (is_deferred_v<S>) {
      sub.for_each_input([&](const void* data, const xlite::shape& s, std::size_t size) { check(data, s, size, false); });
    } else if constexpr (is_memory_leaf_v<S>) {
      check(sub.data, sub.shape, sizeof(typename S::value_type), true);
    } else if constexpr (requires { sub.operands; }) {
      unpack([&](const auto&... o) { (self(self, o), ...); }, sub.operands);
    } else if constexpr (requires { sub.operand; }) {
      self(self, sub.operand);
    }
  };
  visit(visit, e);
  return overlap;
}

} // namespace xlite::expr
