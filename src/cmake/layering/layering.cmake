# The layering check (ctest -L layering): a lower layer never includes or links an upper one.
#
#   cmake -DSOURCE_DIR=<repo> -DLINKS=<build>/layering_links.txt [-DINJECT=file:header]
#         [-DINJECT_LINK="target: lib"] -P layering.cmake
#
# The layers and what each may use (everything not listed is forbidden, ropecheck modules only):
#   core                                   nothing of ropecheck
#   reference, bounds, kernels, io, plugin core
#   verify                                 core, reference, bounds
#   scan                                   core, reference, bounds, verify, io
#   properties, reports                    core, reference, bounds, verify
#   validate                               core, reference, bounds, plugin, verify, properties,
#                                          reports (a plugin's validation, below the CLI)
#   cli                                    everything
#   python                                 everything but properties, reports, validate and cli
#                                          (the extension is a shared object: RapidCheck, which
#                                          properties and so validate link, is not PIC;
#                                          rc.validate runs the `ropecheck validate` executable)
# A module's files are its library sources and headers; tests/, bench/, examples/ and fuzz/ sit on
# top (they may use anything) and are not checked. Includes are resolved to the module whose
# include directory holds the header (or to the including file's own module for local headers).
# Links come from the build's generated LINKS file (one "target: libs" line per module target).
# INJECT adds one fake include line to a file, INJECT_LINK one fake "target: libs" line, so the
# tests can show that the check fails on them.
cmake_minimum_required(VERSION 3.25)

set(_modules core reference bounds kernels io plugin verify scan properties reports validate cli
    python)
set(_dirs_core src/core)
set(_dirs_reference reference)
set(_dirs_bounds src/bounds)
set(_dirs_kernels src/kernels)
set(_dirs_io src/io)
set(_dirs_plugin src/plugin)
set(_dirs_verify src/verify)
set(_dirs_scan src/scan)
set(_dirs_properties properties)
set(_dirs_reports reports)
set(_dirs_validate src/validate)
set(_dirs_cli src/cli)
set(_dirs_python src/python)
set(_allow_core "")
set(_allow_reference core)
set(_allow_bounds core)
set(_allow_kernels core)
set(_allow_io core)
set(_allow_plugin core)
set(_allow_verify core reference bounds)
set(_allow_scan core reference bounds verify io)
set(_allow_properties core reference bounds verify)
set(_allow_reports core reference bounds verify)
set(_allow_validate core reference bounds plugin verify properties reports)
set(_allow_cli ${_modules})
set(_allow_python core reference bounds kernels io plugin verify scan)
# CMake targets of each module (aliases as written in target_link_libraries).
set(_targets_core ropecheck::core ropecheck_core)
set(_targets_reference ropecheck::reference ropecheck_reference)
set(_targets_bounds ropecheck::bounds ropecheck_bounds)
set(_targets_kernels ropecheck::kernels ropecheck_kernels)
set(_targets_io ropecheck::tensorio ropecheck_tensorio ropecheck::hfconfig ropecheck_hfconfig)
set(_targets_plugin ropecheck::plugin ropecheck_plugin ropecheck::plugin_api ropecheck_plugin_api)
set(_targets_verify ropecheck::verify ropecheck_verify)
set(_targets_scan ropecheck::scan ropecheck_scan)
set(_targets_properties ropecheck::properties ropecheck_properties)
set(_targets_reports ropecheck::reports ropecheck_reports)
set(_targets_validate ropecheck::validate ropecheck_validate)
set(_targets_cli ropecheck_cli ropecheck)
set(_targets_python ropecheck_python _ropecheck)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "layering.cmake: give -DSOURCE_DIR=<repository root>")
endif()

# header (as included) -> module, from every module's include directories.
foreach(m ${_modules})
  foreach(d ${_dirs_${m}})
    file(GLOB_RECURSE _incdirs LIST_DIRECTORIES true "${SOURCE_DIR}/${d}/*")
    foreach(id ${_incdirs})
      if(IS_DIRECTORY "${id}" AND id MATCHES "/(include|abi)$")
        file(GLOB_RECURSE _hdrs RELATIVE "${id}" "${id}/*.h" "${id}/*.hpp")
        foreach(h ${_hdrs})
          set(_owner_${h} ${m})
        endforeach()
      endif()
    endforeach()
  endforeach()
endforeach()

set(_violations 0)
set(_checked 0)
foreach(m ${_modules})
  foreach(d ${_dirs_${m}})
    file(GLOB_RECURSE _files "${SOURCE_DIR}/${d}/*.cpp" "${SOURCE_DIR}/${d}/*.hpp"
         "${SOURCE_DIR}/${d}/*.h" "${SOURCE_DIR}/${d}/*.c")
    foreach(f ${_files})
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
      if(rel MATCHES "/(tests|bench|examples|fuzz)/")
        continue()
      endif()
      # Nested module directories (src/io inside nothing else; reports/src of reports) are fine;
      # only a file of another module's directory is skipped.
      math(EXPR _checked "${_checked} + 1")
      file(STRINGS "${f}" _incs REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]ropecheck/")
      if(INJECT MATCHES "^${rel}:(.*)$")
        list(APPEND _incs "#include \"${CMAKE_MATCH_1}\"")
      endif()
      foreach(line ${_incs})
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">].*$" "\\1" h "${line}")
        if(NOT DEFINED _owner_${h})
          message("layering: ${rel} includes unknown ropecheck header <${h}>")
          math(EXPR _violations "${_violations} + 1")
          continue()
        endif()
        set(o ${_owner_${h}})
        if(NOT o STREQUAL m AND NOT o IN_LIST _allow_${m})
          message("layering: ${rel} (${m}) includes <${h}> of ${o}; ${m} may use: "
                  "${_allow_${m}}")
          math(EXPR _violations "${_violations} + 1")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()

# Links: "target: lib;lib;..." lines written at generate time (src/cmake/layering/CMakeLists.txt).
if(LINKS OR INJECT_LINK)
  set(_link_lines "")
  if(LINKS)
    file(STRINGS "${LINKS}" _link_lines)
  endif()
  if(INJECT_LINK)
    list(APPEND _link_lines "${INJECT_LINK}")
  endif()
  foreach(line ${_link_lines})
    if(NOT line MATCHES "^([^:]+): (.*)$")
      continue()
    endif()
    set(tgt ${CMAKE_MATCH_1})
    string(REPLACE "," ";" libs "${CMAKE_MATCH_2}")
    set(m "")
    foreach(mm ${_modules})
      if(tgt IN_LIST _targets_${mm})
        set(m ${mm})
      endif()
    endforeach()
    if(NOT m)
      continue()
    endif()
    foreach(l ${libs})
      foreach(o ${_modules})
        if(l IN_LIST _targets_${o} AND NOT o STREQUAL m AND NOT o IN_LIST _allow_${m})
          message("layering: target ${tgt} (${m}) links ${l} of ${o}; ${m} may use: ${_allow_${m}}")
          math(EXPR _violations "${_violations} + 1")
        endif()
      endforeach()
    endforeach()
  endforeach()
endif()

if(_violations GREATER 0)
  message(FATAL_ERROR "layering: ${_violations} violation(s) in ${_checked} files")
endif()
message("layering: ${_checked} files and the module targets' links respect the layers")
