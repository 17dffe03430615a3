# xlite's optional components. Each one is an INTERFACE target xlite::<name> that adds a
# dependency and defines XLITE_HAS_<NAME>=1, so the headers that need it can tell.
# The core target xlite::xlite never depends on any of them.
#
# Used both by xlite's own CMakeLists.txt and by the installed xliteConfig.cmake.

# xlite_add_component(<name> [GLOBAL]): GLOBAL is passed on to add_library.
# Sets xlite_<name>_FOUND in the caller's scope; defines xlite::<name> when found.
function(xlite_add_component name)
  if(name STREQUAL "zlib")
    find_package(ZLIB QUIET)
    set(found ${ZLIB_FOUND})
    set(dependency ZLIB::ZLIB)
    set(package "ZLIB (Debian: zlib1g-dev)")
  elseif(name STREQUAL "mpi")
    find_package(MPI QUIET COMPONENTS CXX)
    set(found ${MPI_CXX_FOUND})
    set(dependency MPI::MPI_CXX)
    set(package "MPI (Debian: libopenmpi-dev)")
  else()
    message(FATAL_ERROR "xlite: unknown component '${name}'; the components are: zlib, mpi")
  endif()

  set(xlite_${name}_FOUND ${found} PARENT_SCOPE)
  if(NOT found)
    set(xlite_${name}_MISSING "${package}" PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET xlite::${name})
    string(TOUPPER "${name}" upper)
    add_library(xlite::${name} INTERFACE IMPORTED ${ARGN})
    target_link_libraries(xlite::${name} INTERFACE xlite::xlite ${dependency})
    target_compile_definitions(xlite::${name} INTERFACE XLITE_HAS_${upper}=1)
  endif()
endfunction()
