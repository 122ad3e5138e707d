// `hf_eager`: Hugging Face transformers' eager Llama RoPE, default rope_type.
// Follows (read through the search tool's stored copies; the full snapshots were too large to
// fetch):
//   huggingface/transformers src/transformers/modeling_rope_utils.py
//     @ 0044e3b3facff1a1ad60b235c69d5b45beae75a4  (_compute_default_rope_parameters)
//       dim = int(head_dim * partial_rotary_factor); attention_factor = 1.0
//       inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
//   huggingface/transformers src/transformers/models/llama/modeling_llama.py
//     @ 5dd4a63548857797727ae73eeb6a6e886ea02a3e  (LlamaRotaryEmbedding.forward, rotate_half,
//     apply_rotary_pos_emb)
//       freqs = (inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1,
//       2) emb = torch.cat((freqs, freqs), dim=-1); cos = emb.cos() * attention_scaling (autocast
//       off) return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype) q_embed = (q * cos) +
//       (rotate_half(q) * sin)      rotate_half = cat(-x2, x1)
// The matmul has inner dimension 1: one f32 product per entry. Partial rotary (GPT-NeoX, Phi,
// StableLM: rotary slice, apply_rotary_pos_emb, cat with the pass-through slice) is the same
// recipe with dim = rotary_dim; spec.scale is the attention_scaling factor of the cos/sin multiply.
// Every op is PyTorch eager CPU's (torch_cpu.hpp): the table rounds once into the model dtype, and
// the rotation's two products and one add each round into it (a bf16 model rounds three times per
// output). Trig is glibc cosf/sinf, PyTorch's scalar CPU loop; its vectorized loops (SLEEF) and
// CUDA differ by an ulp in some entries: modelled, within the declared trig_error.
#include "torch_cpu.hpp"

namespace ropecheck::engines {
namespace {

class HfEagerKernel final : public EngineBase {
 public:
  HfEagerKernel() : EngineBase({Dtype::f64, Dtype::f32, Dtype::f16, Dtype::bf16}, {Layout::half}) {}
  std::string name() const override { return "hf_eager"; }
  std::string description() const override {
    return "transformers eager Llama: f32 inv_freq and angle, glibc cosf/sinf, table and rotation "
           "in the model dtype (one rounding per op)";
  }
  Provenance provenance() const override {
    return {"Hugging Face transformers (eager, default rope_type)",
            "huggingface/transformers src/transformers/models/llama/modeling_llama.py @ "
            "5dd4a63548857797727ae73eeb6a6e886ea02a3e; src/transformers/modeling_rope_utils.py @ "
            "0044e3b3facff1a1ad60b235c69d5b45beae75a4",
            "bit for bit against a golden set made by those functions at those commits in PyTorch "
            "1.13 CPU (60,160 outputs; src/python/tests/golden/hf_eager.npz; ctest engines_torch)",
            "trig: glibc cosf/sinf, PyTorch's scalar CPU loop (ATEN_CPU_CAPABILITY=default); "
            "PyTorch's AVX2/AVX-512 loops (SLEEF u10) and CUDA cosf/sinf differ by 1-2 ulp in "
            "some table entries, covered by the declared trig_error"};
  }
  // Model dtype d: the table is f32 cos/sin rounded into d (f64 holds f32 values exactly), the
  // rotation computes in d.
  Policy policy(Dtype d) const override {
    const Precision table = d == Dtype::f64 ? Dtype::f32 : d;
    return {Dtype::f32, table,
            d,          AngleRecipe::hf_f32,
            false,      "PyTorch eager ops: each product and the add round into the model dtype",
            2};
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (auto st = check(spec, a); st != KernelStatus::ok || a.n_tokens == 0 || a.n_heads == 0)
      return st;
    return torch_cpu::run(spec, a, static_cast<float>(spec.scale));
  }
};

}  // namespace

const EngineKernel& hf_eager_kernel() {
  static const HfEagerKernel k;
  return k;
}

}  // namespace ropecheck::engines
