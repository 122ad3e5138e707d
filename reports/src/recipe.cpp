#include "recipe.hpp"

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
  return theta;
}
bool ladder_f32_faithful(const Policy& p, const RopeSpec& spec) {
  const ScalingKind k = spec.scaling.kind;
  return p.recipe == AngleRecipe::ladder_f32 &&
         (k == ScalingKind::none || k == ScalingKind::linear || k == ScalingKind::freq_factors);
}
}  // namespace

double recipe_angle(const Policy& p, const RopeSpec& spec, std::int64_t i, std::int64_t m) {
  if (p.recipe == AngleRecipe::ladder_f32) return static_cast<double>(ladder_f32_angle(spec, i, m));
  if (p.recipe == AngleRecipe::hf_f32) {
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
    case AngleRecipe::ladder_f32:
      return 101;
    case AngleRecipe::pow_product:
      break;
  }
  return static_cast<int>(p.angle);
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

Trig recipe_trig(const Policy& p, const RopeSpec& spec, std::int64_t m) {
  Trig t;
  // Scaling variants and the newer layouts: the built-in kernels take theta'_i from the spec's
  // f64 formulas (theta_ladder_f64) and form m * theta'_i in their angle precision; that is the
  // recipe reproduced here (a declared f32 angle rounds theta'_i and the product to f32, hf_f32
  // and ladder_f32 are treated as f32 angles). ladder_f32 is reproduced exactly instead on every
  // layout unscaled and with linear / freq_factors (ggml's, see recipe_angle). Multi-axis specs
  // are reported with one position per token.
  if (!ladder_f32_faithful(p, spec) &&
      (spec.scaling.kind != ScalingKind::none ||
       (spec.layout != Layout::interleaved && spec.layout != Layout::half))) {
    const auto th = theta_ladder_f64(spec);
    const Precision ap = angle_precision(p);
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const double theta = rd(th[static_cast<std::size_t>(i)], ap);
      const Mp a = ref::exact(rd(rd(static_cast<double>(m), ap) * theta, ap));
      t.c.push_back(cos(a));
      t.s.push_back(sin(a));
    }
    return t;
  }
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const Mp a = ref::exact(recipe_angle(p, spec, i, m));
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
