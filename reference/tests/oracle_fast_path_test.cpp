// The fast path of the oracle where it matters: inputs built so that the MPFR path's value of an
// element sits within the fast path's error bound of a rounding boundary of the question asked
// (a midpoint of the target dtype for rounded(), a midpoint of doubles for diff()), at positions
// up to 2^62. On random inputs the fast path is far more accurate than its stated bound, so a
// comparison with MPFR there cannot tell a sound certification from a weakened one; here:
//   - the fast path must defer to MPFR (the fallback count is asserted, per vector) and answer
//     what MPFR answers, while a control input a quarter ulp from the boundary is answered
//     without MPFR (so "always fall back" is not a way to pass);
//   - the stated bound is the documented formula (oracle.cpp, steps 5-6), term by term;
//   - each term of that bound is needed: for each, an input (found by a deterministic search, its
//     properties checked in MPFR) on which the fast value and the MPFR path's value lie on
//     opposite sides of a rounding boundary, at a distance the bound covers and the bound without
//     that term does not. With the term dropped the certification accepts the fast side's
//     answer, which differs from MPFR's; with it the oracle must fall back and agree.
// Terms that only the MPFR path's own rounding makes necessary (its angle RN_p(m theta) and its
// other roundings) are below the fast path's own 2^-98.5 at the production precision (>= 160
// bits; the bound has that much room), so their witnesses use a lower reference precision, which
// the Oracle's contract covers (it serves "the MPFR path at the current precision").
#include "precision_guard.hpp"
#include "ropecheck/reference/oracle.hpp"

#include "ropecheck/reference/double_double.hpp"

#include <gtest/gtest.h>
#include <mpfr.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ropecheck::reference {
namespace {

constexpr double kElementError = 0x1.6a09e667f3bcdp-99;  // oracle.cpp: 2^-98.5
constexpr std::int64_t kMaxAbsPosition = std::int64_t{1} << 62;
bool beyond_fast_range(std::int64_t m) { return m > kMaxAbsPosition || m < -kMaxAbsPosition; }

// An mpfr_t at 1024 bits: the construction's arithmetic is exact (or 2^-1000-accurate) whatever the
// reference precision under test.
struct Big {
  mpfr_t v;
  Big() { mpfr_init2(v, 1024); }
  explicit Big(double d) : Big() { mpfr_set_d(v, d, MPFR_RNDN); }
  explicit Big(const Mp& m) : Big() { mpfr_set(v, m.backend().data(), MPFR_RNDN); }
  Big(const Big& o) : Big() { mpfr_set(v, o.v, MPFR_RNDN); }
  Big& operator=(const Big& o) {
    mpfr_set(v, o.v, MPFR_RNDN);
    return *this;
  }
  ~Big() { mpfr_clear(v); }
  double d() const { return mpfr_get_d(v, MPFR_RNDN); }
  int sign() const { return mpfr_sgn(v); }
};
Big operator+(const Big& a, const Big& b) {
  Big r;
  mpfr_add(r.v, a.v, b.v, MPFR_RNDN);
  return r;
}
Big operator-(const Big& a, const Big& b) {
  Big r;
  mpfr_sub(r.v, a.v, b.v, MPFR_RNDN);
  return r;
}
Big operator*(const Big& a, const Big& b) {
  Big r;
  mpfr_mul(r.v, a.v, b.v, MPFR_RNDN);
  return r;
}
Big operator/(const Big& a, const Big& b) {
  Big r;
  mpfr_div(r.v, a.v, b.v, MPFR_RNDN);
  return r;
}
Big abs(const Big& a) {
  Big r;
  mpfr_abs(r.v, a.v, MPFR_RNDN);
  return r;
}
Mp to_mp(const Big& b) {
  Mp r;
  mpfr_set(r.backend().data(), b.v, MPFR_RNDN);  // rounds to the current precision
  return r;
}

RopeSpec make_spec(std::int64_t head_dim, Layout layout, double base, double scale,
                   std::int64_t rotary_dim = 0) {
  RopeSpec s;
  s.head_dim = head_dim;
  if (rotary_dim) s.rotary_dim = rotary_dim;
  s.layout = layout;
  s.base = base;
  s.scale = scale;
  return s.normalized();
}

RopeSpec yarn_spec() {  // a magnitude s = 0.1 ln 40 + 1, not a double
  RopeSpec y;
  y.head_dim = 32;
  y.layout = Layout::half;
  y.scaling.kind = ScalingKind::yarn;
  y.scaling.factor = 40;
  y.scaling.original_max_position_embeddings = 4096;
  return y.normalized();
}

// The MPFR path's s cos(m theta_i) and s sin(m theta_i) for one pair: what it multiplies x by
// (rotating e_a gives them exactly: fmms(c, 1, s, 0) and fmma(s, 1, c, 0) are exact).
struct Table {
  Big sc, ss;
};
Table mpfr_table(const RopeSpec& s, std::int64_t pair, std::int64_t m) {
  std::vector<double> e(static_cast<std::size_t>(s.head_dim), 0.0);
  const auto [a, b] = s.pair(pair);
  e[static_cast<std::size_t>(a)] = 1;
  const MpVector v = apply_blocked(s, Mp(static_cast<long long>(m)), e);
  return {Big(v(a)), Big(v(b))};
}

// x, zero but for pair `pair`, with s cos x_a - s sin x_b = target + r: the larger table entry
// takes the magnitude, the other element absorbs the residual, so |r| <= 2^-53 |first residual|.
std::vector<double> aim(const RopeSpec& s, std::int64_t pair, const Table& t, const Big& target,
                        Big* first_residual = nullptr) {
  std::vector<double> x(static_cast<std::size_t>(s.head_dim), 0.0);
  const auto [a, b] = s.pair(pair);
  double& xa = x[static_cast<std::size_t>(a)];
  double& xb = x[static_cast<std::size_t>(b)];
  const Big neg_ss = Big(0.0) - t.ss;
  if (mpfr_cmpabs(t.sc.v, t.ss.v) >= 0) {
    xa = (target / t.sc).d();
    const Big r = target - t.sc * Big(xa);
    xb = (r / neg_ss).d();
    if (first_residual) *first_residual = r;
  } else {
    xb = (target / neg_ss).d();
    const Big r = target - neg_ss * Big(xb);
    xa = (r / t.sc).d();
    if (first_residual) *first_residual = r;
  }
  return x;
}

// A rounding boundary of dtype d: the midpoint of two neighbours, and which of them lies on each
// side (ties go to the even one).
struct Boundary {
  Big mid;
  double below = 0, above = 0, odd = 0, even = 0;
};
Boundary boundary_above(double v, Dtype d) {  // v > 0 a dtype value, not the largest
  Boundary bd;
  bd.below = v;
  bd.above = v + ulp(v, d);
  bd.mid = (Big(bd.below) + Big(bd.above)) / Big(2.0);
  bd.even = round_to(to_mp(bd.mid), d);
  bd.odd = bd.even == bd.below ? bd.above : bd.below;
  return bd;
}

// ---- The stated bound is the documented formula ----------------------------------------------

// oracle.cpp, steps 5-6 (trig_pairs, rotate_pairs): per element of a pair at position m,
//   err = (2^-98.5 + 2^-p (|m| theta_up 1.0001 + 4)) [* |s.hi| (1 + 2^-40) when s != 1]
//         * (|x_a| + |x_b|),
// theta_up the double just above theta_p; at m = 0 the trig is exact on both paths: 0 when s = 1,
// (2^-98.5 + 4 2^-p) |s.hi| (1 + 2^-40) otherwise.
struct Terms {
  bool element = true, angle = true, mpfr_roundings = true, magnitude = true, position_zero = true,
       second_element = true;
};
double documented_bound(const RopeSpec& s, std::int64_t pair, std::int64_t m,
                        const std::vector<double>& x, Terms t = {}) {
  const double p_unit = std::ldexp(1.0, -static_cast<int>(precision_bits()));
  const double theta = std::nextafter(static_cast<double>(inv_freq(s, pair)), 1e300);
  const double shi = static_cast<double>(magnitude(s));
  const bool s_one = magnitude(s) == 1;
  const double k_el = t.element ? kElementError : 0.0;
  double err = 0;
  if (m != 0)
    err = k_el + p_unit * ((t.angle ? std::fabs(static_cast<double>(m)) * theta * 1.0001 : 0.0) +
                           (t.mpfr_roundings ? 4 : 0));
  if (!s_one) {
    if (m == 0 && t.position_zero) err = k_el + (t.mpfr_roundings ? 4 * p_unit : 0.0);
    if (t.magnitude) err *= std::fabs(shi) * (1 + 0x1p-40);
  }
  const auto [a, b] = s.pair(pair);
  const double xa = std::fabs(x[static_cast<std::size_t>(a)]);
  const double xb = std::fabs(x[static_cast<std::size_t>(b)]);
  return err * (xa + (t.second_element ? xb : 0.0));
}

TEST(OracleFastPath, StatedBoundIsTheDocumentedFormula) {
  const std::vector<RopeSpec> specs = {make_spec(16, Layout::half, 10000, 1),
                                       make_spec(16, Layout::interleaved, 500000, 3000.25),
                                       yarn_spec()};
  int checked = 0;
  for (const RopeSpec& s : specs) {
    const Oracle fast(s);
    for (std::int64_t m : {std::int64_t{0}, std::int64_t{5}, std::int64_t{-77777},
                           (std::int64_t{1} << 62) - 1, -(std::int64_t{1} << 62)}) {
      const Rotation r = fast.at({m});
      for (std::int64_t i = 0; i < s.n_pairs(); i += 3) {
        std::vector<double> x(static_cast<std::size_t>(s.head_dim), 0.0);
        const auto [a, b] = s.pair(i);
        x[static_cast<std::size_t>(a)] = 0.625 + static_cast<double>(i);
        x[static_cast<std::size_t>(b)] = -1.5;
        const ExactVector v = r.apply(x.data());
        const auto fa = v.fast_value(a), fb = v.fast_value(b);
        ASSERT_TRUE(fa.valid && fb.valid);
        // Within 2^-50 relative, not bit for bit: a compiler may contract the oracle's
        // expression into an FMA in its FMA clone (clang's default -ffp-contract=on). Every term
        // checked here is >= 2^-16 of the bound (the 1.0001 margin of the angle term at m = 2^62
        // is the smallest) except 4 2^-p at p = 160, which only a witness shows (MpfrRoundings).
        const double want = documented_bound(s, i, m, x);
        EXPECT_NEAR(fa.err, want, 0x1p-50 * want) << describe(s) << " m " << m << " pair " << i;
        EXPECT_NEAR(fb.err, want, 0x1p-50 * want) << describe(s) << " m " << m << " pair " << i;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 50);
}

// ---- Deferral at rounding boundaries ------------------------------------------------------------

struct Case {
  RopeSpec spec;
  std::int64_t m, pair;
};
std::vector<Case> boundary_cases() {
  const RopeSpec h = make_spec(128, Layout::half, 10000, 1);
  const RopeSpec p = make_spec(32, Layout::interleaved, 500000, 1, 16);  // partial rotary
  const RopeSpec y = yarn_spec();
  const std::int64_t big = std::int64_t{1} << 62;
  std::vector<Case> v;
  for (const RopeSpec& s : {h, p, y})
    for (std::int64_t m : {std::int64_t{7}, std::int64_t{-3001}, (std::int64_t{1} << 31) + 1,
                           (std::int64_t{1} << 52) - 3, big - 1, big, -big, big + 1})
      for (std::int64_t i : {std::int64_t{0}, s.n_pairs() / 2, s.n_pairs() - 1})
        v.push_back({s, m, i});
  return v;
}

// rounded(a, d) where the MPFR path's value is 2^-102 |target| from a midpoint of d, on either
// side: one fallback per vector and MPFR's answer. On the odd neighbour's side a certification
// against a whole ulp would accept the candidate rounded from the fast value's high word (the
// midpoint itself, so the even neighbour: a wrong answer); on the even side a certification with
// an understated bound would accept the right answer without asking MPFR (the count tells). A
// quarter ulp from the midpoint: no fallback (but beyond 2^62), the same answer. 2^-102 |target|
// is inside the stated bound (>= 2^-98.5 s (|x_a| + |x_b|) >= 2^-98.5 |target|) and far above
// the construction's residual (~2^-106 |target|).
TEST(OracleFastPath, DefersToMpfrAtRoundingMidpointsOfEveryDtype) {
  long near = 0, controls = 0;
  for (const Case& c : boundary_cases()) {
    const Oracle fast(c.spec), slow(c.spec, OracleMode::mpfr);
    const Rotation rf = fast.at({c.m}), rs = slow.at({c.m});
    const Table t = mpfr_table(c.spec, c.pair, c.m);
    const auto a = c.spec.pair(c.pair).first;
    for (Dtype d : kAllDtypes) {
      const double mag = std::fabs(std::max(std::fabs(t.sc.d()), std::fabs(t.ss.d())));
      const Boundary bd = boundary_above(round_to_dtype(0.7 * mag, d), d);
      const double toward_odd = bd.odd > bd.even ? 1.0 : -1.0;
      for (int kind = 0; kind < 3; ++kind) {
        const bool at_boundary = kind < 2;
        const double side = kind == 1 ? -toward_odd : toward_odd;
        const double offset =
            at_boundary ? std::ldexp(std::fabs(bd.mid.d()), -102) : 0.25 * ulp(bd.below, d);
        const Big target = bd.mid + Big(side * offset);
        const std::vector<double> x = aim(c.spec, c.pair, t, target);
        const ExactVector vs = rs.apply(x.data());
        const double want = vs.rounded(a, d);
        ASSERT_EQ(want, kind == 1 ? bd.even : bd.odd)
            << "construction: " << describe(c.spec) << " m " << c.m;
        const std::int64_t before = fast.fallbacks();
        const ExactVector vf = rf.apply(x.data());
        EXPECT_EQ(vf.rounded(a, d), want)
            << name(d) << " " << describe(c.spec) << " m " << c.m << " pair " << c.pair;
        const bool mpfr_only = beyond_fast_range(c.m);
        const std::int64_t want_fallbacks = at_boundary || mpfr_only ? 1 : 0;
        EXPECT_EQ(fast.fallbacks() - before, want_fallbacks)
            << name(d) << (at_boundary ? " at the midpoint " : " a quarter ulp away ")
            << describe(c.spec) << " m " << c.m << " pair " << c.pair;
        (at_boundary ? near : controls)++;
      }
    }
  }
  EXPECT_EQ(near, 2 * controls);
  EXPECT_GE(near, 400);
}

// diff(a, got) = RN_double(got - exact): its boundaries are midpoints of doubles. With got a dtype
// value and exact placed 2^-102 |target| from got - M (M the midpoint between 0.75 h and its upper
// neighbour double, h half an ulp of got), the fast path must fall back, either side. At h/3
// from M (a third of a power of two: 1/6 of a double spacing from every midpoint) it answers alone,
// except for f64: an f64 difference is ~2^-54 |x|, its last bit below the fast path's resolution
// (oracle.hpp: f64 differences fall back by design).
TEST(OracleFastPath, DefersToMpfrAtDifferenceMidpoints) {
  long near = 0;
  for (const Case& c : boundary_cases()) {
    if (beyond_fast_range(c.m)) continue;
    const Oracle fast(c.spec), slow(c.spec, OracleMode::mpfr);
    const Rotation rf = fast.at({c.m}), rs = slow.at({c.m});
    const Table t = mpfr_table(c.spec, c.pair, c.m);
    const auto a = c.spec.pair(c.pair).first;
    for (Dtype d : kAllDtypes) {
      const double mag = std::fabs(std::max(std::fabs(t.sc.d()), std::fabs(t.ss.d())));
      const double got = round_to_dtype(0.7 * mag, d);
      const double d1 = 0.75 * 0.5 * ulp(got, d);
      const Big m_mid = Big(d1) + Big(0.5 * dd::ulp_of(d1));
      for (double side : {1.0, -1.0})
        for (bool at_boundary : {true, false}) {
          // f64: M's neighbours are ~2^-107 |got| apart, below the construction's residual; the
          // away case shows the fallback by design.
          if (at_boundary && d == Dtype::f64) continue;
          const Big offset = at_boundary ? Big(std::ldexp(std::fabs(got), -102))
                                         : Big(0.5 * ulp(got, d)) / Big(3.0);
          const Big target = Big(got) - m_mid + Big(side) * offset;
          const std::vector<double> x = aim(c.spec, c.pair, t, target);
          const ExactVector vs = rs.apply(x.data());
          const double want = vs.diff(a, got);
          if (at_boundary) {  // the answer is decided by the side: M's two neighbours
            ASSERT_EQ(want, side > 0 ? d1 : d1 + dd::ulp_of(d1)) << "construction";
          }
          const std::int64_t before = fast.fallbacks();
          const ExactVector vf = rf.apply(x.data());
          const double ans = vf.diff(a, got);
          EXPECT_TRUE(ans == want || (ans == 0 && want == 0))
              << name(d) << " " << describe(c.spec) << " m " << c.m << ": " << ans << " vs "
              << want;
          const std::int64_t want_fallbacks = at_boundary || d == Dtype::f64 ? 1 : 0;
          EXPECT_EQ(fast.fallbacks() - before, want_fallbacks)
              << name(d) << (at_boundary ? " at a double midpoint " : " away from it ")
              << describe(c.spec) << " m " << c.m << " pair " << c.pair;
          near += at_boundary;
        }
    }
  }
  EXPECT_GE(near, 300);
}

// Positions: the fast path serves |m| <= 2^62 (its reduction error |m| 2^-192 <= 2^-130 turns) and
// nothing beyond; a vector of inputs far from every boundary is answered without MPFR at +-2^62
// and with it at +-(2^62 + 1) (which a comparison in double would take for 2^62), and the answers
// agree with MPFR's.
TEST(OracleFastPath, ServesPositionsUpToTwoToThe62AndNoFurther) {
  const RopeSpec s = make_spec(16, Layout::half, 10000, 1);
  const Oracle fast(s), slow(s, OracleMode::mpfr);
  const std::int64_t big = std::int64_t{1} << 62;
  for (std::int64_t m : {big, -big, big + 1, -big - 1, big + 12345}) {
    const Table t = mpfr_table(s, 0, m);
    const double mag = std::max(std::fabs(t.sc.d()), std::fabs(t.ss.d()));
    const Boundary bd = boundary_above(round_to_dtype(0.7 * mag, Dtype::f32), Dtype::f32);
    std::vector<double> x = aim(s, 0, t, bd.mid + Big(0.25 * ulp(bd.below, Dtype::f32)));
    for (std::int64_t j = 0; j < s.head_dim; ++j)  // the other pairs: no zero outputs
      if (j != s.pair(0).first && j != s.pair(0).second)
        x[static_cast<std::size_t>(j)] =
            round_to_dtype(0.3 + 0.1 * static_cast<double>(j), Dtype::f32);
    const std::int64_t before = fast.fallbacks();
    const ExactVector vf = fast.at({m}).apply(x.data());
    const ExactVector vs = slow.at({m}).apply(x.data());
    for (std::int64_t j = 0; j < s.head_dim; ++j)
      EXPECT_EQ(vf.rounded(j, Dtype::f32), vs.rounded(j, Dtype::f32)) << "m " << m << " j " << j;
    EXPECT_EQ(fast.fallbacks() - before, beyond_fast_range(m) ? 1 : 0) << "m " << m;
    double c[2], sn[2];
    EXPECT_EQ(fast.sincos(0, m, c, sn), !beyond_fast_range(m)) << "m " << m;
  }
}

// The fast range (oracle.hpp): an input element or a magnitude s outside [2^-900, 2^900] sends the
// vector to MPFR whatever is asked (the dd error terms would underflow: two_prod is exact only
// for |a b| >= 2^-969, and the bound is relative), one fallback per vector; inside, the same
// question on the same kind of vector is answered without MPFR. The question asked is about a
// pair that does not hold the odd element, so only the range rule can send it to MPFR.
TEST(OracleFastPath, InputsAndMagnitudesOutsideTheFastRangeFallBack) {
  const RopeSpec s = make_spec(16, Layout::half, 10000, 1);
  const Oracle fast(s), slow(s, OracleMode::mpfr);
  const Rotation rf = fast.at({12345}), rs = slow.at({12345});
  for (double odd : {0x1p-950, 0x1p-901, 0x1p901, 0x1p950, 0x1p-899, 0x1p899}) {
    std::vector<double> x(static_cast<std::size_t>(s.head_dim));
    for (std::size_t j = 0; j < x.size(); ++j) x[j] = 0.3 + 0.1 * static_cast<double>(j);
    x[5] = odd;  // pair 5 = (5, 13); the question is about element 0, of pair 0 = (0, 8)
    const bool outside = std::fabs(odd) < 0x1p-900 || std::fabs(odd) > 0x1p900;
    const std::int64_t before = fast.fallbacks();
    const ExactVector vf = rf.apply(x.data()), vs = rs.apply(x.data());
    EXPECT_EQ(vf.rounded(0, Dtype::f64), vs.rounded(0, Dtype::f64)) << odd;
    EXPECT_EQ(fast.fallbacks() - before, outside ? 1 : 0) << "element " << odd;
  }
  for (double scale : {0x1p-950, 0x1p-901, 0x1p901, 0x1p-899, 0x1p899}) {
    const RopeSpec sc = make_spec(16, Layout::half, 10000, scale);
    const bool outside = scale < 0x1p-900 || scale > 0x1p900;
    const Oracle f(sc), m(sc, OracleMode::mpfr);
    std::vector<double> x(static_cast<std::size_t>(sc.head_dim));
    for (std::size_t j = 0; j < x.size(); ++j) x[j] = 0.3 + 0.1 * static_cast<double>(j);
    const ExactVector vf = f.at({12345}).apply(x.data()), vs = m.at({12345}).apply(x.data());
    EXPECT_EQ(vf.rounded(0, Dtype::f64), vs.rounded(0, Dtype::f64)) << scale;
    EXPECT_EQ(f.fallbacks(), outside ? 1 : 0) << "magnitude " << scale;
  }
}

// ---- Each term of the bound is needed -----------------------------------------------------------

struct Scenario {
  std::string term;
  RopeSpec spec;
  std::int64_t pair, m;
  unsigned bits;  // the reference precision
  Terms reduced;  // the bound with the term dropped
};

// The two questions a front end asks of an element, and their rounding boundaries in terms of
// the exact value E: rounded(d) changes where E crosses a midpoint of d; diff(got) =
// RN_double(got - E) changes where got - E crosses a midpoint M of doubles (for a dtype value got
// near E, M is taken near 0.375 ulp_d(got) from got).
enum class Question { rounded, diff };

struct Witness {
  std::vector<double> x;
  double got = 0, mpfr_answer = 0, reduced_answer = 0;
};

// The certification as ExactVector::rounded / diff run it, with the error bound `err`: the
// answer it accepts from the fast value (hi, lo), if any.
std::optional<double> certify(Question q, Dtype d, double got, double hi, double lo, double err) {
  if (q == Question::rounded) {
    const double c = round_to_dtype(hi, d);
    if (c == 0 || !std::isfinite(c)) return std::nullopt;
    const double delta = (hi - c) + lo;
    if (dd::inside_rounding(c, delta, err + 0x1p-53 * std::fabs(delta), 0.5 * ulp(c, d))) return c;
    return std::nullopt;
  }
  const dd::DD r = dd::two_sum(got, -hi);
  const dd::DD t = dd::two_sum(r.lo, -lo);
  const dd::DD v = dd::two_sum(r.hi, t.hi);
  const double rest = v.lo + t.lo;
  if (rest == 0 && err == 0) return v.hi;
  if (v.hi != 0 && std::isfinite(v.hi) &&
      dd::inside_rounding(v.hi, rest, err + 0x1p-53 * std::fabs(rest), 0.5 * dd::ulp_of(v.hi)))
    return v.hi;
  return std::nullopt;
}

// Candidate k: a dtype value v of either sign with |v| in [0.55, 0.95) of the table's larger
// entry (a low-discrepancy sequence, so that the construction residuals vary), and its boundary
// (in E): the midpoint above v for rounded; for diff, got = v and got - M, M the midpoint above
// d1 ~ 0.375 ulp_d(got), d1 even or odd by k (which neighbour of M a tie goes to).
struct Target {
  Big e;
  double got = 0;
  bool ok = false;
};
Target target_of(Question q, Dtype d, double mag, int k) {
  const double frac = std::fmod(0.6180339887498949 * k, 1.0);
  const double v = round_to_dtype((k / 2 % 2 ? -1 : 1) * mag * (0.55 + 0.4 * frac), d);
  if (v == 0 || dd::is_power_of_two(v)) return {};
  if (q == Question::rounded) return {boundary_above(v, d).mid, 0, true};
  double d1 = 0.375 * ulp(v, d);
  if (k % 2) d1 = std::nextafter(d1, 1.0);
  return {Big(v) - (Big(d1) + Big(0.5 * dd::ulp_of(d1))), v, true};
}

// A boundary B of question q near 0.7 of the table's larger entry, then x with the MPFR path's
// unrounded value at B - D/2, D = fast - that value measured at B, so that (the fast path's
// deviation being locally stable) the fast value lies near B + D/2: the two straddle B. A witness
// is an x on which
//   |fast - MPFR| <= the stated bound (the bound holds),
//   |fast - MPFR| >  the reduced bound (the term is needed for it to hold), and
//   the certification run with the reduced bound accepts an answer that is not MPFR's.
// Candidates are scanned in order (deterministic); first construction residuals above 2^-58 |B|
// are skipped so that the final residual (~2^-53 of it) is below the deviations used here.
std::optional<Witness> find_witness(const Scenario& sc, Question q, Dtype d, const Oracle& fast,
                                    const Oracle& slow, int max_candidates) {
  const RopeSpec& s = sc.spec;
  const Rotation rf = fast.at({sc.m}), rs = slow.at({sc.m});
  const Table t = mpfr_table(s, sc.pair, sc.m);
  const auto [ia, ib] = s.pair(sc.pair);
  const auto xa = static_cast<std::size_t>(ia), xb = static_cast<std::size_t>(ib);
  const double mag = std::max(std::fabs(t.sc.d()), std::fabs(t.ss.d()));
  for (int k = 0; k < max_candidates; ++k) {
    const Target b = target_of(q, d, mag, k);
    if (!b.ok) continue;
    Big r0;
    const std::vector<double> x0 = aim(s, sc.pair, t, b.e, &r0);
    if (mpfr_cmp(abs(r0).v, (abs(b.e) * Big(0x1p-58)).v) > 0) continue;
    const auto f0 = rf.apply(x0.data()).fast_value(ia);
    if (!f0.valid) return std::nullopt;
    // The deviation of the fast value from the MPFR path's unrounded s cos x_a - s sin x_b (its
    // table's and the fast path's errors: locally stable); the MPFR path's final rounding is
    // not, but cannot cross a boundary that is a p-bit number (RN_p is monotone).
    const Big dev = Big(f0.hi) + Big(f0.lo) - (t.sc * Big(x0[xa]) - t.ss * Big(x0[xb]));
    const std::vector<double> x = aim(s, sc.pair, t, b.e - dev / Big(2.0));
    const ExactVector vf = rf.apply(x.data()), vs = rs.apply(x.data());
    const auto f = vf.fast_value(ia);
    const double gap = abs(Big(f.hi) + Big(f.lo) - Big(vs.mp(ia))).d();
    const double reduced = documented_bound(s, sc.pair, sc.m, x, sc.reduced);
    if (!(gap <= f.err && gap > reduced)) continue;
    const double mpfr_answer = q == Question::rounded ? vs.rounded(ia, d) : vs.diff(ia, b.got);
    const auto c = certify(q, d, b.got, f.hi, f.lo, reduced);
    if (c && *c != mpfr_answer && !(*c == 0 && mpfr_answer == 0))
      return Witness{x, b.got, mpfr_answer, *c};
  }
  return std::nullopt;
}

// For every dtype, a witness for at least one of the two questions (both where they exist: for
// rounded() into f32, f16, bf16 the certification's own allowance 2^-53 |delta| ~ 2^-78 |E| or
// more dwarfs the bound's terms at the production precision, so there only diff() can show them).
// The real oracle, which has the term, must defer on each witness and answer MPFR's value.
void expect_term_needed(const Scenario& sc) {
  const PrecisionGuard guard(sc.bits);
  const Oracle fast(sc.spec), slow(sc.spec, OracleMode::mpfr);
  const auto a = sc.spec.pair(sc.pair).first;
  for (Dtype d : kAllDtypes) {
    int found = 0;
    for (Question q : {Question::rounded, Question::diff}) {
      const auto w = find_witness(sc, q, d, fast, slow, 1 << 12);
      if (!w) continue;
      ++found;
      const char* what = q == Question::rounded ? "rounded" : "diff";
      const std::int64_t before = fast.fallbacks();
      const ExactVector v = fast.at({sc.m}).apply(w->x.data());
      const double ans = q == Question::rounded ? v.rounded(a, d) : v.diff(a, w->got);
      EXPECT_EQ(ans, w->mpfr_answer) << sc.term << " " << name(d) << " " << what;
      EXPECT_EQ(fast.fallbacks() - before, 1) << sc.term << " " << name(d) << " " << what;
    }
    EXPECT_GE(found, 1) << sc.term << ": no input needs the term for " << name(d);
  }
}

// The fast path's own error (2^-98.5 per unit of |x_a| + |x_b|): without it the bound is the MPFR
// path's rounding alone (~2^-158 here), below the fast value's real error (~2^-105).
TEST(OracleFastPathTermNeeded, ElementError) {
  Terms t;
  t.element = false;
  expect_term_needed(
      {"element error", make_spec(16, Layout::half, 10000, 1), 0, 3, default_bits(Dtype::f64), t});
}

// The MPFR path's angle RN_p(m theta): 2^-p |m| theta. At p = 128 and m = 2^62 - 1 it moves the
// MPFR value by up to ~2^-67 |x| from the fast one (which rotates by the unrounded angle).
TEST(OracleFastPathTermNeeded, MpfrAngleRounding) {
  Terms t;
  t.angle = false;
  expect_term_needed({"angle rounding", make_spec(16, Layout::half, 10000, 1), 1,
                      (std::int64_t{1} << 62) - 1, 128, t});
}

// The MPFR path's other roundings (sin_cos, s * cos, the fused sum: 4 2^-p): at p = 64 and a small
// angle (m = 1, the last pair's theta ~ 1.3e-6 at base 1e6) the angle term is ~2^-21 of it.
TEST(OracleFastPathTermNeeded, MpfrRoundings) {
  Terms t;
  t.mpfr_roundings = false;
  const RopeSpec s = make_spec(128, Layout::half, 1e6, 1);
  expect_term_needed({"MPFR roundings", s, s.n_pairs() - 1, 1, 64, t});
}

// The factor |s| (the bounds are relative to s |x|): with s = 3000.25 the fast value's error,
// ~2^-105 s |x|, is above 2^-98.5 |x|.
TEST(OracleFastPathTermNeeded, MagnitudeFactor) {
  Terms t;
  t.magnitude = false;
  expect_term_needed({"magnitude factor", make_spec(16, Layout::interleaved, 10000, 3000.25), 0,
                      12345, default_bits(Dtype::f64), t});
}

// The second element of the pair (|x_a| + |x_b|): with x_b carrying the magnitude and x_a only
// the residual, |x_a| alone is ~2^-50 of the scale of the error.
TEST(OracleFastPathTermNeeded, SecondElement) {
  Terms t;
  t.second_element = false;
  // Pair 0 at m = 11: |sin 11| = 0.99998 > |cos 11| = 0.0044, so x_b takes the magnitude.
  expect_term_needed({"second element", make_spec(16, Layout::half, 10000, 1), 0, 11,
                      default_bits(Dtype::f64), t});
}

// m = 0 with s != 1: cos = 1 and sin = 0 exactly on both paths, but the MPFR path still rounds
// s x_a (its fused sum at p bits). At p = 64, RN_p(s x_a) is up to 2^-p |s x_a| from s x_a, which
// the fast path has exactly (s = 3000.3 is a double); a bound of 0 there would certify the fast
// value's rounding. The witness: x_a with s x_a beyond a midpoint B of f64 (a 54-bit number, so a
// p-bit one) on its odd side by less than half B's p-bit spacing, so that the MPFR path's value is
// B itself and rounds to the even neighbour while the fast value rounds to the odd one. f64 only:
// for the narrower dtypes B is a double, and a fast value within 2^-54 |B| of it has B as its high
// word, whose candidate is MPFR's (the rounding test refuses it from the odd side).
TEST(OracleFastPathTermNeeded, PositionZeroWithMagnitude) {
  const PrecisionGuard guard(64);
  const int p = static_cast<int>(precision_bits());
  ASSERT_LE(p, 72);
  const Dtype d = Dtype::f64;
  const RopeSpec s = make_spec(16, Layout::interleaved, 10000, 3000.3);
  const Oracle fast(s), slow(s, OracleMode::mpfr);
  const Rotation rf = fast.at({0}), rs = slow.at({0});
  const Big sp(magnitude(s));
  const auto a = s.pair(0).first;
  Terms without;
  without.position_zero = false;
  std::optional<std::vector<double>> found;
  double v = 0.7 * 3000.3;
  for (int k = 0; k < (1 << 18) && !found; ++k, v += ulp(v, d)) {
    const Boundary bd = boundary_above(v, d);
    const double toward_odd = bd.odd > bd.even ? 1.0 : -1.0;
    std::vector<double> x(static_cast<std::size_t>(s.head_dim), 0.0);
    x[static_cast<std::size_t>(a)] = (bd.mid / sp).d();
    const Big off = (sp * Big(x[static_cast<std::size_t>(a)]) - bd.mid) * Big(toward_odd);
    // 2^-80 |B| < offset < 2^-(p+1) |B|: above 2^-53 of the fast side's distance to the boundary
    // (the certification's allowance for its own rounding), below half of B's p-bit spacing.
    const Big lo = abs(bd.mid) * Big(0x1p-80), hi = abs(bd.mid) * Big(std::ldexp(1.0, -p - 1));
    if (mpfr_cmp(off.v, lo.v) > 0 && mpfr_cmp(off.v, hi.v) < 0) found = x;
  }
  ASSERT_TRUE(found.has_value());
  const std::vector<double>& x = *found;
  const ExactVector vs = rs.apply(x.data());
  const double want = vs.rounded(a, d);
  const auto f = rf.apply(x.data()).fast_value(a);
  const Big gap = abs(Big(f.hi) + Big(f.lo) - Big(vs.mp(a)));
  EXPECT_LE(gap.d(), f.err);
  EXPECT_GT(gap.d(), documented_bound(s, 0, 0, x, without));
  const double c = round_to_dtype(f.hi, d);
  EXPECT_NE(c, want);
  const double delta = (f.hi - c) + f.lo;
  EXPECT_TRUE(dd::inside_rounding(c, delta, 0x1p-53 * std::fabs(delta), 0.5 * ulp(c, d)));
  const std::int64_t before = fast.fallbacks();
  EXPECT_EQ(rf.apply(x.data()).rounded(a, d), want);
  EXPECT_EQ(fast.fallbacks() - before, 1);
}

}  // namespace
}  // namespace ropecheck::reference
