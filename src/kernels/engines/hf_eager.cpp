// `hf_eager`: Hugging Face transformers' eager RoPE (Llama, Phi-3, Qwen2-VL rotary embeddings):
// every rope_type of ROPE_INIT_FUNCTIONS (default, linear, dynamic, yarn, longrope, llama3),
// partial rotary and Qwen2-VL's M-RoPE. Follows (read through the search tool's stored copies; the
// full snapshots were too large to fetch):
//   huggingface/transformers src/transformers/modeling_rope_utils.py
//     @ ef46806472a64b0013ed413781e3afed82bfa047  (the _compute_*_parameters functions)
//   huggingface/transformers src/transformers/models/llama/modeling_llama.py
//     @ 5dd4a63548857797727ae73eeb6a6e886ea02a3e  (LlamaRotaryEmbedding with its dynamic update,
//     rotate_half, apply_rotary_pos_emb)
//   huggingface/transformers src/transformers/models/phi3/modeling_phi3.py
//     @ 43c2b4816a6507cb08a18b402c6b053453651daf  (Phi3RotaryEmbedding: LongRoPE's per-call choice)
//   huggingface/transformers src/transformers/models/qwen2_vl/modeling_qwen2_vl.py
//     @ 928b5565ecea2852ac5a41701c90589321548522  (Qwen2VLRotaryEmbedding,
//     apply_multimodal_rotary_pos_emb)
// The table: angles are the f32 inv_freq column times the f32 position row (a matmul of inner
// dimension 1, autocast off: one f32 product per entry; M-RoPE takes the pair's t/h/w position,
// which is what splitting the three tables by mrope_section selects); cos and sin of the angles in
// f32, each multiplied by the attention scaling (a Python float: rounded to f32), then cast to the
// model dtype. The rotation q cos + rotate_half(q) sin runs in the model dtype (torch_cpu.hpp).
// inv_freq: the init functions' tensor ops are f32 ops whose Python-float operands round to f32
// first; PyTorch evaluates `scalar / t` as t.reciprocal() * scalar (Tensor.__rdiv__), so every
// `1.0 / x` is an f32 reciprocal and `2 pi / inv_freq` a reciprocal times fl32(2 pi). Python-side
// scalars (YaRN's correction range, the attention factors, llama3's wavelength thresholds) are
// f64, as spec.cpp evaluates them. Each variant's steps are written in src/core/recipe_f32.cpp.
// Length-dependent variants: HF takes the length of a call as max(position_ids) + 1. dynamic
// recomputes inv_freq when it exceeds max_position_embeddings (a fresh module; the module keeps
// the grown table for later, shorter calls above max_position_embeddings: not modelled), and
// Phi-3's LongRoPE uses long_factor when it exceeds original_max_position_embeddings. The spec
// carries that length as scaling.seq_len: a call here is HF's call whose longest position is
// seq_len - 1 (0: a call within the original context).
// Not expressible in this spec, or not in these commits: YaRN's truncate=false and the DeepSeek
// mscale/mscale_all_dim attention factor came after ef46806 (followed here as spec.cpp reads
// HF's later code: the ramp's low/high as floats, get_mscale's ratio; not checked against the
// real code); Qwen2-VL's dynamic update raises (self.rope_kwargs does not exist at 928b556) and
// its module has no LongRoPE update, so M-RoPE is offered with the length-free kinds only.
// Every op is PyTorch eager CPU's (torch_cpu.hpp). Trig is glibc cosf/sinf, PyTorch's scalar CPU
// loop; its vectorized loops (SLEEF) and CUDA differ by an ulp in some entries: modelled, within
// the declared trig_error.
#include "torch_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ropecheck::engines {
namespace {

using Floats = torch_cpu::Floats;
using torch_cpu::f32;
using torch_cpu::hf_inv_freq;
// inv_freq: torch_cpu::hf_inv_freq = f32_inv_freq(AngleRecipe::hf_f32, spec)
// (ropecheck/recipe_f32.hpp), the one definition of HF's f32 init functions, which the reports'
// recipe split reproduces too.

// The table per token (each pair's angle from its axis' position) and the rotation of every head.
template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a, const Floats& inv, float scale) {
  using V = torch_cpu::opmath_t<T>;
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  std::vector<V> cos_t(inv.size()), sin_t(inv.size());
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const std::int64_t m = a.positions[t * a.n_axes + (a.n_axes == 1 ? 0 : spec.pair_axis(i))];
      const float angle = static_cast<float>(m) * inv[static_cast<std::size_t>(i)];
      cos_t[i] = torch_cpu::round_op<T>(static_cast<V>(std::cos(angle) * scale));
      sin_t[i] = torch_cpu::round_op<T>(static_cast<V>(std::sin(angle) * scale));
    }
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      torch_cpu::rotate_head<T>(spec, in + off, out + off, cos_t, sin_t);
    }
  }
}

class HfEagerKernel final : public EngineBase {
 public:
  HfEagerKernel()
      : EngineBase({Dtype::f64, Dtype::f32, Dtype::f16, Dtype::bf16},
                   {Layout::half, Layout::mrope}) {}
  std::string name() const override { return "hf_eager"; }
  std::string description() const override {
    return "transformers eager RoPE (every rope_type, partial rotary, Qwen2-VL M-RoPE): f32 "
           "inv_freq and angle, glibc cosf/sinf, table and rotation in the model dtype";
  }
  Provenance provenance() const override {
    return {
        "Hugging Face transformers (eager; default, linear, dynamic, yarn, longrope, llama3, "
        "M-RoPE)",
        "huggingface/transformers src/transformers/modeling_rope_utils.py @ "
        "ef46806472a64b0013ed413781e3afed82bfa047; models/llama/modeling_llama.py @ "
        "5dd4a63548857797727ae73eeb6a6e886ea02a3e; models/phi3/modeling_phi3.py @ "
        "43c2b4816a6507cb08a18b402c6b053453651daf; models/qwen2_vl/modeling_qwen2_vl.py @ "
        "928b5565ecea2852ac5a41701c90589321548522",
        "bit for bit against golden sets made by those functions in PyTorch 1.13 CPU "
        "(src/python/tests/golden/hf_eager.npz, hf_eager_scaled.npz; ctest engines_torch); "
        "YaRN's truncate=false and mscale pair postdate those commits: modelled, unchecked",
        "trig: glibc cosf/sinf, PyTorch's scalar CPU loop (ATEN_CPU_CAPABILITY=default); "
        "PyTorch's AVX2/AVX-512 loops (SLEEF u10) and CUDA cosf/sinf differ by 1-2 ulp in "
        "some table entries, covered by the declared trig_error"};
  }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    RopeSpec plain = spec;
    plain.scaling = Scaling{};
    if (!EngineBase::supports(plain, d) || !spec_is_valid(spec)) return false;
    const ScalingKind k = spec.scaling.kind;
    if (k == ScalingKind::freq_factors) return false;  // no such rope_type: ggml's GGUF tensor
    return spec.layout != Layout::mrope ||
           (k != ScalingKind::dynamic && k != ScalingKind::longrope);
  }
  // Model dtype d: the table is f32 cos/sin rounded into d (f64 holds f32 values exactly), the
  // rotation computes in d. hf_f32 with a scaling kind is HF's f32 evaluation of that kind
  // (src/bounds/scaled_f32.cpp).
  Policy policy(Dtype d) const override {
    const Precision table = d == Dtype::f64 ? Dtype::f32 : d;
    return {Dtype::f32, table,
            d,          AngleRecipe::hf_f32,
            false,      "PyTorch eager ops: each product and the add round into the model dtype",
            2};
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (!supports(spec, a.dtype) || a.real_positions) return KernelStatus::unsupported;
    if (a.n_axes != 1 && a.n_axes != spec.n_axes()) return KernelStatus::error;
    if (a.n_tokens < 0 || a.n_heads < 0) return KernelStatus::error;
    if (a.n_tokens == 0 || a.n_heads == 0) return KernelStatus::ok;
    if (!a.positions || !a.in || !a.out) return KernelStatus::error;
    // The attention scaling of the cos/sin multiply: HF's attention factor (f64, as spec.cpp) times
    // the spec's own magnitude (1 for a model config), rounded to f32 by the op.
    const Floats inv = hf_inv_freq(spec);
    const float scale = f32(magnitude_f64(spec));
    return kernels::dispatch_dtype(a.dtype, [&](auto tag) {
      rotate_all<decltype(tag)>(spec, a, inv, scale);
      return KernelStatus::ok;
    });
  }
};

}  // namespace

const EngineKernel& hf_eager_kernel() {
  static const HfEagerKernel k;
  return k;
}

}  // namespace ropecheck::engines
