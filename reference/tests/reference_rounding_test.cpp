// One correct rounding, checked exhaustively for f16 and bf16 and by sampling for f32 and f64.
//
// f16/bf16: every finite value, every midpoint between neighbours (and the midpoint nudged by a
// tiny MP epsilon either way), the overflow threshold and the underflow threshold, both signs.
// Expected results come from integer arithmetic on the bit patterns (value of a pattern, parity
// of a pattern), never from the code under test.
// f32/f64: 10^5 random MP values (random 64-bit significands over the whole exponent range plus
// subnormals and overflow, and exact midpoints of random neighbours) against MPFR's own
// mpfr_get_flt / mpfr_get_d with MPFR_RNDN, an independent implementation of the same rounding.
#include "ropecheck/reference/reference.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>

namespace ropecheck::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Value of the non-negative finite bit pattern `k` (sign bit clear) of a binary format with p
// significand bits (p - 1 stored) and exponent bias emax: integer significand times a power of
// two, both exact in a double.
double value_of_pattern(std::uint32_t k, Dtype d) {
  const auto t = traits(d);
  const int mbits = t.digits - 1;
  const std::uint32_t m = k & ((1u << mbits) - 1);
  const int e = static_cast<int>(k >> mbits);
  if (e == 0) return std::ldexp(double(m), t.emin - mbits);  // subnormal (and zero)
  return std::ldexp(double((1u << mbits) | m), e - t.emax - mbits);
}

// Number of non-negative finite patterns: exponent fields 0 .. 2*emax (all-ones is inf/NaN).
std::uint32_t finite_pattern_count(Dtype d) {
  const auto t = traits(d);
  return static_cast<std::uint32_t>(2 * t.emax + 1) << (t.digits - 1);
}

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }

// Collects mismatches (bit-exact comparison, so the sign of zero counts) and reports the first few.
struct Mismatches {
  std::int64_t checked = 0, count = 0;
  std::ostringstream first;
  void check(const Mp& x, Dtype d, double expected, const char* what) {
    ++checked;
    const double got = round_to(x, d);
    if (bits(got) == bits(expected)) return;
    if (count++ < 10)
      first << "  " << what << ": round_to(" << to_decimal(x, 30) << ", " << name(d)
            << ") = " << got << " (bits " << std::hex << bits(got) << "), expected " << expected
            << " (bits " << bits(expected) << std::dec << ")\n";
  }
};

void exhaustive(Dtype d) {
  const std::uint32_t n = finite_pattern_count(d);
  std::vector<double> v(n);
  for (std::uint32_t k = 0; k < n; ++k) v[k] = value_of_pattern(k, d);
  // Patterns of one sign are ordered by value: make sure our decoding agrees before relying on it.
  for (std::uint32_t k = 1; k < n; ++k) ASSERT_LT(v[k - 1], v[k]) << k;
  ASSERT_EQ(v[n - 1], max_finite(d));
  ASSERT_EQ(v[1], min_subnormal(d));

  Mismatches mm;
  for (std::uint32_t k = 0; k < n; ++k) {
    mm.check(exact(v[k]), d, v[k], "value");
    mm.check(exact(-v[k]), d, -v[k], "negative value");  // k = 0 gives -0
  }
  for (std::uint32_t k = 0; k + 1 < n; ++k) {
    const Mp lo = exact(v[k]), hi = exact(v[k + 1]);
    const Mp mid = (lo + hi) / 2;  // exact: two doubles, far more MP bits than needed
    // Tie: the even significand, i.e. the even bit pattern (k even -> lower neighbour).
    const double even = (k % 2 == 0) ? v[k] : v[k + 1];
    // 2^-80 of the gap: representable next to mid at >= 161 bits, far below any rounding boundary.
    const Mp eps = (hi - lo) * exact(std::ldexp(1.0, -80));
    mm.check(mid, d, even, "midpoint");
    mm.check(mid + eps, d, v[k + 1], "midpoint + eps");
    mm.check(mid - eps, d, v[k], "midpoint - eps");
    mm.check(-mid, d, -even, "-midpoint");  // k = 0: -min_subnormal/2 ties to -0
    mm.check(-mid - eps, d, -v[k + 1], "-midpoint - eps");
    mm.check(-mid + eps, d, -v[k], "-midpoint + eps");
  }
  // Overflow: max + half an ulp is the tie between max (odd pattern) and 2^(emax+1) (even):
  // IEEE goes to inf; anything below stays max.
  const Mp max = exact(v[n - 1]);
  const Mp half_ulp = (max - exact(v[n - 2])) / 2;
  const Mp tiny = half_ulp * exact(std::ldexp(1.0, -80));
  for (int sign : {1, -1}) {
    const double s = sign;
    mm.check(sign * (max + half_ulp), d, s * kInf, "max + ulp/2");
    mm.check(sign * (max + half_ulp - tiny), d, s * v[n - 1], "max + ulp/2 - tiny");
    mm.check(sign * (max + half_ulp + tiny), d, s * kInf, "max + ulp/2 + tiny");
    mm.check(sign * max * 2, d, s * kInf, "2 max");
    // Far outside the dtype and even outside double's range: MP handles it, no double overflow.
    mm.check(sign * exact(std::ldexp(1.0, 1000)) * exact(std::ldexp(1.0, 1000)), d, s * kInf,
             "2^2000");
    // Underflow: below half the smallest subnormal everything goes to (signed) zero.
    // The tie goes to 0 (even pattern), with the sign of the input.
    const Mp half_min = exact(v[1]) / 2;
    const Mp tiny_min = half_min * exact(std::ldexp(1.0, -80));
    mm.check(sign * half_min, d, s * 0.0, "min_subnormal/2");
    mm.check(sign * (half_min + tiny_min), d, s * v[1], "min_subnormal/2 + tiny");
    mm.check(sign * (half_min - tiny_min), d, s * 0.0, "min_subnormal/2 - tiny");
    mm.check(sign * exact(std::ldexp(1.0, -1000)) * exact(std::ldexp(1.0, -1000)), d, s * 0.0,
             "2^-2000");
  }
  EXPECT_EQ(mm.count, 0) << mm.count << " of " << mm.checked << " roundings wrong, first:\n"
                         << mm.first.str();
  // Sanity of the enumeration size: 31744 (f16) / 32640 (bf16) finite magnitudes, times 2 signs
  // for values, 6 per gap, plus the 18 edge cases.
  EXPECT_EQ(mm.checked, 2 * std::int64_t(n) + 6 * (std::int64_t(n) - 1) + 18);
}

TEST(ReferenceRounding, ExhaustiveF16) { exhaustive(Dtype::f16); }
TEST(ReferenceRounding, ExhaustiveBf16) { exhaustive(Dtype::bf16); }

// Independent rounding by MPFR's converters.
double mpfr_reference(const Mp& x, Dtype d) {
  if (d == Dtype::f32) return mpfr_get_flt(x.backend().data(), MPFR_RNDN);
  return mpfr_get_d(x.backend().data(), MPFR_RNDN);
}

void sampled(Dtype d, std::uint64_t seed) {
  const auto t = traits(d);
  std::mt19937_64 rng(seed);
  Mismatches mm;
  constexpr int kSamples = 100000;
  for (int i = 0; i < kSamples; ++i) {
    Mp x;
    if (i % 2 == 0) {
      // Random 64-bit significand (more bits than p, so most values are not representable) at a
      // uniformly random binade from below the smallest subnormal to above the largest normal.
      const std::uint64_t sig = rng() | (std::uint64_t(1) << 63);
      const int lo = t.emin - t.digits - 2, hi = t.emax + 2;
      const int e = lo + static_cast<int>(rng() % std::uint64_t(hi - lo + 1));
      x = Mp(sig);
      mpfr_mul_2si(x.backend().data(), x.backend().data(), e - 63, MPFR_RNDN);  // exact
    } else {
      // Exact midpoint of a random finite value and its upper neighbour, optionally nudged.
      double a, b;
      if (d == Dtype::f32) {
        float fa;
        do fa = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
        while (!std::isfinite(fa) || std::fabs(fa) == std::numeric_limits<float>::max());
        a = fa;
        b = std::nextafter(fa, std::numeric_limits<float>::infinity());
      } else {
        do a = std::bit_cast<double>(rng());
        while (!std::isfinite(a) || std::fabs(a) == std::numeric_limits<double>::max());
        b = std::nextafter(a, kInf);
      }
      const Mp lo = exact(a), hi = exact(b);
      x = (lo + hi) / 2;
      const int nudge = static_cast<int>(rng() % 3) - 1;
      x += nudge * (hi - lo) * exact(std::ldexp(1.0, -80));
    }
    if (rng() % 2) x = -x;
    mm.check(x, d, mpfr_reference(x, d), "sample");
  }
  EXPECT_EQ(mm.count, 0) << mm.count << " of " << mm.checked << " roundings differ from MPFR:\n"
                         << mm.first.str();
}

TEST(ReferenceRounding, SampledF32AgainstMpfrGetFlt) { sampled(Dtype::f32, 0x5eed32); }
TEST(ReferenceRounding, SampledF64AgainstMpfrGetD) { sampled(Dtype::f64, 0x5eed64); }

// The core's round_to_dtype (inputs, kernels' storage, the oracle's candidates; for f32 the
// hardware conversion) against round_to on the same doubles: random doubles over each format's
// range from below its smallest subnormal to beyond max, its ties and their neighbours.
TEST(ReferenceRounding, CoreRoundToDtypeEqualsRoundTo) {
  std::mt19937_64 rng(0x5eedc0);
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const auto t = traits(d);
    long differ = 0;
    for (int i = 0; i < 200000; ++i) {
      const int lo = t.emin - t.digits - 2, hi = t.emax + 2;
      const int e = lo + static_cast<int>(rng() % std::uint64_t(hi - lo + 1));
      double x = std::ldexp(1.0 + static_cast<double>(rng() >> 12) * 0x1p-52, e);
      if (i % 3 == 1) {  // a tie of the format, or a double next to it
        const double q = std::ldexp(1.0, std::max(e, t.emin) - t.digits + 1);
        x = std::ldexp(1.0, e) + (static_cast<double>(rng() % 64) + 0.5) * q;
        x = i % 2 ? x : std::nextafter(x, rng() % 2 ? kInf : 0.0);
      }
      if (rng() % 2) x = -x;
      const double a = round_to_dtype(x, d), b = round_to(exact(x), d);
      differ += std::bit_cast<std::uint64_t>(a) != std::bit_cast<std::uint64_t>(b);
    }
    EXPECT_EQ(differ, 0) << name(d);
  }
}

}  // namespace
}  // namespace ropecheck::reference
