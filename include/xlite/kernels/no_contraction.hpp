#pragma once

// XLITE_NO_CONTRACTION_FUNCTION before a function and XLITE_NO_CONTRACTION_BODY first in its
// body keep the compiler from fusing a * b + c into one FMA there, whatever the flags: GCC
// contracts across statements by default (-ffp-contract=fast) wherever the target has an
// FMA (aarch64 always, x86 with -mfma), clang within an expression. The portable GEMM
// kernels promise two roundings, a product and a sum, on every build.

#if defined(__clang__)
#define XLITE_NO_CONTRACTION_FUNCTION
#define XLITE_NO_CONTRACTION_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define XLITE_NO_CONTRACTION_FUNCTION __attribute__((optimize("fp-contract=off")))
#define XLITE_NO_CONTRACTION_BODY
#else
#define XLITE_NO_CONTRACTION_FUNCTION
#define XLITE_NO_CONTRACTION_BODY
#endif
