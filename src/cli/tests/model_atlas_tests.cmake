# Included from CMakeLists.txt: the engine atlas at a model's spec (`report --engines
# --hf-config`), the model presets (`list --models`) and the model atlas (`report --models`).
# Labels "cli;report".
set(_ma ${CMAKE_CURRENT_BINARY_DIR}/model_atlas)
set(_ma_expect ${PROJECT_SOURCE_DIR}/src/io/tensorio/tests/expect.cmake)

# ropecheck_ma_file(name exit regex file file_regex args...)
function(ropecheck_ma_file name exit regex file fregex)
  string(REPLACE ";" "|" args "${ARGN}")
  add_test(NAME ModelAtlas/${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:ropecheck>|${args}" -DEXIT=${exit}
                   "-DMATCH=${regex}" -DFILE=${file} "-DFILE_MATCH=${fregex}"
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_file.cmake)
  set_tests_properties(ModelAtlas/${name} PROPERTIES LABELS "cli;report" TIMEOUT 300)
endfunction()

# Qwen2-VL's M-RoPE: the engines that implement it run it, each other one has its row "not
# implemented" (citing its upstream file), and the command exits 0 (it used to exit 2).
ropecheck_ma_file(hf_config_not_implemented 0 "wrote" ${_ma}/qwen2_vl/report.md
  "not implemented \\("
  report --engines all --hf-config ${CMAKE_CURRENT_SOURCE_DIR}/hf/qwen2_vl.json --dtypes f32
  --samples 4 --max-position 4096 --quiet --out ${_ma}/qwen2_vl)
# One model of the atlas: its report set and the index naming it and its source.
ropecheck_ma_file(models_one 0 "wrote .*/index.json" ${_ma}/models/index.json
  "\"hub_repo\": \"EleutherAI/gpt-j-6b\""
  report --models gpt-j-6b --dtypes f32 --samples 4 --quiet --out ${_ma}/models)

add_test(NAME ModelAtlas/list_models
         COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:ropecheck>|list|--models" -DEXIT=0
                 "-DMATCH=gpt-j-6b: head_dim=256 rotary_dim=64 base=10000 layout=interleaved"
                 -P ${_ma_expect})
set_tests_properties(ModelAtlas/list_models PROPERTIES LABELS "cli;report")

# An unknown model: exit 2 naming the presets, nothing written.
add_test(NAME ModelAtlas/models_unknown_name
         COMMAND ${CMAKE_COMMAND}
                 "-DCMD=$<TARGET_FILE:ropecheck>|report|--models|llama-9|--out|${_ma}/unknown"
                 "-DMATCH=no preset named 'llama-9' \\(available: deepseek-v3, .*gpt-j-6b"
                 -DOUT=${_ma}/unknown -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_refused.cmake)
set_tests_properties(ModelAtlas/models_unknown_name PROPERTIES LABELS "cli;report")
