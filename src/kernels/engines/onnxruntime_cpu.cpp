// `onnxruntime_cpu`: ONNX Runtime's CPU RotaryEmbedding, the com.microsoft contrib op (opset 1)
// and the ONNX-standard op (ai.onnx opset 23), as the release 1.30.0 library runs them on x86-64
// (onnxruntime-node 1.30.0's libonnxruntime.so.1, "ORT Build Info: git-commit-id=f2c39fe2f").
// Follows (read through the search tool's stored copies of microsoft/onnxruntime; the snapshot is
// too large to fetch, so the versions read are the closest stored ones):
//   onnxruntime/contrib_ops/cpu/bert/rotary_embedding.cc @ 161d293f2d47552968f6ddb73520c91365f73411
//   onnxruntime/core/providers/cpu/llm/rotary_embedding.cc @
//   af223b4eee0dfe1796f502669d36d6b95130489d
//     both: per (batch, token, head) the cache row at position_ids[b, s] (int64, rejected outside
//     [0, rows of the cache)), MlasRotaryEmbedOneRow over the first rotary_embedding_dim dims,
//     the rest copied; registered for float and MLFloat16 only (no bf16 on the CPU provider); the
//     contrib op's `scale` attribute is read but unused on CPU
//   onnxruntime/core/mlas/lib/rotary_embedding.cpp @ ced49b0c67d9035c2841973e246a47bfa4b806cd
//   onnxruntime/core/mlas/lib/platform.cpp (RopeDispatch = MlasRopeDispatchAvx2 on AVX2 CPUs)
//   onnxruntime/core/mlas/lib/rotary_embedding_kernel_avx2.cpp @
//   13ad4150d89463de107d3872f5e0734b05ffcfb8 (its dispatch table; the kernel bodies read in two
//   later stored revisions whose commit the index does not name: one with masked AVX2 remainders,
//   one with scalar remainder loops; they agree on the vector blocks)
//     the path this machine runs: x_a, x_b, cos, sin widened to f32 (F16C for f16, exact),
//     y_a = fmsub(x_a, cos, fl(x_b sin)), y_b = fmadd(x_a, sin, fl(x_b cos)), each stored once
//     (f16: _mm256_cvtps_ph, round to nearest even). Without AVX2 the scalar fallback rounds both
//     products separately (same bound, other bits: not modelled).
// The cos/sin caches are inputs; this engine builds them the way onnxruntime-genai's model builder
// does (microsoft/onnxruntime-genai, read in a snapshot fetched at
// 80b45b08e5e8d8193c8a3a8cef000740b9fd72f0: src/python/py/models/builders/base.py
// Model.__init__'s rope_attrs, make_rope_init, make_mscale*, make_inv_freq_rescaled*,
// make_rotary_embedding_caches_from_scratch, make_rotary_embedding_caches,
// make_rotary_embedding_multi_cache; builders/gptoss.py make_rotary_embedding_caches_from_scratch).
// Every cache: an f32 inv_freq over dim = rotary_dim, t = arange(cache_length) as f32 (int64
// `.type_as`, or an f32 arange: the same values below 2^24), one f32 product per entry, cos/sin in
// f32 times the f32-rounded mscale (a numpy f64 scalar), `.to(io_dtype)`, the first rotary_dim/2
// columns kept: torch_cpu::token_table. Only the rows of the positions asked are built
// (element-wise: the same values as the full cache's rows). Per rope_scaling (make_rope_init picks
// by the keys of the config's rope_scaling dict):
//   none     inv_freq = 1.0 / (1 * theta ** (arange(0, dim, 2).float() / dim)): HF's default.
//   llama3   ("low_freq_factor" in it) make_inv_freq_rescaled_with_freq_factors: a Python loop over
//            the 0-d f32 entries with HF's expressions (2 pi / freq, the f32-rounded wavelength
//            thresholds old_context_len / low|high_freq_factor, smooth, (1 - smooth) * freq /
//            factor + smooth * freq): the f32 ops of recipe_f32.cpp's llama3, old_context_len =
//            original_context_length; mscale 1.
//   yarn     ("beta_fast" in it) gptoss.py (the one builder model of this commit with a YaRN
//            config): pos = theta ** (arange(0, head_size, 2, f32) / head_size),
//            make_inv_freq_rescaled_with_ntk: low/high = head_size/2 * ln(orig / (beta 2 pi)) /
//            ln(theta) in numpy f64, never floored/ceiled, `assert 0 < low < high < d_half - 1`;
//            1 / (factor * pos), 1 / pos, the ramp and mask in f32: recipe_f32.cpp's yarn with
//            truncate false; mscale = 0.1 ln(factor) + 1 (make_mscale_yarn), HF's get_mscale.
//            mscale / mscale_all_dim / attention_factor are not read: such specs are not this
//            engine's (base.py's generic path would feed its reciprocal inv_freq to the same
//            formula: no model of this commit takes it).
//   longrope ("short_factor" in it) make_rotary_embedding_multi_cache: a long cache (long_factor,
//            context_length = max_position_embeddings rows) and a short one (short_factor,
//            original_context_length rows), inv_freq = 1.0 / (ext * theta ** e) in f32
//            (recipe_f32.cpp's longrope), each times its mscale: short_mscale / long_mscale when
//            the config gives them, else make_mscale_su(context / original) = sqrt(1 + ln(ctx/orig)
//            / ln(orig)), HF's attention factor. The graph picks one per run with attention_mask
//            --> Shape --> Gather(1) --> Greater(·, original) --> If (then: long): the long cache
//            iff the total sequence length exceeds original_context_length, HF's rule; the spec's
//            scaling.seq_len is that length (0: the short cache).
//   linear, dynamic: no branch of make_rope_init reads them (a {rope_type: linear} config is
//            exported with the unscaled cache): not implemented.
// The cache has cache_length rows and the op rejects position_ids outside [0, rows): apply()
// returns unsupported for them. The spec carries that extent for LongRoPE only; for the other
// kinds the cache is taken as long as the positions asked.
// Not modelled (the builder reads the config, the spec only its RoPE): at this commit
// original_context_length is config.original_max_position_embeddings when the config has that
// attribute (Phi-3), else `config.rope_scaling["original..."] if hasattr(config.rope_scaling,
// "original_max_position_embeddings")` (never true of a dict), else context_length; a llama3 or
// YaRN config that names its original context only inside rope_scaling (Llama 3.1) is exported
// with old_context_len = max_position_embeddings, not the spec's recipe (docs/engine-onnxruntime.md
// gives the size). A YaRN block without beta_fast (Qwen2.5's model-card block) is exported
// unscaled, with max_position_embeddings rows.
// Checked bit for bit against golden sets made by the shipped library with caches made by the
// builder's functions themselves (tests/golden/README.md).
#include "torch_cpu.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace ropecheck::engines {
namespace {

// Pairs rotated by the AVX2 kernel's FMA form; the rest of an interleaved row (the tail below)
// rounds both products separately.
inline void fused_pair(float xa, float xb, float c, float s, float& ya, float& yb) {
  ya = std::fma(xa, c, -(xb * s));
  yb = std::fma(xa, s, xb * c);
}
inline void unfused_pair(float xa, float xb, float c, float s, float& ya, float& yb) {
  ya = xa * c - xb * s;
  yb = xa * s + xb * c;
}

// Whether pair i of a row of n_pairs is rotated with FMA. Measured with the shipped library (the
// golden set's README: rotary_dim 2..64 in both layouts, every pair of 42 positions): the half
// layout fuses every pair, remainder included; the interleaved layout fuses the pairs of its
// 16-element blocks and the first pair of the remainder, and rounds the products of the later
// remainder pairs separately: what the 1.30.0 build made of the interleaved tail (the stored source
// versions disagree on that tail, so the golden set decides). f16 cannot tell: an f16 x f16 product
// is exact in f32.
inline bool avx2_fuses(Layout l, std::int64_t i, std::int64_t n_pairs) {
  if (l != Layout::interleaved) return true;
  const std::int64_t blocked = n_pairs / 8 * 8;
  return i <= blocked;
}

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a, const std::vector<float>& inv_freq,
                float mscale) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  const std::int64_t np = spec.n_pairs();
  std::vector<float> cos_t, sin_t;
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    // The cache row in the model dtype (kept as f32: the kernel widens it exactly).
    torch_cpu::token_table<T>(a.positions[t], inv_freq, mscale, cos_t, sin_t);
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      for (std::int64_t i = 0; i < np; ++i) {
        const auto [ia, ib] = spec.pair(i);
        const float xa = static_cast<float>(in[off + ia]), xb = static_cast<float>(in[off + ib]);
        float ya = 0, yb = 0;
        if (avx2_fuses(spec.layout, i, np))
          fused_pair(xa, xb, cos_t[i], sin_t[i], ya, yb);
        else
          unfused_pair(xa, xb, cos_t[i], sin_t[i], ya, yb);
        out[off + ia] = T(ya);
        out[off + ib] = T(yb);
      }
      kernels::copy_tail(spec, in + off, out + off);
    }
  }
}

// The builder's cache for a spec: its f32 inv_freq, the f32 mscale its cos/sin are multiplied by
// and its rows (the file comment says which builder function each kind follows).
struct BuilderCache {
  std::vector<float> inv_freq;
  float mscale = 1;
  std::int64_t rows = std::numeric_limits<std::int64_t>::max();
};

// Whether the builder exports this spec's scaling as the spec means it.
bool builder_writes(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  switch (sc.kind) {
    case ScalingKind::none:
    case ScalingKind::llama3:
      return true;
    case ScalingKind::yarn: {  // gptoss.py: dim and d_half from head_size, no truncation
      if (sc.truncate || sc.attention_factor || sc.mscale != 0 || sc.mscale_all_dim != 0 ||
          spec.rotary_dim != spec.head_dim)
        return false;
      // make_inv_freq_rescaled_with_ntk's `assert 0 < low < high < d_half - 1` (the range is
      // returned clamped to [0, dim - 1]: a clamped end fails the assertion too).
      const auto [low, high] = yarn_correction_range_f64(spec);
      return 0 < low && low < high && high < static_cast<double>(spec.head_dim) / 2 - 1;
    }
    case ScalingKind::longrope:
      return !sc.attention_factor && sc.original_max_position_embeddings > 0 &&
             sc.max_position_embeddings >= sc.original_max_position_embeddings;
    default:
      return false;
  }
}

BuilderCache builder_cache(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  BuilderCache c;
  c.inv_freq = torch_cpu::hf_inv_freq(spec);
  // mscale: 1, make_mscale_yarn(factor) or make_mscale_su(ctx / orig), HF's attention factors
  // (spec.cpp, f64 as numpy evaluates them), times the spec's own magnitude (1 for a model).
  c.mscale = static_cast<float>(magnitude_f64(spec));
  if (sc.kind == ScalingKind::longrope)  // the If's choice: long iff the length > original
    c.rows = sc.seq_len > sc.original_max_position_embeddings ? sc.max_position_embeddings
                                                              : sc.original_max_position_embeddings;
  return c;
}

class OnnxRuntimeCpuKernel final : public EngineBase {
 public:
  OnnxRuntimeCpuKernel()
      : EngineBase({Dtype::f32, Dtype::f16}, {Layout::interleaved, Layout::half}) {}
  std::string name() const override { return "onnxruntime_cpu"; }
  std::string description() const override {
    return "ONNX Runtime CPU RotaryEmbedding (contrib and opset 23): exporter's f32 cos/sin cache "
           "cast to the model dtype, MLAS AVX2 rotation in f32 with FMA, rounded once";
  }
  Provenance provenance() const override {
    return {"ONNX Runtime CPU RotaryEmbedding (com.microsoft and ai.onnx opset 23, MLAS AVX2)",
            "microsoft/onnxruntime onnxruntime/core/mlas/lib/rotary_embedding_kernel_avx2.cpp @ "
            "13ad4150d89463de107d3872f5e0734b05ffcfb8 (release 1.30.0: f2c39fe2f); cache: "
            "microsoft/onnxruntime-genai src/python/py/models/builders/base.py (make_rope_init: "
            "llama3, yarn with beta_fast, longrope; no linear or dynamic branch) and "
            "builders/gptoss.py @ 80b45b08e5e8d8193c8a3a8cef000740b9fd72f0",
            "bit for bit against golden sets made by onnxruntime-node 1.30.0's CPU library "
            "(both ops) on caches from the builder's own functions "
            "(src/kernels/tests/golden/onnxruntime_cpu.golden, onnxruntime_cpu_scaled.golden; "
            "ctest engines_native_test, engines_ort_scaled_test)",
            "the cache is the exporter's (PyTorch f32 cos/sin, modelled as glibc cosf/sinf: "
            "PyTorch's AVX2 loop differs by an ulp in some entries, within trig_error); the "
            "AVX2 path only (CPUs without AVX2 take MLAS's unfused scalar fallback); the "
            "builder's config reading is not modelled: a llama3/YaRN config naming its "
            "original context only inside rope_scaling is exported with max_position_embeddings "
            "in its place, a YaRN block without beta_fast unscaled"};
  }
  // Model dtype d: the cache holds f32 cos/sin rounded into d; the rotation computes in f32.
  Policy policy(Dtype d) const override {
    return {Dtype::f32,
            d,
            Dtype::f32,
            AngleRecipe::hf_f32,
            true,
            "MLAS AVX2: f32 FMA rotation, f16 widened exactly and rounded once; the interleaved "
            "tail (rotary_dim mod 16) partly unfused; cache from the model builder",
            2};
  }
  Domain domain() const override {
    Domain dm = EngineBase::domain();
    // position_ids index the cache, whose row count is an int (rotary_embedding_helper).
    dm.min_position = 0;
    dm.max_position = std::numeric_limits<std::int32_t>::max() - 1;
    // The interleaved tail rounds differently from the half layout's masked block.
    dm.layouts_bitwise_symmetric = false;
    return dm;
  }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    RopeSpec plain = spec;
    plain.scaling = Scaling{};
    return EngineBase::supports(plain, d) && spec_is_valid(spec) && builder_writes(spec);
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (auto st = check(spec, a); st != KernelStatus::ok || a.n_tokens == 0 || a.n_heads == 0)
      return st;
    const BuilderCache c = builder_cache(spec);
    // Past the cache: the op rejects the position (rotary_embedding_helper).
    const std::int64_t last = std::min<std::int64_t>(domain().max_position, c.rows - 1);
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      if (a.positions[t] < domain().min_position || a.positions[t] > last)
        return KernelStatus::unsupported;
    if (a.dtype == Dtype::f16)
      rotate_all<Eigen::half>(spec, a, c.inv_freq, c.mscale);
    else
      rotate_all<float>(spec, a, c.inv_freq, c.mscale);
    return KernelStatus::ok;
  }
};

}  // namespace

const EngineKernel& onnxruntime_cpu_kernel() {
  static const OnnxRuntimeCpuKernel k;
  return k;
}

}  // namespace ropecheck::engines
