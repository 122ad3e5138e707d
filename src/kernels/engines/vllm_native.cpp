// `vllm_native`: vLLM's RotaryEmbedding.forward_native (the PyTorch path: CPU, and the reference
// the CUDA op is tested against), default rotary embedding, NeoX (half) and GPT-J (interleaved).
// Follows (read through the search tool's stored copies; the full snapshots were too large to
// fetch):
//   vllm-project/vllm vllm/model_executor/layers/rotary_embedding/base.py
//     @ 04458da08417899fc04046216c986d28abeb85af  (RotaryEmbedding)
//       _compute_inv_freq: inv_freq_i = 1 / base^(f32(2i) / rotary_dim) on f32 tensors
//       _compute_cos_sin_cache: an f32 row of positions 0 .. max_position_embeddings - 1, its
//         outer product with inv_freq (an einsum), then cos and sin of it concatenated per row
//       __init__: the cache cast to the model dtype
//       forward_native: the cache rows gathered by position; the rotary slice rotated, the rest
//         concatenated back unchanged
//   vllm-project/vllm vllm/model_executor/layers/rotary_embedding/common.py
//     @ 002d181a55a03803d7d69547846630069d2378b8  (apply_rotary_emb_torch)
//       NeoX splits the rotary part into halves, GPT-J into even and odd elements; the outputs
//       are x1 cos - x2 sin and x2 cos + x1 sin, each op in the model dtype
// The position row holds float(m) at row m (exact below 2^24, rounded above, as a cast);
// the einsum is one f32 product per entry. So the table is torch_cpu::token_table with scale 1,
// and the rotation torch_cpu::rotate_head: one rounding per op in the model dtype. Positions
// index the cache: non-negative only (declared in domain()); no magnitude scale in this class.
// Trig as hf_eager: glibc cosf/sinf (PyTorch's scalar CPU loop); SLEEF / CUDA modelled.
#include "torch_cpu.hpp"

namespace ropecheck::engines {
namespace {

class VllmNativeKernel final : public EngineBase {
 public:
  VllmNativeKernel()
      : EngineBase({Dtype::f32, Dtype::f16, Dtype::bf16}, {Layout::half, Layout::interleaved}) {}
  std::string name() const override { return "vllm_native"; }
  std::string description() const override {
    return "vLLM forward_native: f32 cos/sin cache cast to the model dtype, rotation in the model "
           "dtype (one rounding per op)";
  }
  Provenance provenance() const override {
    return {"vLLM (RotaryEmbedding.forward_native)",
            "vllm-project/vllm vllm/model_executor/layers/rotary_embedding/base.py @ "
            "04458da08417899fc04046216c986d28abeb85af; "
            "vllm/model_executor/layers/rotary_embedding/common.py @ "
            "002d181a55a03803d7d69547846630069d2378b8",
            "bit for bit against a golden set made by those functions at those commits in PyTorch "
            "1.13 CPU (33,792 outputs; src/python/tests/golden/vllm_native.npz; ctest "
            "engines_torch)",
            "trig: glibc cosf/sinf, PyTorch's scalar CPU loop (ATEN_CPU_CAPABILITY=default); "
            "the cache built by PyTorch's AVX2/AVX-512 loops (SLEEF u10) or on the GPU differs by "
            "1-2 ulp in some entries, covered by the declared trig_error"};
  }
  Domain domain() const override {
    Domain d = EngineBase::domain();
    d.min_position = 0;  // positions index the cos/sin cache
    d.magnitude_scale = false;
    return d;
  }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    return spec.scale == 1 && EngineBase::supports(spec, d);
  }
  Policy policy(Dtype d) const override {
    return {Dtype::f32,
            d,
            d,
            AngleRecipe::hf_f32,
            false,
            "PyTorch eager ops: cache cast to the model dtype, each product and the add/sub "
            "round into it",
            2};
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (auto st = check(spec, a); st != KernelStatus::ok || a.n_tokens == 0 || a.n_heads == 0)
      return st;
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      if (a.positions[t] < 0) return KernelStatus::error;  // index_select raises
    return torch_cpu::run(spec, a, 1.0f);
  }
};

}  // namespace

const EngineKernel& vllm_native_kernel() {
  static const VllmNativeKernel k;
  return k;
}

}  // namespace ropecheck::engines
