# Compiles SOURCE to assembly at -O1, -O2 and -O3 (with FLAGS, against INCLUDES, directories
# joined with |) and fails unless the streaming loop, run_row, holds prefetch instructions at
# each level. g++ 12 once deleted them at -O1 and -O2 (kernels::prefetch_ahead says why),
# which changes no result, so no other test can see it. The thread pool prefetches too, so
# the count is of run_row's own: a compiler that inlined run_row would fail this test, and
# it would have to look for the loop under its caller's name.
#   cmake -D COMPILER=... -D INCLUDES=... -D SOURCE=... -D OUTPUT_DIR=... -D FLAGS=... -P this
string(REPLACE "|" ";" directories "${INCLUDES}")
set(include_flags "")
foreach(directory IN LISTS directories)
  if(directory)
    list(APPEND include_flags "-I${directory}")
  endif()
endforeach()
foreach(level -O1 -O2 -O3)
  set(assembly "${OUTPUT_DIR}/codegen_prefetch${level}.s")
  execute_process(COMMAND "${COMPILER}" -std=c++20 ${level} ${FLAGS} ${include_flags} -S "${SOURCE}" -o "${assembly}"
                  RESULT_VARIABLE result ERROR_VARIABLE errors)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "compiling ${SOURCE} at ${level} failed:\n${errors}")
  endif()
  # Functions' labels (mangled names start with _, and with __ on Mach-O; clang follows a
  # label with a comment) and prefetch instructions, in order: count the prefetches under
  # run_row's labels. Local labels (.L on ELF, L on Mach-O) stay inside their function.
  file(STRINGS "${assembly}" lines REGEX "^_[^ \t]*:([ \t].*)?$|^[ \t]+prefetcht0")
  set(function "")
  set(count 0)
  foreach(line IN LISTS lines)
    if(line MATCHES "^_")
      set(function "${line}")
    elseif(function MATCHES "7run_row")
      math(EXPR count "${count} + 1")
    endif()
  endforeach()
  if(count EQUAL 0)
    message(FATAL_ERROR "at ${level} no run_row asks for lines ahead: no prefetcht0 in it (${assembly})")
  endif()
  message(STATUS "${level}: ${count} prefetcht0 in run_row")
endforeach()
