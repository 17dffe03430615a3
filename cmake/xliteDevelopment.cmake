# Settings for building xlite's own tests, examples and benchmarks. None of this reaches a
# consumer of xlite::xlite: warnings, -Werror, sanitizers and ccache are ours alone.

option(XLITE_WERROR "Treat warnings in xlite's own targets as errors" OFF)
set(XLITE_SANITIZE "" CACHE STRING "Sanitizers for xlite's own targets, e.g. address,undefined")

set(CMAKE_CXX_EXTENSIONS OFF) # -std=c++20, not gnu++20: xlite must not need GNU extensions

# ccache, with paths taken relative to the source tree and the build directory left out of
# the hash, so that two clones of the repository (a developer's and CI's) share entries.
find_program(XLITE_CCACHE ccache)
if(XLITE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      "${CMAKE_COMMAND}" -E env "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" CCACHE_NOHASHDIR=1 "${XLITE_CCACHE}")
  set(XLITE_CCACHE_LAUNCHES ON) # for the package test's own builds (tests/package)
endif()

add_library(xlite_development INTERFACE)
target_link_libraries(xlite_development INTERFACE xlite::xlite)
target_compile_options(xlite_development INTERFACE -Wall -Wextra -Wpedantic
  $<$<BOOL:${XLITE_WERROR}>:-Werror>)
if(XLITE_SANITIZE)
  target_compile_options(xlite_development INTERFACE
    -fsanitize=${XLITE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  if(XLITE_SANITIZE MATCHES "undefined")
    # xsimd 8's SSE2 double exp, pow and trunc (under floor, ceil, round) convert NaN and
    # +-Inf to int64 with a C++ cast and then discard the result; the check stops there.
    target_compile_options(xlite_development INTERFACE -fno-sanitize=float-cast-overflow)
  endif()
  target_link_options(xlite_development INTERFACE -fsanitize=${XLITE_SANITIZE})
endif()
