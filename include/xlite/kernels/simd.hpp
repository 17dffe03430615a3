#pragma once

// The one header through which xsimd enters xlite. Everything else asks here which SIMD
// instruction set to use and how wide a batch is.
//
// xsimd (8.x) offers the instruction sets the translation unit is compiled for: a batch of
// avx512bw exists only under -mavx512bw, as in Eigen and xtensor. So each translation unit
// has two paths: the widest SIMD arch it was compiled for, and plain scalar C++. At run
// time `dispatch` takes the SIMD one when active_isa() allows its level (XLITE_ISA and
// set_max_isa() cap it), else the scalar one. Compile with -march=native (or -mavx512f
// -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma) for the AVX-512 path; with no flags an
// x86-64 build gets SSE, which every x86-64 CPU runs. One arch per translation unit, not
// every compiled one, keeps the compile time of an expression near xtensor's.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__unix__)
#include <unistd.h>
#endif

#include <xsimd/xsimd.hpp>

#include "xlite/core/aligned_memory.hpp"
#include "xlite/core/cpu_features.hpp"
#include "xlite/kernels/intrinsics.hpp"

namespace xlite::kernels {

// One lane, plain C++: the portable path on machines (or builds) without SIMD, and the
// path for expressions the SIMD loop does not take.
struct scalar_arch {
  static constexpr const char* name() { return "scalar"; }
};

// The widest arch this translation unit is compiled for, and the ISA level it needs.
#if XSIMD_WITH_AVX512BW && XSIMD_WITH_AVX512DQ && XSIMD_WITH_FMA3_AVX2
using simd_arch = xsimd::avx512bw;
inline constexpr isa simd_arch_level = isa::avx512;
#elif XSIMD_WITH_FMA3_AVX2
using simd_arch = xsimd::fma3<xsimd::avx2>;
inline constexpr isa simd_arch_level = isa::avx2;
#elif XSIMD_WITH_SSE4_2
using simd_arch = xsimd::sse4_2;
inline constexpr isa simd_arch_level = isa::portable;
#elif XSIMD_WITH_SSE2
using simd_arch = xsimd::sse2;
inline constexpr isa simd_arch_level = isa::portable; // the x86-64 baseline
#elif XSIMD_WITH_NEON64
using simd_arch = xsimd::neon64;
inline constexpr isa simd_arch_level = isa::portable; // the AArch64 baseline
#else
using simd_arch = scalar_arch;
inline constexpr isa simd_arch_level = isa::portable;
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

// The batch {0, 1, 2, ...}.
template <class T, class Arch>
xsimd::batch<T, Arch> lane_indices() {
  static constexpr auto indices = [] {
    std::array<T, lanes<T, Arch>> i{};
    for (std::size_t lane = 0; lane < i.size(); ++lane) i[lane] = static_cast<T>(lane);
    return i;
  }();
  return xsimd::batch<T, Arch>::load_unaligned(indices.data());
}

// The mask of a batch's first `count` lanes, as a batch_bool (first_lanes in intrinsics.hpp
// is AVX-512's 16-bit mask).
template <class T, class Arch>
xsimd::batch_bool<T, Arch> first_lanes_mask(std::size_t count) {
  return lane_indices<T, Arch>() < xsimd::batch<T, Arch>(static_cast<T>(count));
}

// Batch (a batch of T, or for T = bool a batch_bool) of p[0, count) in its first lanes
// (count below a batch's lanes) and zeros in the rest, reading nothing past p + count: the
// end of a row may be the end of a page. AVX-512 and AVX2 load under a mask (masked lanes
// do not fault); elsewhere, and for bools, through a copy on the stack.
template <class Batch, class T>
Batch load_first(const T* p, std::size_t count) {
  // (bools fill a batch_bool of wider lanes, which no masked load does)
  [[maybe_unused]] constexpr std::size_t register_bytes =
      std::is_same_v<T, bool> ? 0 : sizeof(typename Batch::register_type);
#if XSIMD_WITH_AVX512F
  if constexpr (register_bytes == 64) {
    const __mmask16 lanes_in = first_lanes(static_cast<std::int64_t>(count));
    if constexpr (std::is_same_v<T, float>) {
      return Batch(_mm512_maskz_loadu_ps(lanes_in, p));
    } else if constexpr (std::is_same_v<T, double>) {
      return Batch(_mm512_maskz_loadu_pd(static_cast<__mmask8>(lanes_in), p));
    } else if constexpr (sizeof(T) == 4) {
      return Batch(_mm512_maskz_loadu_epi32(lanes_in, p));
    } else {
      return Batch(_mm512_maskz_loadu_epi64(static_cast<__mmask8>(lanes_in), p));
    }
  }
#endif
#if XSIMD_WITH_AVX2
  if constexpr (register_bytes == 32) {
    using Arch = typename Batch::arch_type;
    using integer = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
    const __m256i lanes_in = first_lanes_mask<integer, Arch>(count).data; // all ones in the lanes to load
    if constexpr (std::is_same_v<T, float>) {
      return Batch(_mm256_maskload_ps(p, lanes_in));
    } else if constexpr (std::is_same_v<T, double>) {
      return Batch(_mm256_maskload_pd(p, lanes_in));
    } else if constexpr (sizeof(T) == 4) {
      return Batch(_mm256_maskload_epi32(reinterpret_cast<const int*>(p), lanes_in));
    } else {
      return Batch(_mm256_maskload_epi64(reinterpret_cast<const long long*>(p), lanes_in));
    }
  }
#endif
  alignas(64) std::array<T, Batch::size> copy{};
  std::copy_n(p, std::min(count, copy.size()), copy.begin()); // (the min for g++'s -Warray-bounds)
  return Batch::load_aligned(copy.data());
}

// Stores v's first `count` lanes (count below a batch's lanes) to p[0, count), writing
// nothing past them: the rest of a row may be another task's, or past the end of a page.
// AVX-512 and AVX2 store under a mask; elsewhere, and for other batches (a batch_bool for
// bools), through a copy on the stack.
template <class T, class Batch>
void store_first(T* p, const Batch& v, std::size_t count) {
  [[maybe_unused]] constexpr std::size_t register_bytes = [] {
    if constexpr (requires { typename Batch::arch_type; }) { // a batch, not a batch_bool
      if constexpr (std::is_same_v<Batch, xsimd::batch<T, typename Batch::arch_type>>) {
        return sizeof(typename Batch::register_type);
      }
    }
    return std::size_t{0};
  }();
#if XSIMD_WITH_AVX512F
  if constexpr (register_bytes == 64) {
    const __mmask16 lanes_out = first_lanes(static_cast<std::int64_t>(count));
    if constexpr (std::is_same_v<T, float>) {
      _mm512_mask_storeu_ps(p, lanes_out, v);
    } else if constexpr (std::is_same_v<T, double>) {
      _mm512_mask_storeu_pd(p, static_cast<__mmask8>(lanes_out), v);
    } else if constexpr (sizeof(T) == 4) {
      _mm512_mask_storeu_epi32(p, lanes_out, v);
    } else {
      static_assert(sizeof(T) == 8, "store_first: lanes of 4 or 8 bytes");
      _mm512_mask_storeu_epi64(p, static_cast<__mmask8>(lanes_out), v);
    }
    return;
  }
#endif
#if XSIMD_WITH_AVX2
  if constexpr (register_bytes == 32) {
    using Arch = typename Batch::arch_type;
    using integer = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
    const __m256i lanes_out = first_lanes_mask<integer, Arch>(count).data; // all ones in the lanes to store
    if constexpr (std::is_same_v<T, float>) {
      _mm256_maskstore_ps(p, lanes_out, v);
    } else if constexpr (std::is_same_v<T, double>) {
      _mm256_maskstore_pd(p, lanes_out, v);
    } else if constexpr (sizeof(T) == 4) {
      _mm256_maskstore_epi32(reinterpret_cast<int*>(p), lanes_out, v);
    } else {
      static_assert(sizeof(T) == 8, "store_first: lanes of 4 or 8 bytes");
      _mm256_maskstore_epi64(reinterpret_cast<long long*>(p), lanes_out, v);
    }
    return;
  }
#endif
  alignas(64) std::array<T, Batch::size> copy;
  v.store_aligned(copy.data());
  std::copy_n(copy.begin(), std::min(count, copy.size()), p); // (the min for g++'s -Warray-bounds)
}

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

// ---- streaming stores -----------------------------------------------------------------------

// Stores a batch to memory aligned to its size without first reading the line into the
// cache: for outputs larger than the cache, a plain store's read costs a third of a
// triad's memory traffic.
template <class T, class Arch>
void store_streaming(T* p, const xsimd::batch<T, Arch>& v) {
#if XSIMD_WITH_SSE2
  const auto r = v.data;
  if constexpr (sizeof(r) == 64) {
#if XSIMD_WITH_AVX512F
    if constexpr (std::is_same_v<T, float>)
      _mm512_stream_ps(p, r);
    else if constexpr (std::is_same_v<T, double>)
      _mm512_stream_pd(p, r);
    else
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), r);
#endif
  } else if constexpr (sizeof(r) == 32) {
#if XSIMD_WITH_AVX
    if constexpr (std::is_same_v<T, float>)
      _mm256_stream_ps(p, r);
    else if constexpr (std::is_same_v<T, double>)
      _mm256_stream_pd(p, r);
    else
      _mm256_stream_si256(reinterpret_cast<__m256i*>(p), r);
#endif
  } else {
    if constexpr (std::is_same_v<T, float>)
      _mm_stream_ps(p, r);
    else if constexpr (std::is_same_v<T, double>)
      _mm_stream_pd(p, r);
    else
      _mm_stream_si128(reinterpret_cast<__m128i*>(p), r);
  }
#else
  v.store_aligned(p);
#endif
}

// Orders streaming stores before whatever the thread does next (they are weakly ordered).
inline void streaming_fence() {
#if XSIMD_WITH_SSE2
  _mm_sfence();
#endif
}

// Whether an output of this many bytes is worth streaming: when it is larger than the
// last-level cache a core can use, so nothing would find it there anyway. The OS reports
// the L3 of the whole package (320 MiB for a many-chiplet EPYC, of which one core uses
// 32 MiB), so the threshold is the smaller of that and 32 MiB.
inline bool streaming_pays(std::size_t output_bytes) {
  static const std::size_t threshold = [] {
    std::size_t bytes = std::size_t{32} << 20;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) bytes = std::min(bytes, static_cast<std::size_t>(l3));
#endif
    return bytes;
  }();
  return output_bytes >= threshold;
}

// Whether a loop that streams its output also asks for each operand's lines some way ahead
// (prefetch_ahead), on CPUs of this kind. Measured on one Intel host, a Xeon (Emerald
// Rapids) under KVM: the hardware prefetcher alone fell behind, the more so the more an
// element costs, and over 2^26 floats asking ahead made e3 = exp(-x * x) * y + tanh(w)
// 18-24% faster on one thread and 9-21% on two; e1, e2 and e4 came out between 5% slower
// and 19% faster, within the runs' spread (docs/benchmarks.md). On AMD's they did not pay:
// 2 KiB ahead into L1 took Zen 4 15-20% longer on e2 and e4; 1 KiB into L2 took Zen 5 10-29%
// longer on every case, and 2 KiB into L1 sped its e3 up 8-20% at times but cost e1 and x * y
// up to 10% (docs/architecture.md). Other CPUs, not measured, keep the plain loop.
constexpr bool prefetch_pays_on(const cpu_features& cpu) noexcept { return cpu.vendor == cpu_vendor::intel; }

// prefetch_pays_on this CPU, unless XLITE_PREFETCH=0|1 says otherwise (read once).
inline bool prefetch_pays() {
  static const bool pays = env_integer("XLITE_PREFETCH", 0, 1).value_or(prefetch_pays_on(detected_cpu_features())) == 1;
  return pays;
}

// How far ahead prefetch_ahead asks. On the Xeon 1, 2 and 4 KiB ran e1-e4 level (within
// 2%); 512 bytes gave e3 most of the gain and 256 none, 8 and 16 KiB less of it.
inline constexpr std::size_t prefetch_distance = 2048;

// Asks for the lines of [p, p + Bytes), prefetch_distance bytes further on, into every
// cache level (prefetcht0). The address is computed as an integer: past an array's end
// (the last batches ask for lines beyond it, which is harmless), a pointer would not be.
template <std::size_t Bytes, class T>
void prefetch_ahead(const T* p) {
  const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(p) + prefetch_distance;
  for (std::size_t line = 0; line < Bytes; line += cache_line) {
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + line), 0, 3);
  }
  // g++ 12 takes a function whose only effect is a prefetch for one without effects, and
  // at -O1 and -O2 deletes its calls before inlining them; an empty asm that uses the
  // address is an effect it keeps.
  __asm__ volatile("" : : "r"(ahead));
}

// Whether the SIMD path runs under the current ISA cap.
inline bool simd_path_active() { return !std::is_same_v<simd_arch, scalar_arch> && active_isa() >= simd_arch_level; }

// Calls f(simd_arch{}) when the SIMD path is active, else f(scalar_arch{}); only the
// scalar path exists for code that says it cannot run in batches (SimdCapable false).
template <bool SimdCapable, class F>
decltype(auto) dispatch(F&& f) {
  if constexpr (SimdCapable && !std::is_same_v<simd_arch, scalar_arch>) {
    if (simd_path_active()) return f(simd_arch{});
  }
  return f(scalar_arch{});
}

} // namespace xlite::kernels
