#pragma once

// xlite is header-only. A program whose files run lazy tensors instantiates the backend
// behind mark_step() (the graph compiler, the executor with every kernel, the SPMD
// partitioner: over a megabyte of code) in each of those files, about a minute of compile
// time apiece. Separate compilation builds it once, as Boost.Asio's does:
//
//   - define XLITE_SEPARATE_COMPILATION for every file of the program, and
//   - compile one file that includes xlite/backend_source.hpp before any other xlite header.
//
// The backend's entry points (compile_graph, find_or_compile, execute, partition) are then
// declared in every file and defined in that one. Compile it with the same SIMD flags as
// the rest of the program: its kernels take the widest path their file is compiled for.

#define XLITE_SEPARATE_COMPILATION_CONFIGURED 1

#if !defined(XLITE_SEPARATE_COMPILATION)
#define XLITE_BACKEND_FUNCTION inline
#define XLITE_BACKEND_DEFINITIONS 1
#elif defined(XLITE_BACKEND_SOURCE)
#define XLITE_BACKEND_FUNCTION
#define XLITE_BACKEND_DEFINITIONS 1
#else
#define XLITE_BACKEND_FUNCTION
#define XLITE_BACKEND_DEFINITIONS 0
#endif
