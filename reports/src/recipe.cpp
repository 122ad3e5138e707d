// The recipe-faithful angle and trig, and exact rotation by given angles (recipe.hpp). The
// RecipeReference, which answers the sweep's questions about them fast, is in
// recipe_reference.cpp.
#include "recipe.hpp"

#include "ropecheck/recipe_f32.hpp"

#include <cmath>

namespace ropecheck::reports::detail {

namespace ref = ropecheck::reference;
using ref::Mp;

namespace {
// Rounds into an angle precision narrower than f32 (no built-in kernel declares one; kept so a
// plugin declaring f16/bf16 angles gets a faithful reference too).
double rd(double v, Precision p) { return round_to_dtype(v, p); }

// ggml_rope_cache_init + rope_yarn (ext_factor 0), every step a float operation.
float ladder_f32_angle(const RopeSpec& spec, std::int64_t i, std::int64_t m) {
  const auto [j, dim] = spec.ladder(i);
  const float ts = std::pow(static_cast<float>(spec.base), -2.0f / static_cast<float>(dim));
  float theta = static_cast<float>(m);
  for (std::int64_t k = 0; k < j; ++k) theta *= ts;
  const Scaling& sc = spec.scaling;
  if (sc.kind == ScalingKind::linear) return (1.0f / static_cast<float>(sc.factor)) * theta;
  if (sc.kind == ScalingKind::freq_factors)
    return theta / static_cast<float>(sc.freq_factors[static_cast<std::size_t>(i)]);
  if (sc.kind == ScalingKind::longrope)  // llama.cpp's long or short rope_factors tensor
    return theta / static_cast<float>((sc.seq_len > sc.original_max_position_embeddings
                                           ? sc.long_factor
                                           : sc.short_factor)[static_cast<std::size_t>(i)]);
  return theta;
}
bool ladder_f32_faithful(const Policy& p, const RopeSpec& spec) {
  const ScalingKind k = spec.scaling.kind;
  return p.recipe == AngleRecipe::ladder_f32 &&
         (k == ScalingKind::none || k == ScalingKind::linear || k == ScalingKind::freq_factors ||
          k == ScalingKind::longrope);
}
// fast_powf_f32 (FlashInfer) is reproduced unscaled and with linear scaling on the 1-D layouts,
// fast_powf_ladder_f32 (llama.cpp CUDA) unscaled on every layout (through spec.ladder).
bool fast_powf_faithful(const Policy& p, const RopeSpec& spec) {
  const ScalingKind k = spec.scaling.kind;
  if (p.recipe == AngleRecipe::fast_powf_ladder_f32) return k == ScalingKind::none;
  return p.recipe == AngleRecipe::fast_powf_f32 &&
         (k == ScalingKind::none || k == ScalingKind::linear) &&
         (spec.layout == Layout::interleaved || spec.layout == Layout::half);
}
// hf_f32 / vllm_f32 away from the plain 1-D case recipe_angle covers: every layout whose pair i
// takes frequency i (not axial: its own ladders; not proportional: recipe_angle's rotary_dim
// ladder is what the unscaled case declares), every HF / vLLM scaling kind (freq_factors is
// ggml's, not theirs).
bool f32_tensor_faithful(const Policy& p, const RopeSpec& spec) {
  if (p.recipe != AngleRecipe::hf_f32 && p.recipe != AngleRecipe::vllm_f32) return false;
  const Layout l = spec.layout;
  const bool plain_1d =
      (l == Layout::interleaved || l == Layout::half) && spec.scaling.kind == ScalingKind::none;
  return !plain_1d && spec.scaling.kind != ScalingKind::freq_factors &&
         (l == Layout::interleaved || l == Layout::half || l == Layout::mrope ||
          l == Layout::imrope);
}
// recipe_angles' generic path: the spec's f64 theta'_i rounded to the angle precision.
bool generic_path(const Policy& p, const RopeSpec& spec) {
  return !f32_tensor_faithful(p, spec) && !ladder_f32_faithful(p, spec) &&
         !fast_powf_faithful(p, spec) &&
         (spec.scaling.kind != ScalingKind::none ||
          (spec.layout != Layout::interleaved && spec.layout != Layout::half));
}
}  // namespace

bool recipe_reproduced(const Policy& p, const RopeSpec& spec) {
  // The generic path is the definition of pow_product and inv_freq_f64 (the built-in kernels take
  // theta'_i from theta_ladder_f64); the f32 recipes compute theta'_i in steps of their own.
  return !generic_path(p, spec) ||
         (p.recipe == AngleRecipe::pow_product || p.recipe == AngleRecipe::inv_freq_f64);
}

double recipe_angle(const Policy& p, const RopeSpec& spec, std::int64_t i, std::int64_t m) {
  if (p.recipe == AngleRecipe::ladder_f32) return static_cast<double>(ladder_f32_angle(spec, i, m));
  if (p.recipe == AngleRecipe::fast_powf_ladder_f32) {
    const auto [j, dim] = spec.ladder(i);
    return static_cast<double>(static_cast<float>(m) *
                               fast_powf_ladder_f32_inv_freq(spec.base, j, dim));
  }
  if (p.recipe == AngleRecipe::fast_powf_f32) {
    const double lin = spec.scaling.kind == ScalingKind::linear ? spec.scaling.factor : 0.0;
    const float inv = fast_powf_f32_inv_freq(spec.base, i, spec.rotary_dim, lin);
    return static_cast<double>(static_cast<float>(m) * inv);
  }
  if (p.recipe == AngleRecipe::inv_freq_f64) {  // f64 inv_freq rounded once into the angle
    const double inv = 1.0 / std::pow(spec.base, 2.0 * static_cast<double>(i) /
                                                     static_cast<double>(spec.rotary_dim));
    if (p.angle == Dtype::f32)
      return static_cast<double>(static_cast<float>(m) * static_cast<float>(inv));
    return rd(rd(static_cast<double>(m), p.angle) * rd(inv, p.angle), p.angle);
  }
  if (p.recipe == AngleRecipe::hf_f32 || p.recipe == AngleRecipe::vllm_f32) {  // unscaled: one
    const float base_f = static_cast<float>(spec.base);
    const float rd_f = static_cast<float>(spec.rotary_dim);
    const float inv = 1.0f / std::pow(base_f, static_cast<float>(2 * i) / rd_f);
    return static_cast<double>(static_cast<float>(m) * inv);
  }
  switch (p.angle) {
    case Dtype::f64: {
      const double theta =
          std::pow(spec.base, -2.0 * static_cast<double>(i) / static_cast<double>(spec.rotary_dim));
      return static_cast<double>(m) * theta;
    }
    case Dtype::f32: {
      const float theta =
          std::pow(static_cast<float>(spec.base),
                   -2.0f * static_cast<float>(i) / static_cast<float>(spec.rotary_dim));
      return static_cast<double>(static_cast<float>(m) * theta);
    }
    case Dtype::f16:
    case Dtype::bf16: {
      const double e =
          rd(-2.0 * static_cast<double>(i) / static_cast<double>(spec.rotary_dim), p.angle);
      const double theta = rd(std::pow(rd(spec.base, p.angle), e), p.angle);
      return rd(rd(static_cast<double>(m), p.angle) * theta, p.angle);
    }
  }
  return 0;
}

int recipe_key(const Policy& p) {
  switch (p.recipe) {
    case AngleRecipe::hf_f32:
      return 100;
    case AngleRecipe::vllm_f32:  // the same angles as hf_f32 unscaled, not with linear / dynamic
      return 102;
    case AngleRecipe::ladder_f32:
      return 101;
    case AngleRecipe::inv_freq_f64:
      return 110 + static_cast<int>(p.angle);
    case AngleRecipe::fast_powf_f32:
      return 120 + (p.trig_argument == TrigArgument::turns_f32 ? 1000 : 0);
    case AngleRecipe::fast_powf_ladder_f32:
      return 121 + (p.trig_argument == TrigArgument::turns_f32 ? 1000 : 0);
    case AngleRecipe::pow_product:
      break;
  }
  return static_cast<int>(p.angle) + (p.trig_argument == TrigArgument::turns_f32 ? 1000 : 0);
}

Trig exact_trig(const RopeSpec& spec, std::int64_t m) {
  Trig t;
  const Mp pos(static_cast<long long>(m));
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const Mp a = ref::angle(spec, i, pos);
    t.c.push_back(cos(a));
    t.s.push_back(sin(a));
  }
  return t;
}

namespace {
// trig_argument turns_f32: the angle the hardware sine is evaluated at (policy.hpp), as a double.
double turns(const Policy& p, double angle) {
  if (p.trig_argument != TrigArgument::turns_f32) return angle;
  return turns_f32_angle(static_cast<float>(angle));
}
}  // namespace

std::vector<double> recipe_angles(const Policy& p, const RopeSpec& spec, std::int64_t m) {
  std::vector<double> out;
  // hf_f32 / vllm_f32 with a scaling kind, or on M-RoPE: the engines' own f32 inv_freq
  // (ropecheck/recipe_f32.hpp, the function hf_eager and vllm_native call), one f32 product with
  // the f32 position (vllm_f32's linear: divided first). Without it the split would charge the
  // few-ulp difference between that inv_freq and fl32(theta'_i) -- as large as the angle error
  // itself at every |m| -- to the rotation, and call an angle-limited cell arithmetic-limited.
  // Scaling variants and the newer layouts: the built-in kernels take theta'_i from the spec's
  // f64 formulas (theta_ladder_f64) and form m * theta'_i in their angle precision; that is the
  // recipe reproduced here (a declared f32 angle rounds theta'_i and the product to f32, hf_f32
  // and ladder_f32 are treated as f32 angles). ladder_f32 is reproduced exactly instead on every
  // layout unscaled and with linear / freq_factors / longrope (ggml's, see recipe_angle).
  // Multi-axis specs are reported with one position per token.
  if (f32_tensor_faithful(p, spec)) {
    const std::vector<float> inv = f32_inv_freq(p.recipe, spec);
    const float divisor = f32_position_divisor(p.recipe, spec);
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i)
      out.push_back(
          turns(p, static_cast<double>(f32_recipe_angle(
                       m, divisor, inv[static_cast<std::size_t>(spec.ladder(i).first)]))));
    return out;
  }
  if (generic_path(p, spec)) {
    const auto th = theta_ladder_f64(spec);
    const Precision ap = angle_precision(p);
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const double theta = rd(th[static_cast<std::size_t>(i)], ap);
      out.push_back(turns(p, rd(rd(static_cast<double>(m), ap) * theta, ap)));
    }
    return out;
  }
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i)
    out.push_back(turns(p, recipe_angle(p, spec, i, m)));
  return out;
}

Trig recipe_trig(const Policy& p, const RopeSpec& spec, std::int64_t m) {
  Trig t;
  for (double angle : recipe_angles(p, spec, m)) {
    const Mp a = ref::exact(angle);
    t.c.push_back(cos(a));
    t.s.push_back(sin(a));
  }
  return t;
}

ref::MpVector rotate(const RopeSpec& spec, const Trig& t, const std::vector<double>& x) {
  ref::MpVector y(spec.head_dim);
  // The magnitude: scale x the variant's attention factor (exact, as the reference has it).
  const Mp s = ref::magnitude(spec);
  const bool scaled = s != 1;
  for (std::int64_t j = spec.rotary_dim; j < spec.head_dim; ++j) y[j] = ref::exact(x[j]);
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    const Mp xa = ref::exact(x[a]), xb = ref::exact(x[b]);
    Mp ya = xa * t.c[i] - xb * t.s[i];
    Mp yb = xa * t.s[i] + xb * t.c[i];
    if (scaled) {
      ya *= s;
      yb *= s;
    }
    y[a] = ya;
    y[b] = yb;
  }
  return y;
}

}  // namespace ropecheck::reports::detail
