// Section 1 of bounds.cpp for the hf_f32 recipe with a scaling kind: Hugging Face's init functions
// (modeling_rope_utils.py; the steps are listed in src/kernels/engines/hf_eager.cpp) compute the
// scaled inv_freq in f32 with several ops, where section 8 assumes f64 formulas rounded once. Here
// is each path's relative error rho against the exact theta'_i (first order, u = 2^-24; kSlack
// covers the dropped O(u^2) terms); bounds.cpp adds the product with f32(m) (u, and u more above
// 2^24) as for every recipe.
//
// Common steps, e = 2j/dim ((j, dim) = spec.ladder(i)), b the base, [x] = 1 when the Python float
// x is not an f32 (it rounds in the op):
//   pow = powf(f32(b), f32(e)): the exponent's rounding e ln(b) u, the base's e [b] u, powf within
//     one ulp 2u:                                           rp = (e ln b + e [b] + 2) u
//   the default inv_freq = 1 / pow, one f32 reciprocal:     rho0 = rp + u
// linear:    inv / f32(f): a rounded divisor and a division  rho = rho0 + [f] u + u
// longrope:  1 / (f32(ext_i) * pow)                          rho = rp + [ext_i] u + 2u
// dynamic within L0: base' = base (t)^(d/(d-2)) in f64 (relative error delta64 of section 8),
//   then rounded to f32 by the pow:                          rho = (e ln b' + e + 3) u + e delta64
// dynamic past L0 (seq_len an int64 tensor, so the base' formula runs in f32): with F = f32(f),
//   Ls = f32(L), L0 exact below 2^24,
//     t1 = F Ls ([f] u + [L] u + u), t2 = t1 / L0 (u + [L0] u), t = t2 - f32(f - 1) (u |f - 1|
//     for the rounded subtrahend, u t for the subtraction):
//       delta_t = ((f L / L0) ([f] + [L] + [L0] + 2) u + u |f - 1| + u t) / t
//     p = fl32(pow(double(t), d / (d - 2))) (the exponent an f64 Python float, std::pow in
//       double): x delta_t + x u64 ln t + 2 u64 + u, x = d/(d-2)
//     base' = f32(b) * p: [b] u + u                   -> delta_b = x delta_t + (2 + [b]) u + x u64
//     ln t
//                                                                  + 2 u64
//   then the default formula on an f32 base':                rho = (e ln b' + 3) u + e delta_b
// yarn (q_j = r/f + 1 - r, r the exact ramp of pair j, clamped to [0, 1]): extrapolation
//   1 / pow (rho_e = rp + u), interpolation 1 / (F pow) (rho_i = rp + [f] u + 2u); the f32 ramp r^
//   with |r^ - r| <= eR; w = fl(1 - r^) errs from 1 - r by <= eR + u (1 - r); fl(1 - w) from r by
//   <= eR + u. inv = fl(fl(inter (1 - w)) + fl(extra w)), relative to theta:
//     |d| <= (r (rho_i + u) + eR + u) / f + (1 - r)(rho_e + u) + eR + u (1 - r) + q u
//                                                            rho = |d| / q
//   The ramp's own error eR: truncated (integer low/high, exact in f32; the Python difference
//   high - low exact) only the f32 division, u r, and a clamped pair (r = 0 or 1) is computed
//   exactly: rho = rho_e or rho_i; the 0.001 guard makes every ramp value 0 or >= 1 (clamped);
//   where section 8 finds the truncation unstable (+inf) there is no claim. Not truncated: the f64
//   range's error (section 8's e_r) plus f32(low) (u |low|), j - low (u |j - low|), f32(high - low)
//   and the division (2u r): eR = e_r + u (|low| + |j - low|) / (high - low) + 2u r, and the
//   general formula for every pair.
// llama3 (rho_inv = rho0): wavelen = fl(fl(1/inv) f32(2 pi)) (f32(2 pi) is 0.47u off: <= u):
//   rho_w = rho_inv + 3u; r = fl(fl(1/wavelen) f32(orig)): rho_r = rho_w + (2 + [orig]) u;
//   smooth = fl(fl(r - f32(low)) / f32(high - low)), with r <= high in the band:
//     e_s = (high rho_r + u low [low]) / (high - low) + 3u + 2 u64
//   (the subtraction u (high - low), the divisor's rounding and the division u each <= u).
//   smoothed = fl(fl(fl(fl(1 - s^) inv) / F) + fl(s^ inv)) with q = (1 - s)/f + s: s^'s error
//   enters both terms with opposite signs, theta (1 - 1/f) ds, so
//     rho_m = ((1 - s)/f (rho_inv + (3 + [f]) u) + s (rho_inv + u) + es (1 - 1/f)) / q + u.
//   Band edges: f32 wavelengths may classify a pair into a neighbouring band; the recipe is
//   continuous there and a misclassified pair has |s^ - edge| <= 2 e_s, so pairs with s within
//   2 e_s of an edge take es = 2 e_s and the max of rho_m (s clamped) and their band's own error
//   (inv: rho_inv; inv / F: rho_inv + [f] u + u); the other medium pairs es = e_s. A pair with s
//   beyond 2 e_s outside [0, 1] is surely classified (its wavelength is further from the f32
//   threshold, relatively, than 2 high rho_r / (high - low) >= rho_w): only its band's error.
// Valid while every intermediate is a normal f32 (theta'_i, pow >= 2^-125, base' finite);
// otherwise no claim.
#include "scaled_f32.hpp"

#include "ropecheck/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace ropecheck::bounds::detail {
namespace {

constexpr double u = 0x1p-24, u64 = 0x1p-53;
constexpr double kInf = std::numeric_limits<double>::infinity();

double not_f32(double v) { return round_to_dtype(v, Dtype::f32) == v ? 0.0 : 1.0; }

// rp: the f32 pow's error for base b at exponent e.
double pow_rel(double b, double e) { return (e * std::log(b) + e * not_f32(b) + 2) * u; }

double dynamic_rel(const RopeSpec& s, double e, const F64Terms& f64) {
  const Scaling& sc = s.scaling;
  const double bp = dynamic_base_f64(s);
  if (sc.seq_len <= sc.max_position_embeddings)
    return (e * std::log(bp) + e + 3) * u + e * f64.dynamic_base_rel;
  const double f = sc.factor, L = static_cast<double>(sc.seq_len);
  const double L0 = static_cast<double>(sc.max_position_embeddings);
  const double t = f * L / L0 - (f - 1), d = static_cast<double>(s.ladder_dim()), x = d / (d - 2);
  const double dt = ((f * L / L0) * (not_f32(f) + not_f32(L) + not_f32(L0) + 2) * u +
                     u * std::fabs(f - 1) + u * t) /
                    t;
  const double db = x * dt + (2 + not_f32(s.base)) * u + x * u64 * std::log(t) + 2 * u64;
  return (e * std::log(bp) + 3) * u + e * db;
}

double yarn_rel(const RopeSpec& s, std::int64_t j, double rp, const F64Terms& f64) {
  const Scaling& sc = s.scaling;
  if (!std::isfinite(f64.yarn_ramp_abs)) return kInf;
  auto [low, high] = yarn_correction_range_f64(s);
  if (low == high) high += 0.001;
  const double f = sc.factor, jd = static_cast<double>(j);
  const double r = std::clamp((jd - low) / (high - low), 0.0, 1.0);
  const double rho_e = rp + u, rho_i = rp + not_f32(f) * u + 2 * u;
  double eR = u * r;
  if (sc.truncate) {
    if (r == 0) return rho_e;
    if (r == 1) return rho_i;
  } else {
    eR = f64.yarn_ramp_abs + u * (std::fabs(low) + std::fabs(jd - low)) / (high - low) + 2 * u * r;
  }
  const double q = r / f + 1 - r;
  const double d =
      (r * (rho_i + u) + eR + u) / f + (1 - r) * (rho_e + u) + eR + u * (1 - r) + q * u;
  return d / q;
}

double llama3_rel(const RopeSpec& s, double theta, double rho_inv) {
  const Scaling& sc = s.scaling;
  const double f = sc.factor, lo = sc.low_freq_factor, hi = sc.high_freq_factor;
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const double rho_r = rho_inv + 3 * u + (2 + not_f32(orig)) * u;
  const double e_s = (hi * rho_r + u * lo * not_f32(lo)) / (hi - lo) + 3 * u + 2 * u64;
  const double wavelen = 2 * std::numbers::pi / theta;
  const double s_raw = (orig / wavelen - lo) / (hi - lo);
  const double low_band = rho_inv + not_f32(f) * u + u;
  if (s_raw >= 1 + 2 * e_s) return rho_inv;  // surely the high band: inv itself
  if (s_raw <= -2 * e_s) return low_band;    // surely the low band: inv / F
  const bool near_edge = s_raw <= 2 * e_s || s_raw >= 1 - 2 * e_s;
  const double es = near_edge ? 2 * e_s : e_s, sm = std::clamp(s_raw, 0.0, 1.0);
  const double q = (1 - sm) / f + sm;
  const double rho_m =
      ((1 - sm) / f * (rho_inv + (3 + not_f32(f)) * u) + sm * (rho_inv + u) + es * (1 - 1 / f)) /
          q +
      u;
  if (!near_edge) return rho_m;
  return std::max(rho_m, s_raw > 0.5 ? rho_inv : low_band);
}

}  // namespace

bool hf_scaled_f32_applies(const RopeSpec& spec) {
  switch (spec.scaling.kind) {
    case ScalingKind::linear:
    case ScalingKind::dynamic:
    case ScalingKind::yarn:
    case ScalingKind::llama3:
    case ScalingKind::longrope:
      return true;
    default:
      return false;
  }
}

double hf_scaled_f32_theta_rel(const RopeSpec& spec, std::int64_t pair, const F64Terms& f64) {
  const Scaling& sc = spec.scaling;
  const auto [j, dim] = spec.ladder(pair);
  const double e = 2.0 * static_cast<double>(j) / static_cast<double>(dim);
  const double theta = std::pow(spec.base, -e);
  if (std::isinf(round_to_dtype(spec.base, Dtype::f32)) || theta < 0x1p-125) return kInf;
  const double rp = pow_rel(spec.base, e), rho0 = rp + u;
  switch (sc.kind) {
    case ScalingKind::linear:
      return rho0 + not_f32(sc.factor) * u + u;
    case ScalingKind::longrope: {
      const auto& ext =
          sc.seq_len > sc.original_max_position_embeddings ? sc.long_factor : sc.short_factor;
      return rp + not_f32(ext[static_cast<std::size_t>(pair)]) * u + 2 * u;
    }
    case ScalingKind::dynamic:
      return std::isinf(round_to_dtype(dynamic_base_f64(spec), Dtype::f32))
                 ? kInf
                 : dynamic_rel(spec, e, f64);
    case ScalingKind::yarn:
      return yarn_rel(spec, j, rp, f64);
    case ScalingKind::llama3:
      return llama3_rel(spec, theta, rho0);
    default:
      return kInf;
  }
}

}  // namespace ropecheck::bounds::detail
