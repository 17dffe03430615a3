#pragma once

// Automatic mixed precision: a policy (fp32, autocast, XLITE_USE_BF16, XLITE_DOWNCAST_BF16)
// and the compile pass that applies it.

#include "xlite/amp/autocast.hpp"
#include "xlite/amp/policy.hpp"
