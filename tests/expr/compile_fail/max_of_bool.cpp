// Must not compile: the largest element of a bool expression.
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<float> x{1, 2};
  auto m = xlite::max(x > 1.0f);
  static_cast<void>(m);
}
