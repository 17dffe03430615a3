#pragma once

// The one header through which xsimd enters xlite. Everything else asks here which SIMD
// instruction sets exist and how wide a batch is.
//
// xsimd (8.x) offers the instruction sets the translation unit is compiled for: a batch of
// avx512bw exists only under -mavx512bw, as in Eigen and xtensor. Within those, xlite picks
// at run time: `dispatch` calls its function with the widest compiled arch that
// active_isa() allows, so XLITE_ISA and set_max_isa() select every compiled path from one
// binary. Compile with -march=native (or -mavx512f -mavx512bw -mavx512dq -mavx512vl) to get
// the AVX-512 path; with no flags a TU gets the baseline (SSE2 on x86-64).

#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "xlite/core/cpu_features.hpp"

namespace xlite::kernels {

// One lane, plain C++: the portable path on machines (or builds) without SIMD, and the
// path for expressions the SIMD loop does not take.
struct scalar_arch {
  static constexpr const char* name() { return "scalar"; }
};

// The arch each xlite::isa level runs, where this TU compiled one.
#if XSIMD_WITH_AVX512BW && XSIMD_WITH_AVX512DQ
using avx512_arch = xsimd::avx512bw;
inline constexpr bool avx512_compiled = true;
#else
using avx512_arch = void;
inline constexpr bool avx512_compiled = false;
#endif

#if XSIMD_WITH_FMA3_AVX2
using avx2_arch = xsimd::fma3<xsimd::avx2>;
inline constexpr bool avx2_compiled = true;
#else
using avx2_arch = void;
inline constexpr bool avx2_compiled = false;
#endif

// The baseline: what any CPU of the target runs without run-time detection.
#if XSIMD_WITH_SSE4_2
using baseline_arch = xsimd::sse4_2;
#elif XSIMD_WITH_SSE2
using baseline_arch = xsimd::sse2;
#elif XSIMD_WITH_NEON64
using baseline_arch = xsimd::neon64;
#else
using baseline_arch = scalar_arch;
#endif

// A batch of T for Arch: xsimd::batch, or T itself for scalar_arch.
template <class T, class Arch>
struct batch_of {
  using type = xsimd::batch<T, Arch>;
};
template <class T>
struct batch_of<T, scalar_arch> {
  using type = T;
};
template <class T, class Arch>
using batch_t = typename batch_of<T, Arch>::type;

// A batch of booleans with the lane layout of T.
template <class T, class Arch>
struct mask_of {
  using type = xsimd::batch_bool<T, Arch>;
};
template <class T>
struct mask_of<T, scalar_arch> {
  using type = bool;
};
template <class T, class Arch>
using mask_t = typename mask_of<T, Arch>::type;

// Lanes of T per batch.
template <class T, class Arch>
inline constexpr std::size_t lanes = xsimd::batch<T, Arch>::size;
template <class T>
inline constexpr std::size_t lanes<T, scalar_arch> = 1;

template <class V>
inline constexpr bool is_batch_v = false;
template <class T, class A>
inline constexpr bool is_batch_v<xsimd::batch<T, A>> = true;
template <class T, class A>
inline constexpr bool is_batch_v<xsimd::batch_bool<T, A>> = true;

// xsimd supports these element types in batches; others (bool, int8 as a value) take the
// scalar path.
template <class T>
inline constexpr bool simd_element_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                       std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

// The arch for an ISA level: the widest compiled one at or below it.
inline isa arch_level_for(isa level) {
  if (level >= isa::avx512 && avx512_compiled) return isa::avx512;
  if (level >= isa::avx2 && avx2_compiled) return isa::avx2;
  return isa::portable;
}

// Calls f(Arch{}) with the arch active_isa() selects among those compiled; f(scalar_arch{})
// when `scalar_only`.
template <class F>
decltype(auto) dispatch(F&& f, bool scalar_only = false) {
  if (!scalar_only) {
    switch (arch_level_for(active_isa())) {
    case isa::avx512:
      if constexpr (avx512_compiled) return f(avx512_arch{});
      break;
    case isa::avx2:
      if constexpr (avx2_compiled) return f(avx2_arch{});
      break;
    default: break;
    }
    if constexpr (!std::is_same_v<baseline_arch, scalar_arch>) return f(baseline_arch{});
  }
  return f(scalar_arch{});
}

} // namespace xlite::kernels
