// Unit tests of the reference's small numeric pieces: precision control, exact/parse/print,
// theta ladder endpoints, ulp and the rotation's shape, on hand-built cases whose answers follow
// from the definitions (not from the code under test). The error statistics of an output vector
// (verify::compare_vector) are tested in src/verify/tests.
#include "ropecheck/reference/reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ropecheck::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

RopeSpec make_spec(std::int64_t head_dim, std::int64_t rotary_dim, Layout layout,
                   double base = 10000.0, double scale = 1.0) {
  RopeSpec s;
  s.head_dim = head_dim;
  s.rotary_dim = rotary_dim;
  s.layout = layout;
  s.base = base;
  s.scale = scale;
  return s.normalized();
}

// Restores the process-wide precision after a test that changes it.
struct PrecisionGuard {
  unsigned saved = precision_bits();
  ~PrecisionGuard() { set_precision_bits(saved); }
};

TEST(ReferencePrecision, DefaultBitsFollowsTwoPPlusThirtyWithFloor160) {
  EXPECT_EQ(default_bits(Dtype::f64), 160u);  // 2*53+30 = 136 < 160
  EXPECT_EQ(default_bits(Dtype::f32), 160u);
  EXPECT_EQ(default_bits(Dtype::f16), 160u);
  EXPECT_EQ(default_bits(Dtype::bf16), 160u);
}

TEST(ReferencePrecision, SetPrecisionGivesSmallestBoostStepAtOrAboveRequest) {
  PrecisionGuard g;
  // Boost maps digits10 d to d*1000/301 + (1 or 2) bits; the steps are 3 or 4 bits apart, so the
  // actual precision is >= the request and less than 4 bits above it.
  for (unsigned b : {54u, 64u, 100u, 160u, 161u, 200u, 256u, 1000u}) {
    set_precision_bits(b);
    const unsigned got = precision_bits();
    EXPECT_GE(got, b);
    EXPECT_LT(got, b + 4) << "requested " << b;
    // A freshly computed value really carries that precision.
    Mp x = exact(1.0) / exact(3.0);
    EXPECT_EQ(mpfr_get_prec(x.backend().data()), static_cast<mpfr_prec_t>(got));
  }
}

TEST(ReferenceExact, DoublesAreExactIncludingSignedZeroAndSubnormals) {
  for (double v : {0.0, -0.0, 1.0, -2.5, 0.1, 1e300, 4.9406564584124654e-324, -kInf}) {
    Mp m = exact(v);
    EXPECT_EQ(mpfr_get_d(m.backend().data(), MPFR_RNDN), v);
    EXPECT_EQ(std::signbit(mpfr_get_d(m.backend().data(), MPFR_RNDN)), std::signbit(v));
  }
  // 0.1 as a double is not 1/10: exact() must not round to the decimal.
  EXPECT_NE(exact(0.1), parse_decimal("0.1"));
}

TEST(ReferenceParse, AcceptsIntegersDecimalsAndExponents) {
  EXPECT_EQ(parse_decimal("12"), exact(12.0));
  EXPECT_EQ(parse_decimal("-3.25"), exact(-3.25));
  EXPECT_EQ(parse_decimal("+0.5"), exact(0.5));
  EXPECT_EQ(parse_decimal("1e6"), exact(1e6));
  EXPECT_EQ(parse_decimal("1E+6"), exact(1e6));
  EXPECT_EQ(parse_decimal(".25"), exact(0.25));
  EXPECT_EQ(parse_decimal("7."), exact(7.0));
  EXPECT_EQ(parse_decimal("1099511627776"), exact(std::ldexp(1.0, 40)));
  // Same decimal value written two ways: both are its correct rounding, so they are equal.
  EXPECT_EQ(parse_decimal("-1234.25e-2"), parse_decimal("-12.3425"));
  // 1/10 at MP precision, not the double 0.1: 10 * it is 1 within one MP rounding.
  EXPECT_LT(abs(parse_decimal("0.1") * 10 - 1), exact(std::ldexp(1.0, -150)));
}

TEST(ReferenceParse, RejectsGarbage) {
  for (const char* bad : {"", " ", "abc", "1.2.3", "1e", "e5", "--1", "+-1", " 1", "1 ", "0x10",
                          "nan", "inf", "1,5", ".", "1e5.5", "12abc"})
    EXPECT_THROW(parse_decimal(bad), std::invalid_argument) << "'" << bad << "'";
}

TEST(ReferencePrint, SignificantDigitsAndFormat) {
  EXPECT_EQ(to_decimal(exact(-6.0), 5), "-6");
  EXPECT_EQ(to_decimal(parse_decimal("-6.0759938"), 5), "-6.076");
  EXPECT_EQ(to_decimal(parse_decimal("1") / 3, 10), "0.3333333333");
  EXPECT_EQ(to_decimal(exact(std::ldexp(1.0, 40)), 5), "1.0995e+12");
  EXPECT_THROW(to_decimal(exact(1.0), 0), std::invalid_argument);
}

TEST(ReferenceThetaLadder, PairZeroIsExactlyOneAndLastPairApproachesOneOverBase) {
  for (Layout l : {Layout::interleaved, Layout::half}) {
    const RopeSpec s = make_spec(128, 128, l, 500000.0);
    EXPECT_EQ(inv_freq(s, 0), Mp(1));  // exp(-0) = 1 exactly, no rounding involved
    // theta_63 = base^(-126/128) exactly = base^-1 * base^(1/64), computed independently with pow.
    const Mp expect = pow(exact(500000.0), Mp(-126) / 128);
    EXPECT_LT(abs(inv_freq(s, 63) - expect) / expect, exact(std::ldexp(1.0, -140)));
    EXPECT_THROW(inv_freq(s, 64), std::out_of_range);
    EXPECT_THROW(inv_freq(s, -1), std::out_of_range);
  }
}

TEST(ReferenceUlp, MatchesFormatDefinition) {
  EXPECT_EQ(ulp(1.0, Dtype::f16), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp(1.0, Dtype::bf16), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp(1.0, Dtype::f32), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp(1.0, Dtype::f64), std::ldexp(1.0, -52));
  EXPECT_EQ(ulp(-1.5, Dtype::f16), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp(65504.0, Dtype::f16), 32.0);
  EXPECT_EQ(ulp(kInf, Dtype::f16), 32.0);  // ulp at emax
  EXPECT_EQ(ulp(0.0, Dtype::f16), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp(std::ldexp(1.0, -20), Dtype::f16), std::ldexp(1.0, -24));  // subnormal range
  EXPECT_EQ(ulp(0.0, Dtype::f64), 4.9406564584124654e-324);
  EXPECT_EQ(ulp(std::ldexp(1.0, -126), Dtype::bf16), std::ldexp(1.0, -133));
}

TEST(ReferenceRotation, RejectsWrongInputLength) {
  const RopeSpec s = make_spec(4, 4, Layout::half);
  EXPECT_THROW(apply_dense(s, exact(1.0), {1.0, 2.0}), std::invalid_argument);
  EXPECT_THROW(apply_blocked(s, exact(1.0), {1.0, 2.0, 3.0, 4.0, 5.0}), std::invalid_argument);
}

TEST(ReferenceRotation, PassthroughDimsAreNotScaled) {
  const RopeSpec s = make_spec(5, 2, Layout::interleaved, 10000.0, 3.0);
  const MpMatrix r = rotation(s, exact(0.0));
  EXPECT_EQ(r(0, 0), Mp(3));
  EXPECT_EQ(r(1, 1), Mp(3));
  for (int j = 2; j < 5; ++j) EXPECT_EQ(r(j, j), Mp(1));
}

// ---- Scaling variants against HF's formulas written out here (transformers
// modeling_rope_utils: _compute_dynamic_ntk_parameters, get_mscale / _compute_yarn_parameters),
// evaluated in MP with pow/log (not the exp/log chain of reference.cpp). Agreement within
// 2^-(p - 20) relative: a few roundings at the working precision p, amplified by at most
// e ln(base') < 2^5 in the exponent (the margin the scaling tests use).
Mp rel_gap(const Mp& a, const Mp& b) { return abs(a - b) / abs(b); }
Mp mp_tol() { return ldexp(Mp(1), -static_cast<int>(precision_bits()) + 20); }

TEST(ReferenceScaling, DynamicNtkBaseIsHfFormula) {
  RopeSpec s;
  s.head_dim = 128;
  s.scaling.kind = ScalingKind::dynamic;
  s.scaling.factor = 2;
  s.scaling.max_position_embeddings = 4096;
  s.scaling.seq_len = 10000;
  const RopeSpec n = s.normalized();
  // base' = base (f L / L0 - (f - 1))^(d / (d - 2)), theta_j = base'^(-2j/d).
  const Mp t = Mp(2) * 10000 / 4096 - 1;
  const Mp base2 = Mp(10000) * pow(t, Mp(128) / 126);
  for (std::int64_t i : {1, 17, 40, 63}) {
    const auto [j, dim] = n.ladder(i);
    const Mp want = pow(base2, -Mp(2 * j) / dim);
    EXPECT_LT(rel_gap(inv_freq(n, i), want), mp_tol()) << "pair " << i;
  }
}

TEST(ReferenceScaling, YarnAttentionFactorIsHfGetMscale) {
  RopeSpec s;
  s.head_dim = 64;
  s.scaling.kind = ScalingKind::yarn;
  s.scaling.factor = 40;
  s.scaling.original_max_position_embeddings = 4096;
  // get_mscale(40) = 0.1 ln 40 + 1 (mscale 1), the decimal one tenth.
  const Mp one_tenth = Mp(1) / 10;
  EXPECT_LT(rel_gap(magnitude(s.normalized()), one_tenth * log(Mp(40)) + 1), mp_tol());
  // DeepSeek: get_mscale(f, mscale) / get_mscale(f, mscale_all_dim).
  s.scaling.mscale = 0.707;
  s.scaling.mscale_all_dim = 1;
  const Mp num = one_tenth * exact(0.707) * log(Mp(40)) + 1, den = one_tenth * log(Mp(40)) + 1;
  EXPECT_LT(rel_gap(magnitude(s.normalized()), num / den), mp_tol());
}

// With truncation the correction range is floor(low), ceil(high) (HF find_correction_range), then
// ramp_j = clamp((j - low) / (high - low), 0, 1) and theta'_j = theta_j / f * ramp + theta_j (1 -
// ramp): pairs at or below low keep theta_j, pairs at or above high get theta_j / f. low and high
// here from the core's f64 evaluation of the same formula (integers, the MP ones unless a
// correction dim sits within ~1e-13 of an integer, which it does not here).
TEST(ReferenceScaling, YarnTruncatedRampIsHfFormula) {
  RopeSpec s;
  s.head_dim = 128;
  s.scaling.kind = ScalingKind::yarn;
  s.scaling.factor = 8;
  s.scaling.original_max_position_embeddings = 4096;
  const RopeSpec n = s.normalized();
  ASSERT_TRUE(n.scaling.truncate);  // HF's default
  const auto [low, high] = yarn_correction_range_f64(n);
  ASSERT_EQ(low, std::floor(low));
  ASSERT_EQ(high, std::floor(high));
  ASSERT_LT(low, high);
  for (std::int64_t i = 0; i < n.n_pairs(); ++i) {
    const auto [j, dim] = n.ladder(i);
    const Mp theta = pow(Mp(10000), -Mp(2 * j) / dim);
    Mp ramp = (Mp(j) - Mp(low)) / (Mp(high) - Mp(low));
    if (ramp < 0) ramp = 0;
    if (ramp > 1) ramp = 1;
    const Mp want = theta / 8 * ramp + theta * (1 - ramp);
    EXPECT_LT(rel_gap(inv_freq(n, i), want), mp_tol()) << "pair " << i;
  }
}

// beta_fast == beta_slow without truncation makes low == high, and HF adds 0.001 to high
// (linear_ramp_factor: "prevent singularity"): the pair whose index lies within 0.001 above the
// common correction dim v gets ramp (j - v) / 0.001, strictly between 0 and 1; the others 0 or 1.
TEST(ReferenceScaling, YarnEqualCorrectionDimsUseHfGuard) {
  const double d = 128, orig = 4096, base = 10000, v_aim = 19.9995;
  RopeSpec s;
  s.head_dim = 128;
  s.scaling.kind = ScalingKind::yarn;
  s.scaling.factor = 8;
  s.scaling.original_max_position_embeddings = 4096;
  s.scaling.truncate = false;
  // v = d ln(orig / (beta 2 pi)) / (2 ln base) solved for beta at v_aim (then taken exactly).
  s.scaling.beta_fast = s.scaling.beta_slow =
      orig / (2 * M_PI) * std::exp(-2 * std::log(base) * v_aim / d);
  const RopeSpec n = s.normalized();
  const Mp two_pi = 8 * atan(Mp(1));
  const Mp v =
      Mp(128) * log(Mp(4096) / (exact(n.scaling.beta_fast) * two_pi)) / (2 * log(Mp(10000)));
  const Mp r20 = (Mp(20) - v) / exact(0.001);
  ASSERT_GT(r20, Mp(0.25));
  ASSERT_LT(r20, Mp(0.75));
  for (std::int64_t i : {19, 20, 21}) {
    const auto [j, dim] = n.ladder(i);
    ASSERT_EQ(j, i);
    const Mp theta = pow(Mp(10000), -Mp(2 * j) / dim);
    const Mp ramp = i == 19 ? Mp(0) : i == 21 ? Mp(1) : r20;
    const Mp want = theta / 8 * ramp + theta * (1 - ramp);
    EXPECT_LT(rel_gap(inv_freq(n, i), want), mp_tol()) << "pair " << i;
  }
}

}  // namespace
}  // namespace ropecheck::reference
