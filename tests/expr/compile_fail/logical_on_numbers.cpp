// Must not compile: logical_and of two float tensors.
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<float> a{1, 2};
  auto e = xlite::logical_and(a, a);
  static_cast<void>(e);
}
