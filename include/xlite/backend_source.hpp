#pragma once

// The one file of a program built with XLITE_SEPARATE_COMPILATION that defines xlite's
// backend (see xlite/core/separate_compilation.hpp). Include it in a .cpp of its own,
// before any other xlite header:
//
//   // xlite_backend.cpp
//   #include <xlite/backend_source.hpp>

#if defined(XLITE_SEPARATE_COMPILATION_CONFIGURED)
#error "xlite/backend_source.hpp must come before any other xlite header in its file"
#endif
#if !defined(XLITE_SEPARATE_COMPILATION)
#define XLITE_SEPARATE_COMPILATION
#endif
#define XLITE_BACKEND_SOURCE

#include "xlite/compile/compiler.hpp"
#include "xlite/runtime/compilation.hpp"
#include "xlite/runtime/executor.hpp"
#include "xlite/spmd/partitioner.hpp"
