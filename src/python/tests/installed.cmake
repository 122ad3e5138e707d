# python_installed: `cmake --install` of this build into a fresh prefix, then the installed package
# imported by the module's interpreter with nothing of the build tree on its path (ROPECHECK_EXE
# unset): it must name the installed executable and validate a PyTorch kernel with it.
# -DBUILD=<build dir> -DPY=<python3> -DSRC=<this folder>
set(prefix ${BUILD}/python-install-test)
file(REMOVE_RECURSE ${prefix})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix}
                RESULT_VARIABLE r OUTPUT_QUIET)
if(r)
  message(FATAL_ERROR "cmake --install into ${prefix} failed (${r})")
endif()
file(GLOB_RECURSE init ${prefix}/__init__.py)
list(FILTER init INCLUDE REGEX "/ropecheck/__init__\\.py$")
list(LENGTH init n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one installed ropecheck/__init__.py under ${prefix}, found: ${init}")
endif()
get_filename_component(pkg ${init} DIRECTORY)
get_filename_component(site ${pkg} DIRECTORY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=ROPECHECK_EXE PYTHONPATH=${site}
                        ${PY} ${SRC}/installed_check.py ${prefix} ${SRC}
                WORKING_DIRECTORY ${prefix} RESULT_VARIABLE r)
file(REMOVE_RECURSE ${prefix})
if(r)
  message(FATAL_ERROR "the installed package failed (${r})")
endif()
