#pragma once

// Lazy tensors: ops are recorded as a graph, compiled once per distinct graph at a barrier
// (mark_step), and run as fused kernels on a device.

#include "xlite/ir/print.hpp"
#include "xlite/lazy/collectives.hpp"
#include "xlite/lazy/control.hpp"
#include "xlite/lazy/convolution.hpp"
#include "xlite/lazy/debug.hpp"
#include "xlite/lazy/expression.hpp"
#include "xlite/lazy/factories.hpp"
#include "xlite/lazy/losses.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/pooling.hpp"
#include "xlite/lazy/random.hpp"
#include "xlite/lazy/sharding.hpp"
#include "xlite/lazy/step.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/lazy/unfold.hpp"
