// `vllm_native`: vLLM's RotaryEmbedding.forward_native (the PyTorch path: CPU, and the reference
// the CUDA op is tested against) and the scaled classes beside it, NeoX (half) and GPT-J
// (interleaved). Follows (read through the search tool's stored copies; the full snapshots were
// too large to fetch; each file at the one commit the store holds for it):
//   vllm-project/vllm vllm/model_executor/layers/rotary_embedding/
//     base.py @ 04458da08417899fc04046216c986d28abeb85af (RotaryEmbedding)
//       _compute_inv_freq: inv_freq_i = 1 / base^(f32(2i) / rotary_dim) on f32 tensors
//       _compute_cos_sin_cache: an f32 row of positions 0 .. max_position_embeddings - 1, its
//         outer product with inv_freq (an einsum), then cos and sin of it concatenated per row
//       __init__: the cache cast to the model dtype
//       forward_native: the cache rows gathered by position; the rotary slice rotated, the rest
//         concatenated back unchanged
//     common.py @ 1593f0c1de61ba1e6efb9315ac8d0a3d2fe14cdd (and 002d181a55a0 for the unscaled
//     golden set; the same apply_rotary_emb_torch): NeoX splits the rotary part into halves,
//     GPT-J into even and odd elements; x1 cos - x2 sin and x2 cos + x1 sin, each op in the
//     model dtype; YaRN's correction range in Python floats (floor / ceil, clamped) and its ramp
//     (arange - low) / (high - low) clamped to [0, 1] in f32
//     linear_scaling_rope.py @ 0f17ee061e413bf8ab7927f926f69cdff24dc63e: the position row
//       divided by the factor in f32 (t / factor), inv_freq unscaled; ceil(L * factor) rows
//     dynamic_ntk_scaling_rope.py @ 50feac95f9e53a97d6ed27fee6bfe3b163d18594: one base for the
//       whole cache, base * (factor * max_len / L - (factor - 1)) ** (rd / (rd - 2)) in Python
//       floats with max_len = L * factor: HF's dynamic formula at seq_len = factor * L, at every
//       position (HF uses base itself until the sequence passes L); ceil(max_len) rows
//     yarn_scaling_rope.py @ ffdc985737c94233f2c88629c4450022e5bf4925 and
//     deepseek_scaling_rope.py @ 00d678e109f09c2d1845e7a6626ba9fd5980e4f0: pos = base **
//       (arange / rd) in f32; extrapolation 1 / pos, interpolation 1 / (factor * pos); mask =
//       1 - ramp; inv_freq = interp * (1 - mask) + extrap * mask (four f32 ops); cos and sin
//       times mscale in f32 (YaRN: 0.1 ln f + 1; DeepSeek: the mscale / mscale_all_dim ratio);
//       ceil(original * factor) rows
//     llama3_rope.py @ 045d7575500e01e0f4a7ff84e039a9f7f7dc3bd0: wave_len = 2pi / inv_freq as
//       PyTorch computes a scalar over a tensor (reciprocal, then times f32(2pi)); smooth =
//       (orig / wave_len - low) / (high - low) the same way; the bands chosen on f32 compares;
//       medium band ((1 - smooth) * inv) / factor + smooth * inv; max_position_embeddings rows
//     phi3_long_rope_scaled_rope.py @ 17d618b0f944610b73e79e6726983fbe7679f613: NeoX only;
//       inv_freq = 1 / (f32(factor_i) * pos); cos and sin times mscale = sqrt(1 + ln(max /
//       orig) / ln(orig)) in f32; the long factors chosen ONCE at start-up when max_model_len >
//       original_max_position_embeddings (spec.scaling.seq_len plays max_model_len: the spec's
//       choice rule is HF's, by the sequence length, which vLLM fixes to max_model_len); the long
//       cache has max_position_embeddings rows, the short one original_max_position_embeddings
//     mrope.py @ dba39a557eabb84d809fc4ac86d5afd0b6bc5b84 (MRotaryEmbedding, Qwen2-VL / Qwen2.5-VL
//       M-RoPE and, with mrope_interleaved, Qwen3-VL's): RotaryEmbeddingBase's cache (base.py @
//       072d10a084c2b89e63323c781eacd7d7e218ba2b: the steps above; f32, cast to the model
//       dtype), its rows gathered by each axis' position ([3, tokens]), then cos and sin
//       each split by mrope_section on the half (rotary_dim / 2) dim and chunk k taken from axis
//       k (torch.cat), or with mrope_interleaved apply_interleaved_rope (axis h on pairs
//       1, 4, .. < 3 sections[1], w on 2, 5, .. < 3 sections[2], t elsewhere): which is the
//       spec's pair_axis() for mrope / imrope. The rotation is common.py's (NeoX halves, each op in
//       the model dtype). 1-D positions (text only) gather one row for every pair: the same as
//       t = h = w. The cache has 4 * max_position_embeddings rows, which the unscaled spec does
//       not carry (taken as long as the positions asked, as for RotaryEmbedding).
//     __init__.py @ 926c71f6f25f8fe0a71ba4b168205e64bef24a36 (get_rope): MRotaryEmbedding for
//       rope_type default and yarn when the config has mrope_section
// Cache extent: positions index the cos/sin cache, so only 0 .. rows - 1 are served; apply()
// returns unsupported for a position past it (vLLM's index_select would raise, or for the short
// LongRoPE cache silently read the long cache's rows). Unscaled, and linear / llama3 without
// max_position_embeddings in the spec: the cache is taken as long as the positions asked.
// Not modelled: explicit attention factors, YaRN without truncation and DeepSeek's mscale without
// mscale_all_dim (the spec's HF reading differs), and MRotaryEmbedding with YaRN (get_rope's
// "yarn" with mrope_section): it passes 4 * original_max_position_embeddings to the base class,
// so YaRN's correction range and cache are those of a 4x longer original context, not the
// config's; M-RoPE with any other rope_type is not MRotaryEmbedding (get_rope builds the 1-D
// class): unsupported.
// Trig as hf_eager: glibc cosf/sinf (PyTorch's scalar CPU loop); SLEEF / CUDA modelled.
#include "ropecheck/recipe_f32.hpp"
#include "torch_cpu.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

namespace ropecheck::engines {
namespace {

// What vLLM's class builds for one spec: the cache's inv_freq, the f32 divisor of the position
// row (linear; 0: none), the f32 factor cos and sin are multiplied by, the cache's rows.
struct VllmCache {
  std::vector<float> inv_freq;
  float position_divisor = 0;
  float mscale = 1;
  std::int64_t rows = std::numeric_limits<std::int64_t>::max();
};

std::int64_t rows_of(double extent) {
  return extent > 0 ? static_cast<std::int64_t>(std::ceil(extent))
                    : std::numeric_limits<std::int64_t>::max();
}

// inv_freq of every class: f32_inv_freq(AngleRecipe::vllm_f32, spec) (src/core/recipe_f32.cpp:
// YaRN / DeepSeek, llama3 and LongRoPE write HF's f32 ops in the same order; linear leaves
// inv_freq unscaled and dynamic takes its one base), the definition the reports' angle split
// reproduces too. What stays here: the position divisor, mscale and the cache extent.

// Phi3LongRoPEScaledRotaryEmbedding: the cache the start-up choice selects.
VllmCache longrope_cache(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  const bool use_long = sc.seq_len > sc.original_max_position_embeddings;
  const double scale = static_cast<double>(sc.max_position_embeddings) /
                       static_cast<double>(sc.original_max_position_embeddings);
  VllmCache c;
  c.mscale = static_cast<float>(
      scale <= 1.0
          ? 1.0
          : std::sqrt(1 + std::log(scale) /
                              std::log(static_cast<double>(sc.original_max_position_embeddings))));
  c.inv_freq = f32_inv_freq(AngleRecipe::vllm_f32, spec);  // the factors use_long selects
  c.rows = use_long ? sc.max_position_embeddings : sc.original_max_position_embeddings;
  return c;
}

double deepseek_get_mscale(double f, double m) {
  return f <= 1 ? 1.0 : 0.1 * m * std::log(f) + 1.0;
}

// The variants vLLM's classes compute as the spec means them (see the file comment); false: not
// this engine's.
bool vllm_models(const RopeSpec& spec) {
  try {
    spec.validate();  // e.g. a LongRoPE factor list of the wrong length is never indexed
  } catch (const SpecError&) {
    return false;
  }
  const Scaling& sc = spec.scaling;
  if (is_multi_axis(spec.layout))  // MRotaryEmbedding: default frequencies (its YaRN: see above)
    return spec.layout != Layout::axial && sc.kind == ScalingKind::none;
  switch (sc.kind) {
    case ScalingKind::none:
    case ScalingKind::linear:
    case ScalingKind::llama3:
      return true;
    case ScalingKind::dynamic: {  // the one base vLLM computes is HF's at seq_len = factor * L
      const double max_len = static_cast<double>(sc.max_position_embeddings) * sc.factor;
      return sc.max_position_embeddings > 0 && max_len == std::floor(max_len) &&
             static_cast<double>(sc.seq_len) == max_len;
    }
    case ScalingKind::yarn:
      return sc.truncate && !sc.attention_factor && (sc.mscale == 0) == (sc.mscale_all_dim == 0);
    case ScalingKind::longrope:
      return spec.layout == Layout::half && !sc.attention_factor &&
             sc.original_max_position_embeddings > 0 &&
             sc.max_position_embeddings >= sc.original_max_position_embeddings;
    default:
      return false;
  }
}

VllmCache vllm_cache(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  if (sc.kind == ScalingKind::longrope) return longrope_cache(spec);
  VllmCache c;
  c.inv_freq = f32_inv_freq(AngleRecipe::vllm_f32, spec);
  c.position_divisor = f32_position_divisor(AngleRecipe::vllm_f32, spec);
  switch (sc.kind) {
    case ScalingKind::linear:
      c.rows = rows_of(static_cast<double>(sc.max_position_embeddings) * sc.factor);
      return c;
    case ScalingKind::dynamic:
      c.rows = rows_of(static_cast<double>(sc.max_position_embeddings) * sc.factor);
      return c;
    case ScalingKind::yarn:
      c.mscale =
          static_cast<float>(sc.mscale != 0 ? deepseek_get_mscale(sc.factor, sc.mscale) /
                                                  deepseek_get_mscale(sc.factor, sc.mscale_all_dim)
                                            : deepseek_get_mscale(sc.factor, 1.0));
      c.rows = rows_of(static_cast<double>(sc.original_max_position_embeddings) * sc.factor);
      return c;
    case ScalingKind::llama3:
      c.rows = rows_of(static_cast<double>(sc.max_position_embeddings));
      return c;
    default:
      return c;
  }
}

// The cache rows of the tokens' positions, computed as vLLM does (f32 position row, divided by
// the linear factor, one f32 product with inv_freq, glibc cosf / sinf, times mscale in f32, cast
// to the model dtype), then torch_cpu::rotate_head. M-RoPE: pair i's entry comes from the row of
// its axis' position (one position per token: every pair's).
template <class T>
void run_cache(const RopeSpec& spec, const TensorArgs& a, const VllmCache& c) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  std::vector<torch_cpu::opmath_t<T>> cos_t(c.inv_freq.size()), sin_t(c.inv_freq.size());
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    for (std::size_t i = 0; i < c.inv_freq.size(); ++i) {
      const std::int64_t axis = a.n_axes == 1 ? 0 : spec.pair_axis(static_cast<std::int64_t>(i));
      float row = static_cast<float>(a.positions[t * a.n_axes + axis]);
      if (c.position_divisor != 0) row = row / c.position_divisor;
      const float angle = row * c.inv_freq[i];
      cos_t[i] = torch_cpu::round_op<T>(std::cos(angle) * c.mscale);
      sin_t[i] = torch_cpu::round_op<T>(std::sin(angle) * c.mscale);
    }
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      torch_cpu::rotate_head<T>(spec, in + off, out + off, cos_t, sin_t);
    }
  }
}

class VllmNativeKernel final : public EngineBase {
 public:
  VllmNativeKernel()
      : EngineBase({Dtype::f32, Dtype::f16, Dtype::bf16},
                   {Layout::half, Layout::interleaved, Layout::mrope, Layout::imrope}) {}
  std::string name() const override { return "vllm_native"; }
  std::string description() const override {
    return "vLLM forward_native: f32 cos/sin cache (scaled classes: linear divides the position, "
           "dynamic NTK one base, YaRN / DeepSeek mscale, llama3, LongRoPE chosen at start-up; "
           "MRotaryEmbedding: each pair's row from its t/h/w axis, mrope_section chunks or "
           "Qwen3-VL's interleaved) cast to the model dtype, rotation in the model dtype (one "
           "rounding per op); positions past the cache are not served";
  }
  Provenance provenance() const override {
    return {"vLLM (RotaryEmbedding.forward_native, the scaled classes, MRotaryEmbedding)",
            "vllm-project/vllm vllm/model_executor/layers/rotary_embedding/: base.py @ "
            "04458da08417899fc04046216c986d28abeb85af; common.py @ "
            "002d181a55a03803d7d69547846630069d2378b8 / 1593f0c1de61ba1e6efb9315ac8d0a3d2fe14cdd; "
            "linear_scaling_rope.py @ 0f17ee061e413bf8ab7927f926f69cdff24dc63e; "
            "dynamic_ntk_scaling_rope.py @ 50feac95f9e53a97d6ed27fee6bfe3b163d18594; "
            "yarn_scaling_rope.py @ ffdc985737c94233f2c88629c4450022e5bf4925; "
            "deepseek_scaling_rope.py @ 00d678e109f09c2d1845e7a6626ba9fd5980e4f0; "
            "llama3_rope.py @ 045d7575500e01e0f4a7ff84e039a9f7f7dc3bd0; "
            "phi3_long_rope_scaled_rope.py @ 17d618b0f944610b73e79e6726983fbe7679f613; "
            "mrope.py @ dba39a557eabb84d809fc4ac86d5afd0b6bc5b84 (with base.py @ "
            "072d10a084c2b89e63323c781eacd7d7e218ba2b)",
            "bit for bit against golden sets made by those classes at those commits in PyTorch "
            "1.13 CPU (unscaled: 33,792 outputs, src/python/tests/golden/vllm_native.npz; scaled: "
            "201,216 outputs of 42 cases, src/python/tests/golden/vllm_native_scaled.npz; "
            "MRotaryEmbedding: 110,592 outputs of 21 cases, "
            "src/python/tests/golden/vllm_native_mrope.npz; ctest engines_torch)",
            "trig: glibc cosf/sinf, PyTorch's scalar CPU loop (ATEN_CPU_CAPABILITY=default); "
            "the cache built by PyTorch's AVX2/AVX-512 loops (SLEEF u10) or on the GPU differs by "
            "1-2 ulp in some entries, covered by the declared trig_error; MRotaryEmbedding with "
            "YaRN (its correction range at 4x the original context) not modelled"};
  }
  Domain domain() const override {
    Domain d = EngineBase::domain();
    d.min_position = 0;  // positions index the cos/sin cache (its extent: apply())
    d.magnitude_scale = false;
    return d;
  }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    if (spec.scale != 1 || !vllm_models(spec)) return false;
    RopeSpec unscaled = spec;
    unscaled.scaling = Scaling{};
    return EngineBase::supports(unscaled, d);
  }
  Policy policy(Dtype d) const override {
    return {Dtype::f32,
            d,
            d,
            AngleRecipe::vllm_f32,
            false,
            "PyTorch eager ops: cache cast to the model dtype, each product and the add/sub "
            "round into it",
            2};
  }
  // Positions: one per token, or for M-RoPE also [tokens, 3] (t, h, w; vLLM's [3, tokens]).
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    const bool multi = is_multi_axis(spec.layout);
    if (multi && a.n_axes != 1 && a.n_axes != spec.n_axes() && supports(spec, a.dtype))
      return KernelStatus::error;
    TensorArgs one = a;  // check() takes one position per token
    if (multi) one.n_axes = 1;
    if (auto st = check(spec, one); st != KernelStatus::ok || a.n_tokens == 0 || a.n_heads == 0)
      return st;
    const VllmCache c = vllm_cache(spec);
    for (std::int64_t k = 0; k < a.n_tokens * a.n_axes; ++k) {
      // index_select raises; MRotaryEmbedding's cache[positions] would wrap to the last rows
      if (a.positions[k] < 0) return KernelStatus::error;
      if (a.positions[k] >= c.rows) return KernelStatus::unsupported;  // past the cache
    }
    return kernels::dispatch_dtype(a.dtype, [&](auto tag) {
      run_cache<decltype(tag)>(spec, a, c);
      return KernelStatus::ok;
    });
  }
};

}  // namespace

const EngineKernel& vllm_native_kernel() {
  static const VllmNativeKernel k;
  return k;
}

}  // namespace ropecheck::engines
