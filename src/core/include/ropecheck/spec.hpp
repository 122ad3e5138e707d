// The core (src/core, ropecheck::core): the vocabulary every other layer reads; nothing of
// ropecheck below it.
//   spec.hpp    RopeSpec: layouts and their pairing, partial rotary, scaling variants, multi-axis
//   dtype.hpp   the dtypes (f64 f32 f16 bf16), their traits (digits, emin, emax, u), bit patterns
//   policy.hpp  a kernel's declared precision Policy, angle recipes, their names and JSON
//   kernel.hpp  the Kernel interface, its call arguments (TensorArgs) and declared Domain
// Adding a layout: the Layout enum and kAllLayouts below, its pairing in pair() / ladder() /
// pair_axis(), its name and validation rules in spec.cpp; then plugin.h (its ABI number), the
// kernels that implement it and the properties' spec generator (properties/lib/gen.hpp). The
// reference, bounds, verify engine, reports and CLI read the pairing and the names from here.
// Adding a dtype: dtype.hpp/.cpp (traits, bit patterns, kAllDtypes), its property translation
// unit (properties/lib/props_<dtype>.cpp and the dtype lists in properties/CMakeLists.txt), and
// the kernels that store it.
//
// RopeSpec: the single description of a RoPE configuration, read by the reference, the kernels,
// the properties and the reports. It holds parameters only, no numerics: the reference computes
// the inverse-frequency ladder in multiprecision, each kernel in its declared precision.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ropecheck {

// Pairing of rotated dims and, for multi-axis layouts, which position axis drives each pair.
//   interleaved:  pair i = (2i, 2i+1)              (GPT-J, RoFormer, ggml NORMAL, Meta complex)
//   half:         pair i = (i, i + rotary_dim/2)   (GPT-NeoX, HF rotate_half, ggml NEOX)
//   proportional: pair i = (i, i + head_dim/2), i < rotary_dim/2, theta_i = base^(-2i/head_dim)
//                 (Gemma-style partial rotary: the inverse frequencies of the *full* head, zero
//                 padded after rotary_dim/2 entries; dims [rd/2, hd/2) and [hd/2 + rd/2, hd) pass
//                 through). Distinct from contiguous partial rotary (half with rotary_dim < hd).
//   mrope:        Qwen2-VL M-RoPE: half pairing over rotary_dim, one ladder over rotary_dim, pair i
//                 driven by axis t, h or w by contiguous chunks sections = mrope_section (pairs).
//   imrope:       Qwen3-VL interleaved M-RoPE: as mrope, but pair i is driven by h when
//                 i % 3 == 1 and i < 3 sections[1], by w when i % 3 == 2 and i < 3 sections[2],
//                 by t otherwise (HF Qwen3-VL apply_interleaved_mrope).
//   axial:        per-axis ladders (2-D vision, CogVideoX 3-D): interleaved pairs, axis a owns
//                 sections[a] consecutive pairs with its own ladder base^(-2j/(2 sections[a])),
//                 j < sections[a] (CogVideoX get_3d_rotary_pos_embed: t D/4, h 3D/8, w 3D/8).
enum class Layout : int {
  interleaved = 0,
  half = 1,
  proportional = 2,
  mrope = 3,
  imrope = 4,
  axial = 5
};

// Frequency scaling variant: what turns the ladder theta_i into theta'_i, and the magnitude
// (attention) factor it implies. Named after the recipe where recipes differ; the formulas are in
// spec.cpp (double, for kernels) and reference.cpp (multiprecision), each citing its recipe.
//   none          theta'_i = theta_i
//   linear        theta'_i = theta_i / factor                 (HF linear, vLLM LinearScaling)
//   dynamic       HF dynamic NTK: base' = base (f L/L0 - (f - 1))^(d/(d-2)), L = max(seq_len, L0),
//                 L0 = max_position_embeddings, d = the ladder dim. Length-dependent.
//   yarn          HF _compute_yarn_parameters (ramp between theta/f and theta, magnitude =
//                 attention factor with HF's precedence)
//   llama3        HF _compute_llama3_parameters (direct form)
//   freq_factors  theta'_i = theta_i / freq_factors[i] (ggml rope_freqs; llama3 as GGUF stores it)
//   longrope      HF _compute_longrope_parameters: theta'_i = theta_i / ext_i, ext = long_factor
//                 iff seq_len > original_max_position_embeddings (strictly), else short_factor
enum class ScalingKind : int {
  none = 0,
  linear = 1,
  dynamic = 2,
  yarn = 3,
  llama3 = 4,
  freq_factors = 5,
  longrope = 6
};

// Explicit parameters; fields a kind does not use are ignored (and left at their defaults by the
// parsers). All doubles are taken as their exact values by the reference.
struct Scaling {
  ScalingKind kind = ScalingKind::none;
  double factor = 1.0;  // linear, dynamic, yarn, llama3
  // yarn, llama3, longrope: the pre-training context; dynamic: unused.
  std::int64_t original_max_position_embeddings = 0;
  // dynamic: L0 of the formula; longrope: the extended context (default attention factor).
  std::int64_t max_position_embeddings = 0;
  // dynamic, longrope: the current sequence length the table is built for (0: none given ->
  // dynamic uses L0; longrope uses the short factors).
  std::int64_t seq_len = 0;
  double beta_fast = 32.0, beta_slow = 1.0;   // yarn
  bool truncate = true;                       // yarn: floor/ceil the correction range (HF default)
  double mscale = 0.0, mscale_all_dim = 0.0;  // yarn (DeepSeek); 0 = not given (HF truthiness)
  // yarn, longrope: explicit attention factor; wins over every derived one when set.
  std::optional<double> attention_factor;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  std::vector<double> short_factor, long_factor;         // longrope, one per pair
  std::vector<double> freq_factors;                      // freq_factors, one per pair
  bool operator==(const Scaling&) const = default;
};

// Scalings of published models, the one copy of their parameters for reports and validate.
// Llama-3.1-8B: llama3, factor 8, low 1, high 4, original 8192 (with theta 500000).
Scaling llama31_scaling();
// DeepSeek-V3: yarn, factor 40, original 4096, mscale = mscale_all_dim = 1 (attention factor 1).
Scaling deepseek_v3_yarn_scaling();
// One representative variant of each kind for n_pairs pairs (the probes of a kernel's domain):
// linear 4, dynamic factor 2 at 16384 of 4096, DeepSeek-V3's yarn, Llama-3.1's llama3,
// freq_factors 1 + 7i/n, LongRoPE 4096 -> 131072 on its long side; none for ScalingKind::none.
Scaling example_scaling(ScalingKind kind, std::int64_t n_pairs);

class SpecError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct RopeSpec {
  std::int64_t head_dim = 0;
  // Even and <= head_dim. Dims >= rotary_dim pass through unchanged. 0 in a freshly built spec
  // means "default" and is resolved by `normalized()` to head_dim rounded down to even.
  std::int64_t rotary_dim = 0;
  // theta_i = base^(-2i/rotary_dim). Taken as the exact value of this double.
  double base = 10000.0;
  Layout layout = Layout::interleaved;
  // Magnitude scale s: every rotation block is s * [[cos, -sin], [sin, cos]].
  double scale = 1.0;
  Scaling scaling;
  // mrope / imrope: mrope_section (pairs per axis t, h, w; sum = rotary_dim/2). axial: pairs per
  // axis (sum = rotary_dim/2). Empty for the 1-D layouts.
  std::vector<std::int64_t> sections;

  std::int64_t n_pairs() const { return rotary_dim / 2; }

  // Element indices (a, b) of rotation pair i: out_a = s(x_a cos - x_b sin),
  // out_b = s(x_a sin + x_b cos), with angle m_axis(i) * theta'_i.
  std::pair<std::int64_t, std::int64_t> pair(std::int64_t i) const {
    switch (layout) {
      case Layout::interleaved:
      case Layout::axial:
        return {2 * i, 2 * i + 1};
      case Layout::proportional:
        return {i, i + head_dim / 2};
      default:
        return {i, i + rotary_dim / 2};
    }
  }
  // Number of position axes per token (1 for interleaved, half, proportional).
  std::int64_t n_axes() const;
  // The position axis that drives pair i.
  std::int64_t pair_axis(std::int64_t i) const;
  // Unscaled ladder of pair i: theta_i = base^(-2 j / dim) with (j, dim) = ladder(i).
  std::pair<std::int64_t, std::int64_t> ladder(std::int64_t i) const;
  // The "dim" of the scaling formulas (HF's int(head_dim * partial_rotary_factor)): rotary_dim,
  // or head_dim for proportional.
  std::int64_t ladder_dim() const { return layout == Layout::proportional ? head_dim : rotary_dim; }
  // Element j is not part of any rotated pair (copied bit for bit).
  bool is_passthrough(std::int64_t j) const;

  // Resolves defaults (rotary_dim 0 -> head_dim rounded down to even) and validates; throws
  // SpecError with a message naming the offending field.
  RopeSpec normalized() const;
  // Throws SpecError if the spec is not valid (after normalization).
  void validate() const;

  bool operator==(const RopeSpec&) const = default;
};

// Largest head_dim accepted (the dense reference is head_dim^2 multiprecision numbers).
inline constexpr std::int64_t kMaxHeadDim = 1 << 14;

// Every layout, in enum order: the one list that parsing, messages and generators read.
inline constexpr Layout kAllLayouts[] = {Layout::interleaved, Layout::half,   Layout::proportional,
                                         Layout::mrope,       Layout::imrope, Layout::axial};
std::optional<Layout> parse_layout(std::string_view s);
// The layout names for messages: "interleaved, half, proportional, mrope, imrope or axial"
// (one_d: the 1-D layouts only).
std::string layout_choices(bool one_d = false);
std::optional<ScalingKind> parse_scaling_kind(std::string_view s);
const char* name(Layout l);
const char* name(ScalingKind k);
// 1-D layouts are interleaved, half and proportional.
inline bool is_multi_axis(Layout l) {
  return l == Layout::mrope || l == Layout::imrope || l == Layout::axial;
}

// ---- double-precision evaluation of the variant formulas -------------------------------------
// The recipes as kernels evaluate them in f64 (the reference has its own multiprecision copy).
// theta'_i for every pair, in pair order: theta_i = pow(base', -2j/dim) then the variant's
// per-pair factor c_i (theta'_i = theta_i * c_i, one more rounding when c_i != 1).
std::vector<double> theta_ladder_f64(const RopeSpec& spec);
// The effective magnitude s = scale * attention_factor(variant), in f64.
double magnitude_f64(const RopeSpec& spec);
// The variant's attention factor alone (1 for kinds without one), f64.
double attention_factor_f64(const Scaling& sc, std::int64_t ladder_dim);
// dynamic NTK: base' in f64.
double dynamic_base_f64(const RopeSpec& spec);
// yarn: HF find_correction_range (low, high) in f64, after truncation and clamping, before the
// +0.001 singularity guard.
std::pair<double, double> yarn_correction_range_f64(const RopeSpec& spec);
// llama3 direct form as GGUF freq factors (llama.cpp convert_hf_to_gguf, LlamaModel
// generate_extra_tensors): ff_i = 1 / c_i with c_i the llama3 multiplier, in f64.
std::vector<double> llama3_freq_factors_f64(const RopeSpec& spec);
std::string describe(const RopeSpec& s);  // short human-readable one-liner

// The partial-rotary ratios models ship, for one head dim: rotary_dim = head_dim/2 (ChatGLM,
// Persimmon, gemma.cpp's half-rope layers), /4 (GPT-NeoX / Pythia, StableLM), 0.4 head_dim
// (Phi-2), a 64-dim rope part (GPT-J's 64 of 256, DeepSeek MLA's 64 beside 128); each rounded down
// to even, those in [2, head_dim), without repeats. A kernel often takes exactly one of them, so
// a uniform draw of rotary_dim would almost never reach its partial path (#29: an
// exponent-over-head_dim bug in it passed); the property generators, their probe of supports()
// and validate's directed specs all draw these.
std::vector<std::int64_t> model_rotary_dims(std::int64_t head_dim);

}  // namespace ropecheck
