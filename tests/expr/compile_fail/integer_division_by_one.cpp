// Must not compile: i / c<1> of integers, which the rule x / 1 -> x must not let through:
// division computes in floating point, so i / c<1> asks for a cast as i / c<2> does.
#include <xlite/expr.hpp>

#include <cstdint>

void check() {
  xlite::tensor<std::int32_t> i{1, 2};
  auto e = i / xlite::c<1>;
  static_cast<void>(e);
}
