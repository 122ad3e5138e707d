// `hf_eager`: Hugging Face transformers' eager Llama RoPE, default rope_type.
// Follows (read through the search tool's stored copies; the full snapshots were too large to
// fetch):
//   huggingface/transformers src/transformers/modeling_rope_utils.py
//     @ 0044e3b3facff1a1ad60b235c69d5b45beae75a4  (_compute_default_rope_parameters)
//       the rotated width is head_dim times partial_rotary_factor, truncated to an integer;
//       attention factor 1; inv_freq_i = 1 / base^(f32(2i) / dim), the exponent an f32 quotient
//       and the power and reciprocal taken on f32 tensors
//   huggingface/transformers src/transformers/models/llama/modeling_llama.py
//     @ 5dd4a63548857797727ae73eeb6a6e886ea02a3e  (LlamaRotaryEmbedding.forward, rotate_half,
//     apply_rotary_pos_emb)
//       angles: the f32 inv_freq column times the f32 position row (a matmul, autocast off),
//       duplicated over both halves; cos and sin of the angles in f32, each multiplied by the
//       attention scaling, then cast to the model dtype; the rotation q cos + rotate_half(q) sin
//       in the model dtype, rotate_half being (-second half, first half)
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
