#pragma once

// The systolic-array model of a TPU's matrix unit: numerics, cycles and traffic
// (docs/tpu.md).

#include "xlite/tpu/convolution.hpp"
#include "xlite/tpu/cost_model.hpp"
#include "xlite/tpu/cycle_simulation.hpp"
#include "xlite/tpu/dataflow.hpp"
#include "xlite/tpu/device.hpp"
#include "xlite/tpu/matrix.hpp"
#include "xlite/tpu/memory_config.hpp"
#include "xlite/tpu/report.hpp"
#include "xlite/tpu/step_cost.hpp"
#include "xlite/tpu/systolic_array.hpp"
