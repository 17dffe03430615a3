// Must not compile: xlite::assign into a const xtensor container, which it cannot write.
#include <xlite/expr.hpp>
#include <xlite/expr/xtensor.hpp>

#include <xtensor/xarray.hpp>

void check() {
  xlite::tensor<float> a{1, 2};
  const xt::xarray<float> out = xt::zeros<float>({2});
  xlite::assign(out, a * 2.0f);
}
