// `ggml_cuda`: llama.cpp / ggml's CUDA rope, following github.com/ggml-org/ggml
// src/ggml-cuda/rope.cu @ d99724f2b141fed9e1a9f402213506c081433465 (last changed at
// aa9d2226490f4e5fb10ef564a903054deb8ecf29; llama.cpp's ggml/ directory carries the same file):
//   ggml_cuda_op_rope -> rope_norm_cuda / rope_neox_cuda (host): theta_scale =
//     powf(freq_base, -2.0f / n_dims)
//   rope_norm / rope_neox (device, one thread per pair, iw = 2 * pair):
//     theta_base = pos[i2] * powf(theta_scale, iw / 2.0f)   (pos an int32)
//     rope_yarn(theta_base / 1.0f, freq_scale 1, ext_factor 0, mscale = attn_factor 1):
//       cos_theta = cosf(theta) * 1, sin_theta = sinf(theta) * 1
//     dst = x0 * cos_theta - x1 * sin_theta, x0 * sin_theta + x1 * cos_theta (f32; f16 widened)
//     stored as float or half (make_half2: round to nearest even); dims past n_dims copied.
//   src/ggml-cuda/CMakeLists.txt: CUDA_FLAGS -use_fast_math, so powf is __powf, cosf / sinf are
//     __cosf / __sinf, and a * b + c * d may be contracted into an FMA.
// Modelled, not reproduced (CUDA only):
//   __powf(ts, j) = ex2.approx(j * lg2.approx(ts)): lg2 / ex2 evaluated in f64 and rounded once
//     (policy.cpp fast_powf_ladder_f32_inv_freq); PTX's documented errors are in the declared
//     recipe fast_powf_ladder_f32;
//   __cosf / __sinf = cos.approx / sin.approx: the argument scaled into f32 turns (reproduced),
//     then cos / sin of 2pi t in f64 rounded once; PTX's 2^-20.5 is the declared trig_error;
//   the contraction fma(x0, cos, -(x1 * sin)), fma(x0, sin, x1 * cos) as ggml_cpu's GCC build
//     (nvcc may fuse the other product; the bound is the same); flush-to-zero is not modelled
//     (f32 and f16 values never reach f32 subnormals here but for inputs below 2^-126).
// Scaled rows (the same rope.cu): theta_base / freq_factors[i] (the fast-math division, modelled
//   correctly rounded), then rope_yarn as on the CPU (freq_scale, the YaRN ramp and mix, mscale
//   with logf = __logf, modelled correctly rounded; corr dims by the host's ggml.c, libm);
//   rope_multi (GGML_ROPE_TYPE_MROPE): theta_base = pos[axis of the pair's section] * __powf(...).
//   llama.cpp's parameters as for ggml_cpu (ggml_rope.hpp). The declared recipe makes no angle
//   claim for scaled specs (bounds.cpp section 1, fast_powf_ladder_f32): their bound is the cap.
// ggml's CUDA rope takes f32 and f16 (GGML_ASSERT in ggml_cuda_op_rope), int32 positions, any
// even number of rotated dims, NORMAL (interleaved), NEOX (half) and MROPE.
#include "ggml_rope.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ropecheck::engines {
namespace {

// pos[i2] * __powf(theta_scale, iw / 2.0f) per pair (pos the pair's axis), __sincosf and
// __logf as modelled (engine.hpp cuda_fast_sincos; log in f64 rounded once).
template <class T>
void run(const RopeSpec& spec, const TensorArgs& a, const GgmlRopeParams& p) {
  std::vector<float> inv(static_cast<std::size_t>(spec.n_pairs()));
  for (std::size_t i = 0; i < inv.size(); ++i) {
    const auto [j, dim] = spec.ladder(static_cast<std::int64_t>(i));
    inv[i] = fast_powf_ladder_f32_inv_freq(spec.base, j, dim);
  }
  const auto angles = [&](const float pos[3], std::vector<float>& theta) {
    for (std::size_t i = 0; i < theta.size(); ++i)
      theta[i] = pos[p.multi ? spec.pair_axis(static_cast<std::int64_t>(i)) : 0] * inv[i];
  };
  const auto fast_log = [](float x) {
    return static_cast<float>(std::log(static_cast<double>(x)));
  };
  ggml_rotate<T>(spec, a, p, angles, cuda_fast_sincos, fast_log);
}

class GgmlCudaKernel final : public GgmlScaledBackend {
 public:
  GgmlCudaKernel() : GgmlScaledBackend(&run<float>, &run<Eigen::half>) {}
  std::string name() const override { return "ggml_cuda"; }
  std::string description() const override {
    return "llama.cpp / ggml CUDA rope (-use_fast_math): inv_freq = __powf(powf(base, -2/n_dims), "
           "i), f32 angle, freq_scale, rope_freqs, YaRN and ggml_rope_multi as on the CPU, "
           "__cosf/__sinf (argument in f32 turns), f32 FMA rotation (GPU fast-math modelled)";
  }
  Provenance provenance() const override {
    return {"llama.cpp / ggml CUDA backend (ggml_rope_ext)",
            "ggml-org/ggml src/ggml-cuda/rope.cu @ d99724f2b141fed9e1a9f402213506c081433465",
            kCudaUnchecked,
            "GPU fast-math modelled: __cosf/__sinf's argument scaled into f32 turns is "
            "reproduced, cos.approx/sin.approx (2^-20.5 abs) and __powf's lg2.approx/ex2.approx "
            "are replaced by correctly rounded values and covered by the declared policy "
            "(trig_error 11.32, recipe fast_powf_ladder_f32); bit-exact only on the device"};
  }
  Policy policy(Dtype) const override {
    Policy p{Dtype::f32,
             Dtype::f32,
             Dtype::f32,
             AngleRecipe::fast_powf_ladder_f32,
             true,
             "CUDA -use_fast_math: __powf(theta_scale, i), __cosf/__sinf (argument in f32 turns), "
             "f32 FMA rotation; f16 widened exactly and rounded once; int32 positions",
             kPtxApproxTrigErrorU32};
    p.trig_argument = TrigArgument::turns_f32;
    return p;
  }
};

}  // namespace

const EngineKernel& ggml_cuda_kernel() {
  static const GgmlCudaKernel k;
  return k;
}

}  // namespace ropecheck::engines
