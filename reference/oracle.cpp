// The two-tier oracle (contract in oracle.hpp). The fast path computes, per pair at an integer
// position m, cos and sin of m theta_i in double-double (dd: an unevaluated sum hi + lo of two
// doubles, ~106 bits) with an a-priori bound on its error, then each rotated element in dd with a
// bound; ExactVector answers a question only when a rounding test shows that every value within
// the bound rounds to the same double, else it asks MPFR (reference::apply_cached).
//
// ---- Error analysis of the fast path (u = 2^-53; dd operations after Joldes, Muller, Popescu,
// "Tight and rigorous error bounds for basic building blocks of double-word arithmetic", 2017:
// dd + dd <= 3u^2 relative, dd * dd <= 5u^2 (Dekker product; 7u^2 is safe for any variant),
// dd * double <= 2u^2) -------------------------------------------------------------------------
// Target: theta_p, the MPFR ladder's value of theta_i at the reference precision p (the very
// number the MPFR path multiplies by m), so the two paths aim at the same rotation.
// 1. Reduction. c = theta_p / (2 pi) is computed in MPFR at 448 bits and its fractional part
//    truncated to a 192-bit fixed-point integer Phi (error < 2^-192 + 2^-440 c). For integer m,
//    frac(m c) = frac(m Phi 2^-192) up to |m| 2^-192 <= 2^-130 turns (|m| <= 2^62): computed
//    exactly mod 2^192 with 64x64->128 products. The integer part of c drops out (m integer).
// 2. Split f = j / 2^K + g, K = 10, |g| <= 2^-11 turns; g to dd: its top word (exact in a
//    double) plus its second word rounded to a double: error <= 2^-118 + 2^-128 turns. t = 2 pi g
//    in dd (2 pi in dd, error 2^-107 relative; product 5u^2): |t| <= 2 pi 2^-11 < 2^-8.3, |t - 2 pi
//    g_exact| <= 2^-111 rad (all reduction errors included).
// 3. sin t, cos t by their Taylor series to t^9 and t^10 (truncation < 2^-116, < 2^-128): the
//    terms below 2^-45 in double from z.hi (their errors < 2^-81 before a factor |z| or |t z|
//    < 2^-16.6: < 2^-97 in P, Q, < 2^-110 in the result), the leading ones in dd: eleven dd
//    operations on values <= 1, each <= 5u^2 relative: < 2^-100.5 together (the last additions
//    dominate, 3u^2 each).
// 4. Table: cos, sin of 2 pi j / 2^K rounded from MPFR to dd (hi = RN(v), lo = RN(v - hi):
//    <= 2^-106 |v|). cos(a + t) = Ca ct - Sa st and sin(a + t) = Sa ct + Ca st: two dd products
//    (5u^2 each) and one dd sum (3u^2), plus the table's and the series' errors times |ct|, |st|
//    <= 1. Together with 2. and 3.: |C - cos(m theta_p)|, |S - sin(m theta_p)| <= 2^-100.
//    (kTrigError below; the cross-check test in tests/ measures it against MPFR.)
// 5. Elements: E_a = s (C x_a - S x_b), E_b = s (S x_a + C x_b) with x exact doubles: two
//    dd * double products (2u^2), one dd sum (3u^2), and for s != 1 a dd * dd product (5u^2)
//    with s rounded to dd (u^2): |E - s R x| <= s (|x_a| + |x_b|) (2^-100 + 12 u^2) <=
//    s (|x_a| + |x_b|) 2^-99.5, stated with a margin as kElementError = 2^-98.5. Inputs outside
//    [2^-900, 2^900] (or non-finite) fall back: the dd error terms would underflow or overflow.
// 6. The MPFR path's own rounding (what "bit for bit the same as MPFR" has to include): its angle
//    RN_p(m theta_p) (2^-p |m theta_p|), sin_cos (2^-p), s * cos (2^-p relative) and the fused
//    fmms (2^-p relative): <= s (|x_a| + |x_b|) 2^-p (|m| theta_p + 4), added per element.
// 7. Rounding test (Ziv): for a value v known to lie in [hi + lo - e, hi + lo + e], RN(v) is
//    certified when the interval does not reach a rounding boundary of the candidate; the
//    candidate's boundaries are half an ulp away, except toward zero from a power of two, where
//    the next value down is half an ulp away and the boundary a quarter ulp (inside_rounding).
#include "ropecheck/reference/oracle.hpp"

#include "ropecheck/reference/double_double.hpp"

#include <mpfr.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

// GCC and clang (>= 14) on x86-64 build an FMA clone and a baseline clone of the hot loops.
#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 14 : defined(__GNUC__))
#define ROPECHECK_FMA_CLONES [[gnu::target_clones("fma", "default")]]
#else
#define ROPECHECK_FMA_CLONES
#endif

namespace ropecheck::reference {

namespace {

using dd::add;
using dd::DD;
using dd::fast_two_sum;
using dd::inside_rounding;
using dd::mul;
using dd::neg;
using dd::two_prod;
using dd::two_sum;
using dd::ulp_of;

constexpr int kTableBits = 10;  // K: table of 2^K + 1 angles 2 pi j / 2^K
constexpr double kTrigError = 0x1p-100;
constexpr double kElementError = 0x1.6a09e667f3bcdp-99;  // 2^-98.5
// |m| <= 2^62, compared as integers: as a double, 2^62 + 1 .. 2^62 + 2^9 would compare equal.
constexpr std::int64_t kMaxAbsPosition = std::int64_t{1} << 62;
bool position_in_range(std::int64_t m) { return m >= -kMaxAbsPosition && m <= kMaxAbsPosition; }
constexpr double kMinInput = 0x1p-900, kMaxInput = 0x1p900;

DD dd_of(mpfr_srcptr v) {
  mpfr_t r;
  mpfr_init2(r, mpfr_get_prec(v));
  const double hi = mpfr_get_d(v, MPFR_RNDN);
  mpfr_sub_d(r, v, hi, MPFR_RNDN);  // exact: v - RN(v) has no more bits than v
  const double lo = mpfr_get_d(r, MPFR_RNDN);
  mpfr_clear(r);
  return {hi, lo};
}

// cos, sin of 2 pi j / 2^K and the dd constants of the series, from MPFR once per process.
struct Tables {
  std::array<DD, (1 << kTableBits) + 1> cos_, sin_;
  DD two_pi;
  std::array<DD, 11> inv_fact;  // 1/k!, k = 0..10
  Tables() {
    mpfr_t a, s, c;
    mpfr_inits2(256, a, s, c, static_cast<mpfr_ptr>(nullptr));
    for (int j = 0; j <= (1 << kTableBits); ++j) {
      mpfr_const_pi(a, MPFR_RNDN);
      mpfr_mul_si(a, a, 2 * j, MPFR_RNDN);
      mpfr_div_2si(a, a, kTableBits, MPFR_RNDN);
      mpfr_sin_cos(s, c, a, MPFR_RNDN);
      cos_[static_cast<std::size_t>(j)] = dd_of(c);
      sin_[static_cast<std::size_t>(j)] = dd_of(s);
    }
    mpfr_const_pi(a, MPFR_RNDN);
    mpfr_mul_2si(a, a, 1, MPFR_RNDN);
    two_pi = dd_of(a);
    mpfr_set_ui(a, 1, MPFR_RNDN);
    for (int k = 0; k <= 10; ++k) {
      if (k > 0) mpfr_div_ui(a, a, static_cast<unsigned long>(k), MPFR_RNDN);
      inv_fact[static_cast<std::size_t>(k)] = dd_of(a);
    }
    mpfr_clears(a, s, c, static_cast<mpfr_ptr>(nullptr));
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

using u128 = unsigned __int128;

// frac(m c) for c = Phi 2^-192 as 192-bit fixed point, words w[2] (most significant) .. w[0].
[[gnu::always_inline]] inline std::array<std::uint64_t, 3> reduce(
    const std::array<std::uint64_t, 3>& phi, std::int64_t m) {
  const std::uint64_t a = m < 0 ? 0 - static_cast<std::uint64_t>(m) : static_cast<std::uint64_t>(m);
  const u128 p0 = static_cast<u128>(a) * phi[0];
  const u128 p1 = static_cast<u128>(a) * phi[1];
  const std::uint64_t p2 = a * phi[2];  // only its low word stays below 2^192
  std::array<std::uint64_t, 3> w{};
  w[0] = static_cast<std::uint64_t>(p0);
  const u128 mid = (p0 >> 64) + static_cast<std::uint64_t>(p1);
  w[1] = static_cast<std::uint64_t>(mid);
  w[2] = static_cast<std::uint64_t>(mid >> 64) + static_cast<std::uint64_t>(p1 >> 64) + p2;
  if (m < 0) {  // two's complement negation mod 2^192: frac(-x) = 1 - frac(x)
    w[0] = ~w[0];
    w[1] = ~w[1];
    w[2] = ~w[2];
    if (++w[0] == 0 && ++w[1] == 0) ++w[2];
  }
  return w;
}

// cos and sin of 2 pi f, f = w 2^-192 (step 2-4 of the analysis).
[[gnu::always_inline]] inline void sincos_turns(const std::array<std::uint64_t, 3>& w, DD& c,
                                                DD& s) {
  const Tables& T = tables();
  // Nearest table index j (0..2^K) and the signed remainder g = f - j 2^-K in [-2^-11, 2^-11].
  const std::uint64_t top = w[2] >> (63 - kTableBits);  // K + 1 leading bits
  const std::uint64_t j = (top + 1) >> 1;
  const std::uint64_t hi_word = w[2] - (j << (64 - kTableBits));  // mod 2^64: j = 2^K wraps to 0
  // g 2^64 = hi_word (signed, |.| <= 2^53: exact in a double) + w[1] 2^-64 (rounded: <= 2^-118
  // turns) + w[0] 2^-128 (dropped: < 2^-128 turns).
  const double g_top = static_cast<double>(static_cast<std::int64_t>(hi_word)) * 0x1p-64;
  const DD g = two_sum(g_top, static_cast<double>(w[1]) * 0x1p-128);
  const DD t = mul(T.two_pi, g);
  const DD z = mul(t, t);
  const auto& F = T.inv_fact;
  // |t| < 2^-8.3, |z| < 2^-16.6. Terms below 2^-45 are summed in double (their rounding errors
  // stay below 2^-98 before the last factors z or t z, i.e. below 2^-110 in the result); the
  // leading terms in dd. Truncation: t^11/11! < 2^-116 and z^6/12! < 2^-128.
  //   sin t = t + t z P,  P = -1/3! + z (1/5! - z (1/7! - z/9!))
  //   cos t = 1 - z/2 + z^2 Q,  Q = 1/4! - z (1/6! - z (1/8! - z/10!))
  const double zh = z.hi;
  const double wp = zh * (F[7].hi - zh * F[9].hi);
  const DD p5 = fast_two_sum(F[5].hi, F[5].lo - wp);
  const DD p = add(neg(F[3]), mul(z, p5));
  const DD st = add(t, mul(mul(t, z), p));
  const double wq = zh * (F[6].hi - zh * (F[8].hi - zh * F[10].hi));
  const DD q = fast_two_sum(F[4].hi, F[4].lo - wq);
  const DD one_minus = fast_two_sum(1.0, -0.5 * z.hi);  // 1 - z.hi / 2: exact (|z| < 2^-16)
  const DD ct = add(DD{one_minus.hi, one_minus.lo - 0.5 * z.lo}, mul(mul(z, z), q));
  const DD ca = T.cos_[j], sa = T.sin_[j];
  c = add(mul(ca, ct), neg(mul(sa, st)));
  s = add(mul(sa, ct), mul(ca, st));
}

}  // namespace

// ---- Oracle -------------------------------------------------------------------------------------

struct Oracle::Impl {
  RopeSpec spec;
  OracleMode mode;
  int prec = 0;                                   // the MPFR path's precision p
  std::vector<std::array<std::uint64_t, 3>> phi;  // frac(theta_p / 2 pi), 192-bit fixed point
  std::vector<double> theta;                      // theta_p rounded up a little (for the p-term)
  DD s;                                           // the magnitude
  bool s_one = false, s_ok = false;
  double error_scale = 1;
  std::vector<std::int64_t> elem_a, elem_b, axis;  // per pair: its elements and position axis
  std::vector<std::int64_t> passthrough;           // elements no pair rotates
};

namespace {
void fill_constants(Oracle::Impl& im) {
  const std::vector<Mp> th = inv_freqs(im.spec);
  mpfr_t c, two_pi;
  mpfr_inits2(448, c, two_pi, static_cast<mpfr_ptr>(nullptr));
  mpfr_const_pi(two_pi, MPFR_RNDN);
  mpfr_mul_2si(two_pi, two_pi, 1, MPFR_RNDN);
  mpz_t z;
  mpz_init(z);
  for (const Mp& t : th) {
    mpfr_div(c, t.backend().data(), two_pi, MPFR_RNDN);
    mpfr_frac(c, c, MPFR_RNDN);  // exact at 448 bits
    mpfr_mul_2si(c, c, 192, MPFR_RNDN);
    mpfr_get_z(z, c, MPFR_RNDZ);  // truncation: Phi <= 2^192 frac(c)
    std::array<std::uint64_t, 3> w{};
    std::size_t count = 0;
    mpz_export(w.data(), &count, -1, sizeof(std::uint64_t), 0, 0, z);
    im.phi.push_back(w);
    im.theta.push_back(std::nextafter(static_cast<double>(t), 1e300));
  }
  mpz_clear(z);
  mpfr_clears(c, two_pi, static_cast<mpfr_ptr>(nullptr));
  const Mp mag = magnitude(im.spec);
  im.s = dd_of(mag.backend().data());
  im.s_one = im.s.hi == 1.0 && im.s.lo == 0.0;
  im.s_ok =
      std::isfinite(im.s.hi) && std::fabs(im.s.hi) >= kMinInput && std::fabs(im.s.hi) <= kMaxInput;
}
}  // namespace

namespace {

struct TrigOut {
  double *c_hi, *c_lo, *s_hi, *s_lo, *err;
};

// The per-pair work of Oracle::at and Rotation::apply, compiled twice (target_clones): for CPUs
// with FMA, where two_prod's std::fma is one instruction, and for the x86-64 baseline, where it
// is a call to glibc's fma() (exact too). The loader picks one at start-up; the answers are the
// same doubles either way (every operation is exact or correctly rounded in both).
ROPECHECK_FMA_CLONES
void trig_pairs(const Oracle::Impl& im, const std::vector<std::int64_t>& positions, TrigOut o) {
  const double p_unit = std::ldexp(1.0, -im.prec);
  for (std::size_t i = 0; i < im.phi.size(); ++i) {
    const std::int64_t m =
        positions.size() == 1 ? positions[0] : positions[static_cast<std::size_t>(im.axis[i])];
    DD c{1, 0}, s{0, 0};
    double err = 0;  // m = 0: cos = 1, sin = 0 exactly, on both paths
    if (m != 0) {
      sincos_turns(reduce(im.phi[i], m), c, s);
      err = kElementError + p_unit * (std::fabs(static_cast<double>(m)) * im.theta[i] * 1.0001 + 4);
    }
    if (!im.s_one) {
      c = mul(im.s, c);
      s = mul(im.s, s);
      if (m == 0) err = kElementError + 4 * p_unit;  // s * 1 is rounded on both paths
      err *= std::fabs(im.s.hi) * (1 + 0x1p-40);     // the bounds are relative to s |x|
    }
    o.c_hi[i] = c.hi;
    o.c_lo[i] = c.lo;
    o.s_hi[i] = s.hi;
    o.s_lo[i] = s.lo;
    o.err[i] = err * im.error_scale;
  }
}

// The rotated elements (step 5); s cos and s sin already carry s.
ROPECHECK_FMA_CLONES
void rotate_pairs(const Oracle::Impl& im, const TrigOut& t, const double* x, double* hi, double* lo,
                  double* err) {
  for (std::size_t k = 0; k < im.elem_a.size(); ++k) {
    const auto a = static_cast<std::size_t>(im.elem_a[k]);
    const auto b = static_cast<std::size_t>(im.elem_b[k]);
    const DD c{t.c_hi[k], t.c_lo[k]}, s{t.s_hi[k], t.s_lo[k]};
    const double xa = x[a], xb = x[b];
    const DD ea = add(mul(c, xa), neg(mul(s, xb)));
    const DD eb = add(mul(s, xa), mul(c, xb));
    const double e = t.err[k] * (std::fabs(xa) + std::fabs(xb));
    hi[a] = ea.hi;
    lo[a] = ea.lo;
    err[a] = e;
    hi[b] = eb.hi;
    lo[b] = eb.lo;
    err[b] = e;
  }
}

}  // namespace

Oracle::Oracle(const RopeSpec& spec, OracleMode mode, double error_scale) : impl_(new Impl{}) {
  impl_->spec = spec;
  impl_->mode = mode;
  impl_->error_scale = error_scale;
  impl_->prec = static_cast<int>(precision_bits());
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    impl_->elem_a.push_back(spec.pair(i).first);
    impl_->elem_b.push_back(spec.pair(i).second);
    impl_->axis.push_back(spec.pair_axis(i));
  }
  for (std::int64_t j = 0; j < spec.head_dim; ++j)
    if (spec.is_passthrough(j)) impl_->passthrough.push_back(j);
  if (mode == OracleMode::fast) fill_constants(*impl_);
}
Oracle::~Oracle() = default;
const RopeSpec& Oracle::spec() const { return impl_->spec; }
OracleMode Oracle::mode() const { return impl_->mode; }

Rotation Oracle::at(const std::vector<std::int64_t>& positions) const {
  Rotation r;
  at(positions, r);
  return r;
}

void Oracle::at(const std::vector<std::int64_t>& positions, Rotation& r) const {
  const Impl& im = *impl_;
  const RopeSpec& spec = im.spec;
  if (positions.size() != 1 && static_cast<std::int64_t>(positions.size()) != spec.n_axes())
    throw std::invalid_argument("oracle: " + std::to_string(positions.size()) +
                                " positions given, the spec has " + std::to_string(spec.n_axes()) +
                                " axes");
  r.oracle_ = this;
  r.positions_ = positions;
  r.mpfr_only_ = im.mode == OracleMode::mpfr || !im.s_ok;
  for (std::int64_t m : positions)
    if (!position_in_range(m)) r.mpfr_only_ = true;
  if (r.mpfr_only_) return;
  const auto np = static_cast<std::size_t>(spec.n_pairs());
  r.c_hi_.resize(np);
  r.c_lo_.resize(np);
  r.s_hi_.resize(np);
  r.s_lo_.resize(np);
  r.err_.resize(np);
  trig_pairs(im, positions,
             {r.c_hi_.data(), r.c_lo_.data(), r.s_hi_.data(), r.s_lo_.data(), r.err_.data()});
}

namespace {
ROPECHECK_FMA_CLONES
void sincos_at(const std::array<std::uint64_t, 3>& phi, std::int64_t m, DD& c, DD& s) {
  sincos_turns(reduce(phi, m), c, s);
}
}  // namespace

bool Oracle::sincos(std::int64_t pair, std::int64_t m, double c[2], double s[2]) const {
  static_assert(kSinCosError == kTrigError);
  const Impl& im = *impl_;
  if (im.mode != OracleMode::fast || !position_in_range(m)) return false;
  DD cd{1, 0}, sd{0, 0};  // m = 0: exact
  if (m != 0) sincos_at(im.phi[static_cast<std::size_t>(pair)], m, cd, sd);
  c[0] = cd.hi;
  c[1] = cd.lo;
  s[0] = sd.hi;
  s[1] = sd.lo;
  return true;
}

// ---- Rotation -----------------------------------------------------------------------------------

void Rotation::apply(const double* x, ExactVector& out) const {
  const RopeSpec& spec = oracle_->spec();
  const auto n = static_cast<std::size_t>(spec.head_dim);
  out.oracle_ = oracle_;
  out.positions_.assign(positions_.begin(), positions_.end());
  out.x_.assign(x, x + n);
  out.mp_.reset();
  oracle_->vectors_.fetch_add(1, std::memory_order_relaxed);
  out.fast_ = !mpfr_only_;
  if (!out.fast_) return;
  for (std::size_t j = 0; j < n; ++j) {
    const double a = std::fabs(x[j]);
    if (!(a <= kMaxInput) || (a != 0 && a < kMinInput)) {
      out.fast_ = false;
      return;
    }
  }
  out.hi_.resize(n);
  out.lo_.resize(n);
  out.err_.resize(n);
  const Oracle::Impl& im = *oracle_->impl_;
  for (std::int64_t j : im.passthrough) {  // pass-through dims: the input, exactly
    const auto k = static_cast<std::size_t>(j);
    out.hi_[k] = x[k];
    out.lo_[k] = 0;
    out.err_[k] = 0;
  }
  // TrigOut is a view for writing; rotate_pairs only reads through it.
  const TrigOut t{const_cast<double*>(c_hi_.data()), const_cast<double*>(c_lo_.data()),
                  const_cast<double*>(s_hi_.data()), const_cast<double*>(s_lo_.data()),
                  const_cast<double*>(err_.data())};
  rotate_pairs(im, t, x, out.hi_.data(), out.lo_.data(), out.err_.data());
}

ExactVector Rotation::apply(const double* x) const {
  ExactVector v;
  apply(x, v);
  return v;
}

// ---- ExactVector --------------------------------------------------------------------------------

ExactVector::ExactVector() = default;
ExactVector::~ExactVector() = default;
ExactVector::ExactVector(ExactVector&&) noexcept = default;
ExactVector& ExactVector::operator=(ExactVector&&) noexcept = default;

void ExactVector::fall_back(bool certificate) const {
  if (mp_) return;
  const RopeSpec& spec = oracle_->spec();
  Positions p;
  const auto& pos = positions_;
  for (std::int64_t a = 0; a < spec.n_axes(); ++a)
    p.push_back(Mp(static_cast<long long>(pos.size() == 1 ? pos[0] : pos[a])));
  mp_ = std::make_unique<MpVector>(apply_cached(spec, p, x_));
  // A vector without a fast value (mode mpfr, input or position out of range) counts as a
  // fallback whichever question came first.
  (certificate || !fast_ ? oracle_->fallbacks_ : oracle_->mp_requests_)
      .fetch_add(1, std::memory_order_relaxed);
}

namespace detail {

std::optional<double> certify_difference(double got, double hi, double lo, double err) {
  // got - (hi + lo) = d.hi + rest exactly, up to rest's own rounding (u |rest|, and |rest| is
  // about half an ulp of d.hi at most): three exact two_sums and one rounded addition.
  const DD r = two_sum(got, -hi);
  const DD t = two_sum(r.lo, -lo);
  const DD d = two_sum(r.hi, t.hi);
  const double rest = d.lo + t.lo;
  // The allowance for rest's rounding is kept but not load-bearing: each test in inside_rounding
  // is RN(x) < T with T a power of two, i.e. x < T (1 - 2^-54). Where x adds |rest|, it holds
  // only with |rest| < T, whose rounding error is <= 2^-54 T, so the exact x is < T too; where it
  // subtracts rest (e - away < the toward gap, half / 2 at most), away >= half / 2 and
  // away + e < half force e - away < 0. (Subnormal T: the sums are exact.) Same for delta in
  // certify_rounding; tests/oracle_certify_test holds with either allowance dropped.
  const double e = err + 0x1p-53 * std::fabs(rest);
  if (rest == 0 && err == 0) return d.hi;  // exact (includes an exact zero difference)
  if (d.hi != 0 && std::isfinite(d.hi) && inside_rounding(d.hi, rest, e, 0.5 * ulp_of(d.hi)))
    return d.hi;
  return std::nullopt;
}

std::optional<double> certify_rounding(double hi, double lo, double err, Dtype d) {
  const double c = round_to_dtype(hi, d);
  if (c == 0 || !std::isfinite(c)) return std::nullopt;
  const double delta = (hi - c) + lo;  // hi - c exact (c rounds hi to fewer bits)
  const double e = err + 0x1p-53 * std::fabs(delta);
  if (inside_rounding(c, delta, e, 0.5 * ulp(c, d))) return c;
  return std::nullopt;
}

}  // namespace detail

double ExactVector::diff(std::int64_t j, double got) const {
  if (fast_ && !mp_) {
    const auto k = static_cast<std::size_t>(j);
    if (const auto r = detail::certify_difference(got, hi_[k], lo_[k], err_[k])) return *r;
  }
  fall_back(true);
  return static_cast<double>(exact(got) - (*mp_)(j));
}

double ExactVector::rounded(std::int64_t j, Dtype d) const {
  if (fast_ && !mp_) {
    const auto k = static_cast<std::size_t>(j);
    if (const auto r = detail::certify_rounding(hi_[k], lo_[k], err_[k], d)) return *r;
  }
  fall_back(true);
  return round_to((*mp_)(j), d);
}

ExactVector::FastValue ExactVector::fast_value(std::int64_t j) const {
  if (!fast_) return {};
  const auto k = static_cast<std::size_t>(j);
  return {hi_[k], lo_[k], err_[k], true};
}

const Mp& ExactVector::mp(std::int64_t j) const {
  fall_back(false);
  return (*mp_)(j);
}

const MpVector& ExactVector::mp_all() const {
  fall_back(false);
  return *mp_;
}

}  // namespace ropecheck::reference
