# Included from CMakeLists.txt (the --hf-config and scaling-variant end-to-end tests). Labels "cli;scaling".
set(_hf ${CMAKE_CURRENT_SOURCE_DIR}/hf)
set(_vd ${CMAKE_CURRENT_BINARY_DIR}/variant_dumps)
set(_hfout ${CMAKE_CURRENT_BINARY_DIR}/hf_cli)
set(_expect ${PROJECT_SOURCE_DIR}/src/io/tensorio/tests/expect.cmake)
set(_plugdir ${CMAKE_BINARY_DIR}/plugins/libropecheck_plugin_)

add_executable(ropecheck_variant_dumpgen variant_dumpgen.cpp)
target_link_libraries(ropecheck_variant_dumpgen PRIVATE ropecheck::tensorio)
add_test(NAME HfCli/generate_dumps COMMAND ropecheck_variant_dumpgen ${_vd})
add_test(NAME HfCli/mkdir COMMAND ${CMAKE_COMMAND} -E make_directory ${_vd} ${_hfout})
set_tests_properties(HfCli/mkdir PROPERTIES FIXTURES_SETUP hf_mkdir LABELS "cli;scaling")
set_tests_properties(HfCli/generate_dumps PROPERTIES FIXTURES_SETUP variant_dumps
                     FIXTURES_REQUIRED hf_mkdir LABELS "cli;scaling")

# ropecheck_hf_test(name exit regex args...): the ropecheck binary with args, exit status and a
# line of its output (expect.cmake, as the Check/ and Validate/ tests).
function(ropecheck_hf_test name exit regex)
  string(REPLACE ";" "|" args "${ARGN}")
  add_test(NAME HfCli/${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:ropecheck>|${args}" -DEXIT=${exit}
                   "-DMATCH=${regex}" -P ${_expect})
  set_tests_properties(HfCli/${name} PROPERTIES FIXTURES_REQUIRED "variant_dumps;hf_mkdir"
                       LABELS "cli;scaling" TIMEOUT 120)
endfunction()

# ---- report: the sweep restricted to the model's spec; report.json names it -------------------
# ropecheck_hf_report(name config json_regex [extra args...])
function(ropecheck_hf_report name config regex)
  set(out ${_hfout}/report_${name})
  string(REPLACE ";" "|" extra "${ARGN}")
  set(args "report|--kernels|scalar|--dtypes|f32|--samples|4|--max-position|4096|--quiet|--out|${out}|--hf-config|${_hf}/${config}")
  if(extra)
    set(args "${args}|${extra}")
  endif()
  add_test(NAME HfCli/report_${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:ropecheck>|${args}" -DEXIT=0
                   "-DMATCH=all checks hold" -DFILE=${out}/report.json "-DFILE_MATCH=${regex}"
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_file.cmake)
  set_tests_properties(HfCli/report_${name} PROPERTIES FIXTURES_REQUIRED hf_mkdir
                       LABELS "cli;scaling;report" TIMEOUT 120)
endfunction()
ropecheck_hf_report(llama31_8b llama31_8b.json
  "\"spec\": \"head_dim=128 rotary_dim=128 base=500000 layout=half scaling=llama3\\(factor=8 low=1 high=4 orig=8192\\)\"")
ropecheck_hf_report(qwen2_vl qwen2_vl.json
  "\"spec\": \"head_dim=128 rotary_dim=128 base=1e\\+06 layout=mrope sections=\\[16,24,24\\]\"")
# --seq-len beyond original_max_position_embeddings: the long factors (strictly greater).
ropecheck_hf_report(phi35_longrope phi35_longrope.json
  "\"spec\": \"head_dim=96 rotary_dim=96 base=10000 layout=half scaling=longrope\\(orig=4096 max_pos=131072 seq_len=8192\\)\""
  --seq-len 8192)
ropecheck_hf_report(deepseek_yarn deepseek_yarn.json
  "\"spec\": \"head_dim=64 rotary_dim=64 base=10000 layout=half scaling=yarn\\(factor=40 orig=4096 beta_fast=32 beta_slow=1 truncate=true mscale=1 mscale_all_dim=0.707\\)\"")
# GPT-NeoX / Pythia's own keys (rotary_pct, rotary_emb_base): a quarter of each head.
ropecheck_hf_report(pythia_1_4b pythia_1_4b.json
  "\"spec\": \"head_dim=128 rotary_dim=32 base=10000 layout=half\"")
ropecheck_hf_report(gpt_oss_yarn gpt_oss_yarn.json
  "\"spec\": \"head_dim=64 rotary_dim=64 base=150000 layout=half scaling=yarn\\(factor=32 orig=4096 beta_fast=32 beta_slow=1 truncate=false mscale=0 mscale_all_dim=0\\)\"")

# ---- validate: the builtin_scalar plugin (every scaling kind and layout) on each model's spec --
function(ropecheck_hf_validate name exit regex)
  ropecheck_hf_test(validate_${name} ${exit} "${regex}" validate --dtypes f32 --budget quick
                    --seed 1 ${ARGN})
endfunction()
set(_bs ${_plugdir}builtin_scalar.so)
ropecheck_hf_validate(llama31_8b 0
  "layout=half scaling=llama3\\(factor=8 low=1 high=4 orig=8192\\).*PASS: 1 configuration"
  --plugin ${_bs} --hf-config ${_hf}/llama31_8b.json)
ropecheck_hf_validate(qwen2_vl 0
  "layout=mrope sections=\\[16,24,24\\].*classification: f32 mrope = pass;.*PASS: 1 configuration"
  --plugin ${_bs} --hf-config ${_hf}/qwen2_vl.json)
ropecheck_hf_validate(phi35_longrope 0
  "scaling=longrope\\(orig=4096 max_pos=131072 seq_len=8192\\).*PASS: 1 configuration"
  --plugin ${_bs} --hf-config ${_hf}/phi35_longrope.json --seq-len 8192)
ropecheck_hf_validate(deepseek_yarn 0
  "mscale=1 mscale_all_dim=0.707\\).*PASS: 1 configuration"
  --plugin ${_bs} --hf-config ${_hf}/deepseek_yarn.json)
ropecheck_hf_validate(gpt_oss_yarn 0 "truncate=false.*PASS: 1 configuration"
  --plugin ${_bs} --hf-config ${_hf}/gpt_oss_yarn.json)
# GPT-J-6B: rotary_dim 64 of a 256-wide head, pairs (2i, 2i+1).
ropecheck_hf_validate(gptj_6b 0
  "head_dim=256 rotary_dim=64 base=10000 layout=interleaved.*PASS: 1 configuration"
  --plugin ${_bs} --hf-config ${_hf}/gptj_6b.json)
# The wrapper with YaRN's attention factor 0.07 ln f + 1, on the DeepSeek config: caught.
ropecheck_hf_validate(deepseek_yarn_broken_mscale 1
  "classification: f32 half = wrong_results;.*FAIL: 1 configuration"
  --plugin ${_plugdir}broken_yarn_mscale.so --hf-config ${_hf}/deepseek_yarn.json)
# --layouts that contradict the config's layout.
ropecheck_hf_validate(layout_contradicts_config 2 "--layouts contradicts --hf-config"
  --plugin ${_bs} --hf-config ${_hf}/qwen2_vl.json --layouts half)

# ---- eval: one vector through the config's spec ---------------------------------------------
# (a comma-separated row of head_dim = 128 values; ';' would split the cmake list)
string(REPEAT "0.5," 127 _in128)
set(_in128 "${_in128}0.5")
ropecheck_hf_test(eval_qwen2_vl 0 "\"description\": \"head_dim=128 rotary_dim=128 base=1e\\+06 layout=mrope sections=\\[16,24,24\\]\""
  eval --dtype f32 --position 7 --input ${_in128} --hf-config ${_hf}/qwen2_vl.json)
ropecheck_hf_test(eval_llama31_8b 0 "scaling=llama3\\(factor=8 low=1 high=4 orig=8192\\)"
  eval --dtype f32 --position 70000 --input ${_in128} --hf-config ${_hf}/llama31_8b.json)

# Gemma 3: one RoPE per layer type, chosen with --hf-layer-type, refused without it.
string(REPEAT "0.5," 255 _in256)
set(_in256 "${_in256}0.5")
ropecheck_hf_test(eval_gemma3_sliding 0 "\"head_dim\": 256,\n    \"rotary_dim\": 256,\n    \"base\": 10000.0,\n    \"layout\": \"half\",\n    \"scale\": 1.0,\n    \"scaling\": \"none\""
  eval --dtype f32 --position 7 --input ${_in256} --hf-config ${_hf}/gemma3_1b.json
  --hf-layer-type sliding_attention)
ropecheck_hf_test(eval_gemma3_full 0 "\"head_dim\": 256,\n    \"rotary_dim\": 256,\n    \"base\": 1000000.0,"
  eval --dtype f32 --position 7 --input ${_in256} --hf-config ${_hf}/gemma3_1b.json
  --hf-layer-type full_attention)
ropecheck_hf_test(eval_gemma3_no_layer_type 2
  "hf-config: 'rope_local_base_freq': Gemma 3 has two RoPE configurations.*--hf-layer-type"
  eval --dtype f32 --position 7 --input 1 --hf-config ${_hf}/gemma3_1b.json)

# ---- check: dumps from the independent generator --------------------------------------------
function(ropecheck_hf_check name exit regex)
  ropecheck_hf_test(check_${name} ${exit} "${regex}" check ${ARGN})
endfunction()
# DeepSeek-style YaRN, spec in the metadata; and the same tensors with the spec from the config.
ropecheck_hf_check(yarn_meta_good 0 "scaling=yarn\\(factor=40 .*mscale=1 mscale_all_dim=0.707\\).*PASS"
  --tensors ${_vd}/yarn_good_meta.safetensors)
ropecheck_hf_check(yarn_meta_wrong_mscale 1
  "FAIL x -> y token 0 \\(position 0\\), head 0, pair 0"
  --tensors ${_vd}/yarn_wrong_mscale_meta.safetensors)
ropecheck_hf_check(yarn_hf_config_good 0 "mscale_all_dim=0.707\\).*PASS"
  --tensors ${_vd}/yarn_good.safetensors --hf-config ${_hf}/deepseek_yarn.json)
ropecheck_hf_check(yarn_hf_config_wrong_mscale 1 "FAIL x -> y token 0 \\(position 0\\)"
  --tensors ${_vd}/yarn_wrong_mscale.safetensors --hf-config ${_hf}/deepseek_yarn.json)
# Metadata and config agree: accepted; disagree (gpt-oss config on the DeepSeek dump): exit 2.
ropecheck_hf_check(yarn_meta_and_hf_config_agree 0 "PASS"
  --tensors ${_vd}/yarn_good_meta.safetensors --hf-config ${_hf}/deepseek_yarn.json)
ropecheck_hf_check(yarn_meta_contradicts_hf_config 2 "the spec keys describe .* but --hf-config gives"
  --tensors ${_vd}/yarn_good_meta.safetensors --hf-config ${_hf}/gpt_oss_yarn.json)
# M-RoPE with per-axis positions [3, tokens], t != h != w.
ropecheck_hf_check(mrope_meta_good 0 "layout=mrope sections=\\[16,24,24\\].*PASS"
  --tensors ${_vd}/mrope_good_meta.safetensors)
ropecheck_hf_check(mrope_hf_config_good 0 "layout=mrope sections=\\[16,24,24\\].*PASS"
  --tensors ${_vd}/mrope_good.safetensors --hf-config ${_hf}/qwen2_vl.json)
ropecheck_hf_check(mrope_h_w_swapped 1 "FAIL x -> y token 3 \\(position \\(2,2,5\\)\\), head 0, pair 16 \\(elements 16, 80\\)"
  --tensors ${_vd}/mrope_swapped_hw_meta.safetensors)
ropecheck_hf_check(imrope_good 0 "layout=imrope sections=\\[24,20,20\\].*PASS"
  --tensors ${_vd}/imrope_good_meta.safetensors)
ropecheck_hf_check(imrope_as_mrope 1 "FAIL x -> y token 3 \\(position \\(2,2,5\\)\\), head 0, pair 2 \\(elements 2, 66\\)"
  --tensors ${_vd}/imrope_as_mrope_meta.safetensors)
# CogVideoX-style 3-D axial; NeoX pairing hard-coded for it fails.
ropecheck_hf_check(axial_good 0 "layout=axial sections=\\[8,12,12\\].*PASS"
  --tensors ${_vd}/axial_good_meta.safetensors)
ropecheck_hf_check(axial_neox_pairing 1 "FAIL x -> y token 1 \\(position \\(1,1,1\\)\\)"
  --tensors ${_vd}/axial_neox_pairing_meta.safetensors)

# ---- unknown / contradictory config fields: exit 2 with the field named, on every subcommand --
set(_unk "hf-config: unknown field 'betafast' for rope_type 'yarn'")
set(_contra "hf-config: rope_theta differs between the top level and rope_parameters")
set(_unread "hf-config: 'rotary_pct' is a RoPE key that is not read for a config without model_type \\(it is read for model_type gpt_neox\\)")
foreach(_f unknown_field contradictory unread_rope_key)
  if(_f STREQUAL "unknown_field")
    set(_msg "${_unk}")
  elseif(_f STREQUAL "unread_rope_key")
    set(_msg "${_unread}")
  else()
    set(_msg "${_contra}")
  endif()
  ropecheck_hf_test(report_${_f} 2 "${_msg}"
    report --out ${_hfout}/report_refused --hf-config ${_hf}/${_f}.json)
  ropecheck_hf_test(validate_${_f} 2 "${_msg}" validate --plugin ${_bs} --hf-config ${_hf}/${_f}.json)
  ropecheck_hf_test(check_${_f} 2 "${_msg}"
    check --tensors ${_vd}/yarn_good.safetensors --hf-config ${_hf}/${_f}.json)
  ropecheck_hf_test(eval_${_f} 2 "${_msg}"
    eval --dtype f32 --position 1 --input 1 --hf-config ${_hf}/${_f}.json)
endforeach()

# ---- list: the config's spec and which kernel x dtype runs it --------------------------------
ropecheck_hf_test(list_qwen2_vl 0
  "hf-config [^\n]*qwen2_vl.json: [^\n]*mrope[^\n]*\n  scalar: f64 supported f32 supported f16 supported bf16 supported\n  table_f32: f64 unsupported"
  list --hf-config ${_hf}/qwen2_vl.json)
ropecheck_hf_test(list_llama31 0
  "  simd: f64 supported f32 supported f16 supported bf16 supported\n  complex: f64 unsupported"
  list --hf-config ${_hf}/llama31_8b.json)
ropecheck_hf_test(list_unknown_field 2 "${_unk}" list --hf-config ${_hf}/unknown_field.json)
ropecheck_hf_test(list_unread_rope_key 2 "${_unread}" list --hf-config ${_hf}/unread_rope_key.json)
ropecheck_hf_test(list_seq_len_without_config 2 "--seq-len needs --hf-config" list --seq-len 10)

# ---- dynamic NTK / LongRoPE: seq_len = max(position) + 1 where the positions are known ------
# (transformers' dynamic_rope_update: seq_len = torch.max(position_ids) + 1 at run time)
string(REPEAT "0.5," 63 _in64)
set(_in64 "${_in64}0.5")
set(_dyn eval --dtype f32 --input ${_in64} --hf-config ${_hf}/dynamic_ntk.json)
# eval --position 8000 without --seq-len: byte for byte the output of --seq-len 8001.
add_test(NAME HfCli/eval_dynamic_default_seq_len_same_as_explicit
         COMMAND bash -c "diff <(\"$0\" \"$@\" --position 8000) <(\"$0\" \"$@\" --position 8000 --seq-len 8001)"
                 $<TARGET_FILE:ropecheck> ${_dyn})
set_tests_properties(HfCli/eval_dynamic_default_seq_len_same_as_explicit PROPERTIES
                     LABELS "cli;scaling" TIMEOUT 120)
ropecheck_hf_test(eval_dynamic_default_seq_len 0
  "\"description\": \"head_dim=64 rotary_dim=64 base=10000 layout=half scaling=dynamic\\(factor=2 max_pos=4096 seq_len=8001\\)\""
  ${_dyn} --position 8000)
# the max over every position; fractional positions: floor(max) + 1
ropecheck_hf_test(eval_dynamic_default_seq_len_fractional 0 "seq_len=8001\\)\""
  ${_dyn} --position 3,8000.5,17)
# a larger explicit seq_len is taken as given (a different base: a different reference)
ropecheck_hf_test(eval_dynamic_explicit_larger_seq_len 0 "seq_len=9000\\)\"" ${_dyn} --position 8000 --seq-len 9000)
add_test(NAME HfCli/eval_dynamic_larger_seq_len_differs
         COMMAND bash -c "! diff -q <(\"$0\" \"$@\" --position 8000) <(\"$0\" \"$@\" --position 8000 --seq-len 9000)"
                 $<TARGET_FILE:ropecheck> ${_dyn})
set_tests_properties(HfCli/eval_dynamic_larger_seq_len_differs PROPERTIES LABELS "cli;scaling" TIMEOUT 120)

# A correct dump beyond the original / L0 length, no seq_len anywhere: the run-time length.
ropecheck_hf_check(longrope_long_meta_good 0
  "scaling=longrope\\(orig=4096 max_pos=131072 seq_len=20001\\).*seq_len 20001 = max\\(position\\) \\+ 1.*PASS"
  --tensors ${_vd}/longrope_long_meta.safetensors)
ropecheck_hf_check(longrope_long_hf_config_good 0 "seq_len=20001\\).*PASS"
  --tensors ${_vd}/longrope_long.safetensors --hf-config ${_hf}/phi35_longrope.json)
# metadata and config both without seq_len, and the config's --seq-len with a metadata spec.
ropecheck_hf_check(longrope_long_meta_and_hf_config_good 0 "seq_len=20001\\).*PASS"
  --tensors ${_vd}/longrope_long_meta.safetensors --hf-config ${_hf}/phi35_longrope.json)
ropecheck_hf_check(longrope_long_meta_and_seq_len_good 0 "seq_len=30000\\).*PASS"
  --tensors ${_vd}/longrope_long_meta.safetensors --hf-config ${_hf}/phi35_longrope.json
  --seq-len 30000)
ropecheck_hf_check(dynamic_long_meta_good 0
  "scaling=dynamic\\(factor=2 max_pos=4096 seq_len=8001\\).*declared policy: angle f32, table f32, arithmetic f32, recipe hf_f32, fused false, trig_error 2\n.*PASS"
  --tensors ${_vd}/dynamic_long_meta.safetensors)

# An explicit seq_len below max(position) + 1: exit 2, naming where it came from, nothing on
# stdout, nothing written to --out (expect_refused.cmake, as the Hardening/ tests).
function(ropecheck_seq_len_refused name regex)
  set(out ${_hfout}/refused_${name})
  string(REPLACE ";" "|" args "${ARGN}")
  string(REPLACE "@OUT@" "${out}" args "${args}")
  add_test(NAME HfCli/${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:ropecheck>|${args}" "-DMATCH=${regex}"
                   -DOUT=${out} -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_refused.cmake)
  set_tests_properties(HfCli/${name} PROPERTIES FIXTURES_REQUIRED "variant_dumps;hf_mkdir"
                       LABELS "cli;scaling" TIMEOUT 60)
endfunction()
ropecheck_seq_len_refused(eval_dynamic_seq_len_too_small
  "seq_len 1 \\(from --seq-len\\) is smaller than max\\(position\\) \\+ 1 = 8001 \\(largest position 8000\\)"
  ${_dyn} --position 8000 --seq-len 1)
ropecheck_seq_len_refused(eval_dynamic_seq_len_too_small_fractional
  "seq_len 8000 \\(from --seq-len\\) is smaller than max\\(position\\) \\+ 1 = 8001 \\(largest position 8000.5\\)"
  ${_dyn} --position 8000.5 --seq-len 8000)
ropecheck_seq_len_refused(check_longrope_seq_len_too_small_metadata
  "seq_len 4096 \\(from __metadata__ of '[^']*longrope_seq_len_4096_meta.safetensors'\\) is smaller than max\\(position\\) \\+ 1 = 20001"
  check --out @OUT@ --tensors ${_vd}/longrope_seq_len_4096_meta.safetensors)
ropecheck_seq_len_refused(check_longrope_seq_len_too_small_hf_config
  "seq_len 20000 \\(from --seq-len\\) is smaller than max\\(position\\) \\+ 1 = 20001"
  check --out @OUT@ --tensors ${_vd}/longrope_long.safetensors --hf-config ${_hf}/phi35_longrope.json
  --seq-len 20000)
ropecheck_seq_len_refused(check_longrope_seq_len_too_small_spec
  "seq_len 4096 \\(from --spec '[^']*spec_seq_len_4096.json'\\) is smaller than max\\(position\\) \\+ 1 = 20001"
  check --out @OUT@ --tensors ${_vd}/longrope_long_meta.safetensors --spec ${_hf}/spec_seq_len_4096.json)

# ---- check's output: each figure with its own location; NaN said as such --------------------
ropecheck_hf_check(worst_at_locates_each_figure 0
  "  max err \\[u\\] +[0-9.e+-]+ at token 1 \\(position 100000\\), head 0, pair 0\n  max err/bound [0-9.e+-]+ at token 0 \\(position 1\\), head 0, pair 0\n"
  --tensors ${_vd}/worst_at.safetensors)
ropecheck_hf_check(nan_output_said_as_such 1
  "FAIL x -> y token 1 \\(position 100000\\), head 0, pair 1 \\(elements 1, 5\\): error is NaN \\(got a NaN output\\); got \\(nan, "
  --tensors ${_vd}/nan_output.safetensors)
