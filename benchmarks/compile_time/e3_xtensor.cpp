// E3 with xtensor in its fastest form (xsimd, xt::noalias): the reference for
// e3_xlite.cpp's compile time (measure.py).
#define XTENSOR_USE_XSIMD
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>

void e3(xt::xtensor<float, 1>& z, const xt::xtensor<float, 1>& x, const xt::xtensor<float, 1>& y,
        const xt::xtensor<float, 1>& w) {
  xt::noalias(z) = xt::exp(-x * x) * y + xt::tanh(w);
}
