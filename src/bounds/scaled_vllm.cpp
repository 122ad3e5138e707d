// Section 1 for the vllm_f32 recipe: vLLM's scaled cos/sin caches (src/kernels/engines/
// vllm_native.cpp, which cites each class's file and commit). Same setting and notation as
// bounds.cpp: rho is the relative error of the kernel's angle against the exact m theta'_i, first
// order (kSlack covers the dropped products), u = 2^-24, u64 = 2^-53, [x] is 1 when the value x
// is not an f32 (it rounds once when it enters an f32 op) and 0 otherwise, e = 2j/dim with
// (j, dim) = spec.ladder(i).
//
// Unlike section 8, which takes theta'_i from f64 formulas rounded once into f32, vLLM evaluates
// the scaling in f32 tensor ops, one rounding each:
//   pos = powf(float(base), fl(e)):  p = u (e ln base + [base] e + 2)     (section 1's terms)
//   inv = fl(1 / pos):               rho0 = p + u                         (hf_f32's inv_freq)
//   none:     rho0, as hf_f32.
//   linear:   inv unchanged; the POSITION row is divided, row = fl(float(m) / float(f)):
//               [f] u + [f not a power of two] u (the division; exact for a power of two)
//             -> rho0 + [f] u + [f not 2^k] u. (HF divides inv_freq instead: the same bits only
//             when f is a power of two.)
//   dynamic:  base' = base (f max_len / L - (f - 1))^(d/(d-2)), max_len = L f, in f64: the first
//             term has 3 roundings on f^2 (L f, f max_len, / L), f - 1 (u64 |f - 1|), the
//             subtraction (u64 t), so delta_t = (3 f^2 + |f - 1| + t) u64 / t; d/(d-2) rounds
//             (u64, times ln t), pow (2 u64), times base (u64):
//               delta_b = d/(d-2) (delta_t + u64 ln t) + 3 u64.
//             Then hf_f32 on base' (float(base') rounds: the [base] term always counts):
//             -> u (e ln base' + e + 3) + e delta_b.
//   yarn, DeepSeek (r = the exact ramp of pair j, g = theta'/theta = r/f + (1 - r) >= 1/f):
//             extrap = fl(1/pos): d2 = p + u; interp = fl(1/fl(float(f) pos)): d1 = p + [f] u + 2u;
//             ramp = fl((j - low) / float(high - low)), low/high exact integers (j - low exact):
//             |dr| <= u; mask = fl(1 - ramp): abs e_m = 2u; fl(1 - mask): abs e_a = 3u; all three
//             exact (0 or 1) outside the ramp (low == high: j - low is an integer, so ramp is 0 or
//             >= 1000 and clamps exactly). The blend fl(fl(interp a) + fl(extrap mask)) errs,
//             relative to theta, by (e_a + r d1 + r u)/f + e_m + (1 - r)(d2 + u) + u g:
//             -> [e_a/f + e_m + (r/f)(d1 + u) + (1 - r)(d2 + u)] / g + u.
//             low/high come from floor/ceil of f64 values: within their f64 error of an integer
//             (bounds.cpp yarn_ramp_abs's estimate) f64 and exact may truncate differently and the
//             recipe jumps: no claim (inf), as section 8.
//   llama3:   wave = fl(fl(1/inv) fl(2pi)): rho0 + 3u; R = fl(fl(1/wave) float(orig)) =
//             orig / wavelength: rho0 + (5 + [orig]) u; smooth = fl(fl(R - float(lo)) /
//             float(hi - lo)), in the medium band R <= hi:
//               e_s = (hi (rho0 + (5 + [orig]) u) + [lo] lo u + (hi - lo) u + 2 hi u)/(hi - lo)
//                     + ([hi - lo] + 1) u
//             (the 2 hi u: the band edges float(orig/hi), float(orig/lo) move by an ulp). The
//             medium value ((1 - s) inv)/f + s inv is continuous with both neighbouring bands
//             (s = 0 gives inv/f, s = 1 gives inv), so a band chosen differently by the f32
//             compares costs no more than a smooth error; its evaluation, divided by g >= 1/f
//             and g >= s: e_s (1 + f) + rho0 + (4 + [f]) u, which also bounds the outer bands
//             (inv/f: rho0 + [f] u + u; inv: rho0); those terms alone for pairs whose exact R is
//             outside the band by more than R's relative error (rho0 + 8u).
//             lo == hi has a jump at the single band edge: no claim.
//   longrope: inv = fl(1 / fl(float(c_i) pos)), the start-up choice of c = long or short factors
//             being the spec's (seq_len is max_model_len): -> p + [c_i] u + 2u.
// Every variant then takes the product fl(row inv) (u) and, for |m| > 2^24, float(m) (u).
// The magnitude (YaRN / DeepSeek mscale, LongRoPE's) is an f64 value rounded to f32 and
// multiplied into cos and sin in f32: two f32 roundings, inside section 4's 2 max(u_T, u_R) with
// section 8's f64 error of the factor. Valid while inv stays a normal f32 (theta' > 2^-120 here).
#include "scaled_vllm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ropecheck::bounds {
namespace {

constexpr double u = 0x1p-24;
constexpr double u64 = 0x1p-53;

double not_f32(double v) { return round_to_dtype(v, Dtype::f32) == v ? 0.0 : 1.0; }

// The exact ramp of pair j, or -1 when f64 floor/ceil may disagree with the exact ones.
double yarn_ramp(const RopeSpec& spec, std::int64_t j) {
  const Scaling& sc = spec.scaling;
  const double d = static_cast<double>(spec.ladder_dim());
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  for (double rot : {sc.beta_fast, sc.beta_slow}) {
    const double L1 = std::log(orig / (rot * 2 * 3.14159265358979323846));
    const double v = d * L1 / (2 * std::log(spec.base));
    const double err = L1 == 0 ? 1.0 : std::fabs(v) * (3 * u64 / std::fabs(L1) + 6 * u64);
    const bool decides = rot == sc.beta_fast ? v > -1 : v < d;  // else the clamp decides
    if (decides && std::fabs(v - std::nearbyint(v)) <= err) return -1;
  }
  const auto [low, high] = yarn_correction_range_f64(spec);
  const double jd = static_cast<double>(j);
  if (low == high) return jd > low ? 1.0 : 0.0;
  return std::clamp((jd - low) / (high - low), 0.0, 1.0);
}

double dynamic_rho(const RopeSpec& spec, double e) {
  const Scaling& sc = spec.scaling;
  const double f = sc.factor, d = static_cast<double>(spec.ladder_dim());
  const double t = f * f - (f - 1);
  const double dt = (3 * f * f + std::fabs(f - 1) + t) * u64 / t;
  const double db = d / (d - 2) * (dt + u64 * std::log(t)) + 3 * u64;
  return u * (e * std::log(dynamic_base_f64(spec)) + e + 3) + e * db;
}

// theta: the unscaled theta_i. Pairs whose exact R = orig theta / 2pi lies outside the medium
// band by more than R's f32 error (rho0 + 8u covers its 5 + [orig] roundings and the band edges'
// own) take that band's term; the others the medium band's.
double llama3_rho(const RopeSpec& spec, double rho0, double theta) {
  const Scaling& sc = spec.scaling;
  const double lo = sc.low_freq_factor, hi = sc.high_freq_factor, f = sc.factor;
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  if (lo == hi) return std::numeric_limits<double>::infinity();
  const double R = orig * theta / (2 * 3.14159265358979323846), margin = rho0 + 8 * u;
  if (R * (1 + margin) < lo) return rho0 + not_f32(f) * u + u;  // inv / f
  if (R * (1 - margin) > hi) return rho0;                       // inv itself
  const double es =
      (hi * (rho0 + (5 + not_f32(orig)) * u) + not_f32(lo) * lo * u + (hi - lo) * u + 2 * hi * u) /
          (hi - lo) +
      (not_f32(hi - lo) + 1) * u;
  return es * (1 + f) + rho0 + (4 + not_f32(f)) * u;
}

}  // namespace

PairBounds::AngleTerms vllm_f32_angle_terms(const RopeSpec& spec, std::int64_t pair,
                                            PairBounds::AngleTerms t) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const Scaling& sc = spec.scaling;
  const auto [j, dim] = spec.ladder(pair);
  const double e = 2.0 * static_cast<double>(j) / static_cast<double>(dim);
  const double p = u * (e * std::log(spec.base) + not_f32(spec.base) * e + 2);
  const double rho0 = p + u;
  double rho = rho0;
  switch (sc.kind) {
    case ScalingKind::none:
      break;
    case ScalingKind::linear: {
      int ex = 0;
      const bool pow2 = std::frexp(sc.factor, &ex) == 0.5;
      rho += not_f32(sc.factor) * u + (pow2 ? 0.0 : u);
      break;
    }
    case ScalingKind::dynamic:
      rho = dynamic_rho(spec, e);
      break;
    case ScalingKind::yarn: {
      const double r = yarn_ramp(spec, j);
      if (r < 0) {
        rho = inf;
        break;
      }
      const double f = sc.factor, g = r / f + (1 - r);
      const bool in_ramp = r > 0 && r < 1;
      const double d1 = p + not_f32(f) * u + 2 * u, d2 = p + u;
      rho = ((in_ramp ? 3 * u / f + 2 * u : 0.0) + (r / f) * (d1 + u) + (1 - r) * (d2 + u)) / g + u;
      break;
    }
    case ScalingKind::llama3:
      rho = llama3_rho(spec, rho0, std::pow(spec.base, -e));
      break;
    case ScalingKind::longrope: {
      const bool use_long = sc.seq_len > sc.original_max_position_embeddings;
      const auto& c = use_long ? sc.long_factor : sc.short_factor;
      rho = p + (not_f32(c[static_cast<std::size_t>(pair)]) + 2) * u;
      break;
    }
    default:
      rho = inf;  // not a vLLM class (freq_factors): no claim
  }
  if (!(t.theta > 0x1p-120) || !std::isfinite(round_to_dtype(spec.base, Dtype::f32))) rho = inf;
  t.rel = rho + u;
  t.rel_big = t.rel + u;
  t.m_big = 0x1p24;
  return t;
}

}  // namespace ropecheck::bounds
