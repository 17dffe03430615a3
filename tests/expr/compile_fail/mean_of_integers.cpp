// Must not compile: mean of an int tensor.
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<std::int32_t> i{1, 2};
  auto m = xlite::mean(i);
  static_cast<void>(m);
}
