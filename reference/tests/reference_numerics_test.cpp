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

}  // namespace
}  // namespace ropecheck::reference
