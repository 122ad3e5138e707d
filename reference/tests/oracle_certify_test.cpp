// The contract of the fast path's rounding test (detail::certify_difference, certify_rounding),
// tested on its own: for a fast value hi + lo with bound err, a certified answer must be the
// answer of EVERY true value v in [hi + lo - err, hi + lo + err]. The end-to-end tests cannot
// reach the edge of that interval (the fast path's real error is far below err), so here
// (got, hi, lo, err) are built directly: the exact residual rho (got - (hi + lo) - candidate, or
// hi + lo - candidate) is not a double, so the function's rest / delta is a rounded addition, and
// err is set to each critical value (boundary distance -/+ rho, toward and away from zero, at and
// away from powers of two) and its neighbours, so that an edge of the interval sits within 2^-50
// half-ulps of a boundary (the count of such certified cases is asserted: the test must reach the
// edge). The truth at both edges and the centre is MPFR's (exact sums at 2048 bits, one rounding).
// Killed by: toward-zero gap from a power of two taken as the full half-ulp, diff's rounding test
// against a whole ulp, rounded() without err. Not killed, and equivalent (proof in oracle.cpp at
// certify_difference): dropping the 2^-53 |rest| or 2^-53 |delta| allowance.
#include "precision_guard.hpp"
#include "ropecheck/reference/oracle.hpp"

#include <gtest/gtest.h>
#include <mpfr.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace ropecheck::reference {
namespace {

struct Big {  // 2048 bits: every sum below is exact
  mpfr_t v;
  Big() { mpfr_init2(v, 2048); }
  explicit Big(double d) : Big() { mpfr_set_d(v, d, MPFR_RNDN); }
  Big(const Big& o) : Big() { mpfr_set(v, o.v, MPFR_RNDN); }
  Big& operator=(const Big&) = delete;
  ~Big() { mpfr_clear(v); }
};
Big add(const Big& a, const Big& b, int sign = 1) {
  Big r;
  if (sign > 0)
    mpfr_add(r.v, a.v, b.v, MPFR_RNDN);
  else
    mpfr_sub(r.v, a.v, b.v, MPFR_RNDN);
  return r;
}
double to_double(const Big& b) { return mpfr_get_d(b.v, MPFR_RNDN); }
bool is_double(const Big& b) { return mpfr_cmp_d(b.v, to_double(b)) == 0; }

double truth_rounded(const Big& v, Dtype d) {  // the MPFR path's rounding, of an exact value
  Mp m;
  mpfr_set(m.backend().data(), v.v, MPFR_RNDN);  // exact: the guard sets >= 2048 bits
  return round_to(m, d);
}

// The err values that put an edge of the interval at a boundary: boundary distance minus |rho|
// on each side, each with its neighbours (both sides of the exact critical value).
std::vector<double> critical_errs(const Big& rho, double up, double down) {
  std::vector<double> out;
  for (double gap : {up, down}) {
    for (int s : {1, -1}) {
      Big r(gap);
      Big c = add(r, rho, -s);  // gap - s rho: the err at which the edge reaches that boundary
      double e = to_double(c);
      if (!(e > 0)) continue;
      for (int k = 0; k < 3; ++k) e = std::nextafter(e, 0.0);
      for (int k = 0; k < 7 && e > 0; ++k, e = std::nextafter(e, 1.0)) out.push_back(e);
    }
  }
  return out;
}

// Distance (relative to `half`) from the interval's edges to the nearer boundary; < 0: outside.
double margin(const Big& rho, double err, double up, double down, double half) {
  Big e(err);
  Big hi_edge = add(rho, e);
  Big lo_edge = add(rho, e, -1);
  Big a = add(Big(up), hi_edge, -1);     // up - (rho + err)
  Big b = add(lo_edge, Big(-down), -1);  // (rho - err) + down
  return std::fmin(to_double(a), to_double(b)) / half;
}

struct Tally {
  int cases = 0, certified = 0, near_edge = 0;
};

double ulp_in(double c, Dtype d) { return ulp(c, d); }

// The candidate's boundaries: half above and below, except toward zero from a power of two.
void boundaries(double c, double half, double& up, double& down) {
  const bool pow2 = std::fabs(c) == std::exp2(std::ilogb(c));
  const double toward = pow2 ? 0.5 * half : half;
  up = c > 0 ? half : toward;
  down = c > 0 ? toward : half;
}

double draw_candidate(std::mt19937_64& rng, Dtype d) {
  std::uniform_real_distribution<double> u(1, 2);
  std::uniform_int_distribution<int> ex(-20, 20), kind(0, 2);
  double c = kind(rng) == 0 ? 1.0 : u(rng);  // a third at powers of two
  c = std::ldexp(c, ex(rng));
  if (rng() & 1) c = -c;
  return round_to_dtype(c, d);
}

// A double of random 53 bits with magnitude in [scale/2, scale), random sign.
double draw_bits(std::mt19937_64& rng, double scale) {
  std::uniform_real_distribution<double> u(0.5, 1);
  const double v = u(rng) * scale;
  return rng() & 1 ? v : -v;
}

TEST(OracleCertify, DifferenceHoldsForEveryValueWithinTheBound) {
  std::mt19937_64 rng(20261206);
  Tally t;
  for (int i = 0; i < 4000; ++i) {
    const double c = draw_candidate(rng, Dtype::f64);
    const double half = 0.5 * std::ldexp(1.0, std::ilogb(c) - 52);
    // got - (hi + lo) = c + rho: hi carries a part of rho below got's last bit (so r.lo != 0), lo
    // a part 2^-40..2^-60 below that (so r.lo - lo and rest are rounded additions).
    const double got = c + draw_bits(rng, 0.5 * half);  // still rounds to c's neighbourhood
    const double a =
        draw_bits(rng, std::ldexp(half, -std::uniform_int_distribution<int>(0, 8)(rng)));
    const double hi = got - c - a;  // not exact: the rounding is part of the construction
    const double lo =
        draw_bits(rng, std::ldexp(half, -std::uniform_int_distribution<int>(40, 60)(rng)));
    Big rho = add(add(add(Big(got), Big(hi), -1), Big(lo), -1), Big(c), -1);
    double up, down;
    boundaries(c, half, up, down);
    for (double err : critical_errs(rho, up, down)) {
      ++t.cases;
      const std::optional<double> r = detail::certify_difference(got, hi, lo, err);
      if (!r) continue;
      ++t.certified;
      if (*r == c && !is_double(rho) && margin(rho, err, up, down, half) < 0x1p-50) ++t.near_edge;
      const Big centre = add(Big(hi), Big(lo));
      for (int s : {-1, 0, 1}) {
        Big v = add(centre, Big(s * err));
        const double want = to_double(add(Big(got), v, -1));
        ASSERT_EQ(*r, want) << std::hexfloat << "certified " << *r << ", MPFR " << want << "; got "
                            << got << " hi " << hi << " lo " << lo << " err " << err << " edge "
                            << s;
      }
    }
  }
  // The test must reach the edge, else it cannot tell a sound test from a loose one.
  EXPECT_GT(t.near_edge, 1000) << t.cases << " cases, " << t.certified << " certified";
}

void rounding_cases(Dtype d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  PrecisionGuard guard(2048);
  Tally t;
  for (int i = 0; i < 3000; ++i) {
    const double c0 = draw_candidate(rng, d);
    const double half = 0.5 * ulp_in(c0, d);
    // hi = c + a (exact difference, a below c's half-ulp in d), lo with bits 2^-40..2^-60 below a
    // (so delta = a + lo is a rounded addition).
    const double a =
        draw_bits(rng, std::ldexp(half, -std::uniform_int_distribution<int>(0, 4)(rng)));
    const double hi = c0 + a;
    const double c = round_to_dtype(hi, d);
    if (c == 0 || !std::isfinite(c)) continue;
    const double h = 0.5 * ulp_in(c, d);
    const double lo =
        draw_bits(rng, std::ldexp(std::fabs(a), -std::uniform_int_distribution<int>(40, 60)(rng)));
    Big centre = add(Big(hi), Big(lo));
    Big rho = add(centre, Big(c), -1);
    double up, down;
    boundaries(c, h, up, down);
    for (double err : critical_errs(rho, up, down)) {
      ++t.cases;
      const std::optional<double> r = detail::certify_rounding(hi, lo, err, d);
      if (!r) continue;
      ++t.certified;
      if (*r == c && !is_double(rho) && margin(rho, err, up, down, h) < 0x1p-50) ++t.near_edge;
      for (int s : {-1, 0, 1}) {
        Big v = add(centre, Big(s * err));
        const double want = truth_rounded(v, d);
        ASSERT_EQ(*r, want) << std::hexfloat << "certified " << *r << ", MPFR " << want
                            << "; dtype " << name(d) << " hi " << hi << " lo " << lo << " err "
                            << err << " edge " << s;
      }
    }
  }
  EXPECT_GT(t.near_edge, 500) << t.cases << " cases, " << t.certified << " certified";
}

TEST(OracleCertify, RoundingHoldsForEveryValueWithinTheBound_f32) { rounding_cases(Dtype::f32, 1); }
TEST(OracleCertify, RoundingHoldsForEveryValueWithinTheBound_f16) { rounding_cases(Dtype::f16, 2); }
TEST(OracleCertify, RoundingHoldsForEveryValueWithinTheBound_bf16) {
  rounding_cases(Dtype::bf16, 3);
}

}  // namespace
}  // namespace ropecheck::reference
