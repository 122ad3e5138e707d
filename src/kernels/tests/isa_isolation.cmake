# The simd bodies' ISA isolation (ctest kernels_isa_isolation): every VEX/EVEX-encoded (AVX, AVX2,
# AVX-512) instruction of the kernels library sits in a function with internal linkage. A function
# the linker may share between objects (external or weak symbol) compiled for an ISA could be the
# copy it keeps for the portable path, which then faults on CPUs without that ISA; the rules that
# prevent it are in simd/isa.hpp. x86 only.
#
#   cmake -DLIB=<libropecheck_kernels.a> -DOBJDUMP=<objdump> -DNM=<nm> -P isa_isolation.cmake
cmake_minimum_required(VERSION 3.25)

foreach(v LIB OBJDUMP NM)
  if(NOT ${v})
    message(FATAL_ERROR "isa_isolation.cmake: give -D${v}=...")
  endif()
endforeach()

set(_dis "${CMAKE_CURRENT_BINARY_DIR}/isa_isolation_disassembly.txt")  # the working directory
execute_process(COMMAND "${OBJDUMP}" -d --no-show-raw-insn "${LIB}" OUTPUT_FILE "${_dis}"
                RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${OBJDUMP} failed on ${LIB}")
endif()
# Function headers and VEX/EVEX instructions (their mnemonics start with v) only; GNU objdump puts
# a tab right after the address, llvm-objdump (clang builds) spaces and then a tab.
file(STRINGS "${_dis}" _lines REGEX "^([0-9a-f]+ <[^>]+>:|[ ]+[0-9a-f]+:[ ]*\tv[a-z])")
set(_vex "")
set(_fn "")
set(_instructions 0)
foreach(line IN LISTS _lines)
  if(line MATCHES "^[0-9a-f]+ <([^>]+)>:$")
    set(_fn "${CMAKE_MATCH_1}")
  else()
    math(EXPR _instructions "${_instructions} + 1")
    list(APPEND _vex "${_fn}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _vex)
list(LENGTH _vex _n_vex)

execute_process(COMMAND "${NM}" -g --defined-only "${LIB}" OUTPUT_VARIABLE _nm RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIB}")
endif()
string(REGEX MATCHALL "[0-9a-f]+ [TWVu] [^\n]+" _syms "${_nm}")
set(_shared "")
foreach(s IN LISTS _syms)
  string(REGEX REPLACE "^[0-9a-f]+ [TWVu] " "" name "${s}")
  list(FIND _vex "${name}" _at)
  if(_at GREATER -1)
    list(APPEND _shared "${name}")
  endif()
endforeach()

if(_shared)
  list(REMOVE_DUPLICATES _shared)
  list(JOIN _shared "\n  " _list)
  message(FATAL_ERROR "ISA code in functions the linker may share between objects (c++filt the "
                      "names; see src/kernels/simd/isa.hpp):\n  ${_list}")
endif()
if(_n_vex EQUAL 0)
  message(FATAL_ERROR "no VEX/EVEX instruction found in ${LIB}: the check would see nothing")
endif()
message(STATUS "ISA isolation: ${_instructions} VEX/EVEX instructions in ${_n_vex} functions, all "
               "with internal linkage")
