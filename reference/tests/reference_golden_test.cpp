// Golden tests from hand-worked examples (each stated above its test) and one literature value.
// The expected numbers are worked out by hand and written to the digits shown, not outputs of
// this code; each tolerance is half a unit in the last written place (they are roundings of the
// true values) plus the MP error, which is negligible next to it.
#include "ropecheck/reference/reference.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

namespace ropecheck::reference {
namespace {

namespace gen = rc::gen;

Mp dec(const char* s) { return parse_decimal(s); }
Mp pow2(int e) { return exact(std::ldexp(1.0, e)); }
// Residual gate for identities that hold exactly in real arithmetic; see the per-test derivation.
Mp gate() { return pow2(-static_cast<int>(precision_bits()) + 20); }

RopeSpec dim8_half_spec() {
  RopeSpec s;
  s.head_dim = 8;
  s.base = 10000.0;
  s.layout = Layout::half;
  return s.normalized();
}

// Worked example A: dim 8, base 10000, HF rotate_half layout, tokens at positions 0 and 1 holding 1..8
// and 9..16.
TEST(ReferenceGolden, Dim8ThetaLadderIsPowersOfTen) {
  // theta_j = 10000^(-2j/8) = 10^-j exactly in real arithmetic. MP error: ln(10000) (1 rounding),
  // times 2j/8 (2 roundings), exp (1 rounding, relative error amplified by |exponent| <= 6.9):
  // < 16 * 2^-P relative, far inside 2^-(P-20).
  const RopeSpec s = dim8_half_spec();
  const char* want[4] = {"1", "0.1", "0.01", "0.001"};
  for (int j = 0; j < 4; ++j) {
    const Mp t = inv_freq(s, j);
    EXPECT_LE(abs(t - dec(want[j])), gate() * dec(want[j]))
        << "theta_" << j << " = " << to_decimal(t, 40);
  }
  EXPECT_EQ(inv_freq(s, 0), Mp(1));
}

TEST(ReferenceGolden, Dim8CosSinAtPositionOneAsPrinted) {
  // Read cos/sin off R_1 itself (half layout: pair j is (j, j+4), R(j,j) = cos, R(j+4,j) = sin),
  // so the layout's placement is checked too. Printed with 5 decimals (7 for the 0.9999995 and
  // 0.0010000 entries): tolerance = half a unit in that place.
  const RopeSpec s = dim8_half_spec();
  const MpMatrix r = rotation(s, exact(1.0));
  struct Printed {
    const char* value;
    const char* half_unit;
  };
  const Printed cos_p[4] = {
      {"0.54030", "5e-6"}, {"0.99500", "5e-6"}, {"0.99995", "5e-6"}, {"0.9999995", "5e-8"}};
  const Printed sin_p[4] = {
      {"0.84147", "5e-6"}, {"0.09983", "5e-6"}, {"0.01000", "5e-6"}, {"0.0010000", "5e-8"}};
  for (int j = 0; j < 4; ++j) {
    EXPECT_LE(abs(r(j, j) - dec(cos_p[j].value)), dec(cos_p[j].half_unit)) << "cos pair " << j;
    EXPECT_LE(abs(r(j + 4, j) - dec(sin_p[j].value)), dec(sin_p[j].half_unit)) << "sin pair " << j;
    EXPECT_EQ(r(j + 4, j + 4), r(j, j));
    EXPECT_EQ(r(j, j + 4), -r(j + 4, j));
  }
}

TEST(ReferenceGolden, Dim8RotatedTokens) {
  const RopeSpec s = dim8_half_spec();
  // Token 0 (m = 0) is unchanged, exactly.
  const std::vector<double> t0 = {1, 2, 3, 4, 5, 6, 7, 8};
  const MpVector y0 = apply_dense(s, exact(0.0), t0);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y0(j), exact(t0[j]));
  // Token 1 (m = 1): printed with 3 decimals, so |true - printed| <= 5e-4.
  const std::vector<double> t1 = {9, 10, 11, 12, 13, 14, 15, 16};
  const char* want[8] = {"-6.076", "8.552",  "10.849", "11.984",
                         "14.597", "14.928", "15.109", "16.012"};
  for (const MpVector& y : {apply_dense(s, exact(1.0), t1), apply_blocked(s, exact(1.0), t1)})
    for (int j = 0; j < 8; ++j)
      EXPECT_LE(abs(y(j) - dec(want[j])), dec("5e-4")) << j << ": " << to_decimal(y(j), 12);
}

// Worked example B: a 2-D toy where q = k is a unit vector, Q at position 2 and K at position 5 are 3
// apart, the relative angle is 60 degrees and the score is cos(60 deg) = 0.50; shifting both by
// 18 (to 20 and 23) leaves it unchanged. With head_dim 2 the only theta is theta_0 = 1 whatever
// the base, so the example's theta = pi/9 rad per position is realised by feeding the reference the
// fractional positions m * pi/9 (computed in MP): angle = (m pi/9) * 1. Exact answer: 1/2.
TEST(ReferenceGolden, ScoreAtSixtyDegreesIsOneHalf) {
  RopeSpec s;
  s.head_dim = 2;
  s = s.normalized();
  const Mp theta = boost::multiprecision::acos(Mp(-1)) / 9;  // pi/9
  const std::vector<std::vector<double>> units = {{1, 0}, {0, 1}, {-1, 0}, {0.6, 0.8}};
  for (const auto& q : units) {
    // q = k, so the score formula (ScoreFormula below) gives score = ||q||^2 cos(3 theta) (the sin term cancels).
    const Mp norm2 = exact(q[0]) * exact(q[0]) + exact(q[1]) * exact(q[1]);
    for (auto [m, n] : {std::pair{2, 5}, std::pair{20, 23}}) {
      const MpVector qm = apply_dense(s, theta * m, q);
      const MpVector kn = apply_dense(s, theta * n, q);
      const Mp score = qm.dot(kn);
      // Angles ~ 23 pi/9 < 9 carry ~ 4 roundings each (pi, /9, *m, exact *1) -> absolute error
      // < 40 * 2^-P; trig, products and the dot add a few 2^-P: well inside 2^-(P-20).
      EXPECT_LE(abs(score - norm2 / 2), gate()) << "q=(" << q[0] << "," << q[1] << ") m=" << m
                                                << " n=" << n << " score " << to_decimal(score, 30);
      if (q[0] == 1) {
        EXPECT_EQ(to_decimal(score, 2), "0.5");  // as printed: 0.50
      }
    }
  }
}

// Score formula: (R_m q) . (R_n k) = (q1k1 + q2k2) cos((m-n) theta) + (q1k2 - q2k1) sin((m-n) theta),
// checked on random q, k, m, n and theta. theta is a real theta_i of a random spec (pair i of a
// random head_dim/base/layout); q and k live in that pair's dims (all others 0), so the score is
// exactly the 2-D one and the pair placement is exercised too.
RC_GTEST_PROP(ReferenceGolden, ScoreFormula, ()) {
  RopeSpec s;
  s.head_dim = *gen::resize(100, gen::inRange<std::int64_t>(2, 65));
  s.layout = *gen::element(Layout::interleaved, Layout::half);
  s.base = *gen::element(10000.0, 500000.0, 1e6, 1234.5);
  s = s.normalized();
  const std::int64_t i = *gen::resize(100, gen::inRange<std::int64_t>(0, s.n_pairs()));
  const auto [a, b] = s.pair(i);
  auto component = gen::map(gen::resize(100, gen::inRange(-(1 << 20), 1 << 20)),
                            [](int v) { return std::ldexp(double(v), -10); });
  const double q1 = *component, q2 = *component, k1 = *component, k2 = *component;
  auto position = gen::oneOf(
      gen::map(gen::resize(100, gen::inRange(-(1 << 20), 1 << 20)), [](int v) { return v / 4.0; }),
      gen::element(0.0, 1e6, std::ldexp(1.0, 31), -std::ldexp(1.0, 40)));
  const Mp m = exact(*position), n = exact(*position);

  std::vector<double> q(s.head_dim, 0.0), k(s.head_dim, 0.0);
  q[a] = q1, q[b] = q2, k[a] = k1, k[b] = k2;
  const Mp lhs = apply_dense(s, m, q).dot(apply_dense(s, n, k));

  const Mp theta = inv_freq(s, i);
  const Mp d = (m - n) * theta;
  const Mp Q1 = exact(q1), Q2 = exact(q2), K1 = exact(k1), K2 = exact(k2);
  const Mp rhs = (Q1 * K1 + Q2 * K2) * cos(d) + (Q1 * K2 - Q2 * K1) * sin(d);

  // Both sides use the same rounded theta~; their angles RN(m theta~), RN(n theta~) and
  // RN((m-n) theta~) differ from exact by <= 2^-P |.| theta~ each (theta~ <= 1), and cos/sin are
  // 1-Lipschitz, so |lhs - rhs| <= ||q|| ||k|| 2^-P (c + |m| + |n| + |m - n|) with c ~ 10 for
  // the remaining trig, product and sum roundings. Gate: 2^-(P-20) times that scale.
  const Mp qk = sqrt(Q1 * Q1 + Q2 * Q2) * sqrt(K1 * K1 + K2 * K2);
  const Mp bound = gate() * qk * (1 + abs(m) + abs(n) + abs(m - n));
  const Mp res = abs(lhs - rhs);
  if (!(res <= bound))
    RC_FAIL("|lhs - rhs| = " + to_decimal(res, 6) + " > " + to_decimal(bound, 6) + " for " +
            describe(s) + " pair " + std::to_string(i));
}

// Huge-argument trig: the angle at position 1e22 for pair 0 is exactly 1e22 rad (theta_0 = 1,
// 1e22 is a double). sin(1e22) = -0.8522008497671888017727058937530293682618... is the classic
// argument-reduction test value (K. C. Ng, "Argument reduction for huge arguments: good to the
// last bit", 1992). Printed to 40 decimals: tolerance 5e-41 plus MP error (~1e-48).
TEST(ReferenceGolden, HugePositionTrigIsCorrect) {
  RopeSpec s;
  s.head_dim = 2;
  s = s.normalized();
  const MpMatrix r = rotation(s, exact(1e22));
  EXPECT_LE(abs(r(1, 0) - dec("-0.8522008497671888017727058937530293682618")), dec("6e-41"))
      << to_decimal(r(1, 0), 45);
  EXPECT_EQ(r(0, 1), -r(1, 0));
}

}  // namespace
}  // namespace ropecheck::reference
