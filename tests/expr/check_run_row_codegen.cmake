# Compiles SOURCE to assembly at -O1, -O2 and -O3 (with FLAGS, against INCLUDES, directories
# joined with |) and looks at the instructions of its run_row functions, the element-wise
# loops: at each level at least FUNCTIONS (default 1) of them must hold an instruction
# matching REQUIRED (a regex of instruction names), so that a loop that moved out from under
# run_row's name fails rather than passes unseen, and none may hold one matching FORBIDDEN
# (if given). What this checks changes no result, so no other test can see it: that the
# streaming loop keeps its prefetches, which g++ 12 once deleted at -O1 and -O2
# (kernels::prefetch_ahead says why), and that an op against a number compiles to its short
# form. The thread pool prefetches too, so only run_row's own instructions count.
#   cmake -D COMPILER=... -D INCLUDES=... -D SOURCE=... -D OUTPUT_DIR=... -D FLAGS=...
#         -D REQUIRED=... [-D FORBIDDEN=...] [-D FUNCTIONS=...] -P this
string(REPLACE "|" ";" directories "${INCLUDES}")
set(include_flags "")
foreach(directory IN LISTS directories)
  if(directory)
    list(APPEND include_flags "-I${directory}")
  endif()
endforeach()
get_filename_component(name "${SOURCE}" NAME_WE)
file(MAKE_DIRECTORY "${OUTPUT_DIR}")
if(NOT FUNCTIONS)
  set(FUNCTIONS 1)
endif()
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
  set(holding "") # the run_row functions that hold a REQUIRED instruction
  foreach(line IN LISTS lines)
    if(line MATCHES "^_")
      set(function "${line}")
    # (not the scalar fallback's run_row, which keeps the general forms by design)
    elseif(function MATCHES "7run_row" AND NOT function MATCHES "11scalar_arch"
           AND line MATCHES "^[ \t]+([a-z0-9]+)")
      set(instruction "${CMAKE_MATCH_1}")
      if(instruction MATCHES "^(${REQUIRED})$")
        list(APPEND holding "${function}")
      endif()
      if(FORBIDDEN AND instruction MATCHES "^(${FORBIDDEN})$")
        message(FATAL_ERROR "at ${level} a run_row holds ${instruction}, which it should not (${assembly})")
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES holding)
  list(LENGTH holding count)
  if(count LESS FUNCTIONS)
    message(FATAL_ERROR "at ${level} ${count} run_row functions hold ${REQUIRED}, not ${FUNCTIONS} (${assembly})")
  endif()
  message(STATUS "${level}: ${count} run_row functions hold ${REQUIRED}")
endforeach()
