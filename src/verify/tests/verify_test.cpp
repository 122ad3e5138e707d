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
  const Recorded i = record(s, {1, 2, 3, 4}, {kInf, 0.5, 0.5, 0.5}, token_head(1, 0));
  EXPECT_NE(i.summary.findings.front().what.find("error is infinite (got an infinite output)"),
            std::string::npos);
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
  // An all-zero vector: relative to the dtype's smallest normal, still finite.
  const Recorded zero = record(s, {0, 0, 0, 0}, {1e-30, 0, 0, 0}, token_head(0, 0));
  EXPECT_FALSE(zero.check.ok());
  EXPECT_TRUE(std::isfinite(zero.summary.max_error_u));
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
