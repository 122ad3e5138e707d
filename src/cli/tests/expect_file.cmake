# expect.cmake plus a look into a file the command wrote: cmake -DCMD=a|b|c -DEXIT=N
# [-DMATCH=regex] -DFILE=path -DFILE_MATCH=regex -P expect_file.cmake. The file is removed first so
# a stale one from an earlier run cannot satisfy the test.
file(REMOVE "${FILE}")
include(${CMAKE_CURRENT_LIST_DIR}/../../io/tensorio/tests/expect.cmake)
if(NOT EXISTS "${FILE}")
  message(FATAL_ERROR "${FILE} was not written")
endif()
file(READ "${FILE}" content)
if(NOT "${content}" MATCHES "${FILE_MATCH}")
  message(FATAL_ERROR "${FILE} does not match: ${FILE_MATCH}")
endif()
message("${FILE} matches: ${FILE_MATCH}")
