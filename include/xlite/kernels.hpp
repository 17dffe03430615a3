#pragma once

// kernels/: the compute loops both front ends share. The element-wise and reduction
// functors come with xlite/expr.hpp; this header adds the run-time dispatched kernels:
// float <-> bfloat16 conversions and the GEMM (fp32, bf16 on AVX512_BF16 and AMX).

#include "xlite/core.hpp"
#include "xlite/kernels/amx.hpp"
#include "xlite/kernels/convert.hpp"
#include "xlite/kernels/gemm.hpp"
