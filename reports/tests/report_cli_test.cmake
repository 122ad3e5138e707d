# Drives `ropecheck report` end to end (cmake -P, no shell or Python): CASE is one of
#   smoke        small report; every file written, JSON valid against the schema, HTML and JUnit
#                well-formed, Markdown has its sections; exit status 0 or 1 (never 2/3)
#   determinism  two runs with the same seed (1 and 2 threads, and --oracle mpfr) give the same
#                JSON bar environment
#   usage        bad options exit 2 with a message and write nothing
#   baseline     --baseline with the report itself: no regression; with a shrunken copy: exit 1
#   shard        unsharded == --shard 0/2 + GTEST_* 1/2 merged (apart from environment/shard);
#                bad merges and bad --shard values exit 2
#   validate_shard  validate --shard 0/2 + GTEST_* 1/2 configurations == the unsharded run's
#   atlas_model  report --engines --hf-config: the engines on a model's spec, or exit 2
#   plugin       report --plugin: the sweep stays inside the declared domain (head dims, dtypes,
#                layouts) and says what it left out; a broken plugin fails; nothing inside: exit 2
cmake_minimum_required(VERSION 3.25)

set(SMALL --kernels all --dtypes f32,bf16 --head-dims 16 --bases 1e4 --layouts interleaved,half
          --max-position 70000 --samples 8 --quiet)

function(run_ok)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

function(report dir expect_rc)
  execute_process(COMMAND ${ROPECHECK} report ${SMALL} ${ARGN} --out ${dir}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT "${rc}" MATCHES "^(${expect_rc})$")
    message(FATAL_ERROR "ropecheck report ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}\n${err}")
  endif()
  set(last_rc ${rc} PARENT_SCOPE)
endfunction()

if(CASE STREQUAL "smoke")
  file(REMOVE_RECURSE ${WORK}/smoke)
  # With --engines too: the atlas first, then ropecheck's own kernels (the default report's shape).
  report(${WORK}/smoke "0|1" --engines all)
  foreach(f report.json report.md report.html junit.xml)
    if(NOT EXISTS ${WORK}/smoke/${f})
      message(FATAL_ERROR "missing ${f}")
    endif()
  endforeach()
  file(GLOB leftovers ${WORK}/smoke/.*)
  if(leftovers)
    message(FATAL_ERROR "temporary files left behind: ${leftovers}")
  endif()
  run_ok(${TOOL} validate-json ${SCHEMA} ${WORK}/smoke/report.json)
  run_ok(${TOOL} check-html ${WORK}/smoke/report.html)
  run_ok(${TOOL} check-xml ${WORK}/smoke/junit.xml)
  run_ok(${TOOL} check-md ${WORK}/smoke/report.md)
  run_ok(${TOOL} check-headline ${WORK}/smoke/report.json)
  run_ok(${TOOL} check-atlas ${WORK}/smoke/report.json ${WORK}/smoke/report.md)
  # The atlas check fails when an atlas row's check is missing from the report's checks.
  file(READ ${WORK}/smoke/report.json js)
  string(JSON js REMOVE "${js}" checks 0)
  file(WRITE ${WORK}/atlas-doctored.json "${js}")
  execute_process(COMMAND ${TOOL} check-atlas ${WORK}/atlas-doctored.json ${WORK}/smoke/report.md
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "no bound check")
    message(FATAL_ERROR "check-atlas accepted a report whose atlas check is missing (${rc})")
  endif()
  # FP8 cache bytes: formats from --dtypes and --fp8, the divide convention, an odd scale; the
  # engines and the built-in kernels keep every byte inside the chain image of their bound.
  file(REMOVE_RECURSE ${WORK}/smoke_fp8)
  run_ok(${ROPECHECK} report --engines all --dtypes f32,bf16,f8e4m3 --fp8 e5m2 --head-dims 64
         --fp8-convention divide --fp8-scale 0.37 --max-position 70000 --samples 8 --quiet
         --out ${WORK}/smoke_fp8)
  run_ok(${TOOL} validate-json ${SCHEMA} ${WORK}/smoke_fp8/report.json)
  run_ok(${TOOL} check-html ${WORK}/smoke_fp8/report.html)
  run_ok(${TOOL} check-xml ${WORK}/smoke_fp8/junit.xml)
  file(READ ${WORK}/smoke_fp8/report.json js)
  string(JSON nf LENGTH "${js}" options fp8 formats)
  string(JSON f0 GET "${js}" options fp8 formats 0)
  string(JSON f1 GET "${js}" options fp8 formats 1)
  string(JSON conv GET "${js}" options fp8 convention)
  if(NOT nf EQUAL 2 OR NOT f0 STREQUAL "e4m3fn" OR NOT f1 STREQUAL "e5m2" OR
     NOT conv STREQUAL "divide")
    message(FATAL_ERROR "options.fp8: ${nf} ${f0} ${f1} ${conv}")
  endif()
  string(JSON nc LENGTH "${js}" checks)
  math(EXPR lc "${nc} - 1")
  set(fp8_checks 0)
  foreach(i RANGE ${lc})
    string(JSON name GET "${js}" checks ${i} check)
    if(name MATCHES "^Fp8BytesWithinBound")
      math(EXPR fp8_checks "${fp8_checks} + 1")
      string(JSON ok GET "${js}" checks ${i} passed)
      if(NOT ok)
        string(JSON msg GET "${js}" checks ${i} message)
        message(FATAL_ERROR "FP8 check failed on a correct kernel: ${msg}")
      endif()
    endif()
  endforeach()
  if(fp8_checks LESS 8)
    message(FATAL_ERROR "only ${fp8_checks} FP8 checks")
  endif()
  file(READ ${WORK}/smoke_fp8/report.md md)
  if(NOT md MATCHES "## FP8 cache bytes")
    message(FATAL_ERROR "report.md has no FP8 section")
  endif()
elseif(CASE STREQUAL "determinism")
  file(REMOVE_RECURSE ${WORK}/det1 ${WORK}/det2)
  # With FP8 cache bytes (fp8_correct's fast path vs MPFR alone in det3).
  report(${WORK}/det1 "0|1" --seed 7 --threads 1 --fp8 e4m3fn,e5m2)
  report(${WORK}/det2 "0|1" --seed 7 --threads 2 --fp8 e4m3fn,e5m2)
  run_ok(${TOOL} same-json ${WORK}/det1/report.json ${WORK}/det2/report.json)
  # The two-tier oracle answers as MPFR alone does, bit for bit: the whole report agrees.
  file(REMOVE_RECURSE ${WORK}/det3)
  report(${WORK}/det3 "0|1" --seed 7 --threads 2 --oracle mpfr --fp8 e4m3fn,e5m2)
  run_ok(${TOOL} same-json ${WORK}/det1/report.json ${WORK}/det3/report.json)
  # The atlas alone, 1 and 2 threads.
  file(REMOVE_RECURSE ${WORK}/deta1 ${WORK}/deta2)
  foreach(t 1 2)
    execute_process(COMMAND ${ROPECHECK} report --engines all --samples 8 --max-position 70000
                            --seed 7 --threads ${t} --quiet --out ${WORK}/deta${t}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc MATCHES "^(0|1)$")
      message(FATAL_ERROR "report --engines all: exit ${rc}\n${out}\n${err}")
    endif()
  endforeach()
  run_ok(${TOOL} same-json ${WORK}/deta1/report.json ${WORK}/deta2/report.json)
elseif(CASE STREQUAL "usage")
  file(REMOVE_RECURSE ${WORK}/usage)
  foreach(bad "--samples;0" "--max-position;0" "--dtypes;f8" "--kernels;nosuch" "--head-dims;1"
              "--bases;1" "--layouts;diagonal" "--dtypes;f32,f32" "--bases;abc" "--samples;x"
              "--baseline;${WORK}/does-not-exist.json" "--safe-budget-u;0" "--oracle;exact"
              "--engines;nosuch" "--engines;all,all" "--engines;all;--shard;0/2"
              "--fp8;e4m3" "--fp8;e5m2,f8e5m2" "--fp8;e4m3fn;--fp8-scale;0"
              "--fp8;e4m3fn;--fp8-scale;nan" "--fp8;e4m3fn;--fp8-convention;both"
              "--fp8;e4m3fn;--fp8-overflow;inf" "--fp8;e4m3fn;--fp8-overflow;wrap")
    execute_process(COMMAND ${ROPECHECK} report ${SMALL} ${bad} --out ${WORK}/usage
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 2 OR err STREQUAL "")
      message(FATAL_ERROR "'${bad}': exit ${rc} (expected 2 with a message)\n${out}\n${err}")
    endif()
  endforeach()
  execute_process(COMMAND ${ROPECHECK} report ${SMALL} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "missing --out: exit ${rc}, expected 2")
  endif()
  # FP8 names in --dtypes: a cache format needs a rotation dtype beside it, and once only.
  foreach(bad "f8e4m3:name the dtype" "f32,f8e4m3,e4m3fn:given twice")
    string(REPLACE ":" ";" parts "${bad}")
    list(GET parts 0 dt)
    list(GET parts 1 why)
    execute_process(COMMAND ${ROPECHECK} report --dtypes ${dt} --samples 8 --out ${WORK}/usage
                    RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 2 OR NOT err MATCHES "${why}")
      message(FATAL_ERROR "--dtypes ${dt}: exit ${rc}, expected 2 with '${why}': ${err}")
    endif()
  endforeach()
  if(EXISTS ${WORK}/usage/report.json)
    message(FATAL_ERROR "bad usage still wrote a report")
  endif()
elseif(CASE STREQUAL "baseline")
  file(REMOVE_RECURSE ${WORK}/base ${WORK}/base2 ${WORK}/base3)
  report(${WORK}/base "0|1")
  set(first_rc ${last_rc})
  # Against itself: no regression, so the exit status cannot get worse.
  report(${WORK}/base2 "${first_rc}" --baseline ${WORK}/base/report.json)
  # A baseline whose maxima are 10x smaller: every bucket with max > 1 ULP regresses.
  file(READ ${WORK}/base/report.json js)
  string(JSON n LENGTH "${js}" results)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON nb LENGTH "${js}" results ${i} buckets)
    math(EXPR lb "${nb} - 1")
    foreach(b RANGE ${lb})
      string(JSON t TYPE "${js}" results ${i} buckets ${b} pair_error_u max)
      if(t STREQUAL "NUMBER")
        # Baseline max 0: anything above factor x floor = 2 x 0.5 = 1u regresses.
        string(JSON js SET "${js}" results ${i} buckets ${b} pair_error_u max "0")
      endif()
    endforeach()
  endforeach()
  file(WRITE ${WORK}/shrunk.json "${js}")
  report(${WORK}/base3 "1" --baseline ${WORK}/shrunk.json)
  file(READ ${WORK}/base3/report.json js3)
  string(JSON nreg LENGTH "${js3}" baseline regressions)
  if(nreg EQUAL 0)
    message(FATAL_ERROR "shrunken baseline: no regression recorded")
  endif()
  # The checked-in baseline must still parse and be comparable (schema_version) with this build.
  if(EXISTS ${BASELINE})
    run_ok(${TOOL} validate-json ${SCHEMA} ${BASELINE})
  endif()
elseif(CASE STREQUAL "shard")
  # Unsharded vs two shards (one by --shard, one by gtest's environment variables) merged: the
  # same report.json apart from environment/shard; bad merges exit 2 with a message.
  set(W ${WORK}/shard)
  file(REMOVE_RECURSE ${W})
  report(${W}/full "0|1" --seed 3)
  report(${W}/s0 "0|1" --seed 3 --shard 0/2)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=1
                          GTEST_SHARD_STATUS_FILE=${W}/status
                          ${ROPECHECK} report ${SMALL} --seed 3 --out ${W}/s1
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc MATCHES "^(0|1)$")
    message(FATAL_ERROR "shard 1/2 via GTEST_*: exit ${rc}\n${out}\n${err}")
  endif()
  if(NOT EXISTS ${W}/status)
    message(FATAL_ERROR "GTEST_SHARD_STATUS_FILE was not created")
  endif()
  foreach(d s0 s1)
    run_ok(${TOOL} validate-json ${SCHEMA} ${W}/${d}/report.json)
    file(READ ${W}/${d}/report.json js)
    string(JSON total GET "${js}" shard total)
    if(NOT total EQUAL 2)
      message(FATAL_ERROR "${d}: no shard metadata")
    endif()
  endforeach()
  # Each shard alone is not the full report (the test can fail).
  execute_process(COMMAND ${TOOL} same-json-merged ${W}/full/report.json ${W}/s0/report.json
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    message(FATAL_ERROR "shard 0/2 already equals the full report: sharding did nothing")
  endif()
  execute_process(COMMAND ${ROPECHECK} report --merge ${W}/s1/report.json ${W}/s0/report.json
                          --out ${W}/merged
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc MATCHES "^(0|1)$")
    message(FATAL_ERROR "merge: exit ${rc}\n${out}\n${err}")
  endif()
  run_ok(${TOOL} validate-json ${SCHEMA} ${W}/merged/report.json)
  run_ok(${TOOL} check-html ${W}/merged/report.html)
  run_ok(${TOOL} check-xml ${W}/merged/junit.xml)
  run_ok(${TOOL} same-json-merged ${W}/full/report.json ${W}/merged/report.json)
  # Bad merges: a shard missing, one given twice, a different seed, another schema, no file.
  report(${W}/seed9 "0|1" --seed 9 --shard 1/2)
  file(READ ${W}/s1/report.json js)
  string(JSON js SET "${js}" schema_version "1")
  file(WRITE ${W}/old.json "${js}")
  foreach(bad "${W}/s0/report.json" "${W}/s0/report.json;${W}/s0/report.json"
              "${W}/s0/report.json;${W}/seed9/report.json" "${W}/s0/report.json;${W}/old.json"
              "${W}/s0/report.json;${W}/nosuch.json")
    execute_process(COMMAND ${ROPECHECK} report --merge ${bad} --out ${W}/bad
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 2 OR err STREQUAL "")
      message(FATAL_ERROR "merge '${bad}': exit ${rc} (expected 2 with a message)\n${out}\n${err}")
    endif()
  endforeach()
  if(EXISTS ${W}/bad/report.json)
    message(FATAL_ERROR "a bad merge still wrote a report")
  endif()
  foreach(bad "--shard;2/2" "--shard;x" "--shard;-1/2")
    execute_process(COMMAND ${ROPECHECK} report ${SMALL} ${bad} --out ${W}/bad
                    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
    if(NOT rc EQUAL 2 OR err STREQUAL "")
      message(FATAL_ERROR "'${bad}': exit ${rc} (expected 2 with a message)")
    endif()
  endforeach()
elseif(CASE STREQUAL "validate_shard")
  # validate deals its (dtype, layout) configurations to shards: the shards' configurations are
  # disjoint and together the unsharded run's.
  set(VAL validate --plugin ${PLUGIN} --budget quick --dtypes f32 --layouts interleaved,half,mrope)
  function(configs var)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${ARGN}: exit ${rc}\n${out}\n${err}")
    endif()
    string(REGEX MATCHALL "f32 [a-z]+ = " found "${out}")
    set(${var} ${found} PARENT_SCOPE)
  endfunction()
  configs(all ${ROPECHECK} ${VAL})
  configs(s0 ${ROPECHECK} ${VAL} --shard 0/2)
  file(REMOVE ${WORK}/vstatus)
  configs(s1 ${CMAKE_COMMAND} -E env GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=1
             GTEST_SHARD_STATUS_FILE=${WORK}/vstatus ${ROPECHECK} ${VAL})
  if(NOT EXISTS ${WORK}/vstatus)
    message(FATAL_ERROR "validate did not create GTEST_SHARD_STATUS_FILE")
  endif()
  list(LENGTH all n)
  list(LENGTH s0 n0)
  list(LENGTH s1 n1)
  set(union ${s0} ${s1})
  list(SORT union)
  list(SORT all)
  if(NOT n EQUAL 3 OR n0 EQUAL 0 OR n1 EQUAL 0 OR NOT "${union}" STREQUAL "${all}")
    message(FATAL_ERROR "shards [${s0}] + [${s1}] != unsharded [${all}]")
  endif()
elseif(CASE STREQUAL "atlas_model")
  # --engines --hf-config: the engines on one model's spec.
  set(W ${WORK}/atlas_model)
  file(REMOVE_RECURSE ${W})
  file(WRITE ${W}/qwen2.json "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 3584, \"num_attention_heads\": 28, \"rope_theta\": 1000000.0, \"max_position_embeddings\": 32768}")
  run_ok(${ROPECHECK} report --engines all --hf-config ${W}/qwen2.json --samples 8
         --max-position 70000 --quiet --out ${W}/q)
  run_ok(${TOOL} validate-json ${SCHEMA} ${W}/q/report.json)
  file(READ ${W}/q/report.json js)
  string(JSON ms GET "${js}" atlas model_spec)
  string(JSON b GET "${js}" atlas rows 0 base)
  if(NOT ms MATCHES "head_dim=128" OR NOT b EQUAL 1000000)
    message(FATAL_ERROR "atlas on the Qwen2 spec: model_spec '${ms}', base ${b}")
  endif()
  # llama3 scaling: hf_eager implements it (src/kernels/engines/hf_eager.cpp).
  run_ok(${ROPECHECK} report --engines all --hf-config ${HF_DIR}/llama31_8b.json --samples 8
         --max-position 70000 --quiet --out ${W}/llama)
  file(READ ${W}/llama/report.json js)
  string(JSON e0 GET "${js}" atlas rows 0 engine)
  string(JSON s0 GET "${js}" atlas rows 0 supported)
  if(NOT e0 STREQUAL "hf_eager" OR NOT s0)
    message(FATAL_ERROR "llama3-scaled spec: first row ${e0}, supported ${s0}")
  endif()
  # M-RoPE with dynamic NTK: HF's Qwen2-VL module raises on it and no engine implements it. The
  # report is still written (issue #39: a row per engine saying so, never a refusal), exit 0.
  file(WRITE ${W}/vl_dynamic.json "{\"architectures\": [\"Qwen2VLForConditionalGeneration\"], \"hidden_size\": 3584, \"num_attention_heads\": 28, \"rope_theta\": 1000000.0, \"max_position_embeddings\": 32768, \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0, \"mrope_section\": [16, 24, 24]}}")
  run_ok(${ROPECHECK} report --engines all --hf-config ${W}/vl_dynamic.json --samples 8 --quiet
         --out ${W}/vl)
  file(READ ${W}/vl/report.json js)
  string(JSON nrows LENGTH "${js}" atlas rows)
  math(EXPR last "${nrows} - 1")
  foreach(i RANGE ${last})
    string(JSON ni ERROR_VARIABLE none GET "${js}" atlas rows ${i} not_implemented)
    string(JSON sup GET "${js}" atlas rows ${i} supported)
    if(NOT ni OR sup)
      string(JSON e GET "${js}" atlas rows ${i} engine)
      message(FATAL_ERROR "M-RoPE + dynamic spec: row ${i} (${e}) not_implemented '${ni}', "
                          "supported ${sup}: no engine implements it")
    endif()
  endforeach()
elseif(CASE STREQUAL "plugin")
  set(W ${WORK}/plugin)
  file(REMOVE_RECURSE ${W})
  set(P ${PLUGIN_DIR}/libropecheck_plugin_restricted)
  set(FAST --samples 8 --max-position 70000 --quiet)
  # head dims {80, 112, 256} declared: with none asked for, the sweep runs exactly those.
  run_ok(${ROPECHECK} report --plugin ${P}_hd80_112_256_int32.so ${FAST} --dtypes f32,bf16
         --out ${W}/hd)
  run_ok(${TOOL} validate-json ${SCHEMA} ${W}/hd/report.json)
  run_ok(${TOOL} check-html ${W}/hd/report.html)
  file(READ ${W}/hd/report.json js)
  string(JSON hds GET "${js}" options head_dims)
  string(REGEX REPLACE "[ \n]" "" hds "${hds}")
  if(NOT hds STREQUAL "[80,112,256]")
    message(FATAL_ERROR "declared head dims {80,112,256}: the sweep ran ${hds}")
  endif()
  # Asked for 64 and 80: 64 is outside the declared list, said in the report and left out.
  run_ok(${ROPECHECK} report --plugin ${P}_hd80_112_256_int32.so ${FAST} --dtypes f32
         --head-dims 64,80 --out ${W}/asked)
  file(READ ${W}/asked/report.json js)
  string(JSON out0 GET "${js}" domain outside 0)
  string(JSON hds GET "${js}" options head_dims)
  string(REGEX REPLACE "[ \n]" "" hds "${hds}")
  if(NOT out0 MATCHES "head dim 64" OR NOT hds STREQUAL "[80]")
    message(FATAL_ERROR "head dim 64 outside the domain: outside '${out0}', swept ${hds}")
  endif()
  file(READ ${W}/asked/report.md md)
  if(NOT md MATCHES "Kernel domain.*head dim 64: outside")
    message(FATAL_ERROR "report.md does not say what was left out")
  endif()
  # A half-only f32/bf16 plugin: interleaved and f16 are said, and f16 alone is nothing to run.
  run_ok(${ROPECHECK} report --plugin ${P}_nonneg_noscale_half.so ${FAST} --out ${W}/half)
  file(READ ${W}/half/report.json js)
  string(JSON outside GET "${js}" domain outside)
  if(NOT outside MATCHES "f64, f16: not declared" OR NOT outside MATCHES "interleaved: layout")
    message(FATAL_ERROR "half-only f32/bf16 plugin: outside = ${outside}")
  endif()
  execute_process(COMMAND ${ROPECHECK} report --plugin ${P}_nonneg_noscale_half.so ${FAST}
                          --dtypes f16 --out ${W}/none
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "supports none" OR EXISTS ${W}/none/report.json)
    message(FATAL_ERROR "f16 on an f32/bf16 plugin: exit ${rc} (expected 2, nothing written)\n${err}")
  endif()
  # A sign error in sin: the report fails (exit 1) and its JUnit says so.
  execute_process(COMMAND ${ROPECHECK} report --plugin ${P}_hd64_128_bug_sin_sign.so ${FAST}
                          --dtypes f32 --out ${W}/broken
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  file(READ ${W}/broken/junit.xml junit)
  if(NOT rc EQUAL 1 OR NOT junit MATCHES "<failure")
    message(FATAL_ERROR "sin-sign plugin: exit ${rc} (expected 1 with a JUnit failure)")
  endif()
  foreach(bad "--kernels;scalar" "--engines;all" "--shard;0/2" "--timeout;0")
    execute_process(COMMAND ${ROPECHECK} report --plugin ${P}_hd64_128.so ${FAST} ${bad}
                            --out ${W}/bad
                    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
    if(NOT rc EQUAL 2 OR err STREQUAL "")
      message(FATAL_ERROR "--plugin with '${bad}': exit ${rc} (expected 2 with a message)")
    endif()
  endforeach()
else()
  message(FATAL_ERROR "unknown CASE ${CASE}")
endif()
