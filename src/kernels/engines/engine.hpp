// Shared base of the engine-atlas kernels (src/kernels/engines/<engine>.cpp). Each engine kernel
// computes what one production engine computes, in its order and its types: how inv_freq is formed
// and in which precision, the position cast, the angle product, the trig function, the table's
// storage dtype, every intermediate rounding of the rotation (per-operation bf16/f16 rounding where
// the engine does it), FMA where the engine contracts, the output rounding. Each file opens with
// the upstream repository, file and commit it follows and what is modelled rather than reproduced;
// provenance() says the same to `ropecheck list` and the reports.
// The kernels library is built with -ffp-contract=off: an engine that contracts writes std::fma.
//
// Adding an engine: one file here with an EngineKernel subclass and a `const Kernel& <x>_kernel()`
// in namespace ropecheck::engines (an EngineBase), its declaration and list entry in
// ../registry.cpp, and a check against the real code (a bit-for-bit python test, or a golden set
// with the script that made it).
#pragma once

#include "../common.hpp"
#include "ropecheck/kernels/engines.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

namespace ropecheck::engines {

// One rounding of an f32 value into the model dtype d, kept as f32 (what a PyTorch/CUDA op whose
// result tensor has dtype d does after computing in f32): RNE, subnormals, overflow to inf.
inline float round_f32_to(Dtype d, float v) {
  switch (d) {
    case Dtype::f16:
      return static_cast<float>(Eigen::half(v));
    case Dtype::bf16:
      return static_cast<float>(Eigen::bfloat16(v));
    default:
      return v;
  }
}

// CUDA's __sincosf (and __sinf / __cosf: sin.approx / cos.approx) as modelled for the GPU engines:
// the argument scaled into turns, t = fl32(x * fl32(1/2pi)) (reproduced; policy.hpp
// TrigArgument::turns_f32), reduced to [-1/2, 1/2] turn exactly, then sin / cos of 2pi t in f64
// rounded once. The hardware's own approximation (PTX: 2^-20.5 absolute) is not reproduced: it is
// in the engines' declared trig_error.
inline void cuda_fast_sincos(float x, float& s, float& c) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const float t = x * static_cast<float>(1.0 / kTwoPi);
  const float r = t - std::nearbyint(t);  // exact: a multiple of ulp(t), at most 1/2
  s = static_cast<float>(std::sin(kTwoPi * static_cast<double>(r)));
  c = static_cast<float>(std::cos(kTwoPi * static_cast<double>(r)));
}

// The rotation of the engines that rotate in f32 (ggml CPU and CUDA, FlashInfer): per token,
// trig(position, cos, sin) fills the per-pair tables; each pair is widened to f32 (exact from f16 /
// bf16), rotated by rot(x0, x1, c, s, y0, y1) with the engine's own contraction and stored once
// into T (round to nearest even); pass-through dims copied. A pair is read before it is written,
// so in == out is the same computation.
template <class T, class Trig, class Rot>
void rotate_f32(const RopeSpec& spec, const TensorArgs& a, Trig trig, Rot rot) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  const std::int64_t np = spec.n_pairs();
  std::vector<float> cos_t(np), sin_t(np);
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    trig(a.positions[t], cos_t, sin_t);
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      for (std::int64_t i = 0; i < np; ++i) {
        const auto [ia, ib] = spec.pair(i);
        float y0 = 0, y1 = 0;
        rot(static_cast<float>(in[off + ia]), static_cast<float>(in[off + ib]), cos_t[i], sin_t[i],
            y0, y1);
        out[off + ia] = T(y0);
        out[off + ib] = T(y1);
      }
      kernels::copy_tail(spec, in + off, out + off);
    }
  }
}

// What the two CUDA engine models (flashinfer, ggml_cuda) share: the declared trig error of PTX
// sin.approx / cos.approx, 2^-20.5 absolute on [-2 pi, 2 pi] = 11.31 u_f32 (rounded up), and why
// neither is checked against its real code.
inline constexpr double kPtxApproxTrigErrorU32 = 11.32;
inline constexpr const char* kCudaUnchecked =
    "not checked against the real code: it runs on an NVIDIA GPU only and none is available here "
    "(no golden set can be made); the model's steps are read from the source and its error terms "
    "from the PTX ISA";

// The CUDA engines' rotation (ggml_cuda, flashinfer): per token, cuda_fast_sincos of
// fl32(float(position) * inv_freq[i]) (float(pos): one rounding above 2^24), then rotate_f32 with
// the engine's contraction.
template <class T, class Rot>
void rotate_cuda_fast(const RopeSpec& spec, const TensorArgs& a, const std::vector<float>& inv_freq,
                      Rot rot) {
  const auto trig = [&](std::int64_t p, std::vector<float>& c, std::vector<float>& s) {
    const float pos = static_cast<float>(p);
    for (std::size_t i = 0; i < c.size(); ++i) cuda_fast_sincos(pos * inv_freq[i], s[i], c[i]);
  };
  rotate_f32<T>(spec, a, trig, rot);
}

// Whether spec passes RopeSpec::validate() (e.g. a LongRoPE factor list of the wrong length is
// never indexed): the scaled engines' supports() ask it before reading the scaling.
inline bool spec_is_valid(const RopeSpec& spec) {
  try {
    spec.validate();
    return true;
  } catch (const SpecError&) {
    return false;
  }
}

class EngineBase : public EngineKernel {
 public:
  // Unrestricted by default: engines take any position and head_dim their recipe defines.
  // Subclasses narrow it where the engine does (e.g. int32 positions, a head-dim list).
  Domain domain() const override {
    Domain d;
    d.layouts_bitwise_symmetric = true;
    return d;
  }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    if (std::find(dtypes_.begin(), dtypes_.end(), d) == dtypes_.end()) return false;
    if (std::find(layouts_.begin(), layouts_.end(), spec.layout) == layouts_.end()) return false;
    if (spec.scaling.kind != ScalingKind::none) return false;
    return spec.head_dim >= 2 && spec.rotary_dim >= 2 && spec.rotary_dim % 2 == 0 &&
           spec.rotary_dim <= spec.head_dim;
  }

 protected:
  EngineBase(std::initializer_list<Dtype> dtypes, std::initializer_list<Layout> layouts)
      : dtypes_(dtypes), layouts_(layouts) {}
  // Argument checks shared by every engine; ok means: run.
  KernelStatus check(const RopeSpec& spec, const TensorArgs& a) const {
    if (!supports(spec, a.dtype) || a.n_axes != 1 || a.real_positions)
      return KernelStatus::unsupported;
    if (a.n_tokens < 0 || a.n_heads < 0) return KernelStatus::error;
    if (a.n_tokens > 0 && a.n_heads > 0 && (!a.positions || !a.in || !a.out))
      return KernelStatus::error;
    return KernelStatus::ok;
  }

 private:
  std::vector<Dtype> dtypes_;
  std::vector<Layout> layouts_;
};

// ggml's backends (CPU, CUDA): f32 and f16 tensors, int32 positions (an I32 tensor), NORMAL
// (interleaved) and NEOX (half), no magnitude (plain ggml_rope_ext: attn_factor 1). rotate() runs
// the backend's recipe on f32 or f16 data (a.dtype).
class GgmlBackend : public EngineBase {
 public:
  using Rotate = void (*)(const RopeSpec&, const TensorArgs&);
  // The backend's recipe instantiated for f32 and for f16 tensors.
  GgmlBackend(Rotate f32, Rotate f16)
      : EngineBase({Dtype::f32, Dtype::f16}, {Layout::interleaved, Layout::half}),
        f32_(f32),
        f16_(f16) {}
  Domain domain() const override {
    Domain d = EngineBase::domain();
    d.min_position = std::numeric_limits<std::int32_t>::min();
    d.max_position = std::numeric_limits<std::int32_t>::max();
    d.magnitude_scale = false;
    return d;
  }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    return spec.scale == 1 && EngineBase::supports(spec, d);
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (auto st = check(spec, a); st != KernelStatus::ok) return st;
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      if (a.positions[t] < domain().min_position || a.positions[t] > domain().max_position)
        return KernelStatus::unsupported;
    (a.dtype == Dtype::f16 ? f16_ : f32_)(spec, a);
    return KernelStatus::ok;
  }

 private:
  Rotate f32_, f16_;
};

}  // namespace ropecheck::engines
