# Settings for building xlite's own tests, examples and benchmarks. None of this reaches a
# consumer of xlite::xlite: warnings, -Werror, sanitizers and ccache are ours alone.

option(XLITE_WERROR "Treat warnings in xlite's own targets as errors" OFF)
set(XLITE_SANITIZE "" CACHE STRING "Sanitizers for xlite's own targets, e.g. address,undefined")

set(CMAKE_CXX_EXTENSIONS OFF) # -std=c++20, not gnu++20: xlite must not need GNU extensions

find_program(XLITE_CCACHE ccache)
if(XLITE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${XLITE_CCACHE}")
endif()

add_library(xlite_development INTERFACE)
target_link_libraries(xlite_development INTERFACE xlite::xlite)
target_compile_options(xlite_development INTERFACE -Wall -Wextra -Wpedantic
  $<$<BOOL:${XLITE_WERROR}>:-Werror>)
if(XLITE_SANITIZE)
  target_compile_options(xlite_development INTERFACE
    -fsanitize=${XLITE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(xlite_development INTERFACE -fsanitize=${XLITE_SANITIZE})
endif()
