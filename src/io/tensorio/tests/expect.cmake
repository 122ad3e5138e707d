# Runs CMD (a ;-list) and checks its exit status and output: cmake -DCMD=... -DEXIT=N
# [-DMATCH=regex] [-DNOMATCH=regex] -P expect.cmake. ctest's WILL_FAIL cannot tell exit 1
# (a check failed) from 2 (bad input) or a crash, which is exactly what these tests are about.
string(REPLACE "|" ";" cmd "${CMD}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT "${rc}" STREQUAL "${EXIT}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXIT}")
endif()
if(DEFINED MATCH AND NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "output does not match: ${MATCH}")
endif()
if(DEFINED NOMATCH AND "${out}${err}" MATCHES "${NOMATCH}")
  message(FATAL_ERROR "output matches: ${NOMATCH}")
endif()
