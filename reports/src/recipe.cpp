#include "recipe.hpp"

#include "ropecheck/reference/double_double.hpp"
#include "ropecheck/reference/oracle.hpp"

#include <mpfr.h>

#include <array>
#include <cmath>
#include <memory>

// GCC and clang (>= 14) on x86-64 build an FMA clone and a baseline clone of the dd hot paths (as
// reference/oracle.cpp does): two_prod's std::fma is one instruction in the first, glibc's exact
// fma() in the other; the answers are the same doubles either way.
#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 14 : defined(__GNUC__))
#define ROPECHECK_FMA_CLONES [[gnu::target_clones("fma", "default")]]
#else
#define ROPECHECK_FMA_CLONES
#endif

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
// fast_powf_f32 (FlashInfer) is reproduced unscaled and with linear scaling on the 1-D layouts,
// fast_powf_ladder_f32 (llama.cpp CUDA) unscaled on every layout (through spec.ladder).
bool fast_powf_faithful(const Policy& p, const RopeSpec& spec) {
  const ScalingKind k = spec.scaling.kind;
  if (p.recipe == AngleRecipe::fast_powf_ladder_f32) return k == ScalingKind::none;
  return p.recipe == AngleRecipe::fast_powf_f32 &&
         (k == ScalingKind::none || k == ScalingKind::linear) &&
         (spec.layout == Layout::interleaved || spec.layout == Layout::half);
}
}  // namespace

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
    case AngleRecipe::vllm_f32:  // the same angles unscaled; scaled specs take the generic path
      return 100;
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

// The recipe's angle per pair, as the double that holds it exactly (turns_f32: within 2^-52).
std::vector<double> recipe_angles(const Policy& p, const RopeSpec& spec, std::int64_t m) {
  std::vector<double> out;
  // Scaling variants and the newer layouts: the built-in kernels take theta'_i from the spec's
  // f64 formulas (theta_ladder_f64) and form m * theta'_i in their angle precision; that is the
  // recipe reproduced here (a declared f32 angle rounds theta'_i and the product to f32, hf_f32
  // and ladder_f32 are treated as f32 angles). ladder_f32 is reproduced exactly instead on every
  // layout unscaled and with linear / freq_factors (ggml's, see recipe_angle). Multi-axis specs
  // are reported with one position per token.
  if (!ladder_f32_faithful(p, spec) && !fast_powf_faithful(p, spec) &&
      (spec.scaling.kind != ScalingKind::none ||
       (spec.layout != Layout::interleaved && spec.layout != Layout::half))) {
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
}  // namespace

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

// ---- RecipeReference ----------------------------------------------------------------------------
// Error analysis (eps = 2^-p, p the reference precision; u = 2^-53; S = the magnitude, S_b = 2|S|
// as a double (>= S); a = m theta_p (exact), a' the recipe's angle (a double), delta = a' - a;
// c' = RN_p(cos a'), s' the recipe trig and sc = RN_p(S RN_p(cos RN_p(a))), ss the exact-angle
// block entries, the p-bit MP values; dd operations after Joldes, Muller, Popescu (2017):
// dd + dd <= 3u^2, dd * dd <= 5u^2, dd * double <= 2u^2 relative).
// The MP definitions:
//   yrec_a = RN(RN(x_a c') - RN(x_b s')) [then RN(. S) when S != 1]: within 3.01 eps S (|x_a| +
//            |x_b|) of S (x_a c' - x_b s'), and S c' within S eps of S cos a';
//   y_a    = RN(sc x_a - ss x_b) (one rounding, as reference::apply_cached): within 1.01 eps S
//            (|x_a| + |x_b|) of sc x_a - ss x_b; sc within S eps (3 + |a|) of S cos a (angle,
//            cos and product roundings).
// The fast path never evaluates these MP values; it aims at the ideal quantities
//   dC = S (cos a' - cos a), dS = S (sin a' - sin a), C' = S cos a', S' = S sin a',
// the MP roundings above adding <= S (|x_a| + |x_b|) eps (9 + 2|a|) plus eps |result| (the final
// rounding to p bits), all inside mp_err (2 S_b (|x_a| + |x_b|)) (1 + |a|) + |result|),
// mp_err = 2^-(p-4) = 16 eps.
// 1. cos a, sin a: Oracle::sincos (reference/oracle.hpp), each within E_t = 2^-100.
// 2. delta = a' - m (t0 + t1 + t2), theta_p split into three doubles (|theta_p - t0 - t1 - t2| <=
//    2^-159 theta_p); m t0 and m t1 exact (two_prod, |m| <= 2^53), m t2 rounded (<= 2^-159 |a|);
//    a' - hi(m t0) exact (two_sum), the four other terms added in dd (3u^2 of each partial sum,
//    each <= |delta| + 2^-51 |a|): E_delta <= 2^-102 |delta| + 2^-152 |a|.
// 3. sn = sin delta, cm = cos delta - 1 for |delta| <= 2 (below 2^-60: delta and -delta^2 / 2,
//    truncation < 2^-120 relative); otherwise delta halved (exactly) h <= 9 times to
//    |t| <= 2^-8, Taylor series to t^9 / t^10 in dd (truncation <= 2^-105 relative; the terms
//    whose double rounding stays below 2^-110 relative in double), then h doublings sn <- 2 sn (1 +
//    cm), cm <- 2 cm (cm + 2) (8u^2 each, with the error of sn, cm carried at most x1.5 over all
//    steps since |cm| <= 0.46 before the last): relative error <= 2^-97.5 each, plus E_delta (sn)
//    and |delta| E_delta (cm).
// 4. dc = cos a cm - sin a sn, ds = sin a cm + cos a sn (two dd products, one sum: 13u^2 of
//    |cm| + |sn| <= M = |delta| + delta^2 / 2): |dc - (cos a' - cos a)| <= E_t M + 2^-97.5 M +
//    13u^2 M + 3 E_delta <= 2^-96.9 M + 2^-150 |a|; times S (dd, 2^-106 + 5u^2): E_ang =
//    2^-96 M + 2^-149 |a| per unit of S. c' = cos a + dc (3u^2): E_rot = 2^-99 + E_ang per S.
// Angle:    yrec_a - y_a = x_a dC - x_b dS + (MP roundings above) + (errors of dC, dS: <= E_ang
//           S_b (|x_a| + |x_b|)); the dd products and sum of the answer add <= 2^-102 (|x_a dC|
//           + |x_b dS|) (a, b alike, summed over both).
// Rotation: g_a - yrec_a = g_a - (x_a C' - x_b S') + (MP); C', S' within E_rot S_b; the dd work
//           <= 2^-101 (|g_a| + S_b (|x_a| + |x_b|)).
// Fast quantities need |m| <= 2^53, |delta| <= 2, delta = 0 or |delta| >= 2^-300, and every dd
// part and input 0 or in [2^-400, 2^400] (the error terms stay normal numbers).
// f64 outputs: g_a - yrec_a from the MPFR trig (three doubles) in exact products and dd sums,
// see exact_rotation_diff; the MP part as above.
// Rounding test: certified when [v - e, v + e] stays strictly inside the candidate's rounding
// interval (half the gap to each neighbour: dd::inside_rounding, the oracle's test). A zero or tiny
// candidate, an input out of range or a failed test: the MP expression in scratch, the MPFR trig of
// the pair computed then (once per position).
namespace {

using reference::dd::add;
using reference::dd::DD;
using reference::dd::fast_two_sum;
using reference::dd::mul;
using reference::dd::neg;
using reference::dd::two_prod;
using reference::dd::two_sum;

// Far enough from under- and overflow that every dd error term below stays a normal number.
constexpr double kTiny = 0x1p-400, kHuge = 0x1p400;
bool ordinary(double v) { return v == 0 || (std::fabs(v) >= kTiny && std::fabs(v) <= kHuge); }
bool ordinary(const DD& v) { return ordinary(v.hi) && ordinary(v.lo); }

// RN of every value within e of v, when they agree (v normalized: |lo| <= half an ulp of hi).
bool certified(const DD& v, double e, double& out) {
  const double a = std::fabs(v.hi);
  if (!(a >= kTiny && a <= kHuge)) return false;
  if (!reference::dd::inside_rounding(v.hi, v.lo, e, 0.5 * reference::dd::ulp_of(v.hi)))
    return false;
  out = v.hi;
  return true;
}

struct Mpfr {
  mpfr_t v;
  explicit Mpfr(mpfr_prec_t p) { mpfr_init2(v, p); }
  ~Mpfr() { mpfr_clear(v); }
  Mpfr(const Mpfr&) = delete;
  Mpfr& operator=(const Mpfr&) = delete;
};
// A vector of p-bit MPFR numbers, allocated once.
struct MpfrVec {
  std::vector<__mpfr_struct> v;
  MpfrVec(std::size_t n, mpfr_prec_t p) : v(n) {
    for (auto& x : v) mpfr_init2(&x, p);
  }
  ~MpfrVec() {
    for (auto& x : v) mpfr_clear(&x);
  }
  MpfrVec(const MpfrVec&) = delete;
  MpfrVec& operator=(const MpfrVec&) = delete;
  mpfr_ptr operator[](std::size_t i) { return &v[i]; }
};

DD to_dd(mpfr_srcptr x, mpfr_ptr scratch) {  // scratch: at least x's precision
  DD r;
  r.hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(scratch, x, r.hi, MPFR_RNDN);  // exact: x - RN(x) needs no more bits than x
  r.lo = mpfr_get_d(scratch, MPFR_RNDN);
  return r;
}

// 1/k!, k = 0..10, in dd (from MPFR once; immutable).
const std::array<DD, 11>& inv_fact() {
  static const std::array<DD, 11> f = [] {
    std::array<DD, 11> t{};
    Mpfr a(256), r(256);
    mpfr_set_ui(a.v, 1, MPFR_RNDN);
    for (int k = 0; k <= 10; ++k) {
      if (k > 0) mpfr_div_ui(a.v, a.v, static_cast<unsigned long>(k), MPFR_RNDN);
      t[static_cast<std::size_t>(k)] = to_dd(a.v, r.v);
    }
    return t;
  }();
  return f;
}

// Step 3: sin d and cos d - 1 for |d| <= 2 (d.hi = 0 or |d.hi| >= 2^-300).
[[gnu::always_inline]] inline void sincos_m1(DD d, DD& sn, DD& cm) {
  const DD z0 = mul(d, d);
  if (std::fabs(d.hi) < 0x1p-60) {  // the next terms are below 2^-120 relative
    sn = d;
    cm = {-0.5 * z0.hi, -0.5 * z0.lo};
    return;
  }
  int h = 0;
  while (std::fabs(d.hi) > 0x1p-8) {  // exact halvings (|d.lo| >= 2^-170 or 0 here)
    d.hi *= 0.5;
    d.lo *= 0.5;
    ++h;
  }
  const auto& F = inv_fact();
  const DD z = h ? mul(d, d) : z0;
  const double zh = z.hi;
  //   sin t = t + t z P,  P = -1/3! + z (1/5! - z (1/7! - z/9!))
  //   cos t - 1 = -z/2 + z^2 Q,  Q = 1/4! - z (1/6! - z (1/8! - z/10!))
  const double wp = zh * (F[7].hi - zh * F[9].hi);
  const DD p = add(neg(F[3]), mul(z, fast_two_sum(F[5].hi, F[5].lo - wp)));
  sn = add(d, mul(mul(d, z), p));
  // Q's z-term in dd too: cm is needed to ~2^-100 relative, and cm ~ z / 2.
  const double wq = zh * (F[8].hi - zh * F[10].hi);
  const DD q = add(F[4], neg(mul(z, fast_two_sum(F[6].hi, F[6].lo - wq))));
  cm = add(DD{-0.5 * z.hi, -0.5 * z.lo}, mul(mul(z, z), q));
  for (; h > 0; --h) {
    const DD s2 = add(sn, mul(sn, cm));
    const DD c2 = mul(cm, add(cm, DD{2, 0}));
    sn = {2 * s2.hi, 2 * s2.lo};
    cm = {2 * c2.hi, 2 * c2.lo};
  }
}

// Three doubles t0 + t1 + t2 within 2^-159 |x| of x (x finite, p >= 53 bits). r: scratch of at
// least x's precision (x - RN(x) then needs no rounding).
std::array<double, 3> split3(mpfr_srcptr x, mpfr_ptr r) {
  std::array<double, 3> t{};
  t[0] = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(r, x, t[0], MPFR_RNDN);  // exact
  t[1] = mpfr_get_d(r, MPFR_RNDN);
  mpfr_sub_d(r, r, t[1], MPFR_RNDN);  // exact
  t[2] = mpfr_get_d(r, MPFR_RNDN);
  return t;
}

// f64 outputs: g - (x1 C + x2 D) for C, D given in three doubles (S c', S s' from MPFR, within
// 2^-159 of them): the products x C_0, x C_1 exact (two_prod), x C_2 rounded (<= 2^-159 |x| S);
// the two leading products' high words and g combined by exact two_sums, the nine other terms
// added in dd (3u^2 of each partial sum, each <= sum_abs, the sum of the magnitudes of the terms):
// error <= 27u^2 sum_abs <= 2^-101 sum_abs (returned in sum_abs), plus 2^-157 S (|x1| + |x2|)
// (inside the MP part of the bound). Needs |x C_k|, |x D_k| >= 2^-969 or 0: inputs in
// [2^-400, 2^400] and parts 0 or >= 2^-500.
// va = c x_a - s x_b, vb = s x_a + c x_b in dd.
ROPECHECK_FMA_CLONES
void rotate_dd(const DD& c, const DD& s, double xa, double xb, DD& va, DD& vb) {
  va = add(mul(c, xa), neg(mul(s, xb)));
  vb = add(mul(s, xa), mul(c, xb));
}

// Steps 2-4 without the scaling: delta = a' - m theta_p (theta in three doubles), the recipe's
// trig differences dc, ds from cos a, sin a; false when |delta| > 2 or 0 < |delta| < 2^-300.
ROPECHECK_FMA_CLONES
bool angle_difference(double ap, double md, const std::array<double, 3>& t, const DD& c,
                      const DD& s, DD& dc, DD& ds, double& ad) {
  const DD p0 = two_prod(md, t[0]), p1 = two_prod(md, t[1]);
  DD dl = two_sum(ap, -p0.hi);
  for (double w : {-p0.lo, -p1.hi, -p1.lo, -(md * t[2])}) dl = add(dl, DD{w, 0});
  ad = std::fabs(dl.hi);
  if (!(ad <= 2) || (ad != 0 && ad < 0x1p-300)) return false;
  DD sn{0, 0}, cm{0, 0};
  if (ad != 0) sincos_m1(dl, sn, cm);
  dc = add(mul(c, cm), neg(mul(s, sn)));
  ds = add(mul(s, cm), mul(c, sn));
  return true;
}

bool usable3(const std::array<double, 3>& t) {
  bool ok = true;
  for (double w : t) ok = ok && (w == 0 || (std::fabs(w) >= 0x1p-500 && std::fabs(w) <= 0x1p100));
  return ok;
}

ROPECHECK_FMA_CLONES
DD exact_rotation_diff(double g, double x1, const std::array<double, 3>& c, double x2,
                       const std::array<double, 3>& d, double& sum_abs) {
  const DD p0 = two_prod(x1, c[0]), q0 = two_prod(x2, d[0]);
  const DD p1 = two_prod(x1, c[1]), q1 = two_prod(x2, d[1]);
  const DD t = two_sum(p0.hi, q0.hi);
  DD acc = two_sum(g, -t.hi);
  sum_abs = std::fabs(acc.hi) + std::fabs(acc.lo);
  for (double w :
       {-t.lo, -p0.lo, -q0.lo, -p1.hi, -q1.hi, -p1.lo, -q1.lo, -(x1 * c[2]), -(x2 * d[2])}) {
    acc = add(acc, DD{w, 0});
    sum_abs += std::fabs(w);
  }
  sum_abs *= 1 + 0x1p-40;
  return acc;
}

}  // namespace

struct RecipeReference::Impl {
  // Per recipe slot: its angles, the dd quantities with their error coefficients, the MPFR trig
  // (on demand) and the vector's recipe rotation (MP, filled per pair on demand by the fallbacks).
  struct Slot {
    MpfrVec c, s, ya, yb;
    std::vector<double> angle;            // a'
    std::vector<DD> dc, ds, cc, ss;       // dC, dS, C' = S cos a', S' = S sin a'
    std::vector<double> e_ang, e_rot;     // E_ang, E_rot (per unit of S_b (|x_a| + |x_b|))
    std::vector<char> fast;               // the dd quantities are usable
    std::vector<char> identity;           // a' = 0 and m = 0: c' = 1, s' = 0, sc = S, ss = 0
    std::vector<char> have_trig, have_y;  // c/s hold the MPFR trig; ya/yb this vector's rotation
    std::vector<char> have_trig3;         // c3/s3 from recipe_trig3's correction (c/s not set)
    std::vector<std::array<double, 3>> c3, s3;  // S c', S s' in three doubles (with c/s)
    std::vector<char> exact3;                   // c3/s3 usable (parts 0 or >= 2^-500)
    Slot(std::size_t n, mpfr_prec_t p) : c(n, p), s(n, p), ya(n, p), yb(n, p) {}
  };

  RopeSpec spec;
  bool mpfr_only = false;  // --oracle mpfr: never the dd path
  double error_scale = 1;  // 1; below 1 only in the test that shows an understated bound caught
  mpfr_prec_t prec;
  std::size_t np;
  ref::Mp S;
  bool scaled;
  DD s_dd;
  double s_bound;  // >= S
  double mp_err;   // 2^-(p-4)

  // RN(g - y) per element for y = (c x_a - s x_b, s x_a + c x_b), c and s held as three doubles
  // (exact_rotation_diff), each certified against its bound: the exact part 2^-101 of the summed
  // magnitudes; the MP part mp_err, plus the three doubles' own 2^-157 (per unit of S_b (|x_a| +
  // |x_b|): split3's 2^-159 relative, stated separately because mp_err shrinks with --ref-bits),
  // plus `approx` for c and s that are not the MP values themselves (recipe_trig3). False: the
  // rounding test cannot decide.
  bool certified_diff3(double ga, double gb, double xa, double xb, const std::array<double, 3>& c,
                       const std::array<double, 3>& s, double approx, double& da,
                       double& db) const {
    const double mp_part = s_bound * (std::fabs(xa) + std::fabs(xb));
    const double held = (0x1p-157 + approx) * mp_part;
    double sa = 0, sb = 0;
    const DD ra = exact_rotation_diff(ga, xa, c, -xb, s, sa);
    const DD rb = exact_rotation_diff(gb, xa, s, xb, c, sb);
    const double ea = (0x1p-101 * sa + held + mp_err * (mp_part + std::fabs(ra.hi))) * error_scale;
    const double eb = (0x1p-101 * sb + held + mp_err * (mp_part + std::fabs(rb.hi))) * error_scale;
    return certified(ra, ea, da) && certified(rb, eb, db);
  }
  std::vector<ref::Mp> theta;
  std::vector<std::array<double, 3>> theta3;  // theta_p in three doubles (step 2)
  std::unique_ptr<ref::Oracle> oracle;        // cos a, sin a (step 1); null when mpfr_only
  std::vector<DD> ca, sa;                     // cos a, sin a of this position
  std::vector<char> have_ca;                  // ca/sa valid
  std::vector<double> abs_a;                  // >= |a|
  MpfrVec sc, ss, ry_a, ry_b;  // exact-angle block entries; the reference's y of the pair
  MpfrVec ap, ec, es;          // the exact angle RN_p(m theta_p), RN_p of its cos and sin
  std::vector<char> have_exact, have_ref;
  std::vector<std::array<double, 3>> sc3, ss3;  // sc, ss in three doubles (with sc/ss)
  std::vector<char> exact3;                     // sc3/ss3 usable (parts 0 or >= 2^-500)
  std::vector<std::unique_ptr<Slot>> slots;
  int n_slots = 0;
  std::int64_t m = 0;
  const double* x = nullptr;
  Mpfr t1, t2, wide, wide2, xa, xb, angle53, dq, zq, snq, cmq, tq;  // scratch

  Impl(const RopeSpec& sp, bool mpfr, double scale)
      : spec(sp),
        mpfr_only(mpfr),
        error_scale(scale),
        prec(static_cast<mpfr_prec_t>(ref::precision_bits())),
        np(static_cast<std::size_t>(sp.n_pairs())),
        S(ref::magnitude(sp)),
        scaled(S != 1),
        s_bound(2 * std::fabs(static_cast<double>(S))),
        mp_err(std::ldexp(1.0, 4 - static_cast<int>(prec))),
        theta(ref::inv_freqs(sp)),
        ca(np),
        sa(np),
        have_ca(np),
        abs_a(np),
        sc(np, prec),
        ss(np, prec),
        ry_a(np, prec),
        ry_b(np, prec),
        ap(np, prec),
        ec(np, prec),
        es(np, prec),
        have_exact(np),
        have_ref(np),
        sc3(np),
        ss3(np),
        exact3(np),
        t1(prec),
        t2(prec),
        wide(2 * prec + 8),
        wide2(2 * prec + 8),
        xa(53),
        xb(53),
        angle53(53),
        dq(prec + 10),
        zq(prec + 10),
        snq(prec + 10),
        cmq(prec + 10),
        tq(prec + 10) {
    s_dd = to_dd(s_raw(), wide2.v);
    for (const auto& t : theta) theta3.push_back(split3(t.backend().data(), wide2.v));
    if (!mpfr_only) oracle = std::make_unique<ref::Oracle>(sp, ref::OracleMode::fast);
  }

  mpfr_srcptr s_raw() const { return S.backend().data(); }

  // The position's cos a, sin a (dd) and the bound on |a|.
  void exact_trig_dd() {
    for (std::size_t i = 0; i < np; ++i) {
      abs_a[i] = std::fabs(static_cast<double>(m)) * theta3[i][0] * (1 + 0x1p-40);
      double c[2], s[2];
      have_ca[i] = oracle && std::fabs(static_cast<double>(m)) <= 0x1p53 &&
                   oracle->sincos(static_cast<std::int64_t>(i), m, c, s);
      ca[i] = {c[0], c[1]};
      sa[i] = {s[0], s[1]};
      have_ca[i] = have_ca[i] && ordinary(ca[i]) && ordinary(sa[i]);
    }
  }
  // The MPFR exact-angle block entries of pair i (on first use at this position).
  void exact_trig_mp(std::size_t i) {
    if (have_exact[i]) return;
    mpfr_mul_si(ap[i], theta[i].backend().data(), static_cast<long>(m), MPFR_RNDN);
    mpfr_sin_cos(es[i], ec[i], ap[i], MPFR_RNDN);
    mpfr_mul(sc[i], s_raw(), ec[i], MPFR_RNDN);
    mpfr_mul(ss[i], s_raw(), es[i], MPFR_RNDN);
    sc3[i] = split3(sc[i], wide2.v);
    ss3[i] = split3(ss[i], wide2.v);
    exact3[i] = usable3(sc3[i]) && usable3(ss3[i]);
    have_exact[i] = 1;
  }
  // The slot's MPFR trig of pair i (on first use at this position).
  void recipe_trig_mp(Slot& sl, std::size_t i) {
    if (sl.have_trig[i]) return;
    mpfr_set_d(angle53.v, sl.angle[i], MPFR_RNDN);  // exact
    mpfr_sin_cos(sl.s[i], sl.c[i], angle53.v, MPFR_RNDN);
    mpfr_mul(wide.v, s_raw(), sl.c[i], MPFR_RNDN);  // exact: 2p bits
    sl.c3[i] = split3(wide.v, wide2.v);
    mpfr_mul(wide.v, s_raw(), sl.s[i], MPFR_RNDN);
    sl.s3[i] = split3(wide.v, wide2.v);
    sl.exact3[i] = usable3(sl.c3[i]) && usable3(sl.s3[i]);
    sl.have_trig[i] = 1;
  }

  // The slot's S c', S s' in three doubles for f64 outputs (c3/s3, exact3), without an MPFR sin
  // and cos of a' when a' is within 2^-20 of the exact angle a_p = RN_p(m theta_p) (the f64-angle
  // recipes at every position the report samples): cos a' = cos(a_p + d) = ec cos d - es sin d
  // and likewise sin a', from the exact-angle trig ec, es (RN_p of cos a_p, sin a_p) the pair
  // needs anyway. Returns the error of c3/s3 beyond the MP values' own (per unit of S_b), 0 when
  // they are the MP values (recipe_trig_mp).
  //   d = a' - a_p is exact (both multiples of a_p's last place p bits down, |d| < |a_p|);
  //   sin d, cos d - 1 by Taylor to d^7 and d^8 at q = p + 10 bits: truncation <= 2^-178
  //   relative, ten roundings <= 10 eps_q relative; c'' = ec + (ec cm - es sn) (three more
  //   roundings at q): |c'' - (ec cos d - es sin d)| <= 2 eps_q; ec, es within eps_p of cos a_p,
  //   sin a_p: |c'' - cos a'| <= 2 eps_p + 2 eps_q + 2^-198, and c' = RN_p(cos a') within eps_p
  //   of cos a': |c'' - c'| <= 3.01 eps_p; S c'' at 2p + 8 bits rounds by 2^-(2p+8) relative.
  //   Per unit of S_b = 2 |S|: <= 1.6 eps_p, stated as 4 eps_p = mp_err / 4.
  double recipe_trig3(Slot& sl, std::size_t i) {
    if (sl.have_trig[i]) return 0;
    if (sl.have_trig3[i]) return mp_err / 4;
    exact_trig_mp(i);
    mpfr_d_sub(dq.v, sl.angle[i], ap[i], MPFR_RNDN);       // exact
    if (!mpfr_zero_p(dq.v) && mpfr_get_exp(dq.v) > -20) {  // |d| >= 2^-20 (|d| < 2^exp)
      recipe_trig_mp(sl, i);
      return 0;
    }
    // z = d^2; sn = d (1 - z/6 (1 - z/20 (1 - z/42))); cm = -z/2 (1 - z/12 (1 - z/30 (1 - z/56))).
    mpfr_sqr(zq.v, dq.v, MPFR_RNDN);
    const auto horner = [&](mpfr_ptr out, std::initializer_list<unsigned long> dens) {
      mpfr_set_ui(out, 1, MPFR_RNDN);
      for (unsigned long k : dens) {
        mpfr_mul(out, out, zq.v, MPFR_RNDN);
        mpfr_div_ui(out, out, k, MPFR_RNDN);
        mpfr_ui_sub(out, 1, out, MPFR_RNDN);
      }
    };
    horner(snq.v, {42, 20, 6});
    mpfr_mul(snq.v, snq.v, dq.v, MPFR_RNDN);
    horner(cmq.v, {56, 30, 12});
    mpfr_mul(cmq.v, cmq.v, zq.v, MPFR_RNDN);
    mpfr_div_2ui(cmq.v, cmq.v, 1, MPFR_RNDN);
    mpfr_neg(cmq.v, cmq.v, MPFR_RNDN);
    // c'' = ec + (ec cm - es sn), s'' = es + (es cm + ec sn).
    mpfr_fmms(tq.v, ec[i], cmq.v, es[i], snq.v, MPFR_RNDN);
    mpfr_add(tq.v, tq.v, ec[i], MPFR_RNDN);
    mpfr_mul(wide.v, s_raw(), tq.v, MPFR_RNDN);
    sl.c3[i] = split3(wide.v, wide2.v);
    mpfr_fmma(tq.v, es[i], cmq.v, ec[i], snq.v, MPFR_RNDN);
    mpfr_add(tq.v, tq.v, es[i], MPFR_RNDN);
    mpfr_mul(wide.v, s_raw(), tq.v, MPFR_RNDN);
    sl.s3[i] = split3(wide.v, wide2.v);
    sl.exact3[i] = usable3(sl.c3[i]) && usable3(sl.s3[i]);
    sl.have_trig3[i] = 1;
    return mp_err / 4;
  }

  // Steps 2-4 for pair i of a slot; false when the pair is outside the fast path's range.
  bool fast_trig(Slot& sl, std::size_t i) {
    const double ap = sl.angle[i];
    if (!have_ca[i] || !std::isfinite(ap)) return false;
    // exact: |m| <= 2^53 (exact_trig_dd)
    DD dc, ds;
    double ad = 0;
    if (!angle_difference(ap, static_cast<double>(m), theta3[i], ca[i], sa[i], dc, ds, ad))
      return false;
    DD cp = add(ca[i], dc), sp = add(sa[i], ds);
    if (scaled) {
      dc = mul(s_dd, dc);
      ds = mul(s_dd, ds);
      cp = mul(s_dd, cp);
      sp = mul(s_dd, sp);
    }
    const double big_m = (ad + 0.5 * ad * ad) * (1 + 0x1p-40);
    sl.dc[i] = dc;
    sl.ds[i] = ds;
    sl.cc[i] = cp;
    sl.ss[i] = sp;
    sl.e_ang[i] = 0x1p-96 * big_m + 0x1p-149 * abs_a[i];
    sl.e_rot[i] = 0x1p-99 + sl.e_ang[i];
    return ordinary(dc) && ordinary(ds) && ordinary(cp) && ordinary(sp);
  }

  void recipe_trig(Slot& sl, const Policy& p) {
    const auto angles = recipe_angles(p, spec, m);
    sl.angle.assign(angles.begin(), angles.end());
    sl.dc.resize(np);
    sl.ds.resize(np);
    sl.cc.resize(np);
    sl.ss.resize(np);
    sl.e_ang.resize(np);
    sl.e_rot.resize(np);
    sl.fast.assign(np, 0);
    sl.identity.assign(np, 0);
    sl.have_trig.assign(np, 0);
    sl.have_trig3.assign(np, 0);
    sl.c3.resize(np);
    sl.s3.resize(np);
    sl.exact3.assign(np, 0);
    sl.have_y.assign(np, 0);
    for (std::size_t i = 0; i < np; ++i) {
      sl.identity[i] = angles[i] == 0 && m == 0;
      sl.fast[i] = !mpfr_only && fast_trig(sl, i);
    }
  }

  void load_x(std::size_t i) {
    const auto [a, b] = spec.pair(static_cast<std::int64_t>(i));
    mpfr_set_d(xa.v, x[a], MPFR_RNDN);
    mpfr_set_d(xb.v, x[b], MPFR_RNDN);
  }
  // rotate()'s MP values of the pair, as it computes them.
  void recipe_y(Slot& sl, std::size_t i) {
    if (sl.have_y[i]) return;
    recipe_trig_mp(sl, i);
    load_x(i);
    mpfr_mul(t1.v, xa.v, sl.c[i], MPFR_RNDN);
    mpfr_mul(t2.v, xb.v, sl.s[i], MPFR_RNDN);
    mpfr_sub(sl.ya[i], t1.v, t2.v, MPFR_RNDN);
    mpfr_mul(t1.v, xa.v, sl.s[i], MPFR_RNDN);
    mpfr_mul(t2.v, xb.v, sl.c[i], MPFR_RNDN);
    mpfr_add(sl.yb[i], t1.v, t2.v, MPFR_RNDN);
    if (scaled) {
      mpfr_mul(sl.ya[i], sl.ya[i], s_raw(), MPFR_RNDN);
      mpfr_mul(sl.yb[i], sl.yb[i], s_raw(), MPFR_RNDN);
    }
    sl.have_y[i] = 1;
  }
  // reference::apply_cached's values of the pair (rotate_with: one rounding each).
  void reference_y(std::size_t i) {
    if (have_ref[i]) return;
    exact_trig_mp(i);
    load_x(i);
    mpfr_fmms(ry_a[i], sc[i], xa.v, ss[i], xb.v, MPFR_RNDN);
    mpfr_fmma(ry_b[i], ss[i], xa.v, sc[i], xb.v, MPFR_RNDN);
    have_ref[i] = 1;
  }
};

RecipeReference::RecipeReference(const RopeSpec& spec, bool mpfr_only, double error_scale)
    : impl_(new Impl(spec, mpfr_only, error_scale)) {}
RecipeReference::~RecipeReference() { delete impl_; }

void RecipeReference::set_position(std::int64_t m, const std::vector<Policy>& policies) {
  Impl& I = *impl_;
  I.m = m;
  std::fill(I.have_exact.begin(), I.have_exact.end(), 0);
  if (!I.mpfr_only) I.exact_trig_dd();
  while (I.slots.size() < policies.size())
    I.slots.push_back(std::make_unique<Impl::Slot>(I.np, I.prec));
  I.n_slots = static_cast<int>(policies.size());
  for (std::size_t r = 0; r < policies.size(); ++r) I.recipe_trig(*I.slots[r], policies[r]);
  I.x = nullptr;
}

void RecipeReference::set_vector(const double* x) {
  Impl& I = *impl_;
  I.x = x;
  std::fill(I.have_ref.begin(), I.have_ref.end(), 0);
  for (int r = 0; r < I.n_slots; ++r)
    std::fill(I.slots[r]->have_y.begin(), I.slots[r]->have_y.end(), 0);
}

void RecipeReference::angle_diff(int r, std::int64_t pair, double& da, double& db) {
  Impl& I = *impl_;
  Impl::Slot& sl = *I.slots[static_cast<std::size_t>(r)];
  const auto i = static_cast<std::size_t>(pair);
  const auto [a, b] = I.spec.pair(pair);
  const double xa = I.x[a], xb = I.x[b];
  ++questions_;
  if (sl.identity[i]) {  // both rotations are x -> RN(S x) (or x): no difference at all
    da = db = 0;
    return;
  }
  if (sl.fast[i] && ordinary(xa) && ordinary(xb)) {
    const DD& dc = sl.dc[i];
    const DD& ds = sl.ds[i];
    const double ax = std::fabs(xa), bx = std::fabs(xb);
    const double mp_part = I.s_bound * (ax + bx);
    // a: x_a dC - x_b dS; b: x_a dS + x_b dC.
    DD va, vb;
    rotate_dd(dc, ds, xa, xb, va, vb);
    const double dd_part = 0x1p-102 * (ax * std::fabs(dc.hi) + bx * std::fabs(ds.hi) +
                                       ax * std::fabs(ds.hi) + bx * std::fabs(dc.hi)) +
                           sl.e_ang[i] * mp_part;
    const double mp_a = mp_part * (1 + I.abs_a[i]);
    const double ea = (dd_part + I.mp_err * (mp_a + std::fabs(va.hi))) * I.error_scale;
    const double eb = (dd_part + I.mp_err * (mp_a + std::fabs(vb.hi))) * I.error_scale;
    if (certified(va, ea, da) && certified(vb, eb, db)) return;
  }
  ++fallbacks_;
  I.recipe_y(sl, i);
  I.reference_y(i);
  mpfr_sub(I.t1.v, sl.ya[i], I.ry_a[i], MPFR_RNDN);
  da = mpfr_get_d(I.t1.v, MPFR_RNDN);
  mpfr_sub(I.t1.v, sl.yb[i], I.ry_b[i], MPFR_RNDN);
  db = mpfr_get_d(I.t1.v, MPFR_RNDN);
}

bool RecipeReference::exact_diff(std::int64_t pair, double ga, double gb, double& da, double& db) {
  Impl& I = *impl_;
  const auto i = static_cast<std::size_t>(pair);
  const auto [a, b] = I.spec.pair(pair);
  const double xa = I.x[a], xb = I.x[b];
  if (I.mpfr_only || !ordinary(xa) || !ordinary(xb) || !ordinary(ga) || !ordinary(gb)) return false;
  I.exact_trig_mp(i);
  if (!I.exact3[i]) return false;
  // y_a = RN_p(sc x_a - ss x_b), y_b = RN_p(ss x_a + sc x_b): within eps S_b (|x_a| + |x_b|) of
  // the exact expressions; RN_p(g - y) adds eps |g - y|: inside the MP part.
  return I.certified_diff3(ga, gb, xa, xb, I.sc3[i], I.ss3[i], 0, da, db);
}

void RecipeReference::rotation_diff(int r, std::int64_t pair, double ga, double gb, Dtype out,
                                    double& da, double& db) {
  Impl& I = *impl_;
  Impl::Slot& sl = *I.slots[static_cast<std::size_t>(r)];
  const auto i = static_cast<std::size_t>(pair);
  const auto [a, b] = I.spec.pair(pair);
  const double xa = I.x[a], xb = I.x[b];
  ++questions_;
  if (sl.identity[i] && !I.scaled) {
    // yrec = x exactly; RN(RN_p(g - x)) = RN(g - x): exact at p bits unless the exponents are
    // > p - 53 apart, and then the smaller operand is far below half an ulp of the larger.
    da = ga - xa;
    db = gb - xb;
    return;
  }
  if (out != Dtype::f64 && sl.fast[i] && ordinary(xa) && ordinary(xb) && ordinary(ga) &&
      ordinary(gb)) {
    const DD& c = sl.cc[i];
    const DD& s = sl.ss[i];
    const double mp_part = I.s_bound * (std::fabs(xa) + std::fabs(xb));
    DD ya, yb;
    rotate_dd(c, s, xa, xb, ya, yb);
    const DD ra = add(DD{ga, 0}, neg(ya));
    const DD rb = add(DD{gb, 0}, neg(yb));
    const double common = sl.e_rot[i] * mp_part;
    const double ea =
        (0x1p-101 * (std::fabs(ga) + mp_part) + common + I.mp_err * (mp_part + std::fabs(ra.hi))) *
        I.error_scale;
    const double eb =
        (0x1p-101 * (std::fabs(gb) + mp_part) + common + I.mp_err * (mp_part + std::fabs(rb.hi))) *
        I.error_scale;
    if (certified(ra, ea, da) && certified(rb, eb, db)) return;
  }
  if (out == Dtype::f64 && !I.mpfr_only && ordinary(xa) && ordinary(xb) && ordinary(ga) &&
      ordinary(gb)) {
    const double approx = I.recipe_trig3(sl, i);
    if (sl.exact3[i] && I.certified_diff3(ga, gb, xa, xb, sl.c3[i], sl.s3[i], approx, da, db))
      return;
  }
  ++fallbacks_;
  I.recipe_y(sl, i);
  mpfr_d_sub(I.t1.v, ga, sl.ya[i], MPFR_RNDN);
  da = mpfr_get_d(I.t1.v, MPFR_RNDN);
  mpfr_d_sub(I.t1.v, gb, sl.yb[i], MPFR_RNDN);
  db = mpfr_get_d(I.t1.v, MPFR_RNDN);
}

}  // namespace ropecheck::reports::detail
