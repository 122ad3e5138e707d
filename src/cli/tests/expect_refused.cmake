# One row of the malformed-input table (docs/hardening.md): runs the real ropecheck binary and
# requires exit status 2, a stderr message matching MATCH, nothing on stdout, and an output directory (--out,
# fresh and empty before the run) that is still empty afterwards — no report, no check.json, no
# temporary file.   cmake "-DCMD=exe|arg|..." "-DMATCH=regex" -DOUT=dir -P expect_refused.cmake
string(REPLACE "|" ";" cmd "${CMD}")
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}\nstdout: ${out}\nstderr: ${err}")
if(NOT "${rc}" STREQUAL "2")
  message(FATAL_ERROR "exit status ${rc}, expected 2")
endif()
if(NOT "${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "stderr does not match: ${MATCH}")
endif()
if(NOT "${out}" STREQUAL "")
  message(FATAL_ERROR "something was written to stdout")
endif()
file(GLOB_RECURSE left LIST_DIRECTORIES true "${OUT}/*" "${OUT}/.*")
if(left)
  message(FATAL_ERROR "files left in the output directory: ${left}")
endif()
