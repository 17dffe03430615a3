#pragma once

// The one header through which x86 intrinsics enter the run-time dispatched kernels
// (conversions, GEMM, AMX). Such a kernel is a function under a `target` attribute, so
// every build has it whatever its compile flags, and callers pick it after asking
// active_isa(). On other architectures XLITE_X86_KERNELS is 0 and only portable paths exist.
//
// GCC 12's own AVX-512 intrinsics trip -Wmaybe-uninitialized and -Wuninitialized once
// inlined (GCC bug 105593, fixed in GCC 13); since xlite is header-only the warnings would
// land in users' builds, so kernel code sits between XLITE_INTRINSICS_BEGIN and
// XLITE_INTRINSICS_END, which silence those two warnings there and only there.

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define XLITE_X86_KERNELS 1
#include <cstdint>
#include <immintrin.h>
#else
#define XLITE_X86_KERNELS 0
#endif

#define XLITE_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define XLITE_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#define XLITE_TARGET_AVX512_BF16                                                                                       \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#define XLITE_TARGET_AMX                                                                                               \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,amx-tile,amx-bf16")))

#if defined(__GNUC__) && !defined(__clang__)
#define XLITE_INTRINSICS_BEGIN                                                                                         \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")                          \
      _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define XLITE_INTRINSICS_END _Pragma("GCC diagnostic pop")
#else
#define XLITE_INTRINSICS_BEGIN
#define XLITE_INTRINSICS_END
#endif

#if XLITE_X86_KERNELS
namespace xlite::kernels {

// The mask of the first n of 16 lanes, for loop tails: all of them from 16 on, none from 0 down.
inline __mmask16 first_lanes(std::int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1);
}

} // namespace xlite::kernels
#endif
