# ropecheck_add_kernel_test's PLUGIN resolution, on tiny projects that include
# RopecheckFunctions.cmake directly (no install, no compiler: LANGUAGES NONE, imported targets):
#   late   a target defined after the call, a path that exists, a custom command's OUTPUT:
#          configure succeeds and each test runs the right file
#   typo   a name that is neither a target nor a file: configure fails, naming the test, the
#          plugin and where it looked
#   cmake -DFUNCTIONS=.../RopecheckFunctions.cmake -DWORK=dir -P plugin_resolution_test.cmake
cmake_minimum_required(VERSION 3.20)

set(head [=[
cmake_minimum_required(VERSION 3.20)
project(p NONE)
add_executable(ropecheck::ropecheck IMPORTED)
set_target_properties(ropecheck::ropecheck PROPERTIES IMPORTED_LOCATION /bin/true)
include(@FUNCTIONS@)
enable_testing()
]=])
string(REPLACE "@FUNCTIONS@" "${FUNCTIONS}" head "${head}")

function(configure name body expect_rc)
  file(REMOVE_RECURSE ${WORK}/${name})
  file(WRITE ${WORK}/${name}/CMakeLists.txt "${head}${body}")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK}/${name} -B ${WORK}/${name}/build
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if((expect_rc EQUAL 0 AND NOT rc EQUAL 0) OR (NOT expect_rc EQUAL 0 AND rc EQUAL 0))
    message(FATAL_ERROR "${name}: configure exit ${rc}, expected ${expect_rc}\n${out}\n${err}")
  endif()
  string(REGEX REPLACE "[ \n]+" " " err "${err}")  # CMake wraps long messages
  set(err "${err}" PARENT_SCOPE)
endfunction()

configure(late [=[
ropecheck_add_kernel_test(NAME late.validate PLUGIN late_plugin DTYPES f32 bf16)
ropecheck_add_kernel_test(NAME file.validate PLUGIN ${CMAKE_CURRENT_LIST_FILE} NO_REPORT)
add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/gen.so COMMAND true)
ropecheck_add_kernel_test(NAME gen.validate PLUGIN gen.so)
add_library(late_plugin MODULE IMPORTED)
set_target_properties(late_plugin PROPERTIES IMPORTED_LOCATION /opt/late/late_plugin.so)
]=] 0)
file(READ ${WORK}/late/build/CTestTestfile.cmake tests)
foreach(want "late.validate[^\n]*--plugin\" \"/opt/late/late_plugin.so\"[^\n]*--dtypes\" \"f32,bf16\""
             "file.validate[^\n]*--plugin\" \"${WORK}/late/CMakeLists.txt\""
             "gen.validate[^\n]*--plugin\" \"${WORK}/late/build/gen.so\"")
  if(NOT tests MATCHES "add_test\\(\\[=\\[${want}")
    message(FATAL_ERROR "late: no test matching ${want} in\n${tests}")
  endif()
endforeach()

configure(typo [=[
ropecheck_add_kernel_test(NAME typo.validate PLUGIN my_rope_ropecheckk)
add_library(my_rope_ropecheck MODULE IMPORTED)
]=] 1)
set(want "ropecheck_add_kernel_test\\(typo.validate\\): PLUGIN 'my_rope_ropecheckk' is neither a target")
if(NOT err MATCHES "${want}" OR NOT err MATCHES "nor an existing file")
  message(FATAL_ERROR "typo: message does not say what is wrong:\n${err}")
endif()
if(EXISTS ${WORK}/typo/build/CTestTestfile.cmake)
  message(FATAL_ERROR "typo: a test file was generated anyway")
endif()
message(STATUS "plugin resolution: late target, path and custom-command output resolved; typo refused")
