#pragma once

// expr/: xlite::tensor and static expressions that fuse into one SIMD pass.

#include "xlite/core.hpp"
#include "xlite/expr/assign.hpp"
#include "xlite/expr/element_type.hpp"
#include "xlite/expr/evaluate.hpp"
#include "xlite/expr/functions.hpp"
#include "xlite/expr/graph.hpp"
#include "xlite/expr/node.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/expr/xtensor.hpp"
#include "xlite/expr/reduce.hpp"
