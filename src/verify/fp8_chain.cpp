// The FP8 output chain (fp8_chain.hpp).
#include "ropecheck/verify/fp8_chain.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ropecheck::verify {

ChainTrace chain_trace(const Fp8Chain& ch, double v, double scale, bool reciprocal) {
  ChainTrace t;
  t.r = ch.intermediate ? round_to_dtype(v, *ch.intermediate) : v;
  const float rf = static_cast<float>(t.r), sf = static_cast<float>(scale);
  float q = 0;
  if (!ch.divide)
    q = rf * sf;  // f32 arithmetic: one correctly rounded product
  else
    q = reciprocal ? rf * (1.0f / sf) : rf / sf;
  t.q = q;
  t.c = fp8_round(q, ch.format, ch.overflow);
  return t;
}

ChainRange chain_range(const Fp8Chain& c, double lo, double hi, double scale) {
  const Fp8Traits& tr = traits(c.format);
  ChainRange r{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (bool reciprocal : {false, true}) {
    if (reciprocal && !c.divide) break;
    const double a = chain_trace(c, lo, scale, reciprocal).c;
    const double b = chain_trace(c, hi, scale, reciprocal).c;
    // scale > 0 (checked by the callers): the chain is non-decreasing in v. An end that overflowed
    // to NaN (overflow nan) leaves the finite values up to +-max reachable from the other end
    // only if that one did not overflow on the same side: both ends past +max accept NaN alone.
    const double inf = std::numeric_limits<double>::infinity();
    const double a_v = std::isnan(a) ? (std::isnan(b) && lo > 0 ? inf : -tr.max_finite) : a;
    const double b_v = std::isnan(b) ? (std::isnan(a) && hi < 0 ? -inf : tr.max_finite) : b;
    r.lo = std::min(r.lo, a_v);
    r.hi = std::max(r.hi, b_v);
    r.nan_ok = r.nan_ok || std::isnan(a) || std::isnan(b);
  }
  return r;
}

// The quantum of q's binade (the subnormal one at the bottom), the nearest multiple with ties to
// even, then the overflow policy (fp8_round of a value on the extended grid only applies it).
double fp8_round_exact(const reference::Mp& q, Fp8Format f, Fp8Overflow o) {
  using reference::Mp;
  if (boost::multiprecision::isnan(q)) return std::numeric_limits<double>::quiet_NaN();
  const Fp8Traits& t = traits(f);
  const Mp a = abs(q);
  if (a == 0) return fp8_round(q.convert_to<double>(), f, o);
  // Beyond every finite point of the extended grid that matters: fp8_round saturates / NaNs it.
  if (a > Mp(4 * t.max_finite))
    return fp8_round(q < 0 ? -8 * t.max_finite : 8 * t.max_finite, f, o);
  const int e = std::max(std::ilogb(a.convert_to<double>()), 1 - t.bias);
  // ilogb of the double may be one too high when a rounds up to a power of two: the grid at the
  // lower binade is finer, so check a against 2^e.
  const int eb = a < Mp(std::ldexp(1.0, e)) && e > 1 - t.bias ? e - 1 : e;
  const Mp n = a / Mp(std::ldexp(1.0, eb - t.mantissa_bits));  // exact: a power of two
  Mp k = floor(n);
  const Mp frac = n - k;
  if (frac > Mp(0.5) || (frac == Mp(0.5) && fmod(k, Mp(2)) != 0)) k += 1;
  const double r = std::ldexp(k.convert_to<double>(), eb - t.mantissa_bits);
  return fp8_round(q < 0 ? -r : r, f, o);
}

double fp8_correct(const reference::ExactVector& y, std::int64_t j, double scale, bool divide,
                   Fp8Format f, Fp8Overflow o) {
  // y.value(j) is within half a double ulp of y_j, the product or quotient adds half an ulp:
  // t is within 2 ulps (<= |t| 2^-51) of the exact scaled value; |t| 2^-49 leaves room for the
  // two roundings of lo and hi themselves and the ulp changing at a binade.
  const double v = y.value(j), t = divide ? v / scale : v * scale;
  if (std::isfinite(t)) {
    const double w = std::fabs(t) * 0x1p-49;
    const double lo = t - w, hi = t + w;
    const double a = fp8_round(lo, f, o), b = fp8_round(hi, f, o);
    // (t's own rounding keeps its sign of zero: -0 and +0 agree as values.)
    if (a == b || (std::isnan(a) && std::isnan(b))) return fp8_round(t, f, o);
  }
  const reference::Mp s = reference::exact(scale);
  return fp8_round_exact(divide ? reference::Mp(y.mp(j) / s) : reference::Mp(y.mp(j) * s), f, o);
}

}  // namespace ropecheck::verify
