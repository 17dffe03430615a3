// Must not compile: a float expression assigned to a double tensor.
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<float> a{1, 2};
  xlite::tensor<double> d = a * 2.0f;
  static_cast<void>(d);
}
