// `ggml_cpu`: llama.cpp / ggml's CPU rope, following github.com/ggml-org/ggml
// src/ggml-cpu/ops.cpp @ d99724f2b141fed9e1a9f402213506c081433465 (ggml is the upstream of
// llama.cpp's ggml/ directory; the same file there is ggml/src/ggml-cpu/ops.cpp):
//   ggml_compute_forward_rope_flt: theta_scale = powf(freq_base, -2.0f/n_dims)
//   ggml_rope_cache_init, per token: theta = (float)p (p an int32 position); per pair in order:
//     rope_yarn(theta / 1.0f, freq_scale 1, ext_factor 0, mscale 1): cos = cosf(theta) * 1,
//     sin = sinf(theta) * 1; then theta *= theta_scale       (the ladder_f32 angle recipe)
//   rotate_pairs: x0, x1 widened to f32 (f16 exactly), dst0 = x0*cos - x1*sin,
//     dst1 = x0*sin + x1*cos in f32 (contracted to FMA by GCC, see rotate_all), each stored once
//     (f16: one round to nearest even)
//   mode NORMAL = interleaved pairs (2i, 2i+1), NEOX = half (i, i + n_dims/2); dims >= n_dims
//   copied.
// Nothing is modelled: glibc's cosf/sinf/powf are the functions ggml calls on Linux. Checked bit
// for bit against a golden set made by the real code at that commit (tests/golden/).
// ggml's CPU rope takes f32 and f16 tensors only (GGML_ASSERT in ggml_compute_forward_rope_flt);
// its positions are an I32 tensor.
#include "engine.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ropecheck::engines {
namespace {

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

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a) {
  const int n_dims = static_cast<int>(spec.rotary_dim);
  const float theta_scale = std::pow(static_cast<float>(spec.base), -2.0f / n_dims);
  const auto trig = [&](std::int64_t p, std::vector<float>& c, std::vector<float>& s) {
    // int64 p -> float parameter of ggml_rope_cache_init: one round to nearest above 2^24.
    float theta = static_cast<float>(static_cast<std::int32_t>(p));
    for (std::size_t i = 0; i < c.size(); ++i) {
      c[i] = std::cos(theta);
      s[i] = std::sin(theta);
      theta *= theta_scale;
    }
  };
  rotate_f32<T>(spec, a, trig, ggml_rotate_pair);
}

class GgmlCpuKernel final : public GgmlBackend {
 public:
  GgmlCpuKernel() : GgmlBackend(&rotate_all<float>, &rotate_all<Eigen::half>) {}
  std::string name() const override { return "ggml_cpu"; }
  std::string description() const override {
    return "llama.cpp / ggml CPU rope: f32 ladder theta *= powf(base, -2/n_dims), cosf/sinf, f32 "
           "FMA-contracted rotation, f16 widened and rounded once";
  }
  Provenance provenance() const override {
    return {"llama.cpp / ggml CPU backend (ggml_rope_ext)",
            "ggml-org/ggml src/ggml-cpu/ops.cpp @ d99724f2b141fed9e1a9f402213506c081433465",
            "bit for bit against a golden set made by the real ggml CPU backend at that commit "
            "(default x86-64 build, GCC, FMA; src/kernels/tests/golden/ggml_cpu_rope.golden; ctest "
            "engines_native_test)",
            ""};
  }
  Policy policy(Dtype) const override {
    return {Dtype::f32,
            Dtype::f32,
            Dtype::f32,
            AngleRecipe::ladder_f32,
            true,
            "ggml CPU as GCC builds it for FMA targets (contracted rotation); f16 storage widened "
            "exactly and rounded once; int32 positions"};
  }
};

}  // namespace

const EngineKernel& ggml_cpu_kernel() {
  static const GgmlCpuKernel k;
  return k;
}

}  // namespace ropecheck::engines
