// Must not compile: element-wise arithmetic on bfloat16 tensors (a storage type here).
#include <xlite/core/bfloat16.hpp>
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<xlite::bfloat16> a(xlite::shape{2}, xlite::bfloat16(1.0f));
  xlite::tensor<xlite::bfloat16> b = a * a;
}
