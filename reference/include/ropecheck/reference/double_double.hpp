// Double-double ("dd") building blocks: an unevaluated sum hi + lo of two doubles, ~106 bits.
// Round-to-nearest, no overflow; error bounds after Joldes, Muller, Popescu, "Tight and rigorous
// error bounds for basic building blocks of double-word arithmetic" (2017), u = 2^-53:
// add (dd + dd) <= 3u^2 relative, mul (dd * dd) <= 5u^2, mul (dd * double) <= 2u^2.
// One copy for the oracle (oracle.cpp) and the report's recipe reference (reports/src/recipe.cpp).
// always_inline: the oracle's hot loops are compiled as FMA and baseline clones, and these must be
// inlined into each clone to get its instructions.
#pragma once

#include <cmath>

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

}  // namespace ropecheck::reference::dd
