#pragma once

// Optimizers over lazy tensors: SGD, Adam and AdamW whose steps are traced into the step's
// graph, learning-rate schedules, and gradient clipping by norm.

#include "xlite/optim/adam.hpp"
#include "xlite/optim/clip.hpp"
#include "xlite/optim/fully_sharded.hpp"
#include "xlite/optim/optimizer.hpp"
#include "xlite/optim/optimizer_step.hpp"
#include "xlite/optim/schedule.hpp"
#include "xlite/optim/sgd.hpp"
