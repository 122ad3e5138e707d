// `ggml_cpu`: llama.cpp / ggml's CPU rope, following github.com/ggml-org/ggml
// src/ggml-cpu/ops.cpp @ d99724f2b141fed9e1a9f402213506c081433465 (ggml is the upstream of
// llama.cpp's ggml/ directory; the same file there is ggml/src/ggml-cpu/ops.cpp):
//   ggml_compute_forward_rope_flt: theta_scale = powf(freq_base, -2.0f/n_dims); corr_dims from
//     ggml_rope_yarn_corr_dims (src/ggml.c): n_dims * logf(n_ctx_orig / (beta * 2 * (float)M_PI))
//     / (2 * logf(freq_base)), floorf for beta_fast and ceilf for beta_slow, clamped to
//     [0, n_dims - 1], all in f32
//   ggml_rope_cache_init, per token: theta = (float)p (p an int32 position); per pair i in order:
//     rope_yarn(theta / ff_i, ...), then theta *= theta_scale   (the ladder_f32 angle recipe);
//     ggml_mrope_cache_init (ggml_rope_multi, GGML_ROPE_TYPE_MROPE): one such ladder per axis
//     t, h, w, all multiplied by theta_scale at every pair, pair i taking its section's axis
//   rope_yarn(theta_extrap): theta_interp = freq_scale * theta_extrap; with ext_factor != 0,
//     ramp_mix = rope_yarn_ramp(corr_dims, i) * ext_factor (ramp: 1 - clamp((i - low) /
//     max(0.001f, high - low), 0, 1)), theta = theta_interp * (1 - ramp_mix) + theta_extrap *
//     ramp_mix and mscale = attn_factor * (1.0f + 0.1f * logf(1.0f / freq_scale)); cos =
//     cosf(theta) * mscale, sin = sinf(theta) * mscale
//   rotate_pairs: x0, x1 widened to f32 (f16 exactly), dst0 = x0*cos - x1*sin,
//     dst1 = x0*sin + x1*cos in f32, each stored once (f16: one round to nearest even)
//   mode NORMAL = interleaved pairs (2i, 2i+1), NEOX and MROPE = half (i, i + n_dims/2); dims >=
//     n_dims copied.
// ops.cpp is C++ built by GCC with GNU extensions, which contracts a*b + c*d into an FMA of the
// first product (ggml_rotate_pair): the mix is fma(theta_interp, 1 - ramp_mix, theta_extrap *
// ramp_mix) and 1.0f + 0.1f * logf(x) is fma(0.1f, logf(x), 1.0f). The golden set fixes the
// mix (the other product fused misses 565 of its 16 896 YaRN outputs, no FMA 148); the mscale's
// contraction gives the same bits as none at its factors (2 to 40).
// Which parameters llama.cpp passes for a model's configuration (freq_scale, ext_factor,
// attn_factor, the rope_freqs tensor its converter writes) and the steps shared with the CUDA
// recipe: ggml_rope.hpp.
// Nothing is modelled: glibc's cosf/sinf/powf/logf are the functions ggml calls on Linux. Checked
// bit for bit against golden sets made by the real code at that commit (tests/golden/).
// ggml's CPU rope takes f32 and f16 tensors only (GGML_ASSERT in ggml_compute_forward_rope_flt);
// its positions are an I32 tensor.
#include "ggml_rope.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

namespace ropecheck::engines {
namespace {

// ggml_rope_cache_init / ggml_mrope_cache_init: per axis one ladder from float(p), multiplied by
// theta_scale at every pair (all three advance together), pair i taking its axis' value; libm's
// sinf / cosf / logf.
template <class T>
void run(const RopeSpec& spec, const TensorArgs& a, const GgmlRopeParams& p) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(spec.rotary_dim));
  const auto ladder = [&](const float pos[3], std::vector<float>& theta) {
    float th[3] = {pos[0], pos[1], pos[2]};
    for (std::size_t i = 0; i < theta.size(); ++i) {
      theta[i] = th[p.multi ? spec.pair_axis(static_cast<std::int64_t>(i)) : 0];
      for (float& v : th) v *= theta_scale;
    }
  };
  const auto libm_sincos = [](float x, float& sn, float& cs) {
    sn = std::sin(x);
    cs = std::cos(x);
  };
  const auto libm_log = [](float x) { return std::log(x); };
  ggml_rotate<T>(spec, a, p, ladder, libm_sincos, libm_log);
}

class GgmlCpuKernel final : public GgmlScaledBackend {
 public:
  GgmlCpuKernel() : GgmlScaledBackend(&run<float>, &run<Eigen::half>) {}
  std::string name() const override { return "ggml_cpu"; }
  std::string description() const override {
    return "llama.cpp / ggml CPU rope: f32 ladder theta *= powf(base, -2/n_dims), freq_scale, "
           "rope_freqs (llama3 as the converter writes it), LongRoPE's long/short factors and "
           "f32 attn_factor, YaRN ramp and mscale in f32, ggml_rope_multi sections; cosf/sinf, "
           "f32 FMA-contracted rotation, f16 rounded once";
  }
  Provenance provenance() const override {
    return {"llama.cpp / ggml CPU backend (ggml_rope_ext, ggml_rope_multi)",
            "ggml-org/ggml src/ggml-cpu/ops.cpp @ d99724f2b141fed9e1a9f402213506c081433465; "
            "llama.cpp src/llama-context.cpp @ 001d906a, convert_hf_to_gguf.py @ 0024aa74, "
            "src/models/phi3.cpp @ a0b8c172, include/llama.h @ 0011438e",
            "bit for bit against golden sets made by the real ggml CPU backend at that commit "
            "(default x86-64 build, GCC, FMA; src/kernels/tests/golden/ggml_cpu_rope.golden and "
            "ggml_cpu_scaled.golden, ggml_cpu_longrope.golden; ctest engines_native_test, "
            "ggml_scaled_test)",
            "llama.cpp's host-side parameters (freq_scale, ext_factor, attn_factor), the "
            "converter's llama3 rope_freqs and LongRoPE attn_factor and the long/short choice "
            "are transcribed (ggml_rope.hpp)"};
  }
  Policy policy(Dtype) const override {
    return {Dtype::f32,
            Dtype::f32,
            Dtype::f32,
            AngleRecipe::ladder_f32,
            true,
            "ggml CPU as GCC builds it for FMA targets (contracted rotation and YaRN mix); f16 "
            "storage widened exactly and rounded once; int32 positions"};
  }
};

}  // namespace

const EngineKernel& ggml_cpu_kernel() {
  static const GgmlCpuKernel k;
  return k;
}

}  // namespace ropecheck::engines
