// Compiled to assembly, not run, by check_run_row_codegen.cmake: the control of the
// short-form check (codegen_number_forms.cpp), which must fail on the general form of max.
#include <xlite/expr.hpp>

void max_of_tensors(xlite::tensor<float>& z, const xlite::tensor<float>& x, const xlite::tensor<float>& y) {
  z = xlite::max(x, y);
}
