#pragma once

// Runs a reduction instruction. The input is read in its compute dtype (bf16 sums in float,
// as torch.sum does on CPU); the result is rounded to the instruction's dtype once, at the
// end.
//
// Order of accumulation, fixed for any thread count and the same whether the operand was
// fused into the reduction or read from memory: the reduced elements of one output are
// walked in row-major order as contiguous runs (along the innermost axis when it is
// reduced, else runs of one element), cut into pieces of at most chunk_elements; each
// piece is reduced in SIMD lanes (four batch accumulators, lanes combined in the fixed
// tree of combine_lanes) and the pieces of a block of about `block_elements` combined in
// order; each block is reduced on its own and the blocks combined in order.
//
// A fused operand (passes/fusion.hpp: element-wise ops feeding a reduction over the
// innermost axis) is computed piece by piece in registers and never written to memory.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/kernels/reduce.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/elementwise.hpp"

namespace xlite::runtime {

namespace detail {

inline constexpr std::int64_t block_elements = 1 << 14;

// Where the reduced elements of each output are: the kept and reduced axes with their
// strides in the input, and the innermost run.
struct reduction_layout {
  std::array<std::int64_t, max_rank> kept_dims{}, kept_strides{}, reduced_dims{}, reduced_strides{};
  std::size_t kept_rank = 0, reduced_rank = 0;
  std::int64_t outputs = 1, reduced = 1, run = 1; // run: contiguous elements per run
  std::int64_t inner_kept = 1; // the outputs contiguous in the input: kept axes after the last reduced one

  reduction_layout(const shape& in, const std::vector<std::int64_t>& axes) {
    std::array<bool, max_rank> is_reduced{};
    for (const std::int64_t a : axes) is_reduced[static_cast<std::size_t>(a)] = true;
    std::int64_t stride = 1;
    std::array<std::int64_t, max_rank> strides{};
    for (std::size_t a = in.rank(); a-- > 0;) {
      strides[a] = stride;
      stride *= in[a];
    }
    for (std::size_t a = 0; a < in.rank(); ++a) {
      if (is_reduced[a]) {
        reduced_dims[reduced_rank] = in[a];
        reduced_strides[reduced_rank++] = strides[a];
        reduced *= in[a];
      } else {
        kept_dims[kept_rank] = in[a];
        kept_strides[kept_rank++] = strides[a];
        outputs *= in[a];
      }
    }
    if (reduced_rank > 0 && reduced_strides[reduced_rank - 1] == 1) run = reduced_dims[reduced_rank - 1];
    for (std::size_t a = in.rank(); a-- > 0 && !is_reduced[a];) inner_kept *= in[a];
  }

  // The input offset of the first element of output o.
  std::int64_t output_offset(std::int64_t o) const {
    std::int64_t offset = 0;
    for (std::size_t a = kept_rank; a-- > 0;) {
      offset += o % kept_dims[a] * kept_strides[a];
      o /= kept_dims[a];
    }
    return offset;
  }

  // The input offset of reduced element r (relative to the output's first).
  std::int64_t reduced_offset(std::int64_t r) const {
    std::int64_t offset = 0;
    for (std::size_t a = reduced_rank; a-- > 0;) {
      offset += r % reduced_dims[a] * reduced_strides[a];
      r /= reduced_dims[a];
    }
    return offset;
  }
};

template <op O, class T>
T reduce_run(const T* p, std::int64_t n) {
  using red = kernels::reduction<O>;
  if (n < 8) { // shorter than any SIMD path's four batches: the same scalar loop, without dispatch
    T result = red::template identity<T>();
    for (std::int64_t i = 0; i < n; ++i) result = red::combine(result, p[i]);
    return result;
  }
  return kernels::dispatch<kernels::simd_element_v<T>>([&](auto arch) {
    using Arch = decltype(arch);
    using V = kernels::batch_t<T, Arch>;
    constexpr auto width = static_cast<std::int64_t>(kernels::lanes<T, Arch>);
    T result = red::template identity<T>();
    std::int64_t i = 0;
    if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
      if (n >= 4 * width) {
        std::array<V, 4> acc{V(red::template identity<T>()), V(red::template identity<T>()),
                             V(red::template identity<T>()), V(red::template identity<T>())};
        for (; i + 4 * width <= n; i += 4 * width) {
          for (std::size_t k = 0; k < 4; ++k) {
            acc[k] = red::combine(acc[k], V::load_unaligned(p + i + static_cast<std::int64_t>(k) * width));
          }
        }
        result = kernels::combine_lanes<O, T, Arch>(
            red::combine(red::combine(acc[0], acc[1]), red::combine(acc[2], acc[3])));
      }
    }
    for (; i < n; ++i) result = red::combine(result, p[i]);
    return result;
  });
}

// acc[j] = combine(acc[j], values[j]) for j < n.
template <op O, class C>
void combine_rows(C* acc, const C* values, std::int64_t n) {
  using red = kernels::reduction<O>;
  kernels::dispatch<kernels::simd_element_v<C>>([&](auto arch) {
    using Arch = decltype(arch);
    std::int64_t j = 0;
    if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
      using V = kernels::batch_t<C, Arch>;
      constexpr auto width = static_cast<std::int64_t>(kernels::lanes<C, Arch>);
      for (; j + width <= n; j += width) {
        red::combine(V::load_unaligned(acc + j), V::load_unaligned(values + j)).store_unaligned(acc + j);
      }
    }
    for (; j < n; ++j) acc[j] = red::combine(acc[j], values[j]);
  });
}

// The partial results of each block when the innermost axis is kept (the bias gradient's
// sum over the batch): every reduced element is a run of one, so the outputs contiguous in
// the input are reduced side by side, a row at a time, with the same combines per output,
// in the same order, as one output at a time.
template <op O, class C, class Source>
void reduce_rows(const Source& source, std::vector<C>& partial, std::int64_t blocks, std::int64_t runs_per_block,
                 const reduction_layout& layout, thread_pool& pool) {
  using red = kernels::reduction<O>;
  const std::int64_t inner = layout.inner_kept, outer = layout.outputs / inner;
  const std::int64_t rows_per_task = std::min(layout.reduced, runs_per_block);
  pool.parallel_for(outer * blocks, std::max<std::int64_t>(1, block_elements / (rows_per_task * inner)),
                    [&](std::int64_t begin, std::int64_t end) {
                      std::vector<C> acc(static_cast<std::size_t>(inner));
                      for (std::int64_t task = begin; task < end; ++task) {
                        const std::int64_t o = task / blocks, b = task % blocks;
                        const std::int64_t base = layout.output_offset(o * inner);
                        std::fill(acc.begin(), acc.end(), red::template identity<C>());
                        const std::int64_t last = std::min(layout.reduced, (b + 1) * runs_per_block);
                        for (std::int64_t r = b * runs_per_block; r < last; ++r) {
                          const std::int64_t start = base + layout.reduced_offset(r);
                          for (std::int64_t piece = 0; piece < inner; piece += chunk_elements) {
                            const std::int64_t n = std::min(chunk_elements, inner - piece);
                            combine_rows<O>(acc.data() + piece, source(start + piece, n), n);
                          }
                        }
                        for (std::int64_t j = 0; j < inner; ++j) {
                          partial[static_cast<std::size_t>((o * inner + j) * blocks + b)] =
                              acc[static_cast<std::size_t>(j)];
                        }
                      }
                    });
}

// source(offset, n) gives the n operand values from flat offset on, in compute dtype C.
template <op O, class C, class Source>
void reduce_values(const Source& source, C* out, const reduction_layout& layout, thread_pool& pool) {
  using red = kernels::reduction<O>;
  const std::int64_t runs = layout.reduced / std::max<std::int64_t>(layout.run, 1);
  const std::int64_t runs_per_block = std::max<std::int64_t>(1, block_elements / std::max<std::int64_t>(layout.run, 1));
  const std::int64_t blocks = std::max<std::int64_t>(1, (runs + runs_per_block - 1) / runs_per_block);
  std::vector<C> partial(static_cast<std::size_t>(layout.outputs * blocks), red::template identity<C>());
  if (layout.run == 1 && layout.inner_kept > 1 && layout.reduced > 0) {
    reduce_rows<O>(source, partial, blocks, runs_per_block, layout, pool);
  } else {
    const std::int64_t elements_per_task = std::max<std::int64_t>(1, std::min(layout.reduced, block_elements));
    const std::int64_t grain = std::max<std::int64_t>(1, block_elements / elements_per_task);
    // Where each run starts, relative to its output's first element: computed once, since
    // small reductions (a pooling window) spend their time on this index arithmetic.
    std::vector<std::int64_t> run_starts;
    if (runs <= block_elements) {
      for (std::int64_t r = 0; r < runs; ++r) run_starts.push_back(layout.reduced_offset(r * layout.run));
    }
    pool.parallel_for(layout.outputs * blocks, grain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t task = begin; task < end; ++task) {
        const std::int64_t o = task / blocks, b = task % blocks;
        const std::int64_t base = layout.output_offset(o);
        C acc = red::template identity<C>();
        const std::int64_t last = std::min(runs, (b + 1) * runs_per_block);
        for (std::int64_t r = b * runs_per_block; r < last; ++r) {
          const std::int64_t start = base + (run_starts.empty() ? layout.reduced_offset(r * layout.run)
                                                                : run_starts[static_cast<std::size_t>(r)]);
          for (std::int64_t piece = 0; piece < layout.run; piece += chunk_elements) {
            const std::int64_t n = std::min(chunk_elements, layout.run - piece);
            acc = red::combine(acc, reduce_run<O>(source(start + piece, n), n));
          }
        }
        partial[static_cast<std::size_t>(task)] = acc;
      }
    });
  }
  for (std::int64_t o = 0; o < layout.outputs; ++o) {
    C acc = red::template identity<C>();
    for (std::int64_t b = 0; b < blocks; ++b)
      acc = red::combine(acc, partial[static_cast<std::size_t>(o * blocks + b)]);
    out[o] = acc;
  }
}

// The first maximum; a NaN counts as the maximum (the first NaN wins), as torch.argmax:
// kernels::argmax_replaces, the rule of the static front end too. Once the best is a NaN
// nothing replaces it, so the walk stops there.
template <class C>
void argmax_values(const C* in, std::int64_t* out, const reduction_layout& layout, thread_pool& pool) {
  pool.parallel_for(layout.outputs,
                    std::max<std::int64_t>(1, block_elements / std::max<std::int64_t>(layout.reduced, 1)),
                    [&](std::int64_t begin, std::int64_t end) {
                      for (std::int64_t o = begin; o < end; ++o) {
                        const C* base = in + layout.output_offset(o);
                        std::int64_t best = 0;
                        C best_value = base[0];
                        for (std::int64_t r = 1; r < layout.reduced && !(best_value != best_value); ++r) {
                          const C v = base[layout.reduced_offset(r)];
                          if (kernels::argmax_replaces(v, best_value)) {
                            best = r;
                            best_value = v;
                          }
                        }
                        out[o] = best;
                      }
                    });
}

} // namespace detail

// Runs reduction kernel k (whose root is the reduction) into `out`: over its operand
// buffer, or, when element-wise ops were fused into it, over their program's values.
inline void run_reduction(const compile::kernel& k, const ir::instruction& ins, std::span<const buffer* const> inputs,
                          const shape& operand_shape, dtype operand_type, buffer& out, thread_pool& pool) {
  const detail::reduction_layout layout(operand_shape, ins.attrs.ints);
  const bool fused = !k.program.empty();
  visit_dtype(operand_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    const C* values = nullptr;
    aligned_array<C> converted;
    if (!fused) {
      values = reinterpret_cast<const C*>(inputs[0]->data());
      if constexpr (!std::is_same_v<C, T>) {
        converted = allocate_aligned<C>(operand_shape.numel());
        detail::load_values<T>(converted.get(), inputs[0]->as<T>(), operand_shape.numel());
        values = converted.get();
      }
    }
    if (ins.code == op::argmax) {
      if constexpr (!std::is_same_v<T, bool>) detail::argmax_values(values, out.as<std::int64_t>(), layout, pool);
      return;
    }
    if constexpr (!std::is_same_v<T, bool>) {
      auto result = allocate_aligned<C>(layout.outputs);
      const detail::kernel_context context{k, inputs, operand_shape};
      const auto from_memory = [&](std::int64_t offset, std::int64_t) { return values + offset; };
      const auto from_program = [&](std::int64_t offset, std::int64_t n) {
        detail::register_file& regs = detail::thread_registers();
        regs.reserve(k.register_count);
        return reinterpret_cast<const C*>(detail::evaluate_chunk(context, regs, offset, n));
      };
      const auto reduce = [&](auto o) {
        if (fused) {
          detail::reduce_values<decltype(o)::value>(from_program, result.get(), layout, pool);
        } else {
          detail::reduce_values<decltype(o)::value>(from_memory, result.get(), layout, pool);
        }
      };
      switch (ins.code) {
      case op::sum:
      case op::mean:
        reduce(std::integral_constant<op, op::sum>{});
        break;
      case op::prod:
        reduce(std::integral_constant<op, op::prod>{});
        break;
      case op::max:
        reduce(std::integral_constant<op, op::max>{});
        break;
      default:
        reduce(std::integral_constant<op, op::min>{});
        break;
      }
      if (ins.code == op::mean) {
        for (std::int64_t o = 0; o < layout.outputs; ++o) result[o] /= static_cast<C>(layout.reduced);
      }
      detail::store_values(out.as<T>(), result.get(), layout.outputs);
    } else {
      throw dtype_error(xlite::detail::message(name(ins.code), ": no kernel for ", name(operand_type), " operands"));
    }
  });
}

} // namespace xlite::runtime
