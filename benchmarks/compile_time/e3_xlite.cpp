// E3 with xlite, as a user writes it: the file whose compile time #3 compares with
// e3_xtensor.cpp's (measure.py).
#include <xlite/expr.hpp>

void e3(xlite::tensor<float>& z, const xlite::tensor<float>& x, const xlite::tensor<float>& y,
        const xlite::tensor<float>& w) {
  z = xlite::exp(-x * x) * y + xlite::tanh(w);
}
