#pragma once

// expr/: xlite::tensor and static expressions that fuse into one SIMD pass.
// Interop with xtensor and printing are in xlite/expr/xtensor.hpp (xlite/xlite.hpp has
// both): a translation unit that only evaluates expressions does not pay for xtensor's
// headers.

#include "xlite/core.hpp"
#include "xlite/expr/assign.hpp"
#include "xlite/expr/element_type.hpp"
#include "xlite/expr/evaluate.hpp"
#include "xlite/expr/functions.hpp"
#include "xlite/expr/graph.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/reduce.hpp"
#include "xlite/expr/tensor.hpp"
