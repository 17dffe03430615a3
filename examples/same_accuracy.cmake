# Runs FIRST and SECOND (lists: a command each), which must both succeed and print the same
# "test accuracy X after N steps" line: a run across processes against the same run in one.
#
#   cmake "-DFIRST=train_fashion_mnist;--devices;2" "-DSECOND=mpirun;-np;2;train_fashion_mnist_mpi"
#         -P same_accuracy.cmake
set(lines)
foreach(run IN ITEMS FIRST SECOND)
  execute_process(COMMAND ${${run}} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 600)
  message("${out}${err}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "same_accuracy: '${${run}}' failed (${status})")
  endif()
  if(NOT out MATCHES "test accuracy [0-9.]+ after [0-9]+ steps")
    message(FATAL_ERROR "same_accuracy: '${${run}}' printed no test accuracy")
  endif()
  list(APPEND lines "${CMAKE_MATCH_0}")
endforeach()
list(GET lines 0 first)
list(GET lines 1 second)
if(NOT first STREQUAL second)
  message(FATAL_ERROR "same_accuracy: one process: '${first}'; across processes: '${second}'")
endif()
message("same_accuracy: both runs: ${first}")
