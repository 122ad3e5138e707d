# Included from CMakeLists.txt: `eval --position t:h:w` (per-axis positions of a multi-axis spec).
add_test(NAME EvalAxes/mrope_per_axis
         COMMAND ${CMAKE_COMMAND} -DROPECHECK=$<TARGET_FILE:ropecheck>
                 -DCONFIG=${CMAKE_CURRENT_SOURCE_DIR}/hf/qwen2_vl.json
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/eval_axes_test.cmake)
set_tests_properties(EvalAxes/mrope_per_axis PROPERTIES LABELS "cli;scaling" TIMEOUT 120)
# Bad per-axis positions: exit 2, a message naming the problem, nothing on stdout.
set(_q eval --dtype f32 --input 1 --hf-config ${CMAKE_CURRENT_SOURCE_DIR}/hf/qwen2_vl.json)
ropecheck_refused(eval_axes_count
  "--position: '5:3' gives 2 axis positions, the spec has 3 position axes" ${_q} --position 5:3)
ropecheck_refused(eval_axes_non_integer
  "--position: '3.5' in '5:3.5:7' is not an integer .per-axis positions are int64." ${_q}
  --position 5:3.5:7)
ropecheck_refused(eval_axes_empty "--position '5::7'" ${_q} --position 5::7)
ropecheck_refused(eval_axes_on_1d
  "--position: '5:3:7' gives 3 axis positions, the spec has 1 position axis" eval --dtype f32
  --layout half --head-dim 4 --input 1,2,3,4 --position 5:3:7)
