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
// f64, as spec.cpp evaluates them. Each variant's steps are written beside its function below.
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

using Floats = std::vector<float>;

inline float f32(double v) { return static_cast<float>(v); }

// `torch.arange(0, dim, 2).float() / dim`: exact numerators, one f32 division.
Floats exponents(std::int64_t dim) {
  Floats e(static_cast<std::size_t>(dim / 2));
  for (std::size_t i = 0; i < e.size(); ++i)
    e[i] = static_cast<float>(2 * i) / static_cast<float>(dim);
  return e;
}

// `base ** exponents` with base an f32 (a Python float rounds to f32 in the op).
Floats powers(float base, std::int64_t dim) {
  Floats p = exponents(dim);
  for (float& v : p) v = std::pow(base, v);
  return p;
}

Floats reciprocals(Floats v) {
  for (float& x : v) x = 1.0f / x;
  return v;
}

// linear: `inv_freq /= factor` (an f32 division by fl32(factor)).
Floats linear(const RopeSpec& s) {
  Floats inv = torch_cpu::inv_freq_f32(s.base, s.ladder_dim());
  for (float& v : inv) v /= f32(s.scaling.factor);
  return inv;
}

// dynamic: base' = base * (f L / L0 - (f - 1)) ** (d / (d - 2)), then the default formula. Within
// L0 (init: seq_len None) it is Python f64 arithmetic, rounded to f32 by `base' ** t`. Past L0 the
// update passes seq_len = max(position_ids) + 1, an int64 tensor: `f * seq_len` is then an f32
// tensor op and so is every later step; `** (d / (d - 2))` is PyTorch's pow with a scalar
// exponent, std::pow(float, double) rounded to f32; `base *` rounds base to f32.
Floats dynamic(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  const double d = static_cast<double>(s.ladder_dim());
  if (sc.seq_len <= sc.max_position_embeddings)
    return torch_cpu::inv_freq_f32(dynamic_base_f64(s), s.ladder_dim());
  float t = f32(sc.factor) * static_cast<float>(sc.seq_len);
  t = t / static_cast<float>(sc.max_position_embeddings);
  t = t - f32(sc.factor - 1);
  const float p = f32(std::pow(static_cast<double>(t), d / (d - 2)));
  return reciprocals(powers(f32(s.base) * p, s.ladder_dim()));
}

// yarn: pos = base ** e; extrapolation 1 / pos; interpolation 1 / (factor * pos); the ramp
// clamp((arange(d/2, f32) - low) / (high - low), 0, 1) with low/high Python numbers (integers when
// truncated; high += 0.001 when equal), the difference high - low taken in Python and rounded to
// f32; w = 1 - ramp; inv = interpolation * (1 - w) + extrapolation * w, each op in f32.
Floats yarn(const RopeSpec& s) {
  auto [low, high] = yarn_correction_range_f64(s);
  if (low == high) high += 0.001;
  const Floats pos = powers(f32(s.base), s.ladder_dim());
  const float factor = f32(s.scaling.factor), low_f = f32(low), span = f32(high - low);
  Floats inv(pos.size());
  for (std::size_t j = 0; j < pos.size(); ++j) {
    const float extra = 1.0f / pos[j], inter = 1.0f / (factor * pos[j]);
    const float ramp = std::clamp((static_cast<float>(j) - low_f) / span, 0.0f, 1.0f);
    const float w = 1.0f - ramp;
    inv[j] = inter * (1.0f - w) + extra * w;
  }
  return inv;
}

// longrope: inv = 1 / (ext * base ** e), ext the f32 tensor of long_factor when the call's length
// exceeds original_max_position_embeddings, else of short_factor.
Floats longrope(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  const auto& ext =
      sc.seq_len > sc.original_max_position_embeddings ? sc.long_factor : sc.short_factor;
  Floats inv = powers(f32(s.base), s.ladder_dim());
  for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0f / (f32(ext[i]) * inv[i]);
  return inv;
}

// llama3 on the default inv_freq: wavelen = 2 pi / inv (reciprocal times fl32(2 pi)); above
// orig / low_freq_factor inv / factor; in the band [orig / high, orig / low] (compared in f32)
// smooth = (orig / wavelen - low) / (high - low) (reciprocal times fl32(orig), minus, divided by
// the Python difference) and (1 - smooth) * inv / factor + smooth * inv, left to right in f32.
Floats llama3(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const float low_wl = f32(orig / sc.low_freq_factor), high_wl = f32(orig / sc.high_freq_factor);
  const float two_pi = f32(2 * std::numbers::pi), factor = f32(sc.factor);
  Floats inv = torch_cpu::inv_freq_f32(s.base, s.ladder_dim());
  for (float& v : inv) {
    const float wavelen = (1.0f / v) * two_pi;
    const float scaled = wavelen > low_wl ? v / factor : v;
    if (wavelen < high_wl || wavelen > low_wl) {
      v = scaled;
      continue;
    }
    const float smooth = ((1.0f / wavelen) * f32(orig) - f32(sc.low_freq_factor)) /
                         f32(sc.high_freq_factor - sc.low_freq_factor);
    v = (1.0f - smooth) * scaled / factor + smooth * scaled;
  }
  return inv;
}

Floats hf_inv_freq(const RopeSpec& s) {
  switch (s.scaling.kind) {
    case ScalingKind::linear:
      return linear(s);
    case ScalingKind::dynamic:
      return dynamic(s);
    case ScalingKind::yarn:
      return yarn(s);
    case ScalingKind::longrope:
      return longrope(s);
    case ScalingKind::llama3:
      return llama3(s);
    default:
      return torch_cpu::inv_freq_f32(s.base, s.ladder_dim());
  }
}

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

bool valid(const RopeSpec& spec) {
  try {
    spec.validate();
    return true;
  } catch (const SpecError&) {
    return false;
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
    if (!EngineBase::supports(plain, d) || !valid(spec)) return false;
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
