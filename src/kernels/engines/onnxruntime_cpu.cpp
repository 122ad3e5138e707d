// `onnxruntime_cpu`: ONNX Runtime's CPU RotaryEmbedding, the com.microsoft contrib op (opset 1)
// and the ONNX-standard op (ai.onnx opset 23), as the release 1.30.0 library runs them on x86-64
// (onnxruntime-node 1.30.0's libonnxruntime.so.1, "ORT Build Info: git-commit-id=f2c39fe2f").
// Follows (read through the search tool's stored copies of microsoft/onnxruntime; the snapshot is
// too large to fetch, so the versions read are the closest stored ones):
//   onnxruntime/contrib_ops/cpu/bert/rotary_embedding.cc @ 161d293f2d47552968f6ddb73520c91365f73411
//   onnxruntime/core/providers/cpu/llm/rotary_embedding.cc @
//   af223b4eee0dfe1796f502669d36d6b95130489d
//     both: per (batch, token, head) the cache row at position_ids[b, s] (int64, rejected outside
//     [0, rows of the cache)), MlasRotaryEmbedOneRow over the first rotary_embedding_dim dims,
//     the rest copied; registered for float and MLFloat16 only (no bf16 on the CPU provider); the
//     contrib op's `scale` attribute is read but unused on CPU
//   onnxruntime/core/mlas/lib/rotary_embedding.cpp @ ced49b0c67d9035c2841973e246a47bfa4b806cd
//   onnxruntime/core/mlas/lib/platform.cpp (RopeDispatch = MlasRopeDispatchAvx2 on AVX2 CPUs)
//   onnxruntime/core/mlas/lib/rotary_embedding_kernel_avx2.cpp @
//   13ad4150d89463de107d3872f5e0734b05ffcfb8 (its dispatch table; the kernel bodies read in two
//   later stored revisions whose commit the index does not name: one with masked AVX2 remainders,
//   one with scalar remainder loops; they agree on the vector blocks)
//     the path this machine runs: x_a, x_b, cos, sin widened to f32 (F16C for f16, exact),
//     y_a = fmsub(x_a, cos, fl(x_b sin)), y_b = fmadd(x_a, sin, fl(x_b cos)), each stored once
//     (f16: _mm256_cvtps_ph, round to nearest even). Without AVX2 the scalar fallback rounds both
//     products separately (same bound, other bits: not modelled).
// The cos/sin caches are inputs; this engine builds them the way onnxruntime-genai's model builder
// does (microsoft/onnxruntime-genai src/python/py/models/builders/base.py
// @ 80b45b08e5e8d8193c8a3a8cef000740b9fd72f0, make_rotary_embedding_caches_from_scratch and
// make_rotary_embedding_caches): HF's f32 inv_freq over dim = rotary_dim, t = arange(M) cast to
// f32, freqs = outer(t, inv_freq), cos/sin in f32 times mscale, `.to(io_dtype)`, the first
// rotary_dim/2 columns kept: torch_cpu::token_table, the hf_eager table. Only the rows of the
// positions asked are built (element-wise: the same values as the full cache's rows).
// Checked bit for bit against a golden set made by the shipped library (tests/golden/README.md).
#include "torch_cpu.hpp"

#include <cstdint>
#include <limits>
#include <vector>

namespace ropecheck::engines {
namespace {

// Pairs rotated by the AVX2 kernel's FMA form; the rest of an interleaved row (the tail below)
// rounds both products separately.
inline void fused_pair(float xa, float xb, float c, float s, float& ya, float& yb) {
  ya = std::fma(xa, c, -(xb * s));
  yb = std::fma(xa, s, xb * c);
}
inline void unfused_pair(float xa, float xb, float c, float s, float& ya, float& yb) {
  ya = xa * c - xb * s;
  yb = xa * s + xb * c;
}

// Whether pair i of a row of n_pairs is rotated with FMA. Measured with the shipped library (the
// golden set's README: rotary_dim 2..64 in both layouts, every pair of 42 positions): the half
// layout fuses every pair, remainder included; the interleaved layout fuses the pairs of its
// 16-element blocks and the first pair of the remainder, and rounds the products of the later
// remainder pairs separately: what the 1.30.0 build made of the interleaved tail (the stored source
// versions disagree on that tail, so the golden set decides). f16 cannot tell: an f16 x f16 product
// is exact in f32.
inline bool avx2_fuses(Layout l, std::int64_t i, std::int64_t n_pairs) {
  if (l != Layout::interleaved) return true;
  const std::int64_t blocked = n_pairs / 8 * 8;
  return i <= blocked;
}

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a, const std::vector<float>& inv_freq,
                float mscale) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  const std::int64_t np = spec.n_pairs();
  std::vector<float> cos_t, sin_t;
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    // The cache row in the model dtype (kept as f32: the kernel widens it exactly).
    torch_cpu::token_table<T>(a.positions[t], inv_freq, mscale, cos_t, sin_t);
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      for (std::int64_t i = 0; i < np; ++i) {
        const auto [ia, ib] = spec.pair(i);
        const float xa = static_cast<float>(in[off + ia]), xb = static_cast<float>(in[off + ib]);
        float ya = 0, yb = 0;
        if (avx2_fuses(spec.layout, i, np))
          fused_pair(xa, xb, cos_t[i], sin_t[i], ya, yb);
        else
          unfused_pair(xa, xb, cos_t[i], sin_t[i], ya, yb);
        out[off + ia] = T(ya);
        out[off + ib] = T(yb);
      }
      kernels::copy_tail(spec, in + off, out + off);
    }
  }
}

class OnnxRuntimeCpuKernel final : public EngineBase {
 public:
  OnnxRuntimeCpuKernel()
      : EngineBase({Dtype::f32, Dtype::f16}, {Layout::interleaved, Layout::half}) {}
  std::string name() const override { return "onnxruntime_cpu"; }
  std::string description() const override {
    return "ONNX Runtime CPU RotaryEmbedding (contrib and opset 23): exporter's f32 cos/sin cache "
           "cast to the model dtype, MLAS AVX2 rotation in f32 with FMA, rounded once";
  }
  Provenance provenance() const override {
    return {"ONNX Runtime CPU RotaryEmbedding (com.microsoft and ai.onnx opset 23, MLAS AVX2)",
            "microsoft/onnxruntime onnxruntime/core/mlas/lib/rotary_embedding_kernel_avx2.cpp @ "
            "13ad4150d89463de107d3872f5e0734b05ffcfb8 (release 1.30.0: f2c39fe2f); cache: "
            "microsoft/onnxruntime-genai src/python/py/models/builders/base.py @ "
            "80b45b08e5e8d8193c8a3a8cef000740b9fd72f0",
            "bit for bit against a golden set made by onnxruntime-node 1.30.0's CPU library "
            "(both ops; src/kernels/tests/golden/onnxruntime_cpu.golden; ctest "
            "engines_native_test)",
            "the cache is the exporter's (PyTorch f32 cos/sin, modelled as glibc cosf/sinf: "
            "PyTorch's AVX2 loop differs by an ulp in some entries, within trig_error); the "
            "AVX2 path only (CPUs without AVX2 take MLAS's unfused scalar fallback)"};
  }
  // Model dtype d: the cache holds f32 cos/sin rounded into d; the rotation computes in f32.
  Policy policy(Dtype d) const override {
    return {Dtype::f32,
            d,
            Dtype::f32,
            AngleRecipe::hf_f32,
            true,
            "MLAS AVX2: f32 FMA rotation, f16 widened exactly and rounded once; the interleaved "
            "tail (rotary_dim mod 16) partly unfused; cache from the model builder",
            2};
  }
  Domain domain() const override {
    Domain dm = EngineBase::domain();
    // position_ids index the cache, whose row count is an int (rotary_embedding_helper).
    dm.min_position = 0;
    dm.max_position = std::numeric_limits<std::int32_t>::max() - 1;
    // The interleaved tail rounds differently from the half layout's masked block.
    dm.layouts_bitwise_symmetric = false;
    return dm;
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (auto st = check(spec, a); st != KernelStatus::ok || a.n_tokens == 0 || a.n_heads == 0)
      return st;
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      if (a.positions[t] < domain().min_position || a.positions[t] > domain().max_position)
        return KernelStatus::unsupported;
    const std::vector<float> inv_freq = torch_cpu::inv_freq_f32(spec.base, spec.rotary_dim);
    const float mscale = static_cast<float>(spec.scale);
    if (a.dtype == Dtype::f16)
      rotate_all<Eigen::half>(spec, a, inv_freq, mscale);
    else
      rotate_all<float>(spec, a, inv_freq, mscale);
    return KernelStatus::ok;
  }
};

}  // namespace

const EngineKernel& onnxruntime_cpu_kernel() {
  static const OnnxRuntimeCpuKernel k;
  return k;
}

}  // namespace ropecheck::engines
