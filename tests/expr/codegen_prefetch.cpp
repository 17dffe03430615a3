// Compiled to assembly, not run, by check_run_row_codegen.cmake: an evaluation large enough
// to stream runs run_row, whose loop must hold the prefetches of kernels::prefetch_ahead.
#include <xlite/expr.hpp>

void evaluate_e3(xlite::tensor<float>& z, const xlite::tensor<float>& x, const xlite::tensor<float>& y,
                 const xlite::tensor<float>& w) {
  z = exp(-x * x) * y + tanh(w);
}
