#pragma once

// xlite's expression cases, written once for the rows that use them: xlite's own
// (xlite_expressions.cpp, over tensors) and the paired ones (paired_expressions.cpp, over
// the peers' buffers through xlite::adapt).

#include "expressions.hpp"
#include "xlite/expr.hpp"

namespace xlite::bench {

// Case `which` over the leaves x, y and w: an element-wise case's expression goes to
// assign, which writes it into z, and 0 is returned; sum_xy returns the sum.
template <class Leaf, class Assign>
float evaluate_xlite_case(expression which, const Leaf& x, const Leaf& y, const Leaf& w, Assign&& assign) {
  using in = expression_inputs;
  switch (which) {
  case expression::e1:
    assign(in::a * x + y);
    break;
  case expression::e2:
    assign(in::a * x + in::b * y - in::c * w);
    break;
  case expression::e3:
    assign(xlite::exp(-x * x) * y + xlite::tanh(w));
    break;
  case expression::e4:
    assign(xlite::max(x * y + w, 0.0f));
    break;
  case expression::sum_xy:
    return xlite::sum(x * y)();
  }
  return 0.0f;
}

} // namespace xlite::bench
