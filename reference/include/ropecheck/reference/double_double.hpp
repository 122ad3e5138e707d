// Double-double ("dd") building blocks: an unevaluated sum hi + lo of two doubles, ~106 bits.
// Round-to-nearest, no overflow; error bounds after Joldes, Muller, Popescu, "Tight and rigorous
// error bounds for basic building blocks of double-word arithmetic" (2017), u = 2^-53:
// add (dd + dd) <= 3u^2 relative, mul (dd * dd) <= 5u^2, mul (dd * double) <= 2u^2.
// One copy for the oracle (oracle.cpp) and the report's recipe reference (reports/src/recipe.cpp).
// always_inline: the oracle's hot loops are compiled as FMA and baseline clones, and these must be
// inlined into each clone to get its instructions.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ropecheck::reference::dd {

struct DD {
  double hi = 0, lo = 0;
};

[[gnu::always_inline]] inline DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
[[gnu::always_inline]] inline DD fast_two_sum(double a, double b) {  // |a| >= |b| or a == 0
  const double s = a + b;
  return {s, b - (s - a)};
}
// The exact product by a fused multiply-add: a hardware instruction where the build targets FMA,
// else glibc's fma(), exact everywhere (it dispatches to the instruction on CPUs that have it).
// Exact when the error term does not underflow: |a b| >= 2^-969 (callers keep their inputs in a
// range: [2^-900, 2^900] in the oracle, [2^-400, 2^400] in the recipe reference).
[[gnu::always_inline]] inline DD two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}
[[gnu::always_inline]] inline DD add(DD a, DD b) {  // accurate dd + dd (3u^2)
  DD s = two_sum(a.hi, b.hi);
  const DD t = two_sum(a.lo, b.lo);
  s.lo += t.hi;
  s = fast_two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return fast_two_sum(s.hi, s.lo);
}
[[gnu::always_inline]] inline DD neg(DD a) { return {-a.hi, -a.lo}; }
[[gnu::always_inline]] inline DD mul(DD a, DD b) {  // dd * dd (5u^2)
  DD p = two_prod(a.hi, b.hi);
  p.lo += a.hi * b.lo + a.lo * b.hi;
  return fast_two_sum(p.hi, p.lo);
}
[[gnu::always_inline]] inline DD mul(DD a, double b) {  // dd * double (2u^2)
  DD p = two_prod(a.hi, b);
  p.lo += a.lo * b;
  return fast_two_sum(p.hi, p.lo);
}

// ---- Ziv's rounding test, shared by the oracle and the recipe reference
// --------------------------

// 2^(e - 52) for the finite double d's exponent e: the spacing of doubles at |d| (subnormals:
// 2^-1074).
inline double ulp_of(double d) {
  const std::uint64_t biased = (std::bit_cast<std::uint64_t>(d) >> 52) & 0x7ff;
  if (biased <= 52)
    return std::bit_cast<double>(std::uint64_t{1} << (biased == 0 ? 0 : biased - 1));
  return std::bit_cast<double>((biased - 52) << 52);
}
inline bool is_power_of_two(double d) {  // |d| = 2^k for a normal double d (or d = 0)
  return (std::bit_cast<std::uint64_t>(d) & 0x000fffffffffffffULL) == 0;
}
// Does every value in [c + t - e, c + t + e] round to the candidate c, whose rounding boundaries
// lie `half` away from it (half the spacing of its format at c)? Toward zero from a power of two
// the next value is half as far, and so is the boundary. A power of two at the bottom of its
// format's normal range has the same spacing below it: half as far is conservative there. No
// margin is needed: a + e and e - a are rounded monotonically, and half (a power of two, or 0.5
// times one) is a double, so RN(a + e) < half implies a + e < half.
inline bool inside_rounding(double c, double t, double e, double half) {
  const double toward_gap = is_power_of_two(c) ? 0.5 * half : half;
  if (std::fabs(t) + e < toward_gap) return true;  // both sides at once: the common case
  const double away = std::signbit(c) ? -t : t;    // > 0: away from zero
  return away + e < half && e - away < toward_gap;
}

}  // namespace ropecheck::reference::dd
