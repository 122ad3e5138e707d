// What the ggml engine recipes (ggml_cpu.cpp, ggml_cuda.cpp) share: the rope op's parameters as
// llama.cpp derives them from the GGUF its converter writes (or nothing when llama.cpp does not
// run that configuration), ggml's f32 YaRN steps, and the per-token loop with the backend's own
// angle ladder, trig and log plugged in.
//   ggml-org/llama.cpp src/llama-model.cpp (load_hparams) and src/llama-context.cpp
//   (llama_context::llama_context) @ 001d906a6d86e2490e394361e7cc6f478b100088:
//     freq_scale = 1.0f / factor, the factor read from the GGUF as an f32 (linear and yarn);
//     ext_factor = 1.0f for yarn, else 0; yarn_attn_factor = get_mscale(factor, 1) =
//     0.1f * logf(factor) + 1.0f, then multiplied by 1.0f / (1.0f + 0.1f * logf(factor)) to
//     cancel the factor ggml applies itself (llama.cpp PR 17945), both contracted to fmaf by GCC;
//     then, for every scaling type, yarn_attn_factor *= hparams.rope_attn_factor (the GGUF's
//     rope.scaling.attn_factor, 1 when absent); beta_fast 32, beta_slow 1, n_ctx_orig =
//     original_max_position_embeddings.
//   ggml-org/llama.cpp convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors) @
//     0024aa7417efd50a7c2a79e049dfbbbceb0beaaf: llama3 becomes a `rope_freqs` tensor computed in
//     torch float32 (llama3_rope_freqs below); explicit freq factors are stored as f32.
//   LongRoPE (Phi-3 / Phi-3.5 / Phi-4-mini): the converter (Phi3MiniModel.generate_extra_tensors,
//     read in the store's split converter module, commit not shown by the index) writes
//     rope_factors_long / rope_factors_short as torch.float32 tensors of the config's lists and
//     rope.scaling.attn_factor = sqrt(1 + ln(scale) / ln(original)) in Python floats (scale =
//     max_position_embeddings / original, 1.0 when scale <= 1), stored as an f32; it writes no
//     scaling factor (freq_scale 1) and LongRoPE is not YaRN (ext_factor 0), so ggml's mscale
//     is 1.0f * that f32. The graph (src/models/phi3.cpp @ a0b8c172c7113ff5275be4de7f6f68d2
//     14a527c6, llama_model::get_rope_factors in src/llama-model.cpp) hands ggml_rope_ext the long
//     tensor when the per-sequence context exceeds n_ctx_orig_yarn (strictly), else the short one:
//     the spec's seq_len plays that context (as vllm_native's max_model_len). At
//     358a4a0109ee414feb67a8bec271e1e6c5aa9302 phi3.cpp passes the largest position of the batch
//     instead (llama.cpp PR 24875): seq_len is then that quantity; the bits of a choice are the
//     same.
// Not run by llama.cpp here (unsupported rows): dynamic NTK (enum llama_rope_scaling_type in
// include/llama.h @ 0011438e931ec7fd258433f61d411301a759fae2 has none, linear, yarn, longrope),
// YaRN with an explicit attention_factor (the converter writes it as rope.scaling.yarn_attn_factor,
// which llama-context.cpp @ 001d906a overwrites with get_mscale(factor, 1) whenever ext_factor !=
// 0: HF applies the explicit factor, llama.cpp 1 + 0.1 ln f) or DeepSeek's mscale pair (the
// rope_yarn_log_mul path, not modelled), YaRN without truncation (ggml_rope_yarn_corr_dims in
// ggml-org/ggml src/ggml.c @ d99724f2 always floors/ceils; llama.cpp has no truncate key), LongRoPE
// with an explicit attention_factor (the converter ignores it and derives its own), a magnitude
// scale, proportional / imrope / axial layouts, LongRoPE on M-RoPE.
#pragma once

#include "engine.hpp"
#include "ropecheck/spec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <vector>

namespace ropecheck::engines {

struct GgmlRopeParams {
  bool multi = false;  // ggml_rope_multi, GGML_ROPE_TYPE_MROPE (NEOX pairing)
  float freq_base = 10000.0f, freq_scale = 1.0f, ext_factor = 0.0f, attn_factor = 1.0f;
  float beta_fast = 32.0f, beta_slow = 1.0f;
  int n_ctx_orig = 0;
  std::vector<float> freq_factors;  // the rope_freqs tensor, one per pair; empty: none
};

// torch float32 as the converter runs it on 0-d tensors: `s / t` is t.reciprocal() * s
// (torch/_tensor.py __rtruediv__), scalars are cast to f32, every op rounds once. The pow is
// glibc's powf (torch's scalar path; its AVX2 lanes use Sleef_powf8_u10, equal on the golden set's
// configurations: tests/golden/README.md).
inline std::vector<float> llama3_rope_freqs(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  const int dim = static_cast<int>(spec.rotary_dim);
  const float base = static_cast<float>(spec.base), factor = static_cast<float>(sc.factor);
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const float low_wavelen = static_cast<float>(orig / sc.low_freq_factor);
  const float high_wavelen = static_cast<float>(orig / sc.high_freq_factor);
  const float two_pi = static_cast<float>(2 * std::numbers::pi);
  std::vector<float> ff;
  for (int i = 0; i < dim; i += 2) {
    const float e = static_cast<float>(i) / static_cast<float>(dim);
    const float freq = 1.0f / std::pow(base, e);
    const float wavelen = (1.0f / freq) * two_pi;
    if (wavelen < high_wavelen) {
      ff.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      ff.push_back(factor);
    } else {
      const float r = (1.0f / wavelen) * static_cast<float>(orig);
      const float smooth = (r - static_cast<float>(sc.low_freq_factor)) /
                           static_cast<float>(sc.high_freq_factor - sc.low_freq_factor);
      ff.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return ff;
}

// LongRoPE as the converter writes it and llama.cpp's graph picks it (file comment): the chosen
// factor list as an f32 tensor, attn_factor the converter's f64 value rounded into the GGUF's f32,
// freq_scale 1 and ext_factor 0 (p's defaults). n_ctx and n_ctx_orig_yarn are uint32 in llama.cpp.
inline std::optional<GgmlRopeParams> longrope_params(const RopeSpec& spec, GgmlRopeParams p) {
  const Scaling& sc = spec.scaling;
  const std::int64_t u32_max = (std::int64_t{1} << 32) - 1;
  if (p.multi || sc.attention_factor || sc.original_max_position_embeddings < 2 ||
      sc.original_max_position_embeddings > u32_max || sc.seq_len > u32_max ||
      static_cast<std::int64_t>(sc.long_factor.size()) != spec.n_pairs() ||
      static_cast<std::int64_t>(sc.short_factor.size()) != spec.n_pairs())
    return std::nullopt;
  const bool use_long = sc.seq_len > sc.original_max_position_embeddings;
  for (double f : use_long ? sc.long_factor : sc.short_factor) {
    const float f32 = static_cast<float>(f);  // torch.tensor(..., dtype=torch.float32)
    if (!(f32 > 0) || std::isinf(f32)) return std::nullopt;
    p.freq_factors.push_back(f32);
  }
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const double scale = static_cast<double>(sc.max_position_embeddings) / orig;
  const double attn = scale > 1.0 ? std::sqrt(1 + std::log(scale) / std::log(orig)) : 1.0;
  p.attn_factor = static_cast<float>(attn);  // the GGUF's f32; 1.0f * it in llama-context.cpp
  p.n_ctx_orig = static_cast<int>(
      std::min<std::int64_t>(sc.original_max_position_embeddings, (std::int64_t{1} << 31) - 1));
  return p;
}

// The parameters of ggml_rope_ext / ggml_rope_multi for spec, or nothing.
inline std::optional<GgmlRopeParams> llama_cpp_rope_params(const RopeSpec& spec) {
  GgmlRopeParams p;
  if (spec.scale != 1 || spec.rotary_dim < 2 || spec.rotary_dim % 2 != 0 ||
      spec.rotary_dim > spec.head_dim)
    return std::nullopt;
  if (spec.layout == Layout::mrope) {
    if (spec.sections.size() != 3) return std::nullopt;
    p.multi = true;
  } else if (spec.layout != Layout::interleaved && spec.layout != Layout::half) {
    return std::nullopt;
  }
  p.freq_base = static_cast<float>(spec.base);
  const Scaling& sc = spec.scaling;
  switch (sc.kind) {
    case ScalingKind::none:
      return p;
    case ScalingKind::linear:
      p.freq_scale = 1.0f / static_cast<float>(sc.factor);
      return p;
    case ScalingKind::freq_factors:
      if (static_cast<std::int64_t>(sc.freq_factors.size()) != spec.n_pairs()) return std::nullopt;
      for (double f : sc.freq_factors) p.freq_factors.push_back(static_cast<float>(f));
      return p;
    case ScalingKind::llama3:
      if (sc.high_freq_factor == sc.low_freq_factor) return std::nullopt;
      p.freq_factors = llama3_rope_freqs(spec);
      return p;
    case ScalingKind::longrope:
      return longrope_params(spec, p);
    case ScalingKind::yarn: {
      const bool mscale_pair = sc.mscale != 0 && sc.mscale_all_dim != 0;
      if (sc.attention_factor || mscale_pair || !sc.truncate || sc.factor < 1 ||
          sc.original_max_position_embeddings <= 0 ||
          sc.original_max_position_embeddings > (std::int64_t{1} << 31) - 1)
        return std::nullopt;
      p.freq_scale = 1.0f / static_cast<float>(sc.factor);
      p.ext_factor = 1.0f;
      const float factor = 1.0f / p.freq_scale;
      const float mscale = factor <= 1.0f ? 1.0f : std::fma(0.1f, std::log(factor), 1.0f);
      p.attn_factor = mscale * (1.0f / std::fma(0.1f, std::log(factor), 1.0f));
      p.beta_fast = static_cast<float>(sc.beta_fast);
      p.beta_slow = static_cast<float>(sc.beta_slow);
      p.n_ctx_orig = static_cast<int>(sc.original_max_position_embeddings);
      return p;
    }
    default:
      return std::nullopt;
  }
}

// ggml_rope_yarn_corr_dims (ggml-org/ggml src/ggml.c, host code of every backend) in f32, the C
// expression's conversions written out: n_dims * logf(n_ctx_orig / (beta * 2 * (float)M_PI)) /
// (2 * logf(freq_base)), floorf for beta_fast, ceilf for beta_slow, clamped to [0, n_dims - 1].
inline void ggml_yarn_corr_dims(int n_dims, const GgmlRopeParams& p, float dims[2]) {
  const auto corr_dim = [&](float n_rot) {
    return static_cast<float>(n_dims) *
           std::log(static_cast<float>(p.n_ctx_orig) /
                    (n_rot * 2.0f * static_cast<float>(std::numbers::pi))) /
           (2.0f * std::log(p.freq_base));
  };
  const float start = std::floor(corr_dim(p.beta_fast));
  const float end = std::ceil(corr_dim(p.beta_slow));
  dims[0] = 0 > start ? 0.0f : start;
  dims[1] = static_cast<float>(n_dims - 1) < end ? static_cast<float>(n_dims - 1) : end;
}

// rope_yarn for pair i (ops.cpp; rope.cu's device copy is the same expression): theta_interp =
// freq_scale * theta_extrap; with ext_factor != 0, ramp_mix = (1 - clamp((i - low) /
// max(0.001f, high - low), 0, 1)) * ext_factor, theta = theta_interp * (1 - ramp_mix) +
// theta_extrap * ramp_mix and mscale = attn_factor * (1.0f + 0.1f * logf(1.0f / freq_scale)),
// both contracted to FMA by GCC (and by nvcc); cos = cos(theta) * mscale, sin likewise.
// sincos(x, s, c) and log(x) are the backend's functions.
template <class SinCos, class Log>
void ggml_rope_yarn(float theta_extrap, const GgmlRopeParams& p, const float corr[2], int i,
                    float& c, float& s, SinCos sincos, Log log) {
  const float theta_interp = p.freq_scale * theta_extrap;
  float theta = theta_interp;
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    const float y = (static_cast<float>(i) - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
    const float ramp_mix = (1 - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
    theta = std::fma(theta_interp, 1 - ramp_mix, theta_extrap * ramp_mix);
    mscale *= std::fma(0.1f, log(1.0f / p.freq_scale), 1.0f);
  }
  sincos(theta, s, c);
  c *= mscale;
  s *= mscale;
}

// rotate_pairs as GCC compiles it for an FMA target (ggml's default GGML_NATIVE build on x86-64,
// and every FMA variant of its release builds): C++17 with GNU extensions contracts by default
// (-ffp-contract=fast), x0*cos - x1*sin becomes fma(x0, cos, -(x1*sin)) and x0*sin + x1*cos
// becomes fma(x0, sin, x1*cos). The golden set fixes which operand pair is fused: these two
// match every output, the other contractions and the unfused form miss 14-30% of them. A build
// without FMA rounds the products separately (the bound is the same: bounds.cpp section 3).
inline void ggml_rotate_pair(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = std::fma(x0, c, -(x1 * s));
  y1 = std::fma(x0, s, x1 * c);
}

// One ggml rope call over a.n_tokens x a.n_heads vectors of T (f32 or f16): per token the cache
// (angles(pos, theta): the unscaled angle of every pair from the token's float positions
// pos[axis], then / ff, then ggml_rope_yarn), per head rotate_pairs stored once into T, dims past
// n_dims copied. Multi-axis (ggml_rope_multi): pos holds t, h, w; pair i takes its section's.
template <class T, class Angles, class SinCos, class Log>
void ggml_rotate(const RopeSpec& spec, const TensorArgs& a, const GgmlRopeParams& p, Angles angles,
                 SinCos sincos, Log log) {
  const std::int64_t np = spec.n_pairs();
  float corr[2];
  ggml_yarn_corr_dims(static_cast<int>(spec.rotary_dim), p, corr);
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  std::vector<float> theta(static_cast<std::size_t>(np)), c(theta.size()), s(theta.size());
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    // int32 position -> float (the cache init's parameter / pos[i2] * ...): one round to nearest
    // above 2^24. n_axes 1 drives every axis with the one position.
    float pos[3];
    for (std::int64_t ax = 0; ax < 3; ++ax)
      pos[ax] = static_cast<float>(
          static_cast<std::int32_t>(a.positions[t * a.n_axes + std::min(ax, a.n_axes - 1)]));
    angles(pos, theta);
    for (std::int64_t i = 0; i < np; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const float ff = p.freq_factors.empty() ? 1.0f : p.freq_factors[k];
      ggml_rope_yarn(theta[k] / ff, p, corr, static_cast<int>(i), c[k], s[k], sincos, log);
    }
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      for (std::int64_t i = 0; i < np; ++i) {
        const auto [ia, ib] = spec.pair(i);
        const auto k = static_cast<std::size_t>(i);
        float y0 = 0, y1 = 0;
        ggml_rotate_pair(static_cast<float>(in[off + ia]), static_cast<float>(in[off + ib]), c[k],
                         s[k], y0, y1);
        out[off + ia] = T(y0);
        out[off + ib] = T(y1);
      }
      kernels::copy_tail(spec, in + off, out + off);
    }
  }
}

// The ggml backends' scaled rows: what supports() and apply() share. Each backend passes its
// f32 and f16 instantiations of run(spec, args, params).
class GgmlScaledBackend : public GgmlBackend {
 public:
  using Run = void (*)(const RopeSpec&, const TensorArgs&, const GgmlRopeParams&);
  GgmlScaledBackend(Run f32, Run f16) : GgmlBackend(nullptr, nullptr), f32_(f32), f16_(f16) {}
  bool supports(const RopeSpec& spec, Dtype d) const override {
    return (d == Dtype::f32 || d == Dtype::f16) && spec.head_dim >= 2 &&
           llama_cpp_rope_params(spec).has_value();
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    const auto p = llama_cpp_rope_params(spec);
    if (!p || !supports(spec, a.dtype) || a.real_positions) return KernelStatus::unsupported;
    if ((a.n_axes != 1 && a.n_axes != spec.n_axes()) || a.n_tokens < 0 || a.n_heads < 0)
      return KernelStatus::error;
    if (a.n_tokens == 0 || a.n_heads == 0) return KernelStatus::ok;
    if (!a.positions || !a.in || !a.out) return KernelStatus::error;
    for (std::int64_t k = 0; k < a.n_tokens * a.n_axes; ++k)
      if (a.positions[k] < domain().min_position || a.positions[k] > domain().max_position)
        return KernelStatus::unsupported;
    (a.dtype == Dtype::f16 ? f16_ : f32_)(spec, a, *p);
    return KernelStatus::ok;
  }

 private:
  Run f32_, f16_;
};

}  // namespace ropecheck::engines
