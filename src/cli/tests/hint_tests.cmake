# Hints that hold (verify::advise): `check` on wrong-declaration dumps made by kernels emulated as
# engines compute them (hint_dumpgen.cpp). Each hint is asserted and, when it states spec keys,
# followed end to end: --spec with those keys makes the same dump pass. A dump no declaration
# explains (a cache computed wholly in bf16; a cause on all but one vector) must end without one.
add_executable(ropecheck_hint_dumpgen hint_dumpgen.cpp)
target_link_libraries(ropecheck_hint_dumpgen PRIVATE ropecheck::tensorio)
set(_hd ${CMAKE_CURRENT_BINARY_DIR}/hint_dumps)
add_test(NAME HintCli/generate_dumps COMMAND ropecheck_hint_dumpgen ${_hd})
set_tests_properties(HintCli/generate_dumps PROPERTIES FIXTURES_SETUP hint_dumps LABELS "cli")
function(ropecheck_hint_test name expect)
  add_test(NAME HintCli/${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hint_followed_test.sh $<TARGET_FILE:ropecheck>
                   ${_hd}/${name}.safetensors ${_hd}/${name}_followed "${expect}")
  set_tests_properties(HintCli/${name} PROPERTIES FIXTURES_REQUIRED hint_dumps LABELS "cli"
                                                  TIMEOUT 120)
endfunction()
ropecheck_hint_test(bf16_table "cos/sin held in bf16.*\"table_precision\": \"bf16\"}")
ropecheck_hint_test(f16_table "cos/sin held in f16.*\"table_precision\": \"f16\"}")
ropecheck_hint_test(f32_angle_as_f64 "the angle computed as")
ropecheck_hint_test(toward_zero "outputs lie below the exact magnitude.*\"output_rounding\": \"toward_zero\"")
ropecheck_hint_test(base_off_by_one "the output matches base 10001 \\(the spec says 10000\\)")
ropecheck_hint_test(base_500000 "the output matches base 500000")
ropecheck_hint_test(position_plus_one "the output matches position m\\+1")
ropecheck_hint_test(interleaved "the output matches the interleaved layout")
ropecheck_hint_test(sin_negated "the output matches the rotation by -m")
ropecheck_hint_test(rotary_dim_64 "the output matches rotary_dim 64 \\(the spec says 128\\)")
ropecheck_hint_test(passthrough_zeroed "only pass-through dims changed")
ropecheck_hint_test(bf16_cache none)
ropecheck_hint_test(bf16_table_one_bad none)
ropecheck_hint_test(qk_bf16_f16_tables "\"table_precision\": \"bf16\"}")
ropecheck_hint_test(qk_bf16_table_k_sin_negated none)
