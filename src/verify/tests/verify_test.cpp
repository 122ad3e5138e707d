// Unit tests of the verification engine on hand-built cases whose answers follow from the
// definitions (not from the code under test): compare_vector's ULP statistics and pair figure
// (`eval`), and add_vector's located findings and maxima (`check`, `validate`).
#include "ropecheck/verify/verify.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

namespace ropecheck::verify {
namespace {

namespace ref = ropecheck::reference;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

RopeSpec make_spec(std::int64_t head_dim, std::int64_t rotary_dim, Layout layout) {
  RopeSpec s;
  s.head_dim = head_dim;
  s.rotary_dim = rotary_dim;
  s.layout = layout;
  return s.normalized();
}

// ---- compare_vector -----------------------------------------------------------------------------

TEST(VerifyCompareVector, CorrectlyRoundedOutputHasAtMostHalfUlpAndNoMiscounts) {
  const RopeSpec s = make_spec(6, 4, Layout::half);
  const std::vector<double> x = {1.0, -2.0, 0.5, 3.0, -0.0, 7.25};
  // Blocked, not dense: the dense product sums 1*(-0) with +0 products and returns +0, while
  // apply_blocked copies pass-through inputs (the kernels' contract is bit-for-bit copy).
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(3.0), x);
  const std::vector<double> got = ref::round_to(ex, Dtype::f16);
  const VectorError e = compare_vector(s, Dtype::f16, x, ex, got);
  EXPECT_LE(e.max_ulp, 0.5);
  EXPECT_EQ(e.not_correctly_rounded, 0);
  EXPECT_TRUE(e.passthrough_exact);
  // A correctly rounded pair is within u * ||exact pair|| = u * s * ||x pair|| per component,
  // so the pair error is at most sqrt(2) u relative: <= sqrt(2) in units of u.
  EXPECT_LE(e.max_pair_error_u, std::sqrt(2.0));
  EXPECT_GE(e.max_pair_index, 0);
}

TEST(VerifyCompareVector, OneUlpOffIsCountedAndMeasured) {
  const RopeSpec s = make_spec(2, 2, Layout::interleaved);
  const std::vector<double> x = {1.0, 0.0};
  const ref::MpVector ex = ref::apply_dense(s, ref::exact(1.0), x);  // (cos 1, sin 1)
  std::vector<double> got = ref::round_to(ex, Dtype::f32);
  got[1] = std::nextafter(static_cast<float>(got[1]), 2.0f);
  const VectorError e = compare_vector(s, Dtype::f32, x, ex, got);
  EXPECT_EQ(e.not_correctly_rounded, 1);
  EXPECT_EQ(e.max_ulp_index, 1);
  // |got - exact| lies in (0.5, 1.5] ulp after moving one ulp away from the correct rounding.
  EXPECT_GT(e.max_ulp, 0.5);
  EXPECT_LE(e.max_ulp, 1.5);
  EXPECT_GT(e.max_abs_error, 0.0);
}

TEST(VerifyCompareVector, NonFiniteOutputsAndZeroNormPairs) {
  const RopeSpec s = make_spec(4, 4, Layout::interleaved);
  const std::vector<double> x = {0.0, 0.0, 1.0, 1.0};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(5.0), x);
  std::vector<double> got = ref::round_to(ex, Dtype::f32);
  {
    VectorError e = compare_vector(s, Dtype::f32, x, ex, got);
    EXPECT_TRUE(std::isfinite(e.max_pair_error_u));
  }
  got[0] = std::ldexp(1.0, -149);  // zero input pair must give exactly zero
  {
    VectorError e = compare_vector(s, Dtype::f32, x, ex, got);
    EXPECT_EQ(e.max_pair_error_u, kInf);
    EXPECT_EQ(e.max_pair_index, 0);
  }
  got[0] = 0.0;
  got[3] = kNaN;
  {
    VectorError e = compare_vector(s, Dtype::f32, x, ex, got);
    EXPECT_EQ(e.max_ulp, kInf);
    EXPECT_EQ(e.max_ulp_index, 3);
    EXPECT_EQ(e.max_pair_error_u, kInf);
    EXPECT_EQ(e.max_pair_index, 1);
  }
}

TEST(VerifyCompareVector, PairFigureIsPairErrorU) {
  const RopeSpec s = make_spec(2, 2, Layout::interleaved);
  const std::vector<double> x = {0.75, -0.5};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(9.0), x);
  std::vector<double> got = ref::round_to(ex, Dtype::bf16);
  got[0] = std::nextafter(got[0], 10.0);  // any value: the figure must be the one formula's
  const double want = pair_error_u(static_cast<double>(ref::exact(got[0]) - ex(0)),
                                   static_cast<double>(ref::exact(got[1]) - ex(1)), x[0], x[1], 1.0,
                                   unit_roundoff(Dtype::bf16));
  EXPECT_EQ(compare_vector(s, Dtype::bf16, x, ex, got).max_pair_error_u, want);
}

TEST(VerifyCompareVector, PassthroughIsBitExactIncludingSignOfZeroAndNaN) {
  const RopeSpec s = make_spec(5, 2, Layout::interleaved);
  const std::vector<double> x = {1.0, 2.0, -0.0, kNaN, 3.0};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(1.0), x);
  std::vector<double> got = ref::round_to(ex, Dtype::f32);
  EXPECT_TRUE(std::signbit(got[2]));
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_TRUE(compare_vector(s, Dtype::f32, x, ex, got).passthrough_exact);
  got[2] = 0.0;  // +0 for -0: same value, different bits
  EXPECT_FALSE(compare_vector(s, Dtype::f32, x, ex, got).passthrough_exact);
  got[2] = -0.0;
  got[3] = 0.0;  // NaN must stay NaN
  EXPECT_FALSE(compare_vector(s, Dtype::f32, x, ex, got).passthrough_exact);
}

// The ULP figure divides by the ulp of round(exact) (CORE-MATH's convention), which differs from
// the ulp of exact or of got only across a power of two: the spacing below 2^k is half the spacing
// above. exact = 2^k - 2^(k-p-2) (a quarter of the spacing below; it rounds to 2^k, whose ulp is
// 2^(k-p+1)); got = 2^k, its lower neighbour 2^k - 2^(k-p), its upper neighbour 2^k + 2^(k-p+1):
//   got       |got - exact|      / ulp(2^k)   / ulp(got)   / ulp(exact) = 2^(k-p)
//   2^k       2^(k-p-2)          1/8          1/8          1/4
//   below     3 2^(k-p-2)        3/8          3/4          3/4
//   above     9 2^(k-p-2)        9/8          9/8          9/4
// All exact in double, so the figures are compared with ==. (For f64 the "ulp of exact" mistake
// made by converting exact to a double is the same as the right one: RN_f64(exact) is
// round(exact).)
TEST(VerifyCompareVector, UlpFigureAtAPowerOfTwoUsesTheUlpOfTheRoundedExactValue) {
  const RopeSpec s = make_spec(2, 2, Layout::interleaved);
  const std::vector<double> x = {1.0, 0.0};
  for (Dtype d : kAllDtypes) {
    const int p = traits(d).digits;
    for (int k : {0, 3, -5})
      for (double sign : {1.0, -1.0}) {
        const double top = sign * std::ldexp(1.0, k);
        ref::MpVector ex(2);
        ex(0) = ref::exact(top) - ref::exact(sign * std::ldexp(1.0, k - p - 2));
        ex(1) = ref::exact(0.0);
        ASSERT_EQ(ref::round_to(ex(0), d), top) << name(d);
        const struct {
          double got, want;
        } cases[] = {{top, 1.0 / 8},
                     {top - sign * std::ldexp(1.0, k - p), 3.0 / 8},
                     {top + sign * std::ldexp(1.0, k - p + 1), 9.0 / 8}};
        for (const auto& c : cases) {
          const VectorError e = compare_vector(s, d, x, ex, {c.got, 0.0});
          EXPECT_EQ(e.max_ulp, c.want) << name(d) << " k " << k << " got " << c.got;
          EXPECT_EQ(e.max_ulp_index, 0);
        }
      }
  }
}

TEST(VerifyCompareVector, RejectsWrongSizes) {
  const RopeSpec s = make_spec(4, 4, Layout::half);
  const std::vector<double> x = {1, 2, 3, 4};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(1.0), x);
  EXPECT_THROW(compare_vector(s, Dtype::f32, x, ex, {1, 2, 3}), std::invalid_argument);
}

// ---- add_vector ---------------------------------------------------------------------------------

// The common production policy (HF rotate_half in f32).
Policy f32_policy() {
  Policy p;
  p.angle = p.table = p.arithmetic = Dtype::f32;
  p.recipe = AngleRecipe::hf_f32;
  return p;
}

struct Recorded {
  Summary summary;
  VectorCheck check;
};

// One f32 vector at position 7 through PairChecker, check_vector and add_vector.
Recorded record(const RopeSpec& s, const std::vector<double>& x, std::vector<double> got,
                const Location& at) {
  const PairChecker c(f32_policy(), s, Dtype::f32);
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(7.0), x);
  for (std::size_t j = 0; j < got.size(); ++j)
    if (got[j] == 0.5) got[j] = ref::round_to(ex(static_cast<Eigen::Index>(j)), Dtype::f32);
  Recorded r;
  r.check = check_vector(c, {7}, x.data(), got.data(), ex);
  add_vector(r.summary, c, r.check, at, x.data(), got.data(), ex);
  return r;
}

Location token_head(std::int64_t token, std::int64_t head) {
  Location at;
  at.token = token;
  at.position = {7};
  at.head = head;
  return at;
}

// 0.5 in `got` stands for the correctly rounded output (record() fills it in).
TEST(VerifyAddVector, CorrectOutputCountsEveryPairAndFindsNothing) {
  const RopeSpec s = make_spec(6, 4, Layout::half);
  const Recorded r = record(s, {1, 2, 3, 4, 5, 6}, {0.5, 0.5, 0.5, 0.5, 5, 6}, token_head(2, 1));
  EXPECT_TRUE(r.check.ok());
  EXPECT_EQ(r.summary.vectors, 1);
  EXPECT_EQ(r.summary.pairs, 2);
  EXPECT_TRUE(r.summary.passed());
  EXPECT_TRUE(r.summary.any);
  // A maximum's location names the pair, not its elements.
  EXPECT_EQ(r.summary.max_error_at.text().rfind("token 2 (position 7), head 1, pair ", 0), 0u);
  EXPECT_EQ(r.summary.max_error_at.elem_a, -1);
}

TEST(VerifyAddVector, WrongPairIsLocatedWithElementsAndExplained) {
  const RopeSpec s = make_spec(4, 4, Layout::half);  // pair 1 = elements (1, 3)
  const Recorded r = record(s, {1, 2, 3, 4}, {0.5, 0.5, 0.5, -0.25}, token_head(0, 0));
  ASSERT_EQ(r.summary.failures, 1);
  const Finding& f = r.summary.findings.front();
  EXPECT_EQ(f.kind, FindingKind::exceeds_bound);
  EXPECT_EQ(f.message().rfind("token 0 (position 7), head 0, pair 1 (elements 1, 3): error ", 0),
            0u)
      << f.message();
  EXPECT_NE(f.message().find(" u > bound "), std::string::npos) << f.message();
  EXPECT_NE(f.message().find("from x = (2, 4)"), std::string::npos) << f.message();
  // The same comparison relative, with the pair's scale s||x_pair|| = ||(2, 4)||.
  EXPECT_NE(f.message().find("(relative "), std::string::npos) << f.message();
  EXPECT_NE(f.message().find("; scale s||x|| = 4.472)"), std::string::npos) << f.message();
}

TEST(VerifyAddVector, NaNOutputIsSaidAsSuchAndCountsAsInfinite) {
  const RopeSpec s = make_spec(4, 4, Layout::half);
  const Recorded r = record(s, {1, 2, 3, 4}, {kNaN, 0.5, 0.5, 0.5}, token_head(1, 0));
  ASSERT_EQ(r.summary.failures, 1);
  const Finding& f = r.summary.findings.front();
  EXPECT_EQ(f.kind, FindingKind::non_finite_output);
  EXPECT_NE(f.what.find("error is NaN (got a NaN output); got (nan, "), std::string::npos)
      << f.what;
  EXPECT_EQ(r.summary.max_error_u, kInf);
  // +inf where the exact value is ~1: read as an overflow (the values >= T that round to it), so
  // a finite error far beyond the bound, said as such.
  const Recorded i = record(s, {1, 2, 3, 4}, {kInf, 0.5, 0.5, 0.5}, token_head(1, 0));
  ASSERT_EQ(i.summary.failures, 1);
  EXPECT_EQ(i.summary.findings.front().kind, FindingKind::non_finite_output);
  EXPECT_NE(i.summary.findings.front().what.find("read as an overflow"), std::string::npos)
      << i.summary.findings.front().what;
  EXPECT_TRUE(std::isfinite(i.summary.max_error_u));
  // Under output_rounding toward_zero no finite value rounds to inf: the error is infinite.
  Policy rz = f32_policy();
  rz.output_rounding = Rounding::toward_zero;
  const PairChecker c(rz, s, Dtype::f32);
  const std::vector<double> x = {1, 2, 3, 4}, got = {kInf, 0, 0, 0};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(7.0), x);
  Summary z;
  add_vector(z, c, check_vector(c, {7}, x.data(), got.data(), ex), token_head(1, 0), x.data(),
             got.data(), ex);
  ASSERT_FALSE(z.findings.empty());
  EXPECT_EQ(z.findings.front().kind, FindingKind::non_finite_output);
  EXPECT_NE(z.findings.front().what.find("error is infinite (got an infinite output)"),
            std::string::npos)
      << z.findings.front().what;
}

TEST(VerifyAddVector, ChangedPassThroughIsAFindingBeforeThePairs) {
  const RopeSpec s = make_spec(5, 2, Layout::interleaved);
  const Recorded r = record(s, {1, 2, -0.0, 4, 5}, {0.5, 0.5, 0.0, 4, 5}, token_head(0, 0));
  ASSERT_EQ(r.summary.failures, 1);
  const Finding& f = r.summary.findings.front();
  EXPECT_EQ(f.kind, FindingKind::passthrough_changed);
  // Same value, different bits: a change all the same.
  EXPECT_EQ(f.message(),
            "token 0 (position 7), head 0: pass-through element 2 changed: got 0, input -0");
}

TEST(VerifyAddVector, KeepsTheFirstFindingsAndCountsAll) {
  const RopeSpec s = make_spec(8, 8, Layout::interleaved);
  Summary all;
  all.keep = 2;
  const PairChecker c(f32_policy(), s, Dtype::f32);
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8}, got = {9, 9, 9, 9, 9, 9, 9, 9};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(7.0), x);
  add_vector(all, c, check_vector(c, {7}, x.data(), got.data(), ex), token_head(0, 0), x.data(),
             got.data(), ex);
  EXPECT_EQ(all.failures, 4);
  ASSERT_EQ(all.findings.size(), 2u);
  EXPECT_EQ(all.findings[1].where.pair, 1);
}

// ---- zero input pairs: absolute verdict, finite figures
// ------------------------------------------

// A zero input pair's exact output is 0: the verdict is absolute (bound_abs), and the error in u is
// relative to the vector's scaled norm, finite (never the inf of a division by the pair's 0 norm).
TEST(VerifyZeroPair, CorrectZeroPairPassesAndAWrongOneFailsWithAFiniteError) {
  const RopeSpec s = make_spec(4, 4, Layout::interleaved);  // pair 0 = elements (0, 1)
  const Recorded ok = record(s, {0, 0, 3, 4}, {0, -0.0, 0.5, 0.5}, token_head(0, 0));
  EXPECT_TRUE(ok.check.ok());
  EXPECT_EQ(ok.check.pairs[0].error_u, 0.0);
  EXPECT_TRUE(std::isfinite(ok.summary.max_error_u));
  // The broken input: 1e-3 moved into the zero pair (a pairing or stride bug).
  const Recorded bad = record(s, {0, 0, 3, 4}, {1e-3, 0, 0.5, 0.5}, token_head(0, 0));
  ASSERT_FALSE(bad.check.ok());
  const PairCheck& p = bad.check.pairs[0];
  EXPECT_FALSE(p.within());
  EXPECT_TRUE(std::isfinite(p.error_u));
  // Relative to s ||x|| = 5: 1e-3 / 5 / 2^-24.
  EXPECT_NEAR(p.error_u, 1e-3 / 5 / std::ldexp(1.0, -24), 1.0);
  ASSERT_EQ(bad.summary.findings.size(), 1u);
  EXPECT_EQ(bad.summary.findings[0].kind, FindingKind::exceeds_bound);
  EXPECT_NE(bad.summary.findings[0].what.find("the input pair is zero"), std::string::npos);
  // +inf in the zero pair: an overflow read as a value (T - 0), out of bound, its figure finite.
  const Recorded inf = record(s, {0, 0, 3, 4}, {kInf, 0, 0.5, 0.5}, token_head(0, 0));
  EXPECT_FALSE(inf.check.pairs[0].within());
  EXPECT_TRUE(std::isfinite(inf.check.pairs[0].error_u));
  EXPECT_TRUE(std::isfinite(inf.summary.max_error_u));
  // An all-zero vector: relative to the dtype's smallest normal, still finite.
  const Recorded zero = record(s, {0, 0, 0, 0}, {1e-30, 0, 0, 0}, token_head(0, 0));
  EXPECT_FALSE(zero.check.ok());
  EXPECT_TRUE(std::isfinite(zero.summary.max_error_u));
}

// The exact rotation at pos, rounded once into f32.
std::vector<double> rounded(const RopeSpec& s, const std::vector<double>& x, double pos) {
  return ref::round_to(ref::apply_blocked(s, ref::exact(pos), x), Dtype::f32);
}

// ---- an odd head_dim at full rotary: the last element passes through -------------------------

// head_dim 5 at full rotary is rotary_dim 4 (normalized): element 4 is in no pair and must keep
// its bits, in every layout and through both exact types; a check that skipped pass-through dims
// whenever rotary_dim is head_dim rounded down would pass the changed vector.
TEST(VerifyAddVector, PassThroughOfAnOddHeadDimAtFullRotaryIsCompared) {
  for (Layout l : {Layout::interleaved, Layout::half}) {
    const RopeSpec s = make_spec(5, 0, l);
    ASSERT_EQ(s.rotary_dim, 4);
    const Recorded ok = record(s, {1, 2, 3, 4, 5}, {0.5, 0.5, 0.5, 0.5, 5}, token_head(0, 0));
    EXPECT_TRUE(ok.check.ok()) << name(l);
    const Recorded bad = record(s, {1, 2, 3, 4, 5}, {0.5, 0.5, 0.5, 0.5, 6}, token_head(0, 0));
    ASSERT_EQ(bad.check.passthrough_changed, std::vector<std::int64_t>{4}) << name(l);
    ASSERT_EQ(bad.summary.failures, 1);
    EXPECT_EQ(bad.summary.findings[0].message(),
              "token 0 (position 7), head 0: pass-through element 4 changed: got 6, input 5");
    // The oracle's exact type and the per-position bounds (the scan's path).
    const PairChecker c(f32_policy(), s, Dtype::f32);
    const ref::Oracle oracle(s);
    const std::vector<double> x = {1, 2, 3, 4, 5};
    std::vector<double> got = rounded(s, x, 7);
    got[4] = 6;
    const ref::ExactVector e = oracle.at({7}).apply(x.data());
    EXPECT_EQ(check_vector(c, {7}, x.data(), got.data(), e).passthrough_changed.size(), 1u);
    std::vector<bounds::PairBound> at7;
    c.bounds_at({7}, at7);
    VectorCheck v;
    check_vector(v, c, at7, x.data(), got.data(), e);
    EXPECT_FALSE(v.ok());
    // eval's statistics see it too.
    EXPECT_FALSE(compare_vector(s, Dtype::f32, x, ref::apply_blocked(s, ref::exact(7.0), x), got)
                     .passthrough_exact);
  }
}

// ---- overflow is a value ------------------------------------------------------------------------

// One pair at position 0 with magnitude s: the exact output is s (x_a, 0) exactly (R(0) = s I), so
// the choice of s puts it past, short of or far from the overflow threshold T = max + ulp(max)/2
// (output_diff in verify.hpp). The same check from MP values and from the oracle.
struct AtZero {
  PairCheck mp, fast;
};
AtZero check_at_zero(Dtype d, double scale, double got_a, Rounding r = Rounding::nearest_even,
                     double sign = 1) {
  RopeSpec s = make_spec(2, 2, Layout::interleaved);
  s.scale = scale;
  s = s.normalized();
  Policy p = f32_policy();
  p.output_rounding = r;
  const PairChecker c(p, s, d);
  const std::vector<double> x = {sign * max_finite(d), 0.0}, got = {got_a, 0.0};
  const ref::Oracle oracle(s);
  const ref::ExactVector e = oracle.at({0}).apply(x.data());
  return {check_vector(c, {0}, x.data(), got.data(), ref::apply_blocked(s, ref::exact(0.0), x))
              .pairs[0],
          check_vector(c, {0}, x.data(), got.data(), e).pairs[0]};
}

constexpr Dtype kOverflowDtypes[] = {Dtype::f16, Dtype::bf16, Dtype::f32};

// Both paths must agree, bit for bit, on every figure.
void expect_same(const AtZero& z) {
  EXPECT_EQ(z.mp.error_abs, z.fast.error_abs);
  EXPECT_EQ(z.mp.within(), z.fast.within());
  EXPECT_EQ(z.mp.overflowed, z.fast.overflowed);
}

TEST(VerifyOverflow, TheCorrectlyRoundedInfinityPassesWithFiniteFigures) {
  for (Dtype d : kOverflowDtypes) {
    const double max = max_finite(d);
    // exact 1.5 max: its one correct rounding is +inf.
    const AtZero z = check_at_zero(d, 1.5, kInf);
    expect_same(z);
    EXPECT_TRUE(z.mp.within()) << name(d);
    EXPECT_EQ(z.mp.error_abs, 0.0) << name(d);
    EXPECT_EQ(z.mp.error_u, 0.0);
    EXPECT_EQ(z.mp.utilization, 0.0);
    EXPECT_EQ(z.mp.overflowed, 1);
    EXPECT_FALSE(z.mp.non_finite_fault());
    // The same below: -1.5 max rounds to -inf.
    const AtZero n = check_at_zero(d, 1.5, -kInf, Rounding::nearest_even, -1);
    expect_same(n);
    EXPECT_TRUE(n.mp.within()) << name(d);
    EXPECT_EQ(n.mp.error_abs, 0.0);
    EXPECT_FALSE(check_at_zero(d, 1.5, kInf, Rounding::nearest_even, -1).mp.within());
    // ... and a finite output there is far from it: max - 1.5 max, judged (and failed) as such.
    const AtZero f = check_at_zero(d, 1.5, max);
    expect_same(f);
    EXPECT_FALSE(f.mp.within()) << name(d);
    EXPECT_EQ(f.mp.error_abs, 0.5 * max);
    EXPECT_EQ(f.mp.overflowed, 0);
  }
}

TEST(VerifyOverflow, TheWrongInfinityFailsWithAFiniteFigure) {
  for (Dtype d : kOverflowDtypes) {
    const AtZero z = check_at_zero(d, 1.5, -kInf);
    expect_same(z);
    EXPECT_FALSE(z.mp.within()) << name(d);
    // -T - 1.5 max: the distance from the exact value to the values that round to -inf.
    const double T = max_finite(d) + ref::ulp(max_finite(d), d) / 2;
    EXPECT_DOUBLE_EQ(z.mp.error_abs, T + 1.5 * max_finite(d));
    EXPECT_TRUE(std::isfinite(z.mp.error_u));
    EXPECT_FALSE(z.mp.non_finite_fault());
  }
}

TEST(VerifyOverflow, AnInfinityWhereTheRoundingIsFiniteFails) {
  for (Dtype d : kOverflowDtypes) {
    const AtZero z = check_at_zero(d, 0.25, kInf);  // exact max/4, well inside the range
    expect_same(z);
    EXPECT_FALSE(z.mp.within()) << name(d);
    const double T = max_finite(d) + ref::ulp(max_finite(d), d) / 2;
    EXPECT_DOUBLE_EQ(z.mp.error_abs, T - 0.25 * max_finite(d));
  }
}

// Near T the bound decides, both ways: an exact value just past T may be stored as the largest
// finite value, one just short of T as +inf, when a value within the bound lies on that side.
TEST(VerifyOverflow, NearTheThresholdTheBoundDecides) {
  for (Dtype d : kOverflowDtypes) {
    const double max = max_finite(d), half_ulp = ref::ulp(max, d) / 2, T = max + half_ulp;
    const double B = check_at_zero(d, 1.0, max).mp.bound_abs;  // the bound at |exact| ~ T
    // The bound covers at least the half ulp of the output's own rounding.
    ASSERT_GT(B, half_ulp) << name(d);
    // Past T by (B - half_ulp)/2: max is within the bound (|max - exact| < B).
    const double past = T + (B - half_ulp) / 2;
    const AtZero f = check_at_zero(d, past / max, max);
    expect_same(f);
    EXPECT_TRUE(f.mp.within()) << name(d) << " finite max for exact " << past;
    EXPECT_NEAR(f.mp.error_abs, (B + half_ulp) / 2, 1e-9 * B);
    EXPECT_TRUE(check_at_zero(d, past / max, kInf).mp.within());  // its correct rounding
    // Short of T by B/2: +inf is within the bound (T - exact = B/2), counted as an overflow.
    const AtZero i = check_at_zero(d, (T - B / 2) / max, kInf);
    expect_same(i);
    EXPECT_TRUE(i.mp.within()) << name(d);
    EXPECT_NEAR(i.mp.error_abs, B / 2, 1e-9 * B);
    EXPECT_EQ(i.mp.overflowed, 1);
    // Short of T by 2B: +inf is beyond it.
    const AtZero far = check_at_zero(d, (T - 2 * B) / max, kInf);
    expect_same(far);
    EXPECT_FALSE(far.mp.within()) << name(d);
    EXPECT_NEAR(far.mp.error_abs, 2 * B, 1e-9 * B);
  }
}

// Toward zero saturates at +-max and never makes an infinity.
TEST(VerifyOverflow, TowardZeroSaturatesAndNeverOverflows) {
  const Rounding rz = Rounding::toward_zero;
  for (Dtype d : kOverflowDtypes) {
    const AtZero sat = check_at_zero(d, 1.5, max_finite(d), rz);
    expect_same(sat);
    EXPECT_TRUE(sat.mp.within()) << name(d);
    EXPECT_EQ(sat.mp.error_abs, 0.0);
    EXPECT_EQ(sat.mp.overflowed, 1);
    const AtZero inf = check_at_zero(d, 1.5, kInf, rz);
    EXPECT_FALSE(inf.mp.within()) << name(d);
    EXPECT_TRUE(inf.mp.non_finite_fault());
    EXPECT_TRUE(inf.fast.non_finite_fault());
    // max where the exact value is max/4: not a saturation, an error of 3/4 max.
    const AtZero in = check_at_zero(d, 0.25, max_finite(d), rz);
    EXPECT_FALSE(in.mp.within());
    EXPECT_EQ(in.mp.overflowed, 0);
  }
}

// The running summary counts overflows apart and keeps finite figures; a failing one is a
// non_finite_output finding with a finite error that says how the infinity was read. eval's
// statistics read it the same.
TEST(VerifyOverflow, SummaryAndEvalFiguresStayFinite) {
  RopeSpec s = make_spec(4, 4, Layout::interleaved);
  s.scale = 1.5;
  s = s.normalized();
  const PairChecker c(f32_policy(), s, Dtype::f16);
  const std::vector<double> x = {65504, 0, 1, 2};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(0.0), x);
  std::vector<double> got = ref::round_to(ex, Dtype::f16);
  ASSERT_EQ(got[0], kInf);  // the one correct rounding of 1.5 x 65504
  Summary ok;
  add_vector(ok, c, check_vector(c, {0}, x.data(), got.data(), ex), token_head(0, 0), x.data(),
             got.data(), ex);
  EXPECT_TRUE(ok.passed());
  EXPECT_EQ(ok.overflowed, 1);
  EXPECT_TRUE(std::isfinite(ok.max_error_u));
  const VectorError ev = compare_vector(s, Dtype::f16, x, ex, got);
  EXPECT_EQ(ev.max_ulp, 0.0);
  EXPECT_EQ(ev.not_correctly_rounded, 0);
  EXPECT_EQ(ev.max_pair_error_u, 0.0);
  got[0] = -kInf;
  Summary bad;
  add_vector(bad, c, check_vector(c, {0}, x.data(), got.data(), ex), token_head(0, 0), x.data(),
             got.data(), ex);
  ASSERT_EQ(bad.failures, 1);
  EXPECT_EQ(bad.findings[0].kind, FindingKind::non_finite_output);
  EXPECT_NE(bad.findings[0].what.find(" u > bound "), std::string::npos) << bad.findings[0].what;
  EXPECT_NE(bad.findings[0].what.find("got (-inf, "), std::string::npos) << bad.findings[0].what;
  EXPECT_NE(bad.findings[0].what.find("read as an overflow"), std::string::npos);
  EXPECT_TRUE(std::isfinite(bad.max_error_u));
  const VectorError evb = compare_vector(s, Dtype::f16, x, ex, got);
  EXPECT_TRUE(std::isfinite(evb.max_ulp));
  EXPECT_GT(evb.max_ulp, 1000.0);
  EXPECT_EQ(evb.not_correctly_rounded, 1);
}

// ---- the oracle's fast path gives the same checks as MP values ---------------------------------

// Every figure of check_vector / add_vector from a reference::ExactVector must be the double the
// MpVector path gives: outputs correctly rounded, a few ulps off, from the wrong position (found
// out of bound, explained from MP values), NaN; f64 (which falls back) and the 2-byte dtypes.
TEST(VerifyOracle, ExactVectorChecksEqualMpVectorChecks) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> ulps(-3, 3), pick(0, 15);
  long pairs = 0, failures = 0;
  for (Layout l : {Layout::interleaved, Layout::half}) {
    const RopeSpec s = make_spec(64, 48, l);
    const ref::Oracle oracle(s);
    for (Dtype d : kAllDtypes) {
      const PairChecker c(f32_policy(), s, d);
      Summary fast, slow;
      for (std::int64_t m : {std::int64_t{3}, std::int64_t{40000}, std::int64_t{1} << 33}) {
        const ref::Rotation rot = oracle.at({m});
        for (int v = 0; v < 8; ++v) {
          std::vector<double> x(64), got(64);
          for (auto& e : x) e = round_to_dtype(nd(rng), d);
          const ref::MpVector ex = ref::apply_blocked(s, ref::Mp(m), x);
          const ref::MpVector off = ref::apply_blocked(s, ref::Mp(m + 1), x);
          for (std::size_t j = 0; j < 64; ++j) {
            const double r = ref::round_to(ex(static_cast<Eigen::Index>(j)), d);
            got[j] = r + ulps(rng) * ref::ulp(r, d);
            if (pick(rng) == 0) got[j] = ref::round_to(off(static_cast<Eigen::Index>(j)), d);
            if (s.is_passthrough(static_cast<std::int64_t>(j))) got[j] = x[j];
          }
          if (v == 5) got[3] = kNaN;
          const ref::ExactVector e = rot.apply(x.data());
          const VectorCheck a = check_vector(c, {m}, x.data(), got.data(), e);
          const VectorCheck b = check_vector(c, {m}, x.data(), got.data(), ex);
          std::vector<bounds::PairBound> at_m;  // the per-position bounds variant
          c.bounds_at({m}, at_m);
          VectorCheck a2;
          check_vector(a2, c, at_m, x.data(), got.data(), e);
          ASSERT_EQ(a.pairs.size(), b.pairs.size());
          ASSERT_EQ(a2.pairs.size(), b.pairs.size());
          for (std::size_t i = 0; i < a.pairs.size(); ++i) {
            const PairCheck &p = a.pairs[i], &q = b.pairs[i];
            for (auto [u, w] : {std::pair{p.error_abs, q.error_abs},
                                {p.error_u, q.error_u},
                                {p.bound_abs, q.bound_abs},
                                {p.utilization, q.utilization}})
              EXPECT_EQ(std::bit_cast<std::uint64_t>(u), std::bit_cast<std::uint64_t>(w))
                  << name(d) << " position " << m << " pair " << i << ": " << u << " vs " << w;
            EXPECT_EQ(p.within(), q.within());
            EXPECT_EQ(std::bit_cast<std::uint64_t>(a2.pairs[i].utilization),
                      std::bit_cast<std::uint64_t>(q.utilization));
            ++pairs;
          }
          add_vector(fast, c, a, token_head(v, 0), x.data(), got.data(), e);
          add_vector(slow, c, b, token_head(v, 0), x.data(), got.data(), ex);
        }
      }
      EXPECT_EQ(fast.failures, slow.failures);
      failures += slow.failures;
      EXPECT_EQ(fast.max_error_u, slow.max_error_u);
      EXPECT_EQ(fast.max_error_at.text(), slow.max_error_at.text());
      ASSERT_EQ(fast.findings.size(), slow.findings.size());
      for (std::size_t k = 0; k < fast.findings.size(); ++k)
        EXPECT_EQ(fast.findings[k].message(), slow.findings[k].message());
    }
  }
  EXPECT_GT(pairs, 4000);
  EXPECT_GT(failures, 20);  // the wrong-position and NaN outputs were judged, not just passed
}

}  // namespace
}  // namespace ropecheck::verify
