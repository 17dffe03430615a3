#pragma once

// IR nodes for the IR tests (ir.cpp, passes.cpp, serialize.cpp) and the mixed-precision pass's
// (amp/autocast.cpp): parameters with a source that holds nothing, and constants.

#include <memory>

#include "xlite/ir/build.hpp"

namespace ir_nodes {

struct fake_source : xlite::ir::parameter_source {};

inline xlite::ir::node_ptr param(xlite::dtype t, const xlite::shape& s) {
  return xlite::ir::parameter(std::make_shared<fake_source>(), t, s);
}

inline xlite::ir::node_ptr constant(double v, xlite::dtype t = xlite::dtype::f32) {
  return xlite::ir::constant(xlite::ir::literal::of(v), t);
}

} // namespace ir_nodes
