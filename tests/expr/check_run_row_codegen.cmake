# Compiles SOURCE to assembly at -O1, -O2 and -O3 (with FLAGS, against INCLUDES, directories
# joined with |) and looks at the instructions of its run_row functions, the element-wise
# loops: at each level at least one must match REQUIRED (a regex of instruction names), and
# none may match FORBIDDEN (if given). What this checks changes no result, so no other test
# can see it: that the streaming loop keeps its prefetches, which g++ 12 once deleted at -O1
# and -O2 (kernels::prefetch_ahead says why), and that an op against a number compiles to
# its short form. The thread pool prefetches too, so only run_row's own instructions count:
# a compiler that inlined run_row would fail a REQUIRED check, and the check would have to
# look for the loop under its caller's name.
#   cmake -D COMPILER=... -D INCLUDES=... -D SOURCE=... -D OUTPUT_DIR=... -D FLAGS=...
#         -D REQUIRED=... [-D FORBIDDEN=...] -P this
string(REPLACE "|" ";" directories "${INCLUDES}")
set(include_flags "")
foreach(directory IN LISTS directories)
  if(directory)
    list(APPEND include_flags "-I${directory}")
  endif()
endforeach()
get_filename_component(name "${SOURCE}" NAME_WE)
file(MAKE_DIRECTORY "${OUTPUT_DIR}")
foreach(level -O1 -O2 -O3)
  set(assembly "${OUTPUT_DIR}/${name}${level}.s")
  execute_process(COMMAND "${COMPILER}" -std=c++20 ${level} ${FLAGS} ${include_flags} -S "${SOURCE}" -o "${assembly}"
                  RESULT_VARIABLE result ERROR_VARIABLE errors)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "compiling ${SOURCE} at ${level} failed:\n${errors}")
  endif()
  # Functions' labels (mangled names start with _, and with __ on Mach-O; clang follows a
  # label with a comment) and instructions, in order. Local labels (.L on ELF, L on Mach-O)
  # stay inside their function.
  file(STRINGS "${assembly}" lines REGEX "^_[^ \t]*:([ \t].*)?$|^[ \t]+[a-z]")
  set(function "")
  set(required_count 0)
  foreach(line IN LISTS lines)
    if(line MATCHES "^_")
      set(function "${line}")
    elseif(function MATCHES "7run_row" AND line MATCHES "^[ \t]+([a-z0-9]+)")
      set(instruction "${CMAKE_MATCH_1}")
      if(instruction MATCHES "^(${REQUIRED})$")
        math(EXPR required_count "${required_count} + 1")
      endif()
      if(FORBIDDEN AND instruction MATCHES "^(${FORBIDDEN})$")
        message(FATAL_ERROR "at ${level} a run_row holds ${instruction}, which it should not (${assembly})")
      endif()
    endif()
  endforeach()
  if(required_count EQUAL 0)
    message(FATAL_ERROR "at ${level} no run_row holds ${REQUIRED} (${assembly})")
  endif()
  message(STATUS "${level}: ${required_count} of ${REQUIRED} in run_row")
endforeach()
