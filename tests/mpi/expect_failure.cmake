# Runs COMMAND (a list; mpirun and a program), which must fail within TIMEOUT seconds and
# print every regular expression of EXPECT (a list). Used by the failure tests across
# processes: every process must end with an error that says what happened, and none hang.
#
#   cmake -DCOMMAND="mpirun;-np;2;failures;throw" -DEXPECT="process 0: .*boom;process 1: .*boom"
#         -DTIMEOUT=120 -P expect_failure.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${TIMEOUT})
set(all "${out}${err}")
message("${all}")
if(status EQUAL 0)
  message(FATAL_ERROR "expect_failure: the command succeeded; it should have failed")
endif()
if(status MATCHES "timeout")
  message(FATAL_ERROR "expect_failure: the command did not end within ${TIMEOUT} s")
endif()
foreach(expected IN LISTS EXPECT)
  if(NOT all MATCHES "${expected}")
    message(FATAL_ERROR "expect_failure: the output lacks '${expected}'")
  endif()
endforeach()
