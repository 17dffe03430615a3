// Compiled to assembly, not run, by check_run_row_codegen.cmake: the maximum and minimum
// against a number compile to their short forms (kernels/elementwise.hpp,
// maximum_with_number): vmaxps or vminps and at most an add or an or, without the compares
// and blends of the forms between two tensors. Those give the same bits, and cost e4 at 2^16
// about 1% on AVX-512 and 4-7% on AVX2 (docs/benchmarks.md).
#include <xlite/expr.hpp>

void max_with_zero(xlite::tensor<float>& z, const xlite::tensor<float>& x) { z = xlite::max(x, 0.0f); }
void min_with_negative_zero(xlite::tensor<float>& z, const xlite::tensor<float>& x) { z = xlite::min(-0.0f, x); }
void clamp_between_numbers(xlite::tensor<float>& z, const xlite::tensor<float>& x) { z = xlite::clamp(x, 0.0f, 6.0f); }
void max_with_number_double(xlite::tensor<double>& z, const xlite::tensor<double>& x) { z = xlite::max(x, 2.0); }
