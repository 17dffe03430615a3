#pragma once

// core/: dtypes, bfloat16 and float16, shapes, errors, CPU feature detection, the thread pool, environment config.

#include "xlite/core/bfloat16.hpp"
#include "xlite/core/float16.hpp"
#include "xlite/core/cpu_features.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/version.hpp"
