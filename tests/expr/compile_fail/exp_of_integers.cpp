// Must not compile: exp of an integer tensor.
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<std::int32_t> i{1, 2};
  auto e = xlite::exp(i);
  static_cast<void>(e);
}
