#pragma once

// Runs an element-wise kernel's register program (compile/executable.hpp). The kernel's
// result is cut into chunks of `chunk_elements`; for each chunk every step is one loop over
// the chunk in a register (a small buffer that stays in L1), with the kernels' functors on
// SIMD batches, so a chain of n ops costs one read of each input and one write of the
// result, plus n loops over cached data. Chunks are split over the thread pool; a chunk's
// result does not depend on which thread computes it.
//
// A kernel whose native code is built (runtime/native_kernels.hpp) runs that instead, with
// the same chunks of work per thread and bitwise the same results.
//
// Registers hold values in their compute dtype (compile::compute_dtype): float for bf16 and
// f16, int32 for the 8-bit integers, one byte per bool. A value of a narrow dtype is rounded
// to it after each op, so the result is the one op-by-op evaluation gives.
//
// A chunk whose length is not a whole number of batches ends in a padded batch, as a row of
// the static layer ends (expr/evaluate.hpp) and a native kernel's range does: registers
// hold whole batches, inputs read from memory give zeros past the chunk, single values and
// constants fill them, casts give zeros there, and the other steps compute them as they
// compute the rest. So an element's bits do not depend on whether it is in a batch's first
// lanes or its last (nor, but for sin and cos, whose range reduction xsimd picks for a
// whole batch, on the others), and the padding the lanes of sin and cos see is the static
// layer's.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/core/aligned_memory.hpp"
#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/kernels/convert.hpp"
#include "xlite/kernels/elementwise.hpp"
#include "xlite/kernels/random.hpp"
#include "xlite/kernels/simd.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/metrics.hpp"
#include "xlite/runtime/native_kernels.hpp"

namespace xlite::runtime {

namespace detail {

inline constexpr std::int64_t chunk_elements = compile::program_chunk_elements;
// Registers are computed in whole multiples of this many values, a whole number of batches
// of every SIMD compute type on every arch: an AVX-512 register of 4-byte values, the
// narrowest type that computes in batches (bools and the 8-bit types compute in loops).
inline constexpr std::int64_t padded_lanes = 16;
static_assert(chunk_elements % padded_lanes == 0, "a chunk is whole batches");

// n values rounded up to whole batches on the SIMD path. The scalar path has no batches to
// complete: there the padding would only cost a libm call a lane, or overflow an integer
// where no element does.
inline std::int64_t padded(std::int64_t n) {
  return kernels::simd_path_active() ? (n + padded_lanes - 1) / padded_lanes * padded_lanes : n;
}
inline constexpr std::int64_t prefetch_above_bytes = std::int64_t{256} << 10;
inline constexpr std::size_t register_bytes = chunk_elements * 8;
// Registers start this far apart, not register_bytes: chunks of the inputs all sit at the
// same offset modulo 4 KiB, and a register at that offset too would make each load of an
// input wait on the store to the register before it (4K aliasing).
inline constexpr std::size_t register_stride = register_bytes + 5 * 64;
inline constexpr std::size_t register_base = 37 * 64;

template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t,
                                     std::conditional_t<sizeof(T) == 1, std::int32_t,
                                                        std::conditional_t<std::is_same_v<T, bfloat16> ||
                                                                               std::is_same_v<T, float16>,
                                                                           float, T>>>;

// Visits the compute type of a dtype: uint8_t (bool), int32_t, int64_t, float or double.
template <class F>
decltype(auto) visit_compute(dtype t, F&& f) {
  return visit_dtype(t, [&](auto tag) -> decltype(auto) {
    return f(std::type_identity<compute_t<typename decltype(tag)::type>>{});
  });
}

// out[i] = f(a[i], ...) for i < n under Arch: SIMD batches (n is whole ones, see padded),
// or a scalar loop for the scalar arch. The pointers are plain parameters, not captures or
// an array: a SIMD store may alias any memory, so the compiler would reload those after
// every store. Flattened, so that f (exp,
// say) is inlined into the loop at -O2 too, not called once per batch.
template <class Arch, std::size_t Arity, class R, class T, class F>
[[gnu::flatten]] void map_batches(F f, R* out, const T* a, const T* b, const T* c, std::int64_t n) {
  using V = kernels::batch_t<T, Arch>;
  constexpr auto width = static_cast<std::int64_t>(kernels::lanes<T, Arch>);
  std::int64_t i = 0;
  if constexpr (!std::is_same_v<Arch, kernels::scalar_arch>) {
    for (; i + width <= n; i += width) {
      if constexpr (Arity == 1) {
        f(V::load_unaligned(a + i)).store_unaligned(out + i);
      } else if constexpr (Arity == 2) {
        f(V::load_unaligned(a + i), V::load_unaligned(b + i)).store_unaligned(out + i);
      } else {
        f(V::load_unaligned(a + i), V::load_unaligned(b + i), V::load_unaligned(c + i)).store_unaligned(out + i);
      }
    }
  }
  for (; i < n; ++i) {
    if constexpr (Arity == 1) {
      out[i] = static_cast<R>(f(a[i]));
    } else if constexpr (Arity == 2) {
      out[i] = static_cast<R>(f(a[i], b[i]));
    } else {
      out[i] = static_cast<R>(f(a[i], b[i], c[i]));
    }
  }
}

// out[i] = f(in[0][i], ...) for i < n, on the widest path active.
template <std::size_t Arity, class R, class T, class F>
void map_lanes(F f, R* out, const std::array<const T*, 3>& in, std::int64_t n) {
  constexpr bool simd = kernels::simd_element_v<T> && std::is_same_v<R, T>;
  kernels::dispatch<simd>([&](auto arch) { map_batches<decltype(arch), Arity>(f, out, in[0], in[1], in[2], n); });
}

template <op O, class T>
void map_op(T* out, const std::array<const T*, 3>& in, std::int64_t n) {
  map_lanes<info(O).arity, T, T>(kernels::elementwise<O>{}, out, in, n);
}

template <class T>
void compute_same_type(op code, T* out, const std::array<const T*, 3>& in, std::int64_t n) {
  switch (code) {
#define XLITE_SAME_TYPE_CASE(name, arity, kind, rule)                                                                  \
  case op::name:                                                                                                       \
    if constexpr (kernels::same_type_op<op::name, T>()) return map_op<op::name>(out, in, n);                           \
    break;
    XLITE_OP_LIST(XLITE_SAME_TYPE_CASE)
#undef XLITE_SAME_TYPE_CASE
  default:
    break;
  }
  throw value_error(xlite::detail::message("elementwise kernel: ", name(code), " on ", sizeof(T), "-byte values"));
}

template <class T>
void compare(op code, std::uint8_t* out, const std::array<const T*, 3>& in, std::int64_t n) {
  const auto run = [&](auto f) { map_lanes<2, std::uint8_t, T>(f, out, in, n); };
  switch (code) {
  case op::equal:
    return run([](T a, T b) { return a == b; });
  case op::not_equal:
    return run([](T a, T b) { return a != b; });
  case op::less:
    return run([](T a, T b) { return a < b; });
  case op::less_equal:
    return run([](T a, T b) { return a <= b; });
  case op::greater:
    return run([](T a, T b) { return a > b; });
  default:
    return run([](T a, T b) { return a >= b; });
  }
}

// Converts n values of compute type From to compute type To, as the static layer's cast
// does (kernels::detail::scalar_cast: defined for NaN and values out of range), except that
// a number to bool is "not zero" (NaN is true).
template <class To, class From>
void convert_lanes(To* out, const From* in, std::int64_t n, bool to_bool) {
  if (to_bool) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(in[i] != From(0));
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = kernels::detail::scalar_cast<To>(in[i]);
  }
}

// Rounds n compute values in place to storage type T (bf16, f16, int8, uint8).
template <class T>
void round_to_storage(compute_t<T>* values, std::int64_t n) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    alignas(64) std::array<bfloat16, chunk_elements> narrow;
    kernels::convert(values, narrow.data(), n);
    kernels::convert(narrow.data(), values, n);
  } else if constexpr (!std::is_same_v<compute_t<T>, T> && !std::is_same_v<T, bool>) {
    for (std::int64_t i = 0; i < n; ++i) values[i] = static_cast<compute_t<T>>(static_cast<T>(values[i]));
  }
}

// Converts n stored values to their compute type, or back.
template <class T>
void load_values(compute_t<T>* out, const T* in, std::int64_t n) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    kernels::convert(in, out, n);
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<compute_t<T>>(in[i]);
  }
}
template <class T>
void store_values(T* out, const compute_t<T>* in, std::int64_t n, bool streaming = false) {
  if constexpr (std::is_same_v<T, compute_t<T>> && kernels::simd_element_v<T> &&
                !std::is_same_v<kernels::simd_arch, kernels::scalar_arch>) {
    // Results larger than the cache bypass it (kernels::streaming_pays); chunks start on a
    // cache line, so whole batches stream.
    using V = kernels::batch_t<T, kernels::simd_arch>;
    constexpr auto width = static_cast<std::int64_t>(V::size);
    if (streaming && kernels::simd_path_active() && reinterpret_cast<std::uintptr_t>(out) % sizeof(V) == 0) {
      std::int64_t i = 0;
      for (; i + width <= n; i += width) kernels::store_streaming(out + i, V::load_unaligned(in + i));
      for (; i < n; ++i) out[i] = in[i];
      return;
    }
  }
  if constexpr (std::is_same_v<T, bfloat16>) {
    kernels::convert(in, out, n);
  } else if constexpr (std::is_same_v<T, bool>) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = in[i] != 0;
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i]);
  }
}

// The flat index into a (broadcast) operand of each element of [begin, begin + n) of a
// result of shape `out`, walking the result's index like an odometer.
inline void broadcast_indices(const shape& in, const shape& out, std::int64_t begin, std::int64_t n,
                              std::int64_t* indices) {
  const std::size_t rank = out.rank();
  std::array<std::int64_t, max_rank> stride{}, position{};
  std::int64_t s = 1;
  for (std::size_t i = 0; i < in.rank(); ++i) { // aligned at the last axis
    const std::size_t a = rank - 1 - i;
    const std::int64_t dim = in[in.rank() - 1 - i];
    stride[a] = dim == 1 ? 0 : s;
    s *= dim;
  }
  std::int64_t rest = begin, index = 0;
  for (std::size_t a = rank; a-- > 0;) {
    position[a] = rest % out[a];
    rest /= out[a];
    index += position[a] * stride[a];
  }
  for (std::int64_t i = 0; i < n; ++i) {
    indices[i] = index;
    for (std::size_t a = rank; a-- > 0;) {
      index += stride[a];
      if (++position[a] < out[a]) break;
      index -= stride[a] * out[a];
      position[a] = 0;
    }
  }
}

// The registers of one thread: each holds a chunk of values, or points at a chunk of an
// input buffer that is already in its compute dtype (no copy).
class register_file {
public:
  void reserve(std::size_t count) {
    if (count > capacity_) {
      memory_ = allocate_aligned<std::byte>(static_cast<std::int64_t>(register_base + count * register_stride));
      capacity_ = count;
    }
    views_.assign(count, nullptr);
  }
  std::byte* scratch(std::size_t r) { return memory_.get() + register_base + r * register_stride; }
  const std::byte*& view(std::size_t r) { return views_[r]; }

private:
  aligned_array<std::byte> memory_;
  std::size_t capacity_ = 0;
  std::vector<const std::byte*> views_;
};

inline register_file& thread_registers() {
  thread_local register_file registers;
  return registers;
}

// What a kernel's program runs over: its inputs, and the index space it computes (the
// result's shape; for a reduction, its operand's).
struct kernel_context {
  const compile::kernel& k;
  std::span<const buffer* const> inputs;
  const shape& index_space;
};

inline void load_input(const kernel_context& c, const compile::register_step& step, register_file& regs,
                       std::int64_t begin, std::int64_t n) {
  const buffer& in = *c.inputs[step.input];
  const shape& out_shape = c.index_space;
  std::byte* scratch = regs.scratch(step.result);
  visit_dtype(in.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const T* data = in.as<T>();
    const std::int64_t numel = in.shape().numel();
    C* values = reinterpret_cast<C*>(scratch);
    const std::int64_t whole = padded(n);
    if (numel == 1) {
      std::fill_n(values, whole, static_cast<C>(data[0]));
    } else {
      if (numel != out_shape.numel()) {
        std::array<std::int64_t, chunk_elements> indices;
        broadcast_indices(in.shape(), out_shape, begin, n, indices.data());
        for (std::int64_t i = 0; i < n; ++i) values[i] = static_cast<C>(data[indices[i]]);
      } else if constexpr (std::is_same_v<C, T>) {
        if (n == whole) { // the input itself, no copy
          regs.view(step.result) = reinterpret_cast<const std::byte*>(data + begin);
          return;
        }
        std::copy_n(data + begin, n, values);
      } else {
        load_values<T>(values, data + begin, n);
      }
      std::fill(values + n, values + whole, C{});
    }
    regs.view(step.result) = scratch;
  });
}

inline void compute_step(const kernel_context& c, const compile::register_step& step, register_file& regs,
                         std::int64_t begin, std::int64_t chunk) {
  const std::int64_t n = padded(chunk); // every step but casts computes the padding too
  std::byte* result = regs.scratch(step.result);
  std::array<const std::byte*, 3> in{};
  for (std::size_t k = 0; k < step.operands.size(); ++k) in[k] = regs.view(step.operands[k]);
  const auto typed = [&]<class T>(std::type_identity<T>) {
    return std::array<const T*, 3>{reinterpret_cast<const T*>(in[0]), reinterpret_cast<const T*>(in[1]),
                                   reinterpret_cast<const T*>(in[2])};
  };
  switch (step.code) {
  case op::constant:
    visit_compute(step.type, [&](auto tag) {
      using C = typename decltype(tag)::type;
      const C value = std::is_floating_point_v<C> ? static_cast<C>(step.attrs.value.real)
                                                  : static_cast<C>(step.attrs.value.integer);
      std::fill_n(reinterpret_cast<C*>(result), n, value);
    });
    break;
  case op::iota:
    visit_compute(step.type, [&](auto tag) {
      using C = typename decltype(tag)::type;
      const shape& s = c.index_space;
      const auto axis = static_cast<std::size_t>(step.attrs.ints[0]);
      std::int64_t inner = 1;
      for (std::size_t a = axis + 1; a < s.rank(); ++a) inner *= s[a];
      C* values = reinterpret_cast<C*>(result);
      for (std::int64_t i = 0; i < n; ++i) values[i] = static_cast<C>((begin + i) / inner % s[axis]);
    });
    break;
  case op::random_uniform:
  case op::random_normal:
    visit_dtype(step.type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      if constexpr (std::is_floating_point_v<C>) {
        const auto key = static_cast<std::uint64_t>(*reinterpret_cast<const std::int64_t*>(in[0]));
        C* values = reinterpret_cast<C*>(result);
        for (std::int64_t i = 0; i < n; ++i) {
          const kernels::philox_block bits = kernels::random_bits(key, static_cast<std::uint64_t>(begin + i));
          values[i] = static_cast<C>(step.code == op::random_uniform
                                         ? kernels::uniform_from_bits(bits, std::numeric_limits<T>::digits)
                                         : kernels::normal_from_bits(bits));
        }
      }
    });
    break;
  case op::broadcast_to:
    std::memcpy(result, in[0], static_cast<std::size_t>(n) * size_of(compile::compute_dtype(step.type)));
    break;
  case op::cast:
    visit_compute(step.operand_type, [&](auto from) {
      using From = typename decltype(from)::type;
      visit_compute(step.type, [&](auto to) {
        using To = typename decltype(to)::type;
        // The chunk alone: the padding may hold what no integer holds (1 / 0), and a C++
        // cast of that is undefined.
        convert_lanes(reinterpret_cast<To*>(result), reinterpret_cast<const From*>(in[0]), chunk,
                      step.type == dtype::boolean);
        std::fill(reinterpret_cast<To*>(result) + chunk, reinterpret_cast<To*>(result) + n, To{});
      });
    });
    break;
  case op::equal:
  case op::not_equal:
  case op::less:
  case op::less_equal:
  case op::greater:
  case op::greater_equal:
    visit_compute(step.operand_type, [&](auto tag) {
      compare(step.code, reinterpret_cast<std::uint8_t*>(result), typed(tag), n);
    });
    break;
  case op::logical_and:
  case op::logical_or:
  case op::logical_not: {
    const auto* a = reinterpret_cast<const std::uint8_t*>(in[0]);
    const auto* b = reinterpret_cast<const std::uint8_t*>(in[1]);
    auto* out = reinterpret_cast<std::uint8_t*>(result);
    if (step.code == op::logical_and) {
      for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] & b[i];
    } else if (step.code == op::logical_or) {
      for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] | b[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] ^ 1;
    }
    break;
  }
  case op::where:
    visit_compute(step.type, [&](auto tag) {
      using C = typename decltype(tag)::type;
      const auto* condition = reinterpret_cast<const std::uint8_t*>(in[0]);
      const auto* a = reinterpret_cast<const C*>(in[1]);
      const auto* b = reinterpret_cast<const C*>(in[2]);
      auto* out = reinterpret_cast<C*>(result);
      for (std::int64_t i = 0; i < n; ++i) out[i] = condition[i] ? a[i] : b[i];
    });
    break;
  default:
    visit_compute(step.type, [&](auto tag) {
      using C = typename decltype(tag)::type;
      compute_same_type(step.code, reinterpret_cast<C*>(result), typed(tag), n);
    });
    break;
  }
  visit_dtype(step.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    round_to_storage<T>(reinterpret_cast<compute_t<T>*>(result), n);
  });
  regs.view(step.result) = result;
}

// The next chunk of each large input that is read element for element. A chunk's loops are
// too short for the hardware prefetcher to run ahead of them, so the next chunk's lines are
// asked for while this one computes: a share before each step of the program, so that they
// arrive all along the chunk's work instead of in one burst that fills the load queue at the
// first load and leaves memory idle for the rest. (Inputs that fit in the cache need none.)
class next_chunk_prefetch {
public:
  next_chunk_prefetch(const kernel_context& c, std::int64_t begin, std::int64_t n) {
    const std::int64_t numel = c.index_space.numel();
    for (const compile::register_step& step : c.k.program) {
      if (step.what != compile::register_step::kind::load || count_ == ranges_.size()) continue;
      const buffer& in = *c.inputs[step.input];
      const auto element = static_cast<std::int64_t>(size_of(in.type()));
      if (in.shape().numel() != numel || numel * element <= prefetch_above_bytes) continue;
      const std::int64_t ahead = std::min(n, numel - begin - n);
      if (ahead <= 0) continue;
      ranges_[count_++] = {reinterpret_cast<const char*>(in.data()) + (begin + n) * element, ahead * element};
      lines_ += (ahead * element + 63) / 64;
    }
    steps_ = static_cast<std::int64_t>(c.k.program.size());
  }

  // Asks for the share of lines that goes before step s.
  void before_step(std::size_t s) {
    const std::int64_t until = lines_ * (static_cast<std::int64_t>(s) + 1) / steps_;
    for (; issued_ < until; ++issued_) {
      __builtin_prefetch(ranges_[range_].first + offset_);
      offset_ += 64;
      if (offset_ >= ranges_[range_].second) {
        ++range_;
        offset_ = 0;
      }
    }
  }

private:
  std::array<std::pair<const char*, std::int64_t>, 16> ranges_{}; // start, bytes
  std::size_t count_ = 0, range_ = 0;
  std::int64_t lines_ = 0, issued_ = 0, offset_ = 0, steps_ = 1;
};

// Runs k's program over elements [begin, begin + n) of its index space (n at most
// chunk_elements); returns the register that holds the (first) result, in its compute dtype.
// With `invariants_ready`, the chunk-invariant steps' registers still hold their values from
// an earlier chunk of at least n elements, and are not computed again.
inline const std::byte* evaluate_chunk(const kernel_context& c, register_file& regs, std::int64_t begin, std::int64_t n,
                                       bool invariants_ready = false) {
  next_chunk_prefetch prefetch(c, begin, n);
  for (std::size_t s = 0; s < c.k.program.size(); ++s) {
    const compile::register_step& step = c.k.program[s];
    prefetch.before_step(s);
    if (invariants_ready && step.invariant) continue;
    if (step.what == compile::register_step::kind::load) {
      load_input(c, step, regs, begin, n);
    } else {
      compute_step(c, step, regs, begin, n);
    }
  }
  return regs.view(c.k.result_registers[0]);
}

} // namespace detail

namespace detail {

// Evaluates elements [begin, end) of k's results into `outs` (one per result), chunk by
// chunk, on this thread. Every result of a chunk is computed before any is stored, so a
// result may be written over an input.
inline void evaluate_range(const kernel_context& c, std::span<buffer* const> outs, std::int64_t range_begin,
                           std::int64_t range_end, bool streaming) {
  register_file& regs = thread_registers();
  regs.reserve(c.k.register_count);
  for (std::int64_t begin = range_begin; begin < range_end; begin += chunk_elements) {
    const std::int64_t n = std::min(chunk_elements, range_end - begin); // the first is the longest
    evaluate_chunk(c, regs, begin, n, begin != range_begin);
    for (std::size_t r = 0; r < outs.size(); ++r) {
      const std::byte* result = regs.view(c.k.result_registers[r]);
      visit_dtype(outs[r]->type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        store_values(outs[r]->as<T>() + begin, reinterpret_cast<const compute_t<T>*>(result), n, streaming);
      });
    }
  }
}

// k's native code, when it is built and in use.
inline compile::native_entry native_entry_of(const compile::kernel& k) {
  if (!k.native || !native_kernels_enabled()) return nullptr;
  return k.native->entry.load(std::memory_order_acquire);
}

// Runs elements [begin, end) of k's results: its native code when there is one.
class range_evaluator {
public:
  range_evaluator(const compile::kernel& k, std::span<const buffer* const> inputs, std::span<buffer* const> outs)
      : context_{k, inputs, outs[0]->shape()}, outs_(outs), native_(native_entry_of(k)) {
    if (native_ == nullptr) return;
    for (const buffer* in : inputs) native_inputs_.push_back(in->data());
    for (buffer* out : outs) native_outputs_.push_back(out->data());
    simd_ = kernels::simd_path_active();
  }

  bool native() const { return native_ != nullptr; }

  void operator()(std::int64_t begin, std::int64_t end, bool streaming) const {
    if (native_ != nullptr) {
      native_(native_inputs_.data(), native_outputs_.data(), begin, end, simd_, streaming);
    } else {
      evaluate_range(context_, outs_, begin, end, streaming);
    }
  }

private:
  kernel_context context_;
  std::span<buffer* const> outs_;
  compile::native_entry native_;
  std::vector<const void*> native_inputs_;
  std::vector<void*> native_outputs_;
  bool simd_ = false;
};

} // namespace detail

// Runs element-wise kernel k: inputs in the order of k.group.inputs, results into `outs`
// in the order of k.result_registers (one may be an input: see passes/buffer_plan.hpp).
inline void run_elementwise(const compile::kernel& k, std::span<const buffer* const> inputs,
                            std::span<buffer* const> outs, thread_pool& pool) {
  const detail::range_evaluator evaluate(k, inputs, outs);
  if (evaluate.native()) {
    static std::atomic<std::int64_t>& native_runs = metrics::counter("NativeKernelRun");
    native_runs.fetch_add(1, std::memory_order_relaxed);
  }
  // Enough chunks per task that the split costs little; task boundaries are chunk
  // boundaries, so the threads never share a cache line of the result.
  const std::int64_t grain = detail::chunk_elements * 16;
  std::int64_t written = 0;
  for (const buffer* out : outs) written += out->byte_size();
  const bool streaming = kernels::streaming_pays(static_cast<std::size_t>(written));
  pool.parallel_for(outs[0]->shape().numel(), grain, [&](std::int64_t begin, std::int64_t end) {
    evaluate(begin, end, streaming);
    if (streaming) kernels::streaming_fence();
  });
}

// Runs elements [begin, end) of element-wise kernel k on this thread: a matmul epilogue's
// share of a region the GEMM has finished.
inline void run_elementwise_range(const compile::kernel& k, std::span<const buffer* const> inputs, buffer& out,
                                  std::int64_t begin, std::int64_t end) {
  buffer* const outs[] = {&out};
  detail::range_evaluator(k, inputs, outs)(begin, end, false);
}

// The value of `ins`, an element-wise instruction of g whose operands are constants, as
// a kernel computes it: a two-step program (the constants, then the op) run by the same
// compute_step over 64 lanes (passes/fold.hpp). Every element of a kernel is computed on
// batches (a chunk's end too, padded), so the value is the one a kernel gives anywhere on
// the same path (for sin and cos, in a batch that takes the same range reduction as one of
// 64 equal values). Nothing when the kernels cannot compute the op: the run reports that.
inline std::optional<ir::literal> evaluate_constant(const ir::graph& g, const ir::instruction& ins) {
  constexpr std::int64_t lanes = 64; // at least one batch of every compute dtype
  compile::kernel k;
  const auto arity = static_cast<compile::register_id>(ins.operands.size());
  for (compile::register_id r = 0; r < arity; ++r) {
    const ir::instruction& operand = g.instructions[ins.operands[r]];
    compile::register_step load_constant;
    load_constant.code = op::constant;
    load_constant.type = operand.type;
    load_constant.attrs = operand.attrs;
    load_constant.result = r;
    k.program.push_back(std::move(load_constant));
  }
  compile::register_step step;
  step.code = ins.code;
  step.type = ins.type;
  step.operand_type = g.instructions[ins.operands.back()].type; // as compile::lower_program sets it
  step.attrs = ins.attrs;
  for (compile::register_id r = 0; r < arity; ++r) step.operands.push_back(r);
  step.result = arity;
  k.program.push_back(std::move(step));
  k.result_registers = {arity};
  k.register_count = static_cast<compile::register_id>(arity + 1);

  detail::register_file regs;
  regs.reserve(k.register_count);
  const shape index_space{lanes};
  const std::byte* value = nullptr;
  try {
    value = detail::evaluate_chunk(detail::kernel_context{k, {}, index_space}, regs, 0, lanes);
  } catch (const xlite::error&) {
    return std::nullopt;
  }
  return detail::visit_compute(ins.type, [&](auto tag) {
    using C = typename decltype(tag)::type;
    const C first = *reinterpret_cast<const C*>(value);
    return std::is_floating_point_v<C> ? ir::literal::of(static_cast<double>(first))
                                       : ir::literal::of(static_cast<std::int64_t>(first));
  });
}

} // namespace xlite::runtime
