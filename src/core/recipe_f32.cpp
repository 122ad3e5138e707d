// f32_inv_freq (recipe_f32.hpp): the hf_f32 and vllm_f32 inverse frequencies, each step the f32
// tensor op of the code that defines the recipe. Follows (read through the search tool's stored
// copies; the full snapshots were too large to fetch):
//   huggingface/transformers src/transformers/modeling_rope_utils.py
//     @ ef46806472a64b0013ed413781e3afed82bfa047 (the _compute_*_parameters functions)
//   huggingface/transformers src/transformers/models/llama/modeling_llama.py
//     @ 5dd4a63548857797727ae73eeb6a6e886ea02a3e (the dynamic update: seq_len = max(position)+1)
//   huggingface/transformers src/transformers/models/phi3/modeling_phi3.py
//     @ 43c2b4816a6507cb08a18b402c6b053453651daf (LongRoPE's per-call choice)
//   vllm-project/vllm vllm/model_executor/layers/rotary_embedding/ (the files and commits
//     src/kernels/engines/vllm_native.cpp cites): the same steps for yarn / deepseek, llama3 and
//     LongRoPE (their _compute_inv_freq write HF's ops in the same order); linear and dynamic
//     differ (below).
// PyTorch's rules that fix the bits (read from PyTorch 1.13 and checked against the golden sets of
// the engines that call this: src/python/tests/golden/): a Python float in an op with an f32
// tensor rounds to f32 first; `scalar / t` is t.reciprocal() * scalar, so `1.0 / x` is an f32
// reciprocal and `2 pi / inv_freq` a reciprocal times fl32(2 pi); `base ** t` is powf(fl32(base),
// t) (glibc powf on the scalar CPU loop); Python-side scalars (YaRN's correction range, llama3's
// wavelength thresholds) are f64, as spec.cpp evaluates them. Built with -ffp-contract=off: every
// step rounds (src/core/CMakeLists.txt).
#include "ropecheck/recipe_f32.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ropecheck {
namespace {

using Floats = std::vector<float>;

inline float f32(double v) { return static_cast<float>(v); }

// `torch.arange(0, dim, 2).float() / dim`: exact numerators, one f32 division.
Floats exponents(std::int64_t dim) {
  Floats e(static_cast<std::size_t>(dim / 2));
  for (std::size_t i = 0; i < e.size(); ++i)
    e[i] = static_cast<float>(2 * i) / static_cast<float>(dim);
  return e;
}

// `base ** exponents` with base an f32 (a Python float rounds to f32 in the op).
Floats powers(float base, std::int64_t dim) {
  Floats p = exponents(dim);
  for (float& v : p) v = std::pow(base, v);
  return p;
}

Floats reciprocals(Floats v) {
  for (float& x : v) x = 1.0f / x;
  return v;
}

// The default: 1.0 / (base ** (arange(0, dim, 2).float() / dim)).
Floats plain(double base, std::int64_t dim) { return reciprocals(powers(f32(base), dim)); }

// linear (HF): `inv_freq /= factor` (an f32 division by fl32(factor)).
Floats linear(const RopeSpec& s) {
  Floats inv = plain(s.base, s.ladder_dim());
  for (float& v : inv) v /= f32(s.scaling.factor);
  return inv;
}

// dynamic (HF): base' = base * (f L / L0 - (f - 1)) ** (d / (d - 2)), then the default formula.
// Within L0 (init: seq_len None) it is Python f64 arithmetic, rounded to f32 by `base' ** t`.
// Past L0 the update passes seq_len = max(position_ids) + 1, an int64 tensor: `f * seq_len` is
// then an f32 tensor op and so is every later step; `** (d / (d - 2))` is PyTorch's pow with a
// scalar exponent, std::pow(float, double) rounded to f32; `base *` rounds base to f32.
Floats dynamic(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  const double d = static_cast<double>(s.ladder_dim());
  if (sc.seq_len <= sc.max_position_embeddings) return plain(dynamic_base_f64(s), s.ladder_dim());
  float t = f32(sc.factor) * static_cast<float>(sc.seq_len);
  t = t / static_cast<float>(sc.max_position_embeddings);
  t = t - f32(sc.factor - 1);
  const float p = f32(std::pow(static_cast<double>(t), d / (d - 2)));
  return reciprocals(powers(f32(s.base) * p, s.ladder_dim()));
}

// dynamic (vLLM DynamicNTKScalingRotaryEmbedding): one cache for max_len = L0 * f positions, its
// base in Python floats -- HF's f64 formula (dynamic_base_f64) at seq_len = max_len, for every
// position -- then the default. (vllm_native accepts only an integral max_len.)
Floats vllm_dynamic(const RopeSpec& s) {
  RopeSpec at_max_len = s;
  at_max_len.scaling.seq_len = static_cast<std::int64_t>(
      std::llround(static_cast<double>(s.scaling.max_position_embeddings) * s.scaling.factor));
  return plain(dynamic_base_f64(at_max_len), s.ladder_dim());
}

// yarn (HF, and vLLM's YaRN / DeepSeek classes): pos = base ** e; extrapolation 1 / pos;
// interpolation 1 / (factor * pos); the ramp clamp((arange(d/2, f32) - low) / (high - low), 0, 1)
// with low/high Python numbers (integers when truncated; high += 0.001 when equal), the difference
// high - low taken in Python and rounded to f32; w = 1 - ramp; inv = interpolation * (1 - w) +
// extrapolation * w, each op in f32.
Floats yarn(const RopeSpec& s) {
  auto [low, high] = yarn_correction_range_f64(s);
  if (low == high) high += 0.001;
  const Floats pos = powers(f32(s.base), s.ladder_dim());
  const float factor = f32(s.scaling.factor), low_f = f32(low), span = f32(high - low);
  Floats inv(pos.size());
  for (std::size_t j = 0; j < pos.size(); ++j) {
    const float extra = 1.0f / pos[j], inter = 1.0f / (factor * pos[j]);
    const float ramp = std::clamp((static_cast<float>(j) - low_f) / span, 0.0f, 1.0f);
    const float w = 1.0f - ramp;
    inv[j] = inter * (1.0f - w) + extra * w;
  }
  return inv;
}

// longrope: inv = 1 / (ext * base ** e), ext the f32 tensor of long_factor when the call's length
// (HF: per call; vLLM: max_model_len, once) exceeds original_max_position_embeddings, else of
// short_factor.
Floats longrope(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  const auto& ext =
      sc.seq_len > sc.original_max_position_embeddings ? sc.long_factor : sc.short_factor;
  Floats inv = powers(f32(s.base), s.ladder_dim());
  for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0f / (f32(ext[i]) * inv[i]);
  return inv;
}

// llama3 on the default inv_freq: wavelen = 2 pi / inv (reciprocal times fl32(2 pi)); above
// orig / low_freq_factor inv / factor; in the band [orig / high, orig / low] (compared in f32)
// smooth = (orig / wavelen - low) / (high - low) (reciprocal times fl32(orig), minus, divided by
// the Python difference) and (1 - smooth) * inv / factor + smooth * inv, left to right in f32.
Floats llama3(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const float low_wl = f32(orig / sc.low_freq_factor), high_wl = f32(orig / sc.high_freq_factor);
  const float two_pi = f32(2 * std::numbers::pi), factor = f32(sc.factor);
  Floats inv = plain(s.base, s.ladder_dim());
  for (float& v : inv) {
    const float wavelen = (1.0f / v) * two_pi;
    const float scaled = wavelen > low_wl ? v / factor : v;
    if (wavelen < high_wl || wavelen > low_wl) {
      v = scaled;
      continue;
    }
    const float smooth = ((1.0f / wavelen) * f32(orig) - f32(sc.low_freq_factor)) /
                         f32(sc.high_freq_factor - sc.low_freq_factor);
    v = (1.0f - smooth) * scaled / factor + smooth * scaled;
  }
  return inv;
}

}  // namespace

std::vector<float> f32_inv_freq(AngleRecipe recipe, const RopeSpec& s) {
  const bool vllm = recipe == AngleRecipe::vllm_f32;
  const bool scaled = recipe == AngleRecipe::hf_f32 || vllm;
  switch (scaled ? s.scaling.kind : ScalingKind::none) {
    case ScalingKind::linear:
      return vllm ? plain(s.base, s.ladder_dim()) : linear(s);
    case ScalingKind::dynamic:
      return vllm ? vllm_dynamic(s) : dynamic(s);
    case ScalingKind::yarn:
      return yarn(s);
    case ScalingKind::longrope:
      return longrope(s);
    case ScalingKind::llama3:
      return llama3(s);
    default:
      return plain(s.base, s.ladder_dim());
  }
}

float f32_position_divisor(AngleRecipe recipe, const RopeSpec& s) {
  return recipe == AngleRecipe::vllm_f32 && s.scaling.kind == ScalingKind::linear
             ? f32(s.scaling.factor)
             : 0.0f;
}

}  // namespace ropecheck
