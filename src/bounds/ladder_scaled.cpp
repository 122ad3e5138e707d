// Derivation of the ladder_f32 YaRN terms (ggml-org/ggml src/ggml-cpu/ops.cpp rope_yarn and
// src/ggml.c ggml_rope_yarn_corr_dims @ d99724f2b141fed9e1a9f402213506c081433465; llama.cpp's
// parameters: src/kernels/engines/ggml_params.hpp). All arithmetic f32, u = 2^-24,
// mu = -ln(1 - u) >= |ln(1 + d)| for |d| <= u; f the factor, s = 1/f, j the pair index, d the
// ladder dim, [P] 1 when P holds else 0.
//
// A. Correction dims. ggml evaluates v = d ln(L / (beta 2 pi)) / (2 ln b) in f32 and floors
//    (beta_fast) / ceils (beta_slow) it. The argument x^ = fl(float(L) / fl(fl(2 beta) pi_f)):
//    pi_f (u), the product (u), the quotient (u), beta not an f32 (u), L above 2^24 (u):
//    |ln(x^/x)| <= k_x mu, k_x = 3 + [beta] + [L > 2^24]. logf within 1 ulp (2u relative):
//    |L1^ - L1| <= k_x mu + 2u (|L1| + k_x mu). ln b likewise: b rounded into f32 ([b] u absolute),
//    logf 2u relative. The product by d (exact) and the quotient round once each:
//      e_v = d/(2 ln b) (k_x mu + 2u (|L1| + k_x mu)) + |v| ((([b] u + 2u ln b) / ln b) + 2u),
//    times (1 + 2^-20) for the products of small terms. The exact rule floors/ceils the exact v
//    (the reference; v in f64 is within 16 u64 (|v| + 1) of it). When no integer lies within
//    e_v + 16 u64 (|v| + 1) of v, f32 and exact floor/ceil agree and the corr dims are the same
//    integers; otherwise (and unless the clamp to [0, d - 1] decides) no angle claim.
// B. Ramp. With integer corr dims lo < hi, y = (j - lo)/(hi - lo): j - lo and hi - lo are exact
//    (small integers), the quotient rounds (u |y|), the clamp to [0, 1] is 1-Lipschitz and keeps
//    a value past 1 past 1, and 1 - clamp(y) rounds (u): |ramp^ - ramp| <= e_r = 2u. lo == hi:
//    ggml divides by 0.001f, the rule by 0.001: y = 0 at j = lo, |y| >= 999 elsewhere, clamped
//    alike: exact. ext_factor is 1 (exact), so ramp_mix = ramp.
// C. Angle. Exact theta' = theta B, B = s (1 - r) + r >= max(s, r) (s <= 1). ggml: theta_e =
//    theta (1 + dL) (the unscaled ladder, |dL| <= rho_ladder, section 1), theta_i =
//    fl(fs theta_e), fs = fl(1 / float(f)) = s (1 + ds) with |ln(1 + ds)| <= ([f] + 1) mu, then
//    theta^ = fma(theta_i, fl(1 - r^), fl(theta_e r^)) (GCC's contraction; a non-FMA build rounds
//    theta_i (1 - r^) once more: counted). Writing c^ = 1 - r^ + dc (|dc| <= u), r^ = r + dr
//    (|dr| <= e_r), (1 + eta) the product of fs's error and the roundings of the first product
//    (|ln(1 + eta)| <= ([f] + 3) mu) and e2 the rounding of theta_e r^:
//      theta^ = theta (1 + dL)(1 + e3) [B + dr (1 - s) + s dc + s eta c^ + r^ e2]
//    and relative to B (B >= s, B >= r, c^ <= 1 + e_r + u, r^ <= r + e_r):
//      rho_B = e_r (f - 1) + u + eta (1 + e_r + u) + u (1 + f e_r),
//      rho = (1 + rho_ladder)(1 + u)(1 + rho_B) - 1.
//    The (f - 1) e_r term is the ramp's own rounding magnified where the interpolated and the
//    extrapolated angles differ most; it is 2u (f - 1) at most.
// D. Magnitude. Exact M = 1 + g, g = 0.1 ln f (the spec's attention factor, HF get_mscale).
//    F = fl(1 / fs) = f (1 + dF), |ln(1 + dF)| <= k_F mu, k_F = [f] + 2. A = fma(0.1f, logf(F),
//    1): 0.1f (u), logf (2u), the fma (u): |A - M| <= 3u g + 0.1 k_F mu (1 + 3u) + u (1 + g).
//    llama.cpp's attn_factor = fl(A fl(1 / A)) = 1 + da, |da| <= 2u + u^2; ggml's mscale =
//    fl(attn_factor A) (u); cos * mscale rounds (u). So
//      scale_rel = (|A - M| / M)(1 + 4u) + (1 + 2u + u^2)(1 + u)(1 + u) - 1,
//    against section 4's 2 max(u_T, u_R) = 2u: the logf terms make it about 3u + 3u g/(1 + g).
// E. llama3 as rope_freqs (convert_hf_to_gguf.py LlamaModel.generate_extra_tensors, torch f32:
//    src/kernels/engines/ggml_rope.hpp). Exact ff = 1/c, c = (1 - sm)/f + sm, sm = (L/w -
//    lo)/(hi - lo), w = 2 pi/theta. The converter: theta^ = fl(1 / powf(b, fl(2j/d))), relative
//    rho_t = (e ln b + [b] e + 3) u (hf_f32's terms, e = 2j/d: Sleef's and glibc's powf are both
//    within 1 ulp); w^ = fl(fl(1/theta^) fl(2 pi)): rho_w = rho_t + 3u; L/w^ = fl(fl(1/w^) L):
//    rho_r = rho_w + 2u + [L] u; in the band |L/w| <= hi, so sm^ = fl(fl(r^ - lo)/(hi - lo)) errs
//    by e_s = hi (rho_r + u)/(hi - lo) + 2u (lo, hi, hi - lo taken exact: the spec's defaults 1
//    and 4 are). c >= 1/f, so a smooth error moves c by (f - 1) e_s relatively; fl(1 - sm)
//    (<= u absolute, <= u c f / f), the division and the sum (u each), the reciprocal (u):
//      rho_ff = (f - 1) e_s + 4u + [f] u;
//    a pair classified into the band on one side of an edge and out of it on the other changes
//    nothing more (sm = 0 and 1 are the out-of-band values). ggml divides the ladder angle by ff
//    (u): rho = (1 + rho_ladder)(1 + u')(1 + rho_ff) - 1, 1 + u' = 1/(1 - u).
// F. LongRoPE as llama.cpp runs Phi-3 (convert_hf_to_gguf.py Phi3MiniModel, llama-context.cpp,
//    ggml_rope_ext with the rope_factors tensor: src/kernels/engines/ggml_rope.hpp). Angle:
//    freq_scale is 1.0f (fl(1 * t) = t exactly) and ext_factor 0 skips B-D, so the angle is
//    fl(ladder / float(c_j)) with c the list the spec's rule picks (seq_len > original, which is
//    llama.cpp's): section 1's freq_factors terms with ff_j = c_j ([c_j not f32] mu + mu; no
//    new derivation, bounds.cpp takes longrope there). Magnitude: exact M = sqrt(1 + ln f / ln L),
//    f = max / L. The converter evaluates the same expression in Python floats (f64: relative
//    e_M = u64 / (2 ln L) + 4 u64, bounds.cpp section 8's longrope line), the GGUF stores it as
//    an f32 (u), llama.cpp multiplies it by 1.0f (exact) and ggml's cosf(theta) * mscale rounds
//    once (u): s^ = M (1 + e)(1 + d1)(1 + d2), |e| <= e_M, |d1|, |d2| <= u, so
//    |s^ - M| / M <= 2u + e_M + (u^2 + 2u e_M + u^2 e_M): section 4's generic term for ggml's
//    f32 table and arithmetic, 2 max(u_T, u_R) + e_M + u64, to first order; the products in
//    parentheses (about u^2 = 2^-48) are what kSlack (bounds.hpp) carries for every first-order
//    term. f <= 1: M = 1, attn_factor 1.0f, the product exact: 0, as section 4 has it.
#include "ladder_scaled.hpp"

#include "ropecheck/dtype.hpp"

#include <cmath>
#include <limits>
#include <numbers>

namespace ropecheck::bounds::detail {
namespace {

constexpr double u = 0x1p-24;
constexpr double u64 = 0x1p-53;

bool not_f32(double v) { return round_to_dtype(v, Dtype::f32) != v; }
double mu() { return -std::log1p(-u); }

// A: false when the f32 correction dims may be other integers than the exact ones.
bool corr_dims_agree(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  const double d = static_cast<double>(spec.ladder_dim());
  const double L = static_cast<double>(sc.original_max_position_embeddings);
  const double lnb = std::log(spec.base);
  const auto ok = [&](double beta, bool is_low) {
    const double kx = 3 + (not_f32(beta) ? 1 : 0) + (L > 0x1p24 ? 1 : 0);
    const double L1 = std::log(L / (beta * 2 * std::numbers::pi));
    const double v = d * L1 / (2 * lnb);
    const double ev =
        (d / (2 * lnb) * (kx * mu() + 2 * u * (std::fabs(L1) + kx * mu())) +
         std::fabs(v) * (((not_f32(spec.base) ? u : 0.0) + 2 * u * lnb) / lnb + 2 * u)) *
            (1 + 0x1p-20) +
        16 * u64 * (std::fabs(v) + 1);
    if (is_low && v <= -1 - ev) return true;      // floor <= -1 either way: clamped to 0
    if (!is_low && v >= d - 1 + ev) return true;  // ceil >= d - 1 either way: clamped
    return std::fabs(v - std::nearbyint(v)) > ev;
  };
  return ok(sc.beta_fast, true) && ok(sc.beta_slow, false);
}

}  // namespace

double ladder_yarn_angle_rel(const RopeSpec& spec, std::int64_t /*pair*/, double rho_ladder) {
  if (!std::isfinite(rho_ladder) || !corr_dims_agree(spec))
    return std::numeric_limits<double>::infinity();
  const double f = spec.scaling.factor;
  const double er = 2 * u;
  const double eta = std::expm1(((not_f32(f) ? 1 : 0) + 3) * mu());
  const double rho_b = er * (f - 1) + u + eta * (1 + er + u) + u * (1 + f * er);
  return ((1 + rho_ladder) * (1 + u) * (1 + rho_b) - 1) * (1 + 0x1p-40);
}

double ladder_yarn_scale_rel(const RopeSpec& spec) {
  const double f = spec.scaling.factor;
  if (f <= 1) return 0;  // freq_scale 1: logf(1) = 0, every factor exactly 1
  const double g = 0.1 * std::log(f);
  const double kF = (not_f32(f) ? 1 : 0) + 2;
  const double dA = 3 * u * g + 0.1 * kF * mu() * (1 + 3 * u) + u * (1 + g);
  return (dA / (1 + g)) * (1 + 4 * u) + ((1 + 2 * u + u * u) * (1 + u) * (1 + u) - 1);
}

double ladder_llama3_angle_rel(const RopeSpec& spec, std::int64_t pair, double rho_ladder) {
  if (!std::isfinite(rho_ladder)) return rho_ladder;
  const Scaling& sc = spec.scaling;
  const auto [j, dim] = spec.ladder(pair);
  const double e = 2.0 * static_cast<double>(j) / static_cast<double>(dim);
  const double f = sc.factor;
  const double L = static_cast<double>(sc.original_max_position_embeddings);
  const double rho_t = (e * std::log(spec.base) + (not_f32(spec.base) ? e : 0.0) + 3) * u;
  const double rho_r = rho_t + 3 * u + 2 * u + (not_f32(L) ? u : 0.0);
  const double hi = sc.high_freq_factor, lo = sc.low_freq_factor;
  const double es = hi * (rho_r + u) / std::fabs(hi - lo) + 2 * u;
  const double rho_ff = std::fabs(f - 1) * es + 4 * u + (not_f32(f) ? u : 0.0);
  return ((1 + rho_ladder) * (1 + std::expm1(mu())) * (1 + rho_ff) - 1) * (1 + 0x1p-40);
}

}  // namespace ropecheck::bounds::detail
