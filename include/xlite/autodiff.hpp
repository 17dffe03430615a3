#pragma once

// Reverse-mode automatic differentiation of lazy tensors: xlite::grad(loss, params).

#include "xlite/autodiff/grad.hpp"
#include "xlite/autodiff/vjp.hpp"
