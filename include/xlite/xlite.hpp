#pragma once

// Everything xlite has. Each layer also has its own umbrella header (xlite/core.hpp, ...), so
// code that needs one part does not pay the compile time of the rest.

#include "xlite/amp.hpp"
#include "xlite/autodiff.hpp"
#include "xlite/core.hpp"
#include "xlite/data.hpp" // the loader; the IDX and Fashion-MNIST readers with xlite::zlib
#include "xlite/expr.hpp"
#include "xlite/expr/matmul.hpp"
#include "xlite/expr/xtensor.hpp"
#include "xlite/io.hpp"
#include "xlite/kernels.hpp"
#include "xlite/lazy.hpp"
#include "xlite/lazy/tpu_cost.hpp"
#include "xlite/optim.hpp"
#include "xlite/spmd.hpp"
#include "xlite/tpu.hpp"
