// Must not compile: a float matrix times a bfloat16 one, without a cast.
#include <xlite/expr/matmul.hpp>

void check() {
  xlite::tensor<float> a{{1, 2}, {3, 4}};
  xlite::tensor<xlite::bfloat16> b(xlite::shape{2, 2}, xlite::bfloat16(1.0f));
  xlite::tensor<float> c = xlite::matmul(a, b);
}
