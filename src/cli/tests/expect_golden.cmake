# A command's printed plan against a pinned copy: cmake -DCMD=a|b|c -DGOLDEN=file -DACTUAL=file
# -P expect_golden.cmake. The output from its first line starting "plan " on (the header above it
# names the build's plugin path) must equal GOLDEN byte for byte; ACTUAL receives it, so a change
# shows as `diff GOLDEN ACTUAL` and is accepted by copying ACTUAL over GOLDEN. Exit status 0.
string(REPLACE "|" ";" cmd "${CMD}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit status ${rc}, expected 0\n${out}\n${err}")
endif()
string(FIND "${out}" "\nplan " at)
if(at LESS 0)
  message(FATAL_ERROR "no 'plan ' line in the output:\n${out}")
endif()
math(EXPR at "${at} + 1")
string(SUBSTRING "${out}" ${at} -1 plan)
file(WRITE "${ACTUAL}" "${plan}")
file(READ "${GOLDEN}" golden)
if(NOT plan STREQUAL golden)
  execute_process(COMMAND diff -u "${GOLDEN}" "${ACTUAL}" OUTPUT_VARIABLE d)
  message(FATAL_ERROR "the plan differs from ${GOLDEN} (accept a deliberate change with "
                      "cp ${ACTUAL} ${GOLDEN}):\n${d}")
endif()
message("the plan equals ${GOLDEN}")
