# One plugin hostile to the worker's channel, end to end (table: ROPECHECK_CHANNEL_CASES in this
# folder's CMakeLists.txt): `validate --dtypes f64,f32 --threads 1` runs the hostile configuration
# (the plugin misbehaves on f64 only) and then a healthy one on a fresh worker in the same process.
# The run must exit EXIT, classify f64 as CLASS and f32 as pass, write validation.json with that
# classification, and end within SECONDS of wall time; it prints the classification and the time.
#   cmake -DRC=ropecheck -DPLUGIN=x.so -DCLASS=c -DEXIT=n -DSECONDS=s -DJSON=path
#         [-DEXTRA=a|b] [-DCALL_TIMEOUT=s] -P channel_test.cmake
# CALL_TIMEOUT (default 2) is validate's per-call --timeout: short, so the hang cases end quickly.
# A case whose classification is not `timeout` takes a longer one, so that a loaded machine (the
# allocation to the worker's 256 MiB limit took > 2 s under a load of 18 on 2 cores) cannot turn
# its out_of_memory into a timeout.
string(REPLACE "|" ";" extra "${EXTRA}")
if(NOT DEFINED CALL_TIMEOUT)
  set(CALL_TIMEOUT 2)
endif()
file(REMOVE "${JSON}")
string(TIMESTAMP t0 "%s%f" UTC)
execute_process(COMMAND ${RC} validate --plugin ${PLUGIN} --dtypes f64,f32 --layouts half
                        --budget quick --timeout ${CALL_TIMEOUT} --threads 1 --json ${JSON} ${extra}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s%f" UTC)
math(EXPR ms "(${t1} - ${t0}) / 1000")
string(LENGTH "${err}" err_len)
message("${out}")
message("stderr: ${err_len} bytes")
if(err_len LESS 70000)
  message("${err}")
endif()
message("channel ${PLUGIN}: f64 = ${CLASS}, exit ${rc}, ${ms} ms wall")
if(NOT "${rc}" STREQUAL "${EXIT}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXIT}")
endif()
set(line "classification: f64 half = ${CLASS}; f32 half = pass;")
string(FIND "${out}" "${line}" at)
if(at LESS 0)
  message(FATAL_ERROR "output lacks '${line}'")
endif()
if(NOT EXISTS "${JSON}")
  message(FATAL_ERROR "${JSON} was not written")
endif()
file(READ "${JSON}" doc)
string(JSON first GET "${doc}" configurations 0 classification)
string(JSON second GET "${doc}" configurations 1 classification)
if(NOT first STREQUAL CLASS OR NOT second STREQUAL "pass")
  message(FATAL_ERROR "validation.json classifies ${first}, ${second}")
endif()
# The host forwards the first 64 KiB of what a plugin prints, never all of it.
if(err_len GREATER 200000)
  message(FATAL_ERROR "${err_len} bytes on stderr: the plugin's output was not bounded")
endif()
if(ms GREATER "${SECONDS}000")
  message(FATAL_ERROR "took ${ms} ms, more than ${SECONDS} s")
endif()
