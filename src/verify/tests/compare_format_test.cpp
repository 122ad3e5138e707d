// compare_vector's element statistics and pair skip, and the digits and bits of numbers in
// messages: expectations from the contracts in verify.hpp, computed here in
// MP (reference::exact) or from IEEE facts, never read back from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "ropecheck/reference/reference.hpp"
#include "ropecheck/verify/verify.hpp"

namespace ropecheck::verify {
namespace {

namespace ref = ropecheck::reference;

RopeSpec spec(std::int64_t head_dim, std::int64_t rotary_dim, Layout layout) {
  RopeSpec s;
  s.head_dim = head_dim;
  s.rotary_dim = rotary_dim;
  s.layout = layout;
  return s.normalized();
}

Policy f32_all() {  // as HF computes in f32
  Policy p;
  p.angle = p.table = p.arithmetic = Dtype::f32;
  p.recipe = AngleRecipe::hf_f32;
  return p;
}

// max_abs_error is the maximum over the elements (not the last one's): element 0 three ulps off,
// the others correctly rounded.
TEST(VerifyCompareCases, MaxAbsErrorIsTheMaximumOverElements) {
  const RopeSpec s = spec(4, 4, Layout::interleaved);
  const std::vector<double> x = {0.75, -1.5, 2.25, 0.5};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(5.0), x);
  std::vector<double> got = ref::round_to(ex, Dtype::f32);
  float g0 = static_cast<float>(got[0]);
  for (int k = 0; k < 3; ++k) g0 = std::nextafter(g0, 10.0f);
  got[0] = g0;
  const double want = static_cast<double>(abs(ref::exact(got[0]) - ex(0)));
  const VectorError e = compare_vector(s, Dtype::f32, x, ex, got);
  EXPECT_EQ(e.max_abs_error, want);
  EXPECT_EQ(e.max_ulp_index, 0);
  EXPECT_EQ(e.not_correctly_rounded, 1);
}

// A NaN input element: its exact output is NaN and a NaN output is its correct rounding (not
// counted as wrongly rounded); its pair has no relative error and is skipped, so the pair figure
// is the other pair's (finite, index 1).
TEST(VerifyCompareCases, NonFiniteInputIsRoundedAsItsClassAndItsPairSkipped) {
  const RopeSpec s = spec(4, 4, Layout::interleaved);
  const std::vector<double> x = {std::numeric_limits<double>::quiet_NaN(), 1.0, 0.5, -0.25};
  const ref::MpVector ex = ref::apply_blocked(s, ref::exact(3.0), x);
  const std::vector<double> got = ref::round_to(ex, Dtype::f32);
  ASSERT_TRUE(std::isnan(got[0]));
  const VectorError e = compare_vector(s, Dtype::f32, x, ex, got);
  EXPECT_EQ(e.not_correctly_rounded, 0);
  EXPECT_EQ(e.max_pair_index, 1);
  EXPECT_TRUE(std::isfinite(e.max_pair_error_u));
  EXPECT_LE(e.max_pair_error_u, std::sqrt(2.0));  // correctly rounded pair: <= sqrt(2) u
}

// 17 significant digits tell any two doubles apart (verify.hpp): neighbours at 1 and at 1e300.
TEST(VerifyFormat, NeighbouringDoublesAreWrittenApart) {
  for (double a : {1.0, 1e300, 3.0e-310, -7.25}) {
    const double b = std::nextafter(a, std::numeric_limits<double>::infinity());
    const auto [sa, sb] = fmt_apart(a, b);
    EXPECT_NE(sa, sb) << a;
    EXPECT_EQ(std::strtod(sa.c_str(), nullptr), a)
        << sa;  // written apart and still each one's own value
    EXPECT_EQ(std::strtod(sb.c_str(), nullptr), b) << sb;
  }
}

// An exact value that is not a double, at a recorded output equal to its double: the two are
// written from their exact values until they differ.
TEST(VerifyFormat, GotAndAnExactValueBeyondDoublePrecisionAreWrittenApart) {
  const ref::Mp expected = ref::exact(1.0) + ref::exact(std::ldexp(1.0, -70));
  ASSERT_EQ(static_cast<double>(expected), 1.0);
  const auto [g, e] = fmt_got_expected(1.0, expected);
  EXPECT_NE(g, e);
  EXPECT_EQ(fmt_got_expected(1.0, ref::exact(1.0)).first,
            fmt_got_expected(1.0, ref::exact(1.0)).second);
}

// Two NaNs print alike: the changed pass-through element is then told apart by its bits.
TEST(VerifyFormat, PassThroughNaNsAreToldApartByTheirBits) {
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  const std::string m = explain_passthrough(5, -qnan, qnan, Dtype::f32);
  EXPECT_NE(m.find("element 5"), std::string::npos) << m;
  EXPECT_NE(m.find("0xffc00000"), std::string::npos) << m;
  EXPECT_NE(m.find("0x7fc00000"), std::string::npos) << m;
}

}  // namespace
}  // namespace ropecheck::verify
