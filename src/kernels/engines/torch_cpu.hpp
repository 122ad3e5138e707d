// What PyTorch's eager CPU operators compute, op by op, for the engines whose RoPE is plain
// PyTorch (hf_eager.cpp, vllm_native.cpp). Read from PyTorch 1.13 (Debian's python3-torch, the
// build the `engines_torch` python test runs) and checked there bit for bit:
//   - A floating binary op (mul, add, sub) on tensors of dtype d computes in d's "opmath" type and
//     rounds once into d: f64 in f64, f32 in f32, bf16/f16 in f32 then one RNE rounding to d
//     (c10::BFloat16 / c10::Half operators; Vectorized<BFloat16> converts to f32 and back).
//   - A Python scalar in an op with an f32 tensor is first rounded to f32 (a wrapped scalar does
//     not promote), so `base ** t` is powf(float(base), t) and `1.0 / t` is t.reciprocal().
//   - `t.float()` of int64 positions rounds to nearest f32 (exact below 2^24).
//   - `.to(d)` rounds once, RNE.
//   - cos/sin/pow of an f32 tensor: the scalar loop calls glibc cosf/sinf/powf (std::cos(float)),
//     which is what PyTorch runs with ATEN_CPU_CAPABILITY=default and what this header does. The
//     AVX2/AVX-512 loops call SLEEF's u10 functions instead (Sleef_cosf8_u10: within 1 ulp, not
//     bit-identical to glibc: about 5 % of cos/sin entries differ by one ulp), and CUDA calls its
//     own cosf/sinf (within 2 ulp): modelled, not reproduced, and covered by the declared
//     trig_error (policy.hpp), which counts the table entry's error, not its bits.
#pragma once

#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>
#include <vector>

namespace ropecheck::engines::torch_cpu {

// The type a PyTorch op on storage type T computes in ("opmath"): double for f64, else float.
template <class T>
using opmath_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// One op's result stored into T (kept in opmath_t<T>): exact for f64/f32, one RNE rounding for
// bf16/f16.
template <class T>
inline opmath_t<T> round_op(opmath_t<T> v) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>)
    return v;
  else
    return round_f32_to(dtype_of<T>, v);
}

// transformers / vLLM inv_freq, in f32:
//   1.0 / (base ** (torch.arange(0, dim, 2, dtype=int64).float() / dim))
// arange(0, dim, 2) is exact in f32; `/ dim` divides by float(dim); `base **` is
// powf(float(base), e); `1.0 /` is the f32 reciprocal.
inline std::vector<float> inv_freq_f32(double base, std::int64_t dim) {
  const float base_f = static_cast<float>(base), dim_f = static_cast<float>(dim);
  std::vector<float> f(static_cast<std::size_t>(dim / 2));
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = 1.0f / std::pow(base_f, static_cast<float>(2 * i) / dim_f);
  return f;
}

// ---- HF's rope init functions (transformers modeling_rope_utils) as PyTorch CPU evaluates them --
// The f32 inv_freq of each rope_type, op by op (hf_eager.cpp cites the transformers commits and
// says why each step rounds where it does). Shared by hf_eager and onnxruntime_cpu: the
// onnxruntime-genai model builder writes the same tensor expressions for the kinds it implements
// (onnxruntime_cpu.cpp). Python-side scalars are f64, as spec.cpp evaluates them.
using Floats = std::vector<float>;

inline float f32(double v) { return static_cast<float>(v); }

// `torch.arange(0, dim, 2).float() / dim`: exact numerators, one f32 division.
inline Floats exponents(std::int64_t dim) {
  Floats e(static_cast<std::size_t>(dim / 2));
  for (std::size_t i = 0; i < e.size(); ++i)
    e[i] = static_cast<float>(2 * i) / static_cast<float>(dim);
  return e;
}

// `base ** exponents` with base an f32 (a Python float rounds to f32 in the op).
inline Floats powers(float base, std::int64_t dim) {
  Floats p = exponents(dim);
  for (float& v : p) v = std::pow(base, v);
  return p;
}

inline Floats reciprocals(Floats v) {
  for (float& x : v) x = 1.0f / x;
  return v;
}

// linear: `inv_freq /= factor` (an f32 division by fl32(factor)).
inline Floats hf_linear(const RopeSpec& s) {
  Floats inv = torch_cpu::inv_freq_f32(s.base, s.ladder_dim());
  for (float& v : inv) v /= f32(s.scaling.factor);
  return inv;
}

// dynamic: base' = base * (f L / L0 - (f - 1)) ** (d / (d - 2)), then the default formula. Within
// L0 (init: seq_len None) it is Python f64 arithmetic, rounded to f32 by `base' ** t`. Past L0 the
// update passes seq_len = max(position_ids) + 1, an int64 tensor: `f * seq_len` is then an f32
// tensor op and so is every later step; `** (d / (d - 2))` is PyTorch's pow with a scalar
// exponent, std::pow(float, double) rounded to f32; `base *` rounds base to f32.
inline Floats hf_dynamic(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  const double d = static_cast<double>(s.ladder_dim());
  if (sc.seq_len <= sc.max_position_embeddings)
    return torch_cpu::inv_freq_f32(dynamic_base_f64(s), s.ladder_dim());
  float t = f32(sc.factor) * static_cast<float>(sc.seq_len);
  t = t / static_cast<float>(sc.max_position_embeddings);
  t = t - f32(sc.factor - 1);
  const float p = f32(std::pow(static_cast<double>(t), d / (d - 2)));
  return reciprocals(powers(f32(s.base) * p, s.ladder_dim()));
}

// yarn: pos = base ** e; extrapolation 1 / pos; interpolation 1 / (factor * pos); the ramp
// clamp((arange(d/2, f32) - low) / (high - low), 0, 1) with low/high Python numbers (integers when
// truncated; high += 0.001 when equal), the difference high - low taken in Python and rounded to
// f32; w = 1 - ramp; inv = interpolation * (1 - w) + extrapolation * w, each op in f32.
inline Floats hf_yarn(const RopeSpec& s) {
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
// exceeds original_max_position_embeddings, else of short_factor.
inline Floats hf_longrope(const RopeSpec& s) {
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
inline Floats hf_llama3(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const float low_wl = f32(orig / sc.low_freq_factor), high_wl = f32(orig / sc.high_freq_factor);
  const float two_pi = f32(2 * std::numbers::pi), factor = f32(sc.factor);
  Floats inv = torch_cpu::inv_freq_f32(s.base, s.ladder_dim());
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

inline Floats hf_inv_freq(const RopeSpec& s) {
  switch (s.scaling.kind) {
    case ScalingKind::linear:
      return hf_linear(s);
    case ScalingKind::dynamic:
      return hf_dynamic(s);
    case ScalingKind::yarn:
      return hf_yarn(s);
    case ScalingKind::longrope:
      return hf_longrope(s);
    case ScalingKind::llama3:
      return hf_llama3(s);
    default:
      return torch_cpu::inv_freq_f32(s.base, s.ladder_dim());
  }
}

// One token's table in the model dtype, as the f32 recipes build it: angle = float(m) * inv_freq
// (one f32 product), cos/sin in f32 (glibc), times the attention scale in f32 (a Python float:
// float(scale); exact when it is 1), then `.to(T)`. Entries are kept in opmath_t<T>.
template <class T>
void token_table(std::int64_t m, const std::vector<float>& inv_freq, float scale_f,
                 std::vector<opmath_t<T>>& cos_t, std::vector<opmath_t<T>>& sin_t) {
  const float mf = static_cast<float>(m);
  cos_t.resize(inv_freq.size());
  sin_t.resize(inv_freq.size());
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = mf * inv_freq[i];
    cos_t[i] = round_op<T>(static_cast<opmath_t<T>>(std::cos(angle) * scale_f));
    sin_t[i] = round_op<T>(static_cast<opmath_t<T>>(std::sin(angle) * scale_f));
  }
}

// The rotation of one head in the model dtype, one rounding per op (PyTorch eager does three
// separate ops per output: no fusion, no contraction; the kernels library is built with
// -ffp-contract=off):
//   y_a = (x_a * c) - (x_b * s)     (HF: x_a*c + (-x_b)*s, the same IEEE result)
//   y_b = (x_b * c) + (x_a * s)
// Pass-through dims are copied bit for bit (torch.cat of the untouched slice).
template <class T>
void rotate_head(const RopeSpec& spec, const T* in, T* out, const std::vector<opmath_t<T>>& cos_t,
                 const std::vector<opmath_t<T>>& sin_t) {
  using V = opmath_t<T>;
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [ia, ib] = spec.pair(i);
    const V xa = static_cast<V>(in[ia]), xb = static_cast<V>(in[ib]);
    const V c = cos_t[i], s = sin_t[i];
    const V ya = round_op<T>(round_op<T>(xa * c) - round_op<T>(xb * s));
    const V yb = round_op<T>(round_op<T>(xb * c) + round_op<T>(xa * s));
    out[ia] = static_cast<T>(ya);  // exact: ya is already a value of T
    out[ib] = static_cast<T>(yb);
  }
  kernels::copy_tail(spec, in, out);
}

// The token loop shared by the PyTorch engines: one table per token, every head rotated with it.
// In-place calls read a pair before writing it, as PyTorch's out-of-place ops followed by the
// caller's assignment do.
template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a, const std::vector<float>& inv_freq,
                float scale_f) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  std::vector<opmath_t<T>> cos_t, sin_t;
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    token_table<T>(a.positions[t], inv_freq, scale_f, cos_t, sin_t);
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      rotate_head<T>(spec, in + off, out + off, cos_t, sin_t);
    }
  }
}

// The whole recipe on a checked call: inv_freq over spec.rotary_dim, then the token loop in the
// storage type of a.dtype. scale_f: the f32 factor the cos/sin are multiplied by (1 for none).
inline KernelStatus run(const RopeSpec& spec, const TensorArgs& a, float scale_f) {
  const std::vector<float> inv_freq = inv_freq_f32(spec.base, spec.rotary_dim);
  return kernels::dispatch_dtype(a.dtype, [&](auto tag) {
    rotate_all<decltype(tag)>(spec, a, inv_freq, scale_f);
    return KernelStatus::ok;
  });
}

}  // namespace ropecheck::engines::torch_cpu
