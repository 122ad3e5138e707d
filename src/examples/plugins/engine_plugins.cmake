# The engine recipes (src/kernels/engines/) wrapped as plugins, as data: read by
# src/examples/plugins/CMakeLists.txt (the targets) and src/plugin/tests/CMakeLists.txt (their
# `ropecheck validate` tests). Adding an engine is one name in ROPECHECK_ENGINE_PLUGINS, its
# descriptor knobs (_engine_<name>, documented at the top of builtin_wrap.cpp), the knob of its
# misdeclaration (_misdeclare_<name>) and the dtype where that shows (_misdeclared_dtype_<name>).
# Each declares the domain its engine has (vLLM: positions index a cache, no magnitude scale, NeoX
# and GPT-J, MRotaryEmbedding's mrope / imrope; ggml: int32 positions, f32/f16, no magnitude) and its own policy; each has a
# *_misdeclared twin declaring a policy its recipe does not meet: an f32 table and f32 arithmetic
# for the recipes that round the table and every op into bf16/f16 (hf_eager, vllm_native), the
# hf_f32 angle recipe for ggml's f32 ladder, an f64 angle with exact trig for the f32 fast-math
# angles of FlashInfer and ggml's CUDA backend (its emulation replaces the GPU approximations by correctly rounded values, so
# only a declaration tighter than f32 angles shows on the CPU), and the same f64 angle for
# onnxruntime_cpu's f32 cache angle (the exporter's f32 cache).
set(_engine_hf_eager "ROPECHECK_WRAP_LAYOUTS=ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF)"
    "ROPECHECK_WRAP_SCALINGS=ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_NONE)")
set(_engine_vllm_native ROPECHECK_WRAP_MIN_POSITION=0 ROPECHECK_WRAP_MAX_POSITION=INT64_MAX
    ROPECHECK_WRAP_NO_SCALE
    "ROPECHECK_WRAP_LAYOUTS=ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF)|ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_INTERLEAVED)|ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_MROPE)|ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_IMROPE)"
    "ROPECHECK_WRAP_SCALINGS=ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_NONE)"
    "ROPECHECK_WRAP_DTYPES=ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32)|ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F16)|ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_BF16)")
set(_ggml_common ROPECHECK_WRAP_MIN_POSITION=INT32_MIN ROPECHECK_WRAP_MAX_POSITION=INT32_MAX
    ROPECHECK_WRAP_NO_SCALE
    "ROPECHECK_WRAP_DTYPES=ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32)|ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F16)")
# ggml_cpu: the variants llama.cpp runs (src/kernels/engines/ggml_rope.hpp; supports() narrows
# yarn and the sections further).
set(_engine_ggml_cpu ${_ggml_common}
    "ROPECHECK_WRAP_LAYOUTS=ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF)|ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_INTERLEAVED)|ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_MROPE)"
    "ROPECHECK_WRAP_SCALINGS=ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_NONE)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_LINEAR)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_FREQ_FACTORS)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_LLAMA3)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_YARN)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_LONGROPE)")
set(_engine_flashinfer "ROPECHECK_WRAP_HEAD_DIMS=64,128,256,512" ROPECHECK_WRAP_NO_SCALE
    "ROPECHECK_WRAP_LAYOUTS=ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF)|ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_INTERLEAVED)"
    "ROPECHECK_WRAP_SCALINGS=ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_NONE)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_LINEAR)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_LLAMA3)"
    "ROPECHECK_WRAP_DTYPES=ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F16)|ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_BF16)")
# ggml_cuda: the same rows (its declared fast-math recipe makes no angle claim for scaled specs:
# MatchesReferenceWithinBound is the cap there, every other property still applies).
set(_engine_ggml_cuda ${_engine_ggml_cpu})
# onnxruntime_cpu: position_ids index a cache of an int count of rows (non-negative, below
# INT32_MAX); f32/f16; llama3 and YaRN as the model builder writes them (supports() narrows YaRN);
# not LongRoPE: its cache ends at a spec-dependent row (apply() refuses past it), which a
# descriptor cannot declare. Its layouts are NOT bitwise symmetric (MLAS's interleaved tail is
# partly unfused): the wrapper copies that from the engine's Domain, so LayoutsArePermutations
# compares them within the bound.
set(_engine_onnxruntime_cpu ROPECHECK_WRAP_MIN_POSITION=0 ROPECHECK_WRAP_MAX_POSITION=2147483646
    "ROPECHECK_WRAP_LAYOUTS=ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF)|ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_INTERLEAVED)"
    "ROPECHECK_WRAP_SCALINGS=ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_NONE)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_LLAMA3)|ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_YARN)"
    "ROPECHECK_WRAP_DTYPES=ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32)|ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F16)")
set(_misdeclare_hf_eager ROPECHECK_WRAP_DECLARE_F32_ROTATION)
set(_misdeclare_vllm_native ROPECHECK_WRAP_DECLARE_F32_ROTATION)
set(_misdeclare_ggml_cpu ROPECHECK_WRAP_DECLARE_RECIPE=hf_f32)
set(_misdeclare_flashinfer ROPECHECK_WRAP_DECLARE_F64_ANGLE)
set(_misdeclare_ggml_cuda ROPECHECK_WRAP_DECLARE_F64_ANGLE)
set(_misdeclare_onnxruntime_cpu ROPECHECK_WRAP_DECLARE_F64_ANGLE)
set(ROPECHECK_ENGINE_PLUGINS hf_eager vllm_native ggml_cpu ggml_cuda flashinfer onnxruntime_cpu)
set(_misdeclared_dtype_hf_eager bf16)
set(_misdeclared_dtype_vllm_native bf16)
set(_misdeclared_dtype_ggml_cpu f32)
set(_misdeclared_dtype_flashinfer bf16)
set(_misdeclared_dtype_ggml_cuda f32)
set(_misdeclared_dtype_onnxruntime_cpu f32)
