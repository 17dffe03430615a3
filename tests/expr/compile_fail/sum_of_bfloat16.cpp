// Must not compile: a sum of bfloat16 values, which would accumulate in bfloat16.
#include <xlite/core/bfloat16.hpp>
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<xlite::bfloat16> a(xlite::shape{2}, xlite::bfloat16(1.0f));
  auto s = xlite::sum(a);
}
