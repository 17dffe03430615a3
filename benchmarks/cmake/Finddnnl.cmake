# Finds oneDNN's header and library for the benchmarks' dnnl_sgemm; defines dnnl_FOUND and
# the imported target DNNL::dnnl, the name oneDNN's own package config uses.
#
# Why not that config: Debian's (oneDNN 2.6) is built for OpenCL GPUs too and calls
# find_package(OpenCL REQUIRED), which stops the whole configure where OpenCL's headers are
# not installed, although the CPU functions need only these two files.

find_path(dnnl_INCLUDE_DIR oneapi/dnnl/dnnl.h)
find_library(dnnl_LIBRARY dnnl)
mark_as_advanced(dnnl_INCLUDE_DIR dnnl_LIBRARY)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(dnnl REQUIRED_VARS dnnl_LIBRARY dnnl_INCLUDE_DIR)

if(dnnl_FOUND AND NOT TARGET DNNL::dnnl)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES
    IMPORTED_LOCATION "${dnnl_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${dnnl_INCLUDE_DIR}")
endif()
