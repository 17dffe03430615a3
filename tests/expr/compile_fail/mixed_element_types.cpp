// Must not compile: a float tensor and an int tensor without a cast.
#include <xlite/expr.hpp>

void check() {
  xlite::tensor<float> a{1, 2};
  xlite::tensor<std::int32_t> b{1, 2};
  xlite::tensor<float> c = a + b;
}
