#include "recipe.hpp"

#include "ropecheck/reference/double_double.hpp"

#include <mpfr.h>

#include <cmath>
#include <limits>
#include <memory>

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

namespace {
// The recipe's angle per pair, as the double that holds it exactly.
std::vector<double> recipe_angles(const Policy& p, const RopeSpec& spec, std::int64_t m) {
  std::vector<double> out;
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
      out.push_back(rd(rd(static_cast<double>(m), ap) * theta, ap));
    }
    return out;
  }
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) out.push_back(recipe_angle(p, spec, i, m));
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
// Error analysis (eps = 2^-p, p the reference precision; S = the magnitude, c', s' the recipe
// trig and sc = RN(S cos), ss = RN(S sin) the exact-angle block entries, all p-bit MP values):
//   yrec_a = RN(RN(x_a c') - RN(x_b s')) [then RN(. S) when S != 1]: within 3.01 eps S (|x_a| +
//            |x_b|) of S (x_a c' - x_b s');
//   y_a    = RN(sc x_a - ss x_b) (one rounding, as reference::apply_cached): within 1.01 eps S
//            (|x_a| + |x_b|) of sc x_a - ss x_b.
// Angle:    yrec_a - y_a = x_a dC - x_b dS + eta, dC = S c' - sc, dS = S s' - ss (formed in MPFR at
//           2p + 8 bits, rounded to dd: <= 2^-104.9 relative), |eta| <= 4.1 eps S (|x_a| + |x_b|);
//           the dd products and sum add <= 2^-104 (|x_a dC| + |x_b dS|); the MP result rounds once
//           more at p bits (eps relative). Bound used: 2^-102 (|x_a dC| + |x_b dS|) + 2^-(p-4)
//           (2S (|x_a| + |x_b|) + |B|) (2S: S as a double may be below S by an ulp).
// Rotation: g_a - yrec_a = g_a - (x_a C' - x_b S') - eta', C' = S c', S' = S s' (dd, 2^-104.9
//           relative), |eta'| <= 3.01 eps S (...); dd work <= 2^-103 (|g_a| + S (|x_a| + |x_b|)).
//           Bound used: 2^-101 (|g_a| + 2S (|x_a| + |x_b|)) + 2^-(p-4) (2S (...) + |R|).
// Rounding test: certified when [v - e, v + e] stays strictly inside the candidate's rounding
// interval (half the gap to each neighbour, measured with nextafter). A zero or tiny candidate,
// an input outside [2^-400, 2^400], or a failed test: the MP expression in scratch.
namespace {

using reference::dd::add;
using reference::dd::DD;
using reference::dd::fast_two_sum;
using reference::dd::mul;
using reference::dd::neg;
using reference::dd::two_sum;

// Far enough from under- and overflow that every dd error term below stays a normal number.
constexpr double kTiny = 0x1p-400, kHuge = 0x1p400;
bool ordinary(double v) { return v == 0 || (std::fabs(v) >= kTiny && std::fabs(v) <= kHuge); }

// RN of every value within e of v, when they agree (v normalized: |lo| <= half an ulp of hi).
bool certified(const DD& v, double e, double& out) {
  const double a = std::fabs(v.hi);
  if (!(a >= kTiny && a <= kHuge)) return false;
  const double up = std::nextafter(v.hi, std::numeric_limits<double>::infinity()) - v.hi;
  const double down = v.hi - std::nextafter(v.hi, -std::numeric_limits<double>::infinity());
  const double margin = e * (1 + 0x1p-40);
  if (!(up * 0.5 - v.lo > margin && down * 0.5 + v.lo > margin)) return false;
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

}  // namespace

struct RecipeReference::Impl {
  // Per recipe slot: the trig of its angles, the dd quantities, and the vector's recipe rotation
  // (MP, filled per pair on demand by the fallbacks).
  struct Slot {
    MpfrVec c, s, ya, yb;
    std::vector<DD> dc, ds, cc, ss;  // dC, dS, C' = S c', S' = S s'
    std::vector<char> fast;          // the dd quantities are usable (no tiny/huge values)
    std::vector<char> identity;      // c' = 1, s' = 0, sc = S, ss = 0 (angle 0 on both sides)
    std::vector<char> have_y;        // ya/yb hold this vector's recipe rotation of the pair
    Slot(std::size_t n, mpfr_prec_t p) : c(n, p), s(n, p), ya(n, p), yb(n, p) {}
  };

  RopeSpec spec;
  bool mpfr_only = false;  // --oracle mpfr: never the dd path
  mpfr_prec_t prec;
  std::size_t np;
  ref::Mp S;
  bool scaled;
  double s_bound;  // >= S
  double mp_err;   // 2^-(p-4)
  std::vector<ref::Mp> theta;
  MpfrVec sc, ss, ry_a, ry_b;  // exact-angle block entries; the reference's y of the pair
  std::vector<char> have_ref;
  std::vector<std::unique_ptr<Slot>> slots;
  int n_slots = 0;
  std::int64_t m = 0;
  const double* x = nullptr;
  Mpfr t1, t2, wide, wide2, xa, xb;

  explicit Impl(const RopeSpec& sp)
      : spec(sp),
        prec(static_cast<mpfr_prec_t>(ref::precision_bits())),
        np(static_cast<std::size_t>(sp.n_pairs())),
        S(ref::magnitude(sp)),
        scaled(S != 1),
        s_bound(2 * std::fabs(static_cast<double>(S))),
        mp_err(std::ldexp(1.0, 4 - static_cast<int>(prec))),
        theta(ref::inv_freqs(sp)),
        sc(np, prec),
        ss(np, prec),
        ry_a(np, prec),
        ry_b(np, prec),
        have_ref(np),
        t1(prec),
        t2(prec),
        wide(2 * prec + 8),
        wide2(2 * prec + 8),
        xa(53),
        xb(53) {}

  mpfr_srcptr s_raw() const { return S.backend().data(); }

  void exact_trig() {
    Mpfr ang(prec), sn(prec), cs(prec);
    for (std::size_t i = 0; i < np; ++i) {
      mpfr_mul_si(ang.v, theta[i].backend().data(), static_cast<long>(m), MPFR_RNDN);
      mpfr_sin_cos(sn.v, cs.v, ang.v, MPFR_RNDN);
      mpfr_mul(sc[i], s_raw(), cs.v, MPFR_RNDN);
      mpfr_mul(ss[i], s_raw(), sn.v, MPFR_RNDN);
    }
  }

  // wide = S * a - b, exactly enough (2p + 8 bits), as dd.
  DD delta(mpfr_srcptr a, mpfr_srcptr b) {
    mpfr_mul(wide.v, s_raw(), a, MPFR_RNDN);  // exact: 2p bits
    mpfr_sub(wide.v, wide.v, b, MPFR_RNDN);
    return to_dd(wide.v, wide2.v);
  }
  DD product(mpfr_srcptr a) {
    mpfr_mul(wide.v, s_raw(), a, MPFR_RNDN);
    return to_dd(wide.v, wide2.v);
  }

  void recipe_trig(Slot& sl, const Policy& p) {
    const auto angles = recipe_angles(p, spec, m);
    Mpfr a(53);
    sl.dc.resize(np);
    sl.ds.resize(np);
    sl.cc.resize(np);
    sl.ss.resize(np);
    sl.fast.assign(np, 0);
    sl.identity.assign(np, 0);
    sl.have_y.assign(np, 0);
    for (std::size_t i = 0; i < np; ++i) {
      mpfr_set_d(a.v, angles[i], MPFR_RNDN);  // exact
      mpfr_sin_cos(sl.s[i], sl.c[i], a.v, MPFR_RNDN);
      sl.identity[i] = mpfr_zero_p(sl.s[i]) && mpfr_cmp_ui(sl.c[i], 1) == 0 && mpfr_zero_p(ss[i]) &&
                       mpfr_equal_p(sc[i], s_raw());
      sl.dc[i] = delta(sl.c[i], sc[i]);
      sl.ds[i] = delta(sl.s[i], ss[i]);
      sl.cc[i] = product(sl.c[i]);
      sl.ss[i] = product(sl.s[i]);
      bool ok = true;
      for (const DD* d : {&sl.dc[i], &sl.ds[i], &sl.cc[i], &sl.ss[i]})
        ok = ok && ordinary(d->hi) && ordinary(d->lo);
      sl.fast[i] = ok && !mpfr_only;
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
    load_x(i);
    mpfr_fmms(ry_a[i], sc[i], xa.v, ss[i], xb.v, MPFR_RNDN);
    mpfr_fmma(ry_b[i], ss[i], xa.v, sc[i], xb.v, MPFR_RNDN);
    have_ref[i] = 1;
  }
};

RecipeReference::RecipeReference(const RopeSpec& spec, bool mpfr_only) : impl_(new Impl(spec)) {
  impl_->mpfr_only = mpfr_only;
}
RecipeReference::~RecipeReference() { delete impl_; }

void RecipeReference::set_position(std::int64_t m, const std::vector<Policy>& policies) {
  Impl& I = *impl_;
  I.m = m;
  I.exact_trig();
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
    const DD va = add(mul(dc, xa), neg(mul(ds, xb)));
    const DD vb = add(mul(ds, xa), mul(dc, xb));
    const double dd_part = 0x1p-102 * (ax * std::fabs(dc.hi) + bx * std::fabs(ds.hi) +
                                       ax * std::fabs(ds.hi) + bx * std::fabs(dc.hi));
    const double ea = dd_part + I.mp_err * (mp_part + std::fabs(va.hi));
    const double eb = dd_part + I.mp_err * (mp_part + std::fabs(vb.hi));
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
    const DD ra = add(DD{ga, 0}, neg(add(mul(c, xa), neg(mul(s, xb)))));
    const DD rb = add(DD{gb, 0}, neg(add(mul(s, xa), mul(c, xb))));
    const double ea =
        0x1p-101 * (std::fabs(ga) + mp_part) + I.mp_err * (mp_part + std::fabs(ra.hi));
    const double eb =
        0x1p-101 * (std::fabs(gb) + mp_part) + I.mp_err * (mp_part + std::fabs(rb.hi));
    if (certified(ra, ea, da) && certified(rb, eb, db)) return;
  }
  ++fallbacks_;
  I.recipe_y(sl, i);
  mpfr_d_sub(I.t1.v, ga, sl.ya[i], MPFR_RNDN);
  da = mpfr_get_d(I.t1.v, MPFR_RNDN);
  mpfr_d_sub(I.t1.v, gb, sl.yb[i], MPFR_RNDN);
  db = mpfr_get_d(I.t1.v, MPFR_RNDN);
}

}  // namespace ropecheck::reports::detail
