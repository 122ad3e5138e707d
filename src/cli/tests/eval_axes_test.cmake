# `eval --position t:h:w` on the Qwen2-VL M-RoPE config (mrope_section [16, 24, 24] pairs, half
# pairing: pair i = elements (i, i + 64); pairs 16..39 turn with the h position). The input is
# zero except pair 20, an h pair, so:
#   5:3:7 gives the same reference as the 1-D position 3 (t = h = w = 3), and 5:4:7 does not:
#         the h axis, and only it, drives the pair
#   --kernel scalar at 5:3:7 (per-axis positions passed to the kernel) is within 1 u per pair
#   cmake -DROPECHECK=exe -DCONFIG=qwen2_vl.json -P eval_axes_test.cmake
string(REPEAT "0," 20 pre)
string(REPEAT "0," 63 mid)
string(REPEAT ",0" 43 post)
set(input "${pre}1.5,${mid}0.25${post}")

function(eval_json var)
  execute_process(COMMAND ${ROPECHECK} eval --hf-config ${CONFIG} --dtype f64 --input ${input}
                          ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "eval ${ARGN}: exit ${rc}\n${err}")
  endif()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

eval_json(axes --position 5:3:7)
eval_json(one_d --position 3)
eval_json(other --position 5:4:7)
string(JSON ref_axes GET "${axes}" reference)
string(JSON ref_one_d GET "${one_d}" reference)
string(JSON ref_other GET "${other}" reference)
string(JSON pos GET "${axes}" positions 0)
string(JSON pos_h GET "${axes}" positions 0 1)
if(NOT pos_h EQUAL 3)
  message(FATAL_ERROR "positions not echoed per axis: ${pos}")
endif()
if(NOT ref_axes STREQUAL ref_one_d)
  message(FATAL_ERROR "5:3:7 differs from h = 3 on an h pair:\n${ref_axes}\n${ref_one_d}")
endif()
if(ref_axes STREQUAL ref_other)
  message(FATAL_ERROR "5:4:7 gives the reference of 5:3:7: the h axis is ignored")
endif()
string(JSON a20 GET "${axes}" reference 0 20)
string(JSON a0 GET "${axes}" reference 0 0)
if(a20 STREQUAL a0)
  message(FATAL_ERROR "pair 20 did not turn")
endif()

eval_json(kernel --position 5:3:7,2:9:4 --kernel scalar)
string(JSON err GET "${kernel}" kernel max_pair_error_u)
if(NOT err LESS_EQUAL 1)
  message(FATAL_ERROR "scalar at 5:3:7: max pair error ${err} u (expected <= 1)")
endif()
message(STATUS "eval t:h:w: reference follows the h axis; scalar within ${err} u")
