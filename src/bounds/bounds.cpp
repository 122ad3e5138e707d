// Derivation of the per-pair error bound (the one tolerance table of ropecheck).
//
// Setting. Pair p = (a, b) of a head vector x, exact output y = s R(phi) x_p with phi = m theta_i,
// theta_i = base^(-2i/rd). A kernel with Policy {angle precision A (u_A), table precision T (u_T),
// arithmetic precision R (u_R), recipe, fused} stores yhat into dtype D (u_D); A is f32 for the
// f32 recipes hf_f32 and ladder_f32 whatever the declared angle precision (angle_precision()).
// We bound ||yhat - y|| / (s ||x_p||). All "relative" terms below are relative to s ||x_p||; the
// table stores them divided by u_D. First order throughout (except ladder_f32's angle, 1., whose
// product form is kept); what is dropped is covered by kSlack (see header) and the cross terms
// that are *not* small (bf16/f16 storage against f32 trig) are kept explicitly in `second_order`.
//
// 1. Angle. The kernel rotates by phihat = phi + dphi. Rotations are orthogonal, so
//      ||R(phihat) x - R(phi) x|| = 2 |sin(dphi/2)| ||x|| <= min(|dphi|, 2) ||x||.
//    |dphi| <= rho |m| theta_i where rho is the relative error of the recipe's angle:
//    pow_product (theta = pow(base, -2i/rd), angle = m * theta, all in precision A):
//      e = -2i/rd rounded: e(1+d), base^(e(1+d)) = theta * exp(e d ln base)  -> |e| ln(base) u_A
//      base itself rounded into A when not representable: (b(1+d))^e          -> |e| u_A
//      pow within 1 ulp (<= 2 u_A relative)                                  -> 2 u_A
//      m rounded into A when |m| > 2^p_A                                     -> u_A
//      the product m * theta, one rounding                                   -> u_A
//    hf_f32 (HF / vLLM: inv_freq = 1 / base^(float(2i)/float(rd)), angle = float(m) * inv_freq,
//    all f32, u = 2^-24): the same terms plus the reciprocal (u):
//      rho = u (|e| ln base + |e| [base not f32] + 2 + 1 + 1 + [|m| > 2^24]).
//    ladder_f32 (ggml / llama.cpp CPU rope, ggml_rope_cache_init: ts = powf(float(base),
//    -2.0f/float(dim)), theta = float(m), then theta *= ts once per ladder index; all f32,
//    u = 2^-24). With (j, dim) = spec.ladder(i) the exact angle is m ts*^j, ts* = base^(-2/dim),
//    and the kernel's is fl(m) ts^j (1 + d_1) ... (1 + d_j): every error is a factor, so bound the
//    |ln| of each, with mu = -ln(1 - u) >= |ln(1 + d)| for |d| <= u:
//      ts = ts* exp(-e1 d ln base) (1 + d_b)^(-e1 (1 + d)) (1 + d_p), e1 = 2/dim:
//        exponent -2.0f/float(dim) rounded (dim is exact)        e1 ln(base) u
//        base rounded into f32 when not representable            [base not f32] e1 (1 + u) mu
//        powf within 1 ulp (<= 2u relative)                      mu_2 = -ln(1 - 2u)
//      |ln(ts / ts*)| <= lambda, the sum (first order (e1 ln base + [base] e1 + 2) u: pow_product's
//      terms at i = 1). Then
//        ts^j                                                    j lambda
//        the j products theta *= ts, one rounding each           j mu
//        float(m) when |m| > 2^24                                mu
//      ts^j carries j e1 ln(b) u = (2j/dim) ln(b) u, pow_product's exponent term, but the pow and
//      base terms are multiplied by j where pow_product has them once, and so are the roundings.
//      Scaling (ggml rope_yarn with ext_factor 0: angle = fl(freq_scale * (theta / ff_j))):
//        linear: freq_scale = 1.0f / float(factor) (llama.cpp reads the factor as an f32 and
//          inverts it in f32), times theta: [factor not f32] mu + mu + mu;
//        freq_factors: theta / float(ff_j), freq_scale = 1 exactly: [ff_j not f32] mu + mu;
//        longrope (llama.cpp's LongRoPE, ggml_rope.hpp: the chosen long or short list as the
//          converter's f32 tensor, freq_scale 1, ext_factor 0): the same, ff_j = c_j, the list
//          chosen by the spec's rule (seq_len > original), which is llama.cpp's. Its magnitude
//          (ladder_scaled.cpp F) is section 4's generic 2u + the factor's own f64 error.
//      With n the count of mu terms, |ln(angle / exact)| <= L = j lambda + n mu, hence
//        rho = e^L - 1 = (1 + rho_ts)^j (1 + u')^n - 1,  1 + rho_ts = e^lambda, 1 + u' = 1/(1 - u),
//      which bounds both signs (1 - e^-L <= e^L - 1). Evaluated as expm1(L) in double, times
//      (1 + 2^-40) for the double roundings of that evaluation (a few units of 2^-53). This is the
//      product form, not the first-order j (rho_ts + u): j reaches 8191 (head_dim 16384), where
//      j (rho_ts + u) ~ 2^-9 and the dropped (j rho)^2 / 2 is ~2^-10 of the term, kSlack's size.
//      At j = 0 and |m| <= 2^24 the angle is float(m) = m exactly: rho = 0.
//      Valid while every intermediate is a normal f32: float(base) finite and the unscaled and
//      scaled theta_i in [2^-125, 2^127 / |m|] (|m| >= 1); otherwise no angle claim (cap 2).
//      Other scaling kinds declared ladder_f32 get the table's generic f32 angle (8.: theta'_i
//      from the f64 formulas rounded into f32, pow_product's terms, one f32 product), as for the
//      other recipes, except yarn and llama3: ladder_f32 on a yarn spec is ggml's own f32 YaRN
//      (correction dims, ramp, mix and mscale in f32), on a llama3 spec the ladder divided by the
//      rope_freqs llama.cpp's converter computes in torch f32; both derived in ladder_scaled.cpp.
//    inv_freq_f64 (gemma.cpp ops/ops.h CreateInvTimescale; the host's inv_freq tables): theta_i =
//    1 / pow(base, 2i/rd) in f64 (base is an f64 exactly; the exponent rounds: e ln(base) u64;
//    pow within 1 ulp: 2 u64; the reciprocal: u64), then rounded once into the angle precision A
//    (u_A; nothing when A is f64, the f64 value is theta_i itself), then the product as above:
//      rho = (e ln base + 3) u64 + [A != f64] u_A,  plus u_A for the product (and u_A more when
//      |m| > 2^p_A). Against hf_f32 at A = f32 this drops the (e ln base + 3) u32 of the f32
//      inv_freq: pair 63 of head_dim 128, base 1e4 has 2 u32 + 9 u64 where hf_f32 has 13 u32.
//      Scaling variants: theta'_i from the f64 formulas (8.), rounded once into A.
//    fast_powf_f32 (CUDA -use_fast_math, FlashInfer pos_enc.cuh: inv_freq = __powf(rcp, y),
//    rcp = 1.0f / float(base) on the host, y = float(2i) / float(rd) by the fast-math division,
//    __powf = ex2.approx(fl(y * lg2.approx(rcp))); all f32, u = 2^-24; PTX ISA documented errors:
//    div.approx / div.full 2 ulp (<= 4u relative), lg2.approx relative 2^-22 = 4u outside
//    (0.5, 2) and absolute 2^-22 inside, ex2.approx 2 ulp from the correctly rounded value
//    (<= 2.5 ulp <= 5u relative)). With Lambda = |log2 base| and the exact exponent
//    z* = -e log2(base) (e = 2i/rd):
//      log2(rcp) = -log2(base) + log2(1 + d_b)[base not f32] + log2(1 + d_r): abs <= (1 + [b])
//        u / ln 2 (the host's reciprocal and the base's rounding);
//      lg2.approx: abs <= 4u max(Lambda, 1); y = e (1 + d_y), |d_y| <= 4u; the product, u:
//      |z - z*| <= e (Lambda (4u + u) + 4u max(Lambda, 1) + (1 + [b]) u / ln 2) (first order);
//      inv_freq = 2^z (1 + d_e), |d_e| <= 5u, so its relative error is
//        rho_theta = expm1(ln 2 |z - z*|) + 5u, about e (9 ln base + 1 + [b]) u + 5u:
//      nine times hf_f32's exponent term, since every f32 step of the exponent is magnified by
//      ln(base). linear: times fl32(1 / fl32(factor)): [factor not f32] u + 2u. Then the product
//      with float(m) (u; u more when |m| > 2^24), as for the others. The other scaling kinds are
//      not part of this recipe: no angle claim (cap 2). Valid while inv_freq is a normal f32
//      (z > -126): otherwise no claim.
//    fast_powf_ladder_f32 (ggml / llama.cpp CUDA, src/ggml-cuda/rope.cu under -use_fast_math:
//    ts = powf(float(base), -2.0f/float(dim)) on the host, inv_freq = __powf(ts, float(j)) =
//    ex2.approx(fl(j * lg2.approx(ts))), (j, dim) = spec.ladder(i); all f32). With
//    Lambda1 = |log2 ts*| = e1 log2(base), e1 = 2/dim:
//      ts: |ln(ts / ts*)| <= lambda (ladder_f32's, above), so |log2 ts - log2 ts*| <= lambda/ln 2;
//      lg2.approx: <= 4u max(Lambda1, 1) (absolute 2^-22 when ts in (0.5, 2), which is most
//        specs: 2 log2(base) < dim), times j; the product j * L: u j Lambda1 (j is exact);
//      |z - z*| <= j (lambda / ln 2 + 4u max(Lambda1, 1) + u Lambda1), and
//      rho_theta = expm1(ln 2 |z - z*|) + 5u (ex2.approx). At small Lambda1 the absolute lg2
//      error dominates: ~2.8 j u, e.g. 175 u at pair 63 of head_dim 128, where hf_f32 counts
//      13 u. Then the product with float(m) as for the others. Unscaled only (no angle claim for
//      scaled specs); valid while inv_freq is a normal f32 (j Lambda1 < 125).
//    trig_argument turns_f32 (any recipe; Policy::TrigArgument): the hardware evaluates sin/cos at
//      2pi t, t = x' fl32(1/2pi) rounded once in f32 (either direction), x' = x rounded to f32
//      when the angle precision is wider: 2pi t = x (1 + d_x)(1 + k)(1 + d_t), with
//      k = 2pi fl32(1/2pi) - 1 (|k| = 0.68 u), |d_t| < 2u (an ulp of t), |d_x| <= u [A wider than
//      f32]. Relative to the computed angle: tau = (1 + [A > f32] u)(1 + |k|)(1 + 2u) - 1 ~ 2.68u,
//      and relative to the exact angle rho + tau (1 + rho). PTX's sin.approx figures (absolute
//      2^-20.5 on [-2pi, 2pi], 2^-14.7 on [-100pi, 100pi]) are met by this model with the
//      declared trig_error 11.32 (2^-20.5 / 2^-24): 2^-20.5 + 100pi tau > 2^-14.7; beyond 100pi
//      PTX promises nothing and the bound is this model's.
//    All: |m| < 2^53 is exact as a double, so the caller's position is the kernel's.
//
// 2. Trig and table. cos/sin are evaluated in the angle precision A, each entry within 2 u_A
//    absolute. For the C library this is an assumption (documented, not proven here): glibc's
//    sin/cos/sinf/cosf are within 1 ulp for every finite argument, with exact range reduction
//    (glibc's libm-test-ulps lists <= 1 ulp for them), and |cos| <= 1 makes an ulp <= 2u |value|.
//    The `simd` kernel uses its own vectorized f64 sin/cos below |angle| 2^28 (libm above), with a
//    derived absolute error <= u_64 (src/kernels/simd/trig.hpp, tested against long double):
//    inside the same 2 u_A; its f32 tables build entries by angle addition from two such values
//    and declare their derived 6.5 u_64 (Policy::trig_error, the factor used here in place of 2
//    for any kernel that declares one). Rounding the
//    entry into the table precision T when T is coarser than A adds u_T (2 u_T when the table is
//    declared rounded toward zero: truncation errs by up to a whole ulp, and an ulp of a value
//    of magnitude <= 1 is <= 2 u_T in T's normal range); converting it into the arithmetic
//    precision R when R is coarser than both adds u_R; an entry in the table's subnormal range adds
//    half its subnormal quantum (a whole quantum under truncation). With per-entry error eps, the
//    perturbation of the 2x2 block is [[dc, -ds], [ds, dc]], whose 2-norm is sqrt(dc^2 + ds^2) <=
//    sqrt(2) eps.
//
// 3. Arithmetic in precision R. out_a = x_a c - x_b s' (and out_b likewise).
//    Non-fused fl(fl(x_a c) - fl(x_b s')): |err| <= gamma_2 (|x_a c| + |x_b s'|)
//      <= 2 u_R ||x_p|| sqrt(c^2 + s'^2) = 2 u_R ||x_p||                       (Cauchy-Schwarz)
//    Fused fma(x_a, c, -fl(x_b s')): |err| <= u_R (|x_a c| + 2 |x_b s'|) <= 2 u_R ||x_p||
//      (Cauchy-Schwarz with (1, 2)): the same first-order bound. Per pair sqrt(2) * 2 u_R.
//    Storage values converted into R exactly when R is at least as wide as D; otherwise each input
//    rounds (relative u_R per component -> u_R per pair after the rotation).
//    When R == D the last arithmetic rounding *is* the storage rounding, so this counts one u_D
//    twice: conservative by design (the table stays one formula for every policy).
//
// 4. Scale s. s is rounded into the working precision (u) and multiplied in once (u), either into
//    the table or onto the output: 2 max(u_T, u_R) relative, and 0 when s is a power of two.
//
// 5. Storage. One rounding per component into D: <= u_D |yhat_j| in the normal range, so
//    <= u_D ||yhat_p|| per pair. Declared toward zero (Policy::output_rounding): |RZ(v) - v| <
//    ulp(v) <= 2 u_D |v|, so 2 u_D ||yhat_p||; and the faithful-rounding check allows a whole ulp
//    (and asserts |got| <= |pre-storage value|, which truncation guarantees).
//
// 6. Underflow. In gradual underflow a rounding errs by at most half the format's smallest
//    subnormal, absolutely: storage contributes min_sub_D / 2 per component, the arithmetic at most
//    4 roundings of min_sub_R / 2 per component (two products, the scale multiply, the input
//    conversion; additions are exact in underflow). A storage declared toward zero errs by up to
//    a whole min_sub_D. Per pair sqrt(2) times that; this term is
//    divided by s ||x_p||, so the bound is a function of the pair norm.
//
// 7. Cross terms. With T' = trig + scale, Rr = arithmetic, S = storage (all relative):
//      ||M^ x|| <= s ||x|| (1 + T')                 (the angle part is orthogonal: no cross term)
//      pre-storage error <= s ||x|| (A + T' + Rr + Rr T')
//      storage error <= S ||pre-storage value|| <= S s ||x|| (1 + T' + Rr + Rr T')
//    so second_order = Rr T' + S (T' + Rr) + S Rr T'. Kept explicitly because S = 2^-8 for bf16.
//
// 8. Scaling variants (f64 recipe formulas of spec.cpp: theta_ladder_f64, magnitude_f64; the
//    reference has the exact ones). u = 2^-53 for every step, since the formulas run in f64;
//    rho_theta = the relative error of the unscaled theta_i from 1. (with base' for dynamic NTK).
//    The per-pair factor adds to rho_theta, then the product m theta' rounds once (1.).
//    (hf_f32 with an HF rope_type -- linear, dynamic, yarn, llama3, longrope -- is HF's f32
//    evaluation instead, derived in scaled_f32.cpp.)
//    linear, freq_factors, longrope: theta / c, one division                     -> + u
//      (ladder_f32 runs linear and freq_factors in f32 instead: section 1)
//    dynamic NTK: base' = base * t^(d/(d-2)), t = f L / L0 - (f - 1) (t >= 1):
//      f L (u), / L0 (u), f - 1 (u |f - 1|), the subtraction (u t):
//        delta_t = (2u f L/L0 + u |f - 1| + u t) / t
//      d/(d-2) rounded (u, times ln t), pow (<= 1 ulp: 2u), times base (u):
//        delta_b = (d/(d-2)) (delta_t + u ln t) + 3u
//      and theta_j = base'^(-e) takes |e| delta_b in place of the "base not representable"
//      term of 1., with ln(base') in the exponent term.
//    llama3 (medium band, used for every pair since the recipe is continuous across the band
//      edges and a pair may be classified differently in f64 and in MP):
//      wavelen = 2pi/theta (2u + rho_theta), r = orig/wavelen (3u + rho_theta), smooth =
//      (r - low)/(high - low) with |r| <= high in the band: |d smooth| <= e_s =
//      high (3u + rho_theta)/(high - low) + 3u. theta' = theta (1/f + smooth (1 - 1/f)) >= theta/f,
//      so a smooth error moves theta' by <= (f - 1) e_s relatively; the evaluation
//      ((1 - s) theta)/f + s theta rounds 4 times on terms <= theta': 4u.
//                                         -> rho = rho_theta + (f - 1) e_s + 4u
//    yarn: low/high = d ln(orig/(beta 2pi)) / (2 ln base): the argument (3u), ln (2u rel, abs
//      3u + 2u|L1| with L1 the log), ln base (2u), the product and quotient (2u):
//        e_low = |low| (3u/|L1| + 6u) (and e_high alike)
//      truncate: floor/ceil make low/high exact integers unless the f64 value is within e of an
//      integer (then f64 and exact may round to different integers and the recipe itself is
//      discontinuous there: the bound makes no angle claim, the angle term is its cap 2);
//      the ramp (j - low)/(high - low) then rounds once (+ the 0.001 guard's rounding,
//      u (high + 1) / 0.001, when low == high).
//      no truncate: |d ramp| <= e_r = (2 e_low + e_high)/|high - low| + 3u.
//      theta' = theta (1 - ramp (1 - 1/f)) >= theta/f: (f - 1) e_r; evaluation 4u.
//                                         -> rho = rho_theta + (f - 1) e_r + 4u
//    Magnitude s = scale * attention factor (4.): the factor's own f64 error, relative:
//      yarn get_mscale = 0.1 m ln f + 1: 0.1 (u), * m (u), ln (2u), product (u) on the
//        g = 0.1 m ln f part, + 1 (u):                                     <= 6u
//        the DeepSeek ratio get_mscale(f, m)/get_mscale(f, m_all): 6u + 6u + u = 13u
//      longrope sqrt(1 + ln(f)/ln(orig)), f = max/orig (u): ln f abs u + 2u ln f, q =
//        ln f/ln orig abs u/ln orig + 5u q, 1 + q rel <= u/ln orig + 6u, sqrt halves it
//        and rounds:                                                       <= u/(2 ln orig) + 4u
//      an explicit attention_factor is exact; scale * factor rounds once (u).
//
// Compositions, scores and the inverse are bounded from these per-pair absolute bounds (header).
#include "ropecheck/bounds.hpp"

#include "ladder_scaled.hpp"
#include "scaled_f32.hpp"
#include "scaled_vllm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace ropecheck::bounds {

namespace {

int digits(Precision p) { return traits(p).digits; }
bool exactly_representable(double v, Precision p) { return round_to_dtype(v, p) == v; }
bool is_power_of_two(double v) {
  int e = 0;
  return std::frexp(v, &e) == 0.5;
}

}  // namespace

namespace {

constexpr double u64 = 0x1p-53;

// Relative error of base' (dynamic NTK) in f64, section 8.
double dynamic_base_rel(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  const double L0 = static_cast<double>(sc.max_position_embeddings);
  const double L = static_cast<double>(std::max(sc.seq_len, sc.max_position_embeddings));
  const double d = static_cast<double>(spec.ladder_dim());
  const double t = sc.factor * L / L0 - (sc.factor - 1);
  const double dt = (2 * u64 * sc.factor * L / L0 + u64 * std::fabs(sc.factor - 1) + u64 * t) / t;
  return d / (d - 2) * (dt + u64 * std::log(t)) + 3 * u64;
}

// Relative error of the attention factor in f64 (0 when it is exactly 1 or given), section 8.
double attention_factor_rel(const Scaling& sc) {
  switch (sc.kind) {
    case ScalingKind::yarn:
      if (sc.attention_factor || sc.factor <= 1) return 0;
      return (sc.mscale != 0 && sc.mscale_all_dim != 0) ? 13 * u64 : 6 * u64;
    case ScalingKind::longrope: {
      if (sc.attention_factor) return 0;
      const double orig = static_cast<double>(sc.original_max_position_embeddings);
      if (static_cast<double>(sc.max_position_embeddings) / orig <= 1) return 0;
      return u64 / (2 * std::log(orig)) + 4 * u64;
    }
    default:
      return 0;
  }
}

// yarn: the ramp's absolute error e_r, or +inf when truncation makes the recipe unstable.
double yarn_ramp_abs(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  const double d = static_cast<double>(spec.ladder_dim());
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const auto raw = [&](double rot, double& err) {
    const double L1 = std::log(orig / (rot * 2 * 3.14159265358979323846));
    const double v = d * L1 / (2 * std::log(spec.base));
    err = L1 == 0 ? std::numeric_limits<double>::infinity()
                  : std::fabs(v) * (3 * u64 / std::fabs(L1) + 6 * u64);
    return v;
  };
  double el = 0, eh = 0;
  const double lo = raw(sc.beta_fast, el), hi = raw(sc.beta_slow, eh);
  const auto [low, high] = yarn_correction_range_f64(spec);
  const double inf = std::numeric_limits<double>::infinity();
  if (sc.truncate) {
    const auto near_int = [](double v, double e) { return std::fabs(v - std::nearbyint(v)) <= e; };
    // Only matters where the clamp does not decide (an integer beyond the clamp is clamped anyway).
    if ((lo > -1 && near_int(lo, el)) || (hi < d && near_int(hi, eh))) return inf;
    if (low == high) return u64 + 2 * u64 * (high + 1) / 0.001;
    return u64;
  }
  const double dn = std::fabs((low == high ? high + 0.001 : high) - low);
  return (2 * el + eh) / dn + 3 * u64;
}

// Section 1, ladder_f32 unscaled / linear / freq_factors: e^L - 1 = expm1(j lambda + n mu), n
// counting the extra roundings (m itself above 2^24, the scaling), or +inf outside the f32
// normal range the derivation assumes (theta, theta_s: the exact unscaled and scaled theta_i;
// with |m| theta above 2^127, checked per position in angle_at).
bool ladder_f32_always_inf(const RopeSpec& spec, double theta, double theta_s) {
  return std::isinf(round_to_dtype(spec.base, Dtype::f32)) || std::min(theta, theta_s) < 0x1p-125;
}
double ladder_f32_rel(const RopeSpec& spec, std::int64_t pair, bool m_above_2_24) {
  constexpr double u = 0x1p-24;
  const double mu = -std::log1p(-u), mu2 = -std::log1p(-2 * u);
  const auto [j, dim] = spec.ladder(pair);
  const double e1 = 2.0 / static_cast<double>(dim);
  const double lambda = e1 * std::log(spec.base) * u +
                        (exactly_representable(spec.base, Dtype::f32) ? 0.0 : e1 * (1 + u) * mu) +
                        mu2;
  double n = static_cast<double>(j) + (m_above_2_24 ? 1 : 0);
  const Scaling& sc = spec.scaling;
  if (sc.kind == ScalingKind::linear)
    n += (exactly_representable(sc.factor, Dtype::f32) ? 0 : 1) + 2;
  if (sc.kind == ScalingKind::freq_factors || sc.kind == ScalingKind::longrope) {
    const bool use_long = sc.seq_len > sc.original_max_position_embeddings;
    const std::vector<double>& ff = sc.kind == ScalingKind::freq_factors ? sc.freq_factors
                                    : use_long                           ? sc.long_factor
                                                                         : sc.short_factor;
    n += (exactly_representable(ff[static_cast<std::size_t>(pair)], Dtype::f32) ? 0 : 1) + 1;
  }
  return std::expm1(static_cast<double>(j) * lambda + n * mu) * (1 + 0x1p-40);
}

// Section 1, fast_powf_f32: t.theta already set; rel / rel_big / m_big for the recipe.
PairBounds::AngleTerms fast_powf_f32_terms(const RopeSpec& spec, std::int64_t pair,
                                           PairBounds::AngleTerms t) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double u = 0x1p-24;
  const Scaling& sc = spec.scaling;
  t.m_big = 0x1p24;
  const auto [j, dim] = spec.ladder(pair);
  const double e = 2.0 * static_cast<double>(j) / static_cast<double>(dim);
  const double lambda = std::fabs(std::log2(spec.base));
  const double b_not_f32 = exactly_representable(spec.base, Dtype::f32) ? 0.0 : 1.0;
  const bool scaled = sc.kind == ScalingKind::linear;
  if ((sc.kind != ScalingKind::none && !scaled) ||
      std::isinf(round_to_dtype(spec.base, Dtype::f32)) || e * lambda >= 125) {
    t.rel = t.rel_big = inf;
    return t;
  }
  const double dz =
      e * (lambda * 5 * u + 4 * u * std::max(lambda, 1.0) + (1 + b_not_f32) * u / std::log(2.0));
  double rho = std::expm1(std::log(2.0) * dz) + 5 * u;
  if (scaled) rho += (exactly_representable(sc.factor, Dtype::f32) ? 0.0 : u) + 2 * u;
  t.rel = rho + u;
  t.rel_big = t.rel + u;
  return t;
}

// Section 1, fast_powf_ladder_f32: t.theta already set.
PairBounds::AngleTerms fast_powf_ladder_f32_terms(const RopeSpec& spec, std::int64_t pair,
                                                  PairBounds::AngleTerms t) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double u = 0x1p-24;
  t.m_big = 0x1p24;
  const auto [j, dim] = spec.ladder(pair);
  const double e1 = 2.0 / static_cast<double>(dim);
  const double lambda1 = e1 * std::fabs(std::log2(spec.base));
  const double jd = static_cast<double>(j);
  if (spec.scaling.kind != ScalingKind::none || std::isinf(round_to_dtype(spec.base, Dtype::f32)) ||
      jd * lambda1 >= 125) {
    t.rel = t.rel_big = inf;
    return t;
  }
  const double mu = -std::log1p(-u), mu2 = -std::log1p(-2 * u);
  const double lambda = e1 * std::log(spec.base) * u +
                        (exactly_representable(spec.base, Dtype::f32) ? 0.0 : e1 * (1 + u) * mu) +
                        mu2;
  const double dz =
      jd * (lambda / std::log(2.0) + 4 * u * std::max(lambda1 * (1 + 0x1p-20), 1.0) + u * lambda1);
  t.rel = std::expm1(std::log(2.0) * dz) * (1 + 0x1p-40) + 5 * u + u;
  t.rel_big = t.rel + u;
  return t;
}

// Section 1, trig_argument turns_f32: tau, the relative error of the angle the hardware rotates by
// against the kernel's angle.
double turns_f32_rel(Precision angle) {
  constexpr double u = 0x1p-24;
  const long double two_pi = 6.283185307179586476925286766559L;
  const float c = static_cast<float>(1.0L / two_pi);
  const double k = static_cast<double>(std::fabs(two_pi * static_cast<long double>(c) - 1.0L));
  const double dx = digits(angle) > 24 ? u : 0.0;
  return (1 + dx) * (1 + k) * (1 + 2 * u) - 1;
}

// Everything of the angle bound that does not depend on |m|. theta_scaled: the spec's theta'
// ladder (theta_ladder_f64), or empty for an unscaled spec.
PairBounds::AngleTerms recipe_angle_terms(const Policy& policy, const RopeSpec& spec,
                                          std::int64_t pair,
                                          const std::vector<double>& theta_scaled) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  PairBounds::AngleTerms t;
  const auto [j, dim] = spec.ladder(pair);
  const double e = 2.0 * static_cast<double>(j) / static_cast<double>(dim);
  const Scaling& sc = spec.scaling;
  t.theta = sc.kind == ScalingKind::none ? std::pow(spec.base, -e)
                                         : theta_scaled[static_cast<std::size_t>(pair)];
  if (policy.recipe == AngleRecipe::vllm_f32) return vllm_f32_angle_terms(spec, pair, t);
  if (policy.recipe == AngleRecipe::ladder_f32 &&
      (sc.kind == ScalingKind::none || sc.kind == ScalingKind::linear ||
       sc.kind == ScalingKind::freq_factors || sc.kind == ScalingKind::yarn ||
       sc.kind == ScalingKind::llama3 || sc.kind == ScalingKind::longrope)) {
    const double theta = std::pow(spec.base, -e);
    t.ladder = true;
    t.m_big = 0x1p24;
    const bool always_inf = ladder_f32_always_inf(spec, theta, t.theta);
    t.rel = always_inf ? inf : ladder_f32_rel(spec, pair, false);
    t.rel_big = always_inf ? inf : ladder_f32_rel(spec, pair, true);
    if (sc.kind == ScalingKind::yarn) {
      t.rel = detail::ladder_yarn_angle_rel(spec, pair, t.rel);
      t.rel_big = detail::ladder_yarn_angle_rel(spec, pair, t.rel_big);
    }
    if (sc.kind == ScalingKind::llama3) {
      t.rel = detail::ladder_llama3_angle_rel(spec, pair, t.rel);
      t.rel_big = detail::ladder_llama3_angle_rel(spec, pair, t.rel_big);
    }
    t.ladder_theta_max = std::max(theta, t.theta);
    return t;
  }
  if (policy.recipe == AngleRecipe::hf_f32 && detail::hf_scaled_f32_applies(spec)) {
    // HF evaluates the scaled ladder in f32, not by section 8's f64 formulas: scaled_f32.cpp.
    const detail::F64Terms f64{sc.kind == ScalingKind::dynamic ? dynamic_base_rel(spec) : 0.0,
                               sc.kind == ScalingKind::yarn ? yarn_ramp_abs(spec) : 0.0};
    t.rel = detail::hf_scaled_f32_theta_rel(spec, pair, f64) + 0x1p-24;
    t.rel_big = t.rel + 0x1p-24;
    t.m_big = 0x1p24;
    return t;
  }
  if (policy.recipe == AngleRecipe::fast_powf_f32) return fast_powf_f32_terms(spec, pair, t);
  if (policy.recipe == AngleRecipe::fast_powf_ladder_f32)
    return fast_powf_ladder_f32_terms(spec, pair, t);
  const bool dyn = sc.kind == ScalingKind::dynamic;
  const double base = dyn ? dynamic_base_f64(spec) : spec.base;
  const double lnb = std::log(base);
  const Precision ap = angle_precision(policy);  // f32 for hf_f32 and ladder_f32
  const double uA = unit_roundoff(ap);
  // rho_theta / u_angle: exponent rounding, base rounding (or base' error), pow, [reciprocal].
  double k = e * lnb + (dyn || exactly_representable(spec.base, ap) ? 0.0 : e) + 2;
  if (policy.recipe == AngleRecipe::hf_f32) k += 1;
  double rho = k * uA + (dyn ? e * dynamic_base_rel(spec) : 0.0);
  if (policy.recipe == AngleRecipe::inv_freq_f64)  // theta in f64, then one rounding into A
    rho = (e * lnb + 3) * u64 + (ap == Dtype::f64 ? 0.0 : uA) +
          (dyn ? e * dynamic_base_rel(spec) : 0.0);
  switch (sc.kind) {
    case ScalingKind::none:
    case ScalingKind::dynamic:
      break;
    case ScalingKind::linear:
    case ScalingKind::freq_factors:
    case ScalingKind::longrope:
      rho += u64;
      break;
    case ScalingKind::llama3: {
      const double es =
          sc.high_freq_factor * (3 * u64 + rho) / (sc.high_freq_factor - sc.low_freq_factor) +
          3 * u64;
      rho += (sc.factor - 1) * es + 4 * u64;
      break;
    }
    case ScalingKind::yarn:
      rho += (sc.factor - 1) * yarn_ramp_abs(spec) + 4 * u64;
      break;
  }
  t.rel = rho + uA;        // the product m * theta'
  t.rel_big = t.rel + uA;  // |m| above 2^digits: m itself rounded into the angle precision
  t.m_big = std::ldexp(1.0, digits(ap));
  return t;
}

PairBounds::AngleTerms angle_terms(const Policy& policy, const RopeSpec& spec, std::int64_t pair,
                                   const std::vector<double>& theta_scaled) {
  PairBounds::AngleTerms t = recipe_angle_terms(policy, spec, pair, theta_scaled);
  if (policy.trig_argument == TrigArgument::turns_f32)
    t.turns = turns_f32_rel(angle_precision(policy));
  return t;
}

AngleBound angle_at(const PairBounds::AngleTerms& t, double position) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  AngleBound a;
  a.theta = t.theta;
  const double m = std::fabs(position);
  if (m == 0) return a;  // 0 * theta is exactly 0 in every recipe: no angle error at all
  a.rel = m > t.m_big ? t.rel_big : t.rel;
  if (t.ladder && t.ladder_theta_max * std::max(m, 1.0) > 0x1p127) a.rel = inf;
  if (t.turns > 0 && std::isfinite(a.rel)) a.rel += t.turns * (1 + a.rel);
  a.rad = std::isfinite(a.rel) ? a.rel * m * a.theta : inf;
  return a;
}

std::vector<double> scaled_thetas(const RopeSpec& spec) {
  return spec.scaling.kind == ScalingKind::none ? std::vector<double>{} : theta_ladder_f64(spec);
}

// Every term of the pair bound but the angle's (which set_angle adds): they do not depend on the
// pair or the position.
PairBound position_free_bound(const Policy& policy, const RopeSpec& spec, Dtype d) {
  PairBound b;
  const double uD = unit_roundoff(d);
  const Precision A = angle_precision(policy);  // f32 for hf_f32 and ladder_f32
  const double uA = unit_roundoff(A);
  const double uT = unit_roundoff(policy.table);
  const double uR = unit_roundoff(policy.arithmetic);
  const int pA = digits(A), pT = digits(policy.table), pR = digits(policy.arithmetic);
  b.u = uD;

  // 2. trig + table (per entry, absolute since |cos|, |sin| <= 1), then sqrt(2) per pair.
  const bool table_rz = policy.table_rounding == Rounding::toward_zero;
  const bool out_rz = policy.output_rounding == Rounding::toward_zero;
  double eps = policy.trig_error * uA;
  if (pT < pA) eps += table_rz ? 2 * uT : uT;
  if (pR < std::min(pA, pT)) eps += uR;
  eps += table_rz ? min_subnormal(policy.table) : min_subnormal(policy.table) / 2;
  const double T_rel = std::sqrt(2.0) * eps;

  // 3. arithmetic
  double R_rel = std::sqrt(2.0) * 2 * uR;
  const bool narrower_than_storage = pR < digits(d) ||
                                     traits(policy.arithmetic).emin > traits(d).emin ||
                                     traits(policy.arithmetic).emax < traits(d).emax;
  if (narrower_than_storage) R_rel += uR;

  // 4. scale (s = scale * attention factor, section 8 for the factor's own error)
  const double af_rel = attention_factor_rel(spec.scaling);
  const double s_eff = magnitude_f64(spec);
  const double s_rel = af_rel + (s_eff != spec.scale ? u64 : 0.0);
  const bool ggml_yarn =
      policy.recipe == AngleRecipe::ladder_f32 && spec.scaling.kind == ScalingKind::yarn;
  const double Sc_rel =
      ggml_yarn ? detail::ladder_yarn_scale_rel(spec)
                : (is_power_of_two(s_eff) && s_rel == 0 ? 0.0 : 2 * std::max(uT, uR)) + s_rel;

  // 5. storage
  const double S_rel = out_rz ? 2 * uD : uD;

  // 7. cross terms
  const double Tp = T_rel + Sc_rel;
  const double second = R_rel * Tp + S_rel * (Tp + R_rel) + S_rel * R_rel * Tp;

  b.trig = T_rel / uD;
  b.arithmetic = R_rel / uD;
  b.scale = Sc_rel / uD;
  b.storage = S_rel / uD;
  b.second_order = second / uD;

  // 6. underflow, absolute per pair
  const double sub_R = min_subnormal(policy.arithmetic);
  b.underflow_pre_abs = std::sqrt(2.0) * 4 * sub_R / 2;
  b.underflow_abs =
      b.underflow_pre_abs + std::sqrt(2.0) * (out_rz ? min_subnormal(d) : min_subnormal(d) / 2);
  return b;
}

// 1. angle: min(|dphi|, 2) in units of u.
void set_angle(PairBound& b, const AngleBound& a) {
  b.angle_detail = a;
  b.angle = std::min(a.rad, 2.0) / b.u;
}

}  // namespace

AngleBound angle_error_bound(const Policy& policy, const RopeSpec& spec, std::int64_t pair,
                             double position) {
  return angle_at(angle_terms(policy, spec, pair, scaled_thetas(spec)), position);
}

PairBound pair_error_bound(const Policy& policy, const RopeSpec& spec, Dtype d, std::int64_t pair,
                           double position) {
  PairBound b = position_free_bound(policy, spec, d);
  set_angle(b, angle_error_bound(policy, spec, pair, position));
  return b;
}

PairBounds::PairBounds(const Policy& policy, const RopeSpec& spec, Dtype d)
    : position_free_(position_free_bound(policy, spec, d)) {
  const auto thetas = scaled_thetas(spec);
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i)
    angle_.push_back(angle_terms(policy, spec, i, thetas));
}

PairBound PairBounds::at(std::int64_t pair, double position) const {
  PairBound b = position_free_;
  set_angle(b, angle_at(angle_[static_cast<std::size_t>(pair)], position));
  return b;
}

double PairBound::abs(double scaled_norm) const {
  const double rel = angle + trig + arithmetic + scale + storage + second_order;
  return (1 + kSlack) * (rel * u * scaled_norm + underflow_abs);
}

double PairBound::total_u(double scaled_norm) const {
  if (scaled_norm == 0) return underflow_abs == 0 ? 0 : std::numeric_limits<double>::infinity();
  return abs(scaled_norm) / (u * scaled_norm);
}

double PairBound::norm_abs(double scaled_norm) const {
  const double rel = trig + arithmetic + scale + storage + second_order;
  return (1 + kSlack) * (rel * u * scaled_norm + underflow_abs);
}

double PairBound::pre_storage_abs(double scaled_norm) const {
  // Everything before the storage rounding: the cross term Rr T' is part of second_order, which
  // also holds storage cross terms; keeping all of it only loosens this bound.
  const double rel = angle + trig + arithmetic + scale + second_order;
  return (1 + kSlack) * (rel * u * scaled_norm + underflow_pre_abs);
}

std::string PairBound::describe() const {
  std::ostringstream o;
  o << "bound[u] angle=" << angle << " (|dphi|<=" << angle_detail.rad << " rad) trig=" << trig
    << " arith=" << arithmetic << " scale=" << scale << " storage=" << storage
    << " 2nd=" << second_order << " underflow_abs=" << underflow_abs << " slack=(1+2^-10)";
  return o.str();
}

double composition_abs(const PairBound& first, double first_scaled_norm, const PairBound& second,
                       double second_scaled_norm, double scale) {
  return scale * first.abs(first_scaled_norm) + second.abs(second_scaled_norm);
}

double score_pair_abs(const PairBound& bq, double q_scaled_norm, const PairBound& bk,
                      double k_scaled_norm) {
  const double eq = bq.abs(q_scaled_norm), ek = bk.abs(k_scaled_norm);
  return eq * k_scaled_norm + q_scaled_norm * ek + eq * ek;
}

}  // namespace ropecheck::bounds
