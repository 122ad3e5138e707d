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
#include "ropecheck/recipe_f32.hpp"

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
// The f32 inv_freq of each rope_type, op by op: f32_inv_freq(AngleRecipe::hf_f32, s) in
// src/core/recipe_f32.cpp (the transformers commits, and why each step rounds where it does), the
// one definition shared by hf_eager, onnxruntime_cpu (the onnxruntime-genai model builder writes
// the same tensor expressions for the kinds it implements) and the reports' angle split.
using Floats = std::vector<float>;

inline float f32(double v) { return static_cast<float>(v); }

inline Floats hf_inv_freq(const RopeSpec& s) { return f32_inv_freq(AngleRecipe::hf_f32, s); }

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
