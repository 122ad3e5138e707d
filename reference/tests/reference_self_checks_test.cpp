// Self-checks of the dense reference at MP precision: identities R_m must satisfy whatever the
// spec, checked on random specs (odd head_dim, partial rotary, both layouts, many bases) and
// awkward positions (0, 1, 1e6, 2^31, 2^40, negative, fractional).
//
// Error model used by every bound below. P = precision_bits(); every MPFR operation rounds to
// nearest, so each contributes a relative error <= 2^-P. Entries of R are RN(s * RN(cos)) and
// RN(s * RN(sin)) (relative error <= 2 * 2^-P each); Eigen's dense products add exact zeros
// (exact) and at most two non-zero terms per entry (two product roundings and one sum rounding).
// Any such product of two R's is therefore within about 8 * 2^-P * s^2 of its exact value. Where
// two different angles meet (compositions), the angles RN(m * theta~) themselves differ from the
// exact sums by at most 2^-P * |m| * theta~ each, with theta~ <= theta_0 = 1 (base > 1), and cos
// and sin are 1-Lipschitz, so a position-aware term 2^-P * (|a| + |b| + |a +- b|) is added. We
// gate at 2^-(P-20) times those scales: a 2^17-fold margin over the ~8 * 2^-P derived constant,
// still ~2^-140 at the default 161 bits, while any real defect (a wrong sign, pair, angle or
// layout) produces residuals of order 1e-3 or more.
#include "ropecheck/reference/reference.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <mpfr.h>

#include <cmath>
#include <ostream>
#include <tuple>

namespace ropecheck {
// RapidCheck prints counterexamples through ADL-found showValue.
inline void showValue(const RopeSpec& s, std::ostream& os) {
  os << describe(s) << " (rotary_dim=" << s.rotary_dim << ")";
}
}  // namespace ropecheck

namespace ropecheck::reference {
namespace {

namespace gen = rc::gen;

// gen::inRange shrinks its range with the size parameter; pin the size so the full range is used.
template <class T>
rc::Gen<T> full_range(T lo, T hi_exclusive) {
  return gen::resize(100, gen::inRange<T>(lo, hi_exclusive));
}

rc::Gen<double> gen_base() {
  // Log-uniform in [2, 1e7] next to the bases real models use.
  return gen::oneOf(gen::element(10000.0, 500000.0, 1e6),
                    gen::map(full_range<int>(0, 1 << 20),
                             [](int k) { return 2.0 * std::pow(5e6, k / double(1 << 20)); }));
}

// Positions as doubles holding exact values (the reference takes the double's exact value).
rc::Gen<double> gen_position() {
  return gen::oneOf(gen::element(0.0, 1.0, -1.0, 1e6, std::ldexp(1.0, 31), std::ldexp(1.0, 40),
                                 -std::ldexp(1.0, 40), 0.5, -1234.25),
                    gen::map(full_range<int>(-(1 << 20), 1 << 20), [](int k) { return double(k); }),
                    gen::map(full_range<int>(-(1 << 24), 1 << 24), [](int k) { return k / 8.0; }));
}

rc::Gen<double> gen_scale() { return gen::element(1.0, 0.5, 2.0, 0.7071067811865476, 1.3); }

// Random normalized spec: head_dim in [1, max_head_dim] (odd ones included), rotary_dim either
// full or a random even partial width, either layout.
rc::Gen<RopeSpec> gen_spec(std::int64_t max_head_dim, bool random_scale) {
  return gen::exec([=] {
    RopeSpec s;
    s.head_dim = *full_range<std::int64_t>(1, max_head_dim + 1);
    const std::int64_t full = s.head_dim - s.head_dim % 2;
    const bool partial = full >= 2 && *gen::arbitrary<bool>();
    s.rotary_dim = partial ? 2 * *full_range<std::int64_t>(1, full / 2 + 1) : full;
    s.layout = *gen::element(Layout::interleaved, Layout::half);
    s.base = *gen_base();
    s.scale = random_scale ? *gen_scale() : 1.0;
    return s.normalized();
  });
}

unsigned prec() { return precision_bits(); }
Mp pow2(int e) { return exact(std::ldexp(1.0, e)); }
Mp gate() { return pow2(-static_cast<int>(prec()) + 20); }

Mp max_abs(const MpMatrix& m) {
  Mp r = 0;
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) r = std::max(r, Mp(abs(m(i, j))));
  return r;
}

void require_below(const Mp& residual, const Mp& bound, const std::string& what) {
  if (!(residual <= bound))
    RC_FAIL(what + ": residual " + to_decimal(residual, 6) + " > bound " + to_decimal(bound, 6));
}

// diag(s^2 on rotated dims, 1 on pass-through dims).
MpMatrix expected_gram(const RopeSpec& spec) {
  MpMatrix d = MpMatrix::Zero(spec.head_dim, spec.head_dim);
  const Mp s = exact(spec.scale);
  for (std::int64_t j = 0; j < spec.head_dim; ++j) d(j, j) = j < spec.rotary_dim ? s * s : Mp(1);
  return d;
}

// P with P(sigma(k), k) = 1, sigma(2i) = i, sigma(2i+1) = i + rd/2, identity on pass-through.
// Then (P x)[sigma(k)] = x[k]: P applied to an interleaved-ordered vector gathers its even rotated
// entries, then its odd ones, i.e. yields the half-ordered vector. Hence
// (P^T R_half P)[k][l] = R_half[sigma(k)][sigma(l)] = R_interleaved[k][l]: convert to half order,
// rotate there, convert back.
MpMatrix gather_even_then_odd(const RopeSpec& spec) {
  MpMatrix p = MpMatrix::Zero(spec.head_dim, spec.head_dim);
  const std::int64_t h = spec.rotary_dim / 2;
  for (std::int64_t k = 0; k < spec.head_dim; ++k) {
    const std::int64_t sigma = k >= spec.rotary_dim ? k : (k % 2 == 0 ? k / 2 : k / 2 + h);
    p(sigma, k) = 1;
  }
  return p;
}

TEST(ReferenceSelfCheck, GatherPermutationOrdersEvensThenOdds) {
  RopeSpec s;
  s.head_dim = 7;
  s.rotary_dim = 6;
  s = s.normalized();
  MpVector x(7);
  for (int j = 0; j < 7; ++j) x(j) = j;
  const MpVector y = gather_even_then_odd(s) * x;
  const int want[7] = {0, 2, 4, 1, 3, 5, 6};
  for (int j = 0; j < 7; ++j) EXPECT_EQ(y(j), Mp(want[j])) << j;
}

RC_GTEST_PROP(ReferenceSelfCheck, PreservesNorm, ()) {
  // R^T R = s^2 I on rotated dims, I on pass-through dims.
  const RopeSpec spec = *gen_spec(64, /*random_scale=*/true);
  const double m = *gen_position();
  const MpMatrix r = rotation(spec, exact(m));
  const Mp s2 = exact(spec.scale) * exact(spec.scale);
  const MpMatrix res = MpMatrix(r.transpose() * r) - expected_gram(spec);
  require_below(max_abs(res), gate() * std::max(s2, Mp(1)), "R^T R - s^2 I");
}

RC_GTEST_PROP(ReferenceSelfCheck, ZeroPositionIsIdentity, ()) {
  // Exact, not approximate: MPFR's sin(0) = 0 and cos(0) = 1 exactly, and s = 1.
  const RopeSpec spec = *gen_spec(64, /*random_scale=*/false);
  const MpMatrix r = rotation(spec, exact(0.0));
  RC_ASSERT(r == MpMatrix(MpMatrix::Identity(spec.head_dim, spec.head_dim)));
  RC_ASSERT(r == rotation(spec, exact(-0.0)));
}

RC_GTEST_PROP(ReferenceSelfCheck, ComposesAdditively, ()) {
  // R(a) R(b) = R(a + b), s = 1; a + b is exact in MP (doubles of <= 2^40 with 1/8 steps).
  const RopeSpec spec = *gen_spec(64, /*random_scale=*/false);
  const double a = *gen_position(), b = *gen_position();
  const Mp ma = exact(a), mb = exact(b), mab = ma + mb;
  const MpMatrix res = MpMatrix(rotation(spec, ma) * rotation(spec, mb)) - rotation(spec, mab);
  const Mp angle_scale = abs(ma) + abs(mb) + abs(mab);  // times theta_0 = 1
  require_below(max_abs(res), gate() * (1 + angle_scale), "R(a)R(b) - R(a+b)");
}

RC_GTEST_PROP(ReferenceSelfCheck, LayoutsArePermutations, ()) {
  // P^T R_half P = R_interleaved with P = gather_even_then_odd (see there). Exact: both layouts
  // compute the same theta_i, angle, cos, sin and s * (.) for pair i, and the permutation
  // products only multiply by 0 or 1 and add exact zeros.
  RopeSpec half = *gen_spec(64, /*random_scale=*/true);
  half.layout = Layout::half;
  RopeSpec inter = half;
  inter.layout = Layout::interleaved;
  const Mp m = exact(*gen_position());
  const MpMatrix p = gather_even_then_odd(half);
  const MpMatrix permuted = p.transpose() * rotation(half, m) * p;
  RC_ASSERT(permuted == rotation(inter, m));
}

RC_GTEST_PROP(ReferenceSelfCheck, ScoresDependOnlyOnOffset, ()) {
  // R_m^T R_n = R_{n-m}, s = 1.
  const RopeSpec spec = *gen_spec(64, /*random_scale=*/false);
  const Mp m = exact(*gen_position()), n = exact(*gen_position());
  const MpMatrix res =
      MpMatrix(rotation(spec, m).transpose() * rotation(spec, n)) - rotation(spec, n - m);
  const Mp angle_scale = abs(m) + abs(n) + abs(n - m);
  require_below(max_abs(res), gate() * (1 + angle_scale), "R_m^T R_n - R_{n-m}");
}

rc::Gen<double> gen_element() {
  return gen::oneOf(gen::element(0.0, -0.0, 1.0, -1.0, 65504.0),
                    gen::apply([](int k, int e) { return std::ldexp(double(k), e); },
                               full_range<int>(-(1 << 24), 1 << 24), full_range<int>(-40, 20)));
}

// Returns "" when blocked and dense agree, else a description of the first disagreement.
std::string blocked_vs_dense(const RopeSpec& spec, const Mp& m, const std::vector<double>& x) {
  // Both evaluate s(x_a c - x_b sn), s(x_a sn + x_b c) from the same correctly rounded c, sn, with
  // a handful of roundings each: |dense - blocked| <= ~8 * 2^-P * s * (|x_a| + |x_b|).
  const MpVector dense = apply_dense(spec, m, x);
  const MpVector blocked = apply_blocked(spec, m, x);
  const Mp s = exact(spec.scale);
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    const Mp bound = gate() * s * (abs(exact(x[a])) + abs(exact(x[b])));
    for (std::int64_t j : {a, b}) {
      const Mp res = abs(dense(j) - blocked(j));
      if (!(res <= bound))
        return "element " + std::to_string(j) + ": |dense - blocked| = " + to_decimal(res, 6) +
               " > " + to_decimal(bound, 6);
    }
  }
  // Pass-through: 1 * x_j plus exact zeros, exactly x_j in both.
  for (std::int64_t j = spec.rotary_dim; j < spec.head_dim; ++j)
    if (dense(j) != exact(x[j]) || blocked(j) != exact(x[j]))
      return "pass-through element " + std::to_string(j) + " changed";
  return "";
}

RC_GTEST_PROP(ReferenceSelfCheck, BlockedMatchesDense, ()) {
  const RopeSpec spec = *gen_spec(64, /*random_scale=*/true);
  const Mp m = exact(*gen_position());
  const auto x = *gen::container<std::vector<double>>(spec.head_dim, gen_element());
  const std::string msg = blocked_vs_dense(spec, m, x);
  if (!msg.empty()) RC_FAIL(msg);
}

TEST(ReferenceSelfCheck, BlockedMatchesDenseAtHeadDim128) {
  // One full-size case per layout outside RapidCheck (dense is O(d^2) per vector).
  for (Layout l : {Layout::interleaved, Layout::half}) {
    RopeSpec spec;
    spec.head_dim = 128;
    spec.layout = l;
    spec.base = 500000.0;
    spec.scale = 1.3;
    spec = spec.normalized();
    std::vector<double> x(128);
    for (int j = 0; j < 128; ++j) x[j] = std::ldexp(double((j * 7919) % 2003 - 1001), -(j % 9));
    EXPECT_EQ(blocked_vs_dense(spec, parse_decimal("123456.75"), x), "") << name(l);
  }
}

}  // namespace
}  // namespace ropecheck::reference

// ---- the fast paths against the definition ---------------------------------------------------
namespace ropecheck::reference {
namespace {

bool same_mp(const Mp& a, const Mp& b) {
  return (a == b && std::signbit(a.convert_to<double>()) == std::signbit(b.convert_to<double>())) ||
         (boost::multiprecision::isnan(a) && boost::multiprecision::isnan(b));
}

// apply_blocked takes its block entries from the same computation as rotation(): with a unit
// input e_a, output a is fmms(s cos, 1, s sin, 0) = s cos exactly (one rounding of an exact
// value that is already at precision P), so the entries must be rotation()'s bit for bit.
TEST(ReferenceSelfCheck, BlockedEntriesAreTheDenseEntries) {
  for (Layout l : {Layout::interleaved, Layout::half}) {
    RopeSpec spec;
    spec.head_dim = 11;
    spec.rotary_dim = 8;
    spec.layout = l;
    spec.base = 500000.0;
    spec.scale = 0.7;
    spec = spec.normalized();
    for (const char* m : {"0", "1", "-3", "1000000", "2147483648", "0.5", "1e22"}) {
      const Mp pos = parse_decimal(m);
      const MpMatrix r = rotation(spec, pos);
      for (std::int64_t j = 0; j < spec.head_dim; ++j) {
        std::vector<double> e(static_cast<std::size_t>(spec.head_dim), 0.0);
        e[static_cast<std::size_t>(j)] = 1.0;
        const MpVector col = apply_blocked(spec, pos, e);
        for (std::int64_t k = 0; k < spec.head_dim; ++k)
          EXPECT_TRUE(col(k) == r(k, j)) << name(l) << " m=" << m << " R(" << k << "," << j << ")";
      }
    }
  }
}

// The cache returns exactly what apply_blocked computes, across hits, misses, evictions (more
// distinct positions than kTrigCacheEntries), several specs and a precision change.
TEST(ReferenceSelfCheck, CachedIsBlockedBitForBit) {
  std::vector<RopeSpec> specs;
  for (auto [hd, rd, l, base, scale] : {std::tuple{128, 128, Layout::interleaved, 10000.0, 1.0},
                                        {128, 128, Layout::half, 10000.0, 1.0},
                                        {37, 30, Layout::half, 500000.0, 1.25}}) {
    RopeSpec s;
    s.head_dim = hd;
    s.rotary_dim = rd;
    s.layout = l;
    s.base = base;
    s.scale = scale;
    specs.push_back(s.normalized());
  }
  std::vector<double> x(128);
  for (int j = 0; j < 128; ++j) x[j] = std::ldexp(double((j * 7919) % 2003 - 1001), -(j % 9));
  const unsigned bits0 = precision_bits();
  int checked = 0;
  for (unsigned bits : {bits0, 200u}) {
    set_precision_bits(bits);
    for (int round = 0; round < 2; ++round)
      for (std::int64_t k = 0; k < static_cast<std::int64_t>(kTrigCacheEntries) + 10; k += 3)
        for (const RopeSpec& s : specs) {
          const std::vector<double> xs(x.begin(), x.begin() + s.head_dim);
          const Mp m = exact(static_cast<double>(k * 977 - 5000));
          const MpVector c = apply_cached(s, m, xs), b = apply_blocked(s, m, xs);
          for (std::int64_t j = 0; j < s.head_dim; ++j) {
            ASSERT_TRUE(same_mp(c(j), b(j))) << describe(s) << " k=" << k << " j=" << j;
            ASSERT_EQ(mpfr_get_prec(c(j).backend().data()),
                      static_cast<mpfr_prec_t>(precision_bits()));
          }
          ++checked;
        }
  }
  set_precision_bits(bits0);
  EXPECT_GT(checked, 100);
}

// The backward's exact value: the properties and `check` take s R_m^T g as the rotation at -m.
// Each angle is the MP product m theta'_i (negation exact), MPFR's sin is odd and cos even to the
// bit, so the two are equal exactly, for every layout, scaling variant, axis and magnitude. A
// wrong identity (e.g. a variant whose angle is not odd in m) would show here as a difference.
TEST(ReferenceSelfCheck, TransposeIsTheRotationAtNegatedPositions) {
  std::vector<RopeSpec> specs;
  for (Layout l : {Layout::interleaved, Layout::half, Layout::proportional})
    for (ScalingKind k :
         {ScalingKind::none, ScalingKind::linear, ScalingKind::dynamic, ScalingKind::yarn,
          ScalingKind::llama3, ScalingKind::freq_factors, ScalingKind::longrope}) {
      RopeSpec s;
      s.head_dim = 64;
      s.rotary_dim = l == Layout::proportional ? 32 : 48;
      s.layout = l;
      s.base = 500000.0;
      s.scale = 0.75;
      s.scaling = example_scaling(k, s.rotary_dim / 2);
      specs.push_back(s.normalized());
    }
  for (auto [l, sections] : {std::pair{Layout::mrope, std::vector<std::int64_t>{4, 6, 6}},
                             std::pair{Layout::imrope, std::vector<std::int64_t>{4, 6, 6}},
                             std::pair{Layout::axial, std::vector<std::int64_t>{8, 8}}}) {
    RopeSpec s;
    s.head_dim = 32;
    s.layout = l;
    s.sections = sections;
    s.scale = 1.3;
    specs.push_back(s.normalized());
  }
  int checked = 0;
  for (const RopeSpec& s : specs) {
    std::vector<double> g(static_cast<std::size_t>(s.head_dim));
    for (std::int64_t j = 0; j < s.head_dim; ++j)
      g[j] = std::ldexp(double((j * 7919) % 2003 - 1001), -(j % 9));
    for (double m : {0.0, 1.0, 4095.0, 131071.0, 1e9}) {
      Positions p, neg;
      for (std::int64_t a = 0; a < s.n_axes(); ++a) {
        p.push_back(exact(m + 7.0 * a));
        neg.push_back(-exact(m + 7.0 * a));
      }
      const MpVector t = apply_dense_transpose(s, p, g), r = apply_dense(s, neg, g);
      for (std::int64_t j = 0; j < s.head_dim; ++j)
        ASSERT_TRUE(t(j) == r(j)) << describe(s) << " m=" << m << " j=" << j;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 * (21 + 3));
}

}  // namespace
}  // namespace ropecheck::reference
