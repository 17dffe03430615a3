# Compiles SOURCE to assembly at -O1, -O2 and -O3 (with FLAGS, against INCLUDE_DIR) and fails
# unless the streaming loop, run_row, holds prefetch instructions at each level. g++ 12 once
# deleted them at -O1 and -O2 (kernels::prefetch_ahead says why), which changes no result,
# so no other test can see it.
#   cmake -D COMPILER=... -D INCLUDE_DIR=... -D SOURCE=... -D OUTPUT_DIR=... -D FLAGS=... -P this
foreach(level -O1 -O2 -O3)
  set(assembly "${OUTPUT_DIR}/codegen_prefetch${level}.s")
  execute_process(COMMAND "${COMPILER}" -std=c++20 ${level} ${FLAGS} "-I${INCLUDE_DIR}" -S "${SOURCE}" -o "${assembly}"
                  RESULT_VARIABLE result ERROR_VARIABLE errors)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "compiling ${SOURCE} at ${level} failed:\n${errors}")
  endif()
  # Labels (clang's followed by a comment) and prefetch instructions, in order: count the
  # prefetches under run_row's labels.
  file(STRINGS "${assembly}" lines REGEX "^[_a-zA-Z][^ \t]*:([ \t].*)?$|^[ \t]+prefetcht0")
  set(function "")
  set(count 0)
  foreach(line IN LISTS lines)
    if(line MATCHES "^[_a-zA-Z]")
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
