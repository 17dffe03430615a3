// Must not compile: an int tensor times 2.5 (the result would be float).
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<std::int32_t> i{1, 2};
  auto e = i * 2.5;
  static_cast<void>(e);
}
