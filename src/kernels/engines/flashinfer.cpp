// `flashinfer`: FlashInfer's on-the-fly RoPE (apply_rope_pos_ids / apply_rope_pos_ids_inplace),
// following github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4
// (include/flashinfer/pos_enc.cuh last changed at b705b6799cf1d5dfb43c27c9ec641fb74f8a9ebe):
//   BatchQKApplyRotaryPosIds (host): rope_rcp_scale = 1.0f / rope_scale,
//     rope_rcp_theta = 1.0f / rope_theta (rope_theta a float parameter), smooth_a = smooth_b = 0
//   BatchQKApplyRotaryPosIds[HeadParallelism]Kernel (device, per element e of the rotary part):
//     freq = __powf(rope_rcp_theta, float(2 * j) / float(rotary_dim)), j the element's pair
//       (interleave: e / 2; NeoX: e % (rotary_dim / 2));
//     smooth = clamp(freq * smooth_a + smooth_b, 0, 1) = 0, so
//     freq = (1 - 0) * (freq * rope_rcp_scale) + 0 * freq = fl(freq * rope_rcp_scale);
//     embed = float(pos) * freq; __sincosf(embed, &sin, &cos)
//   vec_apply_llama_rope_cos_sin[_interleave]: x loaded as f32 (exact from f16 / bf16),
//     out = x * cos + (-partner or partner) * sin in f32, stored by cast_store (round to nearest
//     even into the tensor's dtype); elements past rotary_dim loaded and stored unchanged.
//   flashinfer/jit/core.py gen_jit_spec: every kernel is built with -use_fast_math (so `/` is the
//     approximate division and the compiler contracts a * b + c * d into an FMA).
// Modelled, not reproduced (a CPU cannot run the GPU's approximations bit for bit):
//   __powf = ex2.approx(y * lg2.approx(x)) and the fast division: the f32 steps in FlashInfer's
//     order with log2 / exp2 / division evaluated in f64 and rounded once (policy.cpp
//     fast_powf_f32_inv_freq); the declared recipe fast_powf_f32 carries PTX's documented 2^-22
//     and 2 ulp errors;
//   __sincosf = sin.approx / cos.approx: the argument scaled into turns by an f32 multiply with
//     fl32(1/2pi) (reproduced: turns_f32_angle), then sin / cos of 2pi t in f64 rounded to f32;
//     the hardware's own approximation (PTX: 2^-20.5 absolute) is the declared trig_error 11.32,
//     not part of the model's figures;
//   the FMA contraction of the rotation: fma(x, cos, -(partner * sin)) is taken (nvcc may fuse
//     the other product; the bound is the same, bounds.cpp section 3);
//   flush-to-zero of f32 subnormals (-use_fast_math implies -ftz=true) is not modelled: it only
//     touches bf16 inputs below 2^-126.
// Scaling rows: linear (rope_scale) and Llama 3.1 (apply_llama31_rope_pos_ids, below); the
// declared recipe makes no angle claim for llama3 (bounds.cpp section 1, fast_powf_f32).
// FlashInfer takes f16 and bf16 (DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP16), head dims 64, 128, 256,
// 512 (DISPATCH_HEAD_DIM), int32 or int64 positions, no magnitude scale. Each thread rotates a
// chunk of vec_size = max(8, head_dim / 32) elements when the chunk starts below rotary_dim, so a
// rotary_dim that is not a multiple of vec_size (2 vec_size for NeoX, whose partner chunk must
// not straddle rotary_dim / 2) would rotate past it or pair the wrong elements: upstream does not
// check it; this emulation's supports() rejects such rotary dims instead.
#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ropecheck::engines {
namespace {

// BatchQKApplyLlama31RotaryPosIds (pos_enc.cuh, same commit): the host sets rope_rcp_scale =
// 1.0f / factor, smooth_a = old_context_length / (2 * M_PI * high - 2 * M_PI * low) (double, then
// float), smooth_b = -1.0f / (high / low - 1.0f); the kernel, per pair, smooth = clamp(freq *
// smooth_a + smooth_b, 0, 1) and freq = (1 - smooth) * (freq * rope_rcp_scale) + smooth * freq,
// both contracted to FMA under -use_fast_math (modelled: the first product fused, as for the
// rotation). HF's wavelength bands are this clamp: smooth >= 1 keeps freq, <= 0 divides it.
float llama31_freq(const Scaling& sc, float freq) {
  const float rcp_scale = 1.0f / static_cast<float>(sc.factor);
  const float low = static_cast<float>(sc.low_freq_factor);
  const float high = static_cast<float>(sc.high_freq_factor);
  const double two_pi = 2 * 3.14159265358979323846;
  const auto smooth_a = static_cast<float>(
      static_cast<double>(static_cast<float>(sc.original_max_position_embeddings)) /
      (two_pi * high - two_pi * low));
  const float smooth_b = -1.0f / (high / low - 1.0f);
  const float smooth = std::max(0.0f, std::min(1.0f, std::fma(freq, smooth_a, smooth_b)));
  return std::fma(1 - smooth, freq * rcp_scale, smooth * freq);
}

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a) {
  const ScalingKind kind = spec.scaling.kind;
  const double lin = kind == ScalingKind::linear ? spec.scaling.factor : 0.0;
  std::vector<float> freq(static_cast<std::size_t>(spec.n_pairs()));
  for (std::size_t i = 0; i < freq.size(); ++i) {
    freq[i] = fast_powf_f32_inv_freq(spec.base, static_cast<std::int64_t>(i), spec.rotary_dim, lin);
    if (kind == ScalingKind::llama3) freq[i] = llama31_freq(spec.scaling, freq[i]);
  }
  // vec[i] * cos + (-partner or partner) * sin, contracted by nvcc (-fmad=true).
  rotate_cuda_fast<T>(spec, a, freq,
                      [](float x0, float x1, float c, float s, float& y0, float& y1) {
                        y0 = std::fma(x0, c, -(x1 * s));
                        y1 = std::fma(x1, c, x0 * s);
                      });
}

class FlashInferKernel final : public EngineBase {
 public:
  FlashInferKernel() : EngineBase({Dtype::f16, Dtype::bf16}, {Layout::interleaved, Layout::half}) {}
  std::string name() const override { return "flashinfer"; }
  std::string description() const override {
    return "FlashInfer apply_rope_pos_ids (CUDA, -use_fast_math): inv_freq by __powf, f32 angle, "
           "__sincosf (argument in f32 turns), f32 FMA rotation, one rounding into f16/bf16 "
           "(GPU fast-math modelled)";
  }
  Provenance provenance() const override {
    return {"FlashInfer (CUDA, apply_rope_pos_ids)",
            "flashinfer-ai/flashinfer include/flashinfer/pos_enc.cuh @ "
            "fb28d7242b3506a2348265962041acc1fb56cca4",
            kCudaUnchecked,
            "GPU fast-math modelled: __sincosf's argument scaled into f32 turns is reproduced, "
            "sin.approx/cos.approx (2^-20.5 abs), lg2.approx/ex2.approx (__powf) and the fast "
            "division are replaced by correctly rounded values and covered by the declared policy "
            "(trig_error 11.32, recipe fast_powf_f32); bit-exact only on the device"};
  }
  Policy policy(Dtype) const override {
    Policy p{Dtype::f32,
             Dtype::f32,
             Dtype::f32,
             AngleRecipe::fast_powf_f32,
             true,
             "CUDA -use_fast_math: __powf inv_freq, __sincosf (argument in f32 turns), f32 FMA "
             "rotation, f16/bf16 stored once (round to nearest even)",
             kPtxApproxTrigErrorU32};
    p.trig_argument = TrigArgument::turns_f32;
    return p;
  }
  Domain domain() const override {
    Domain d = EngineBase::domain();
    d.head_dims = {64, 128, 256, 512};
    d.magnitude_scale = false;  // apply_rope_pos_ids has no magnitude
    return d;
  }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    const ScalingKind k = spec.scaling.kind;
    const Scaling& sc = spec.scaling;
    const bool llama31 = k == ScalingKind::llama3 && sc.low_freq_factor > 0 &&
                         sc.high_freq_factor != sc.low_freq_factor;
    if (spec.scale != 1 || (k != ScalingKind::none && k != ScalingKind::linear && !llama31))
      return false;
    const std::int64_t hd = spec.head_dim, rd = spec.rotary_dim;
    if (hd != 64 && hd != 128 && hd != 256 && hd != 512) return false;
    const std::int64_t vec = std::max<std::int64_t>(8, hd / 32);
    const std::int64_t chunk = spec.layout == Layout::half ? 2 * vec : vec;
    if (rd % chunk != 0) return false;
    RopeSpec unscaled = spec;
    unscaled.scaling = {};
    return EngineBase::supports(unscaled, d);
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (!supports(spec, a.dtype)) return KernelStatus::unsupported;
    RopeSpec unscaled = spec;
    unscaled.scaling = {};
    if (auto st = check(unscaled, a); st != KernelStatus::ok) return st;
    if (a.dtype == Dtype::f16)
      rotate_all<Eigen::half>(spec, a);
    else
      rotate_all<Eigen::bfloat16>(spec, a);
    return KernelStatus::ok;
  }
};

}  // namespace

const EngineKernel& flashinfer_kernel() {
  static const FlashInferKernel k;
  return k;
}

}  // namespace ropecheck::engines
