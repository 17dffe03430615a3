# Installs xlite into a fresh prefix and builds the consumer project against it, then builds
# the consumer again with xlite as a subdirectory (the installed build also compiles xlite
# separately, XLITE_SEPARATE_COMPILATION), and checks what a packager relies on:
# the version check, unknown and optional components.
#
# cmake -DXLITE_SOURCE_DIR=... -DWORK_DIR=... -DCXX=... -DGENERATOR=... [-DLAUNCHER=ccache]
#       -P run_package_test.cmake

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

# Fails unless the consumer's output (`output`) says its native kernels use the headers in
# `dir` (a found package's config once took another package's prefix for its own).
function(expect_native_include dir how)
  string(FIND "${output}" "native include ${dir}\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "native kernels of ${how} must use the headers in ${dir}:\n${output}")
  endif()
endfunction()

# Configures a throwaway project whose body is `code`; sets `configured` and `output`.
function(try_project name code)
  set(dir "${WORK_DIR}/${name}")
  file(WRITE "${dir}/CMakeLists.txt"
       "cmake_minimum_required(VERSION 3.21)\nproject(${name} LANGUAGES CXX)\n${code}\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -S "${dir}" -B "${dir}/build" -G "${GENERATOR}"
                          -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0)
    set(configured TRUE PARENT_SCOPE)
  else()
    set(configured FALSE PARENT_SCOPE)
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
# No build type, so no optimisation: what is checked here is how the package is found and
# linked, and the consumers' one small run each. Unoptimised, the separately compiled
# backend takes 20 s to compile; at Release's -O3 it took 69.
set(common -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=)
if(LAUNCHER)
  list(APPEND common "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()

# 1. install
run(${CMAKE_COMMAND} -S "${XLITE_SOURCE_DIR}" -B "${WORK_DIR}/xlite-build" ${common}
    -DXLITE_BUILD_TESTS=OFF -DXLITE_BUILD_EXAMPLES=OFF "-DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} --install "${WORK_DIR}/xlite-build")
foreach(file include/xlite/xlite.hpp include/xlite/core/shape.hpp share/cmake/xlite/xliteConfig.cmake
             share/cmake/xlite/xliteConfigVersion.cmake share/cmake/xlite/xliteTargets.cmake)
  if(NOT EXISTS "${WORK_DIR}/prefix/${file}")
    message(FATAL_ERROR "the install is missing ${file}")
  endif()
endforeach()

# 2. find_package, with the zlib component
run(${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/consumer" -B "${WORK_DIR}/consumer-installed" ${common}
    "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer-installed")
run("${WORK_DIR}/consumer-installed/consumer")
if(NOT output MATCHES "^xlite 0\\.1 \\(3, 4\\) 12 bfloat16")
  message(FATAL_ERROR "unexpected output from the consumer:\n${output}")
endif()
expect_native_include("${WORK_DIR}/prefix/include" "an installed xlite")
run("${WORK_DIR}/consumer-installed/consumer_separate")
if(NOT output MATCHES "^separate 18")
  message(FATAL_ERROR "unexpected output from the separately compiled consumer:\n${output}")
endif()
run("${WORK_DIR}/consumer-installed/consumer_zlib")
if(NOT output MATCHES "zlib [0-9]")
  message(FATAL_ERROR "xlite::zlib did not bring zlib:\n${output}")
endif()

# 3. add_subdirectory
run(${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/consumer" -B "${WORK_DIR}/consumer-subdirectory" ${common}
    -DXLITE_CONSUME=subdirectory "-DXLITE_SOURCE_DIR=${XLITE_SOURCE_DIR}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer-subdirectory")
run("${WORK_DIR}/consumer-subdirectory/consumer")
expect_native_include("${XLITE_SOURCE_DIR}/include" "xlite as a subdirectory")

# 4. what must fail, fails with a message that says why
try_project(wants_major_1 "find_package(xlite 1.0 CONFIG REQUIRED)")
if(configured OR NOT output MATCHES "xlite")
  message(FATAL_ERROR "find_package(xlite 1.0) should fail against 0.1:\n${output}")
endif()
try_project(unknown_component "find_package(xlite CONFIG REQUIRED COMPONENTS cuda)")
if(configured OR NOT output MATCHES "unknown component 'cuda'")
  message(FATAL_ERROR "an unknown component should be named in an error:\n${output}")
endif()
try_project(optional_only "find_package(xlite CONFIG REQUIRED OPTIONAL_COMPONENTS mpi)
if(NOT TARGET xlite::xlite)
  message(FATAL_ERROR \"core target missing\")
endif()")
if(NOT configured)
  message(FATAL_ERROR "an optional component must never make find_package fail:\n${output}")
endif()
message(STATUS "package test passed")
