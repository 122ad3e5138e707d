#include "ropecheck/fp8.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ropecheck {

const Fp8Traits& traits(Fp8Format f) {
  static const Fp8Traits e4m3fn{4, 3, 7, 448.0, false, true};
  static const Fp8Traits e4m3fnuz{4, 3, 8, 240.0, false, false};
  static const Fp8Traits e5m2{5, 2, 15, 57344.0, true, true};
  switch (f) {
    case Fp8Format::e4m3fn:
      return e4m3fn;
    case Fp8Format::e4m3fnuz:
      return e4m3fnuz;
    case Fp8Format::e5m2:
      return e5m2;
  }
  return e4m3fn;
}

const char* name(Fp8Format f) {
  switch (f) {
    case Fp8Format::e4m3fn:
      return "e4m3fn";
    case Fp8Format::e4m3fnuz:
      return "e4m3fnuz";
    case Fp8Format::e5m2:
      return "e5m2";
  }
  return "?";
}

const char* name(Fp8Overflow o) {
  switch (o) {
    case Fp8Overflow::saturate:
      return "saturate";
    case Fp8Overflow::nan:
      return "nan";
    case Fp8Overflow::inf:
      return "inf";
  }
  return "?";
}

std::optional<Fp8Format> parse_fp8_format(std::string_view s) {
  for (std::string_view n : {"e4m3fn", "f8e4m3", "f8e4m3fn", "float8_e4m3fn", "F8_E4M3"})
    if (s == n) return Fp8Format::e4m3fn;
  for (std::string_view n : {"e4m3fnuz", "f8e4m3fnuz", "float8_e4m3fnuz"})
    if (s == n) return Fp8Format::e4m3fnuz;
  for (std::string_view n : {"e5m2", "f8e5m2", "float8_e5m2", "F8_E5M2"})
    if (s == n) return Fp8Format::e5m2;
  return std::nullopt;
}

std::optional<Fp8Overflow> parse_fp8_overflow(std::string_view s) {
  if (s == "saturate") return Fp8Overflow::saturate;
  if (s == "nan") return Fp8Overflow::nan;
  if (s == "inf") return Fp8Overflow::inf;
  return std::nullopt;
}

double fp8_decode(Fp8Format f, std::uint8_t b) {
  const Fp8Traits& t = traits(f);
  const int m_mask = (1 << t.mantissa_bits) - 1, e_max = (1 << t.exponent_bits) - 1;
  const bool neg = (b & 0x80) != 0;
  const int e = (b >> t.mantissa_bits) & e_max, m = b & m_mask;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (f == Fp8Format::e4m3fnuz && b == 0x80) return nan;
  if (f == Fp8Format::e4m3fn && e == e_max && m == m_mask) return nan;
  if (f == Fp8Format::e5m2 && e == e_max)
    return m == 0 ? (neg ? -1 : 1) * std::numeric_limits<double>::infinity() : nan;
  const double mag = e == 0 ? std::ldexp(m, 1 - t.bias - t.mantissa_bits)
                            : std::ldexp(m_mask + 1 + m, e - t.bias - t.mantissa_bits);
  return neg ? -mag : mag;
}

double fp8_round(double v, Fp8Format f, Fp8Overflow o) {
  const Fp8Traits& t = traits(f);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (std::isnan(v)) return nan;
  const double a = std::fabs(v);
  double r = std::numeric_limits<double>::infinity();
  if (std::isfinite(a)) {
    // The quantum q = 2^(e - mantissa_bits) at a's binade e (the subnormal one below
    // 2^(1 - bias)), built from the exponent bits (the reports round tens of millions of values).
    // y = a / q is exact (q a power of two) and below 2^(mantissa_bits + 1), so adding and
    // subtracting 2^52 rounds it to an integer, to nearest-even in the default rounding mode (no
    // fast-math here; nothing to contract).
    const int biased = static_cast<int>((std::bit_cast<std::uint64_t>(a) >> 52) & 0x7ff);
    const int e = std::max(biased - 1023, 1 - t.bias);
    const int k = e - t.mantissa_bits;  // in [-17, 1021]: q and 1 / q are normal doubles
    const double q = std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52);
    const double inv_q = std::bit_cast<double>(static_cast<std::uint64_t>(1023 - k) << 52);
    const double y = a * inv_q;
    r = ((y + 0x1p52) - 0x1p52) * q;
  }
  if (r > t.max_finite) {
    if (o == Fp8Overflow::saturate) {
      r = t.max_finite;
    } else if (o == Fp8Overflow::inf && t.has_inf) {
      r = std::numeric_limits<double>::infinity();
    } else {
      return nan;
    }
  }
  if (r == 0 && !t.has_negative_zero) return 0.0;
  return std::signbit(v) ? -r : r;
}

std::uint8_t fp8_encode(Fp8Format f, double representable) {
  for (int b = 0; b < 256; ++b) {
    const double d = fp8_decode(f, static_cast<std::uint8_t>(b));
    const bool same = std::isnan(representable)
                          ? std::isnan(d)
                          : d == representable && std::signbit(d) == std::signbit(representable);
    if (same) return static_cast<std::uint8_t>(b);
  }
  return fp8_encode(f, std::numeric_limits<double>::quiet_NaN());
}

int fp8_rank(Fp8Format f, double representable) {
  // Non-negative finite values of f in increasing order are its codes 0x00, 0x01, ... (sign bit
  // clear) up to max; the rank counts from -max, with one zero. The code of a magnitude is its
  // biased exponent and mantissa, computed (the reports rank millions of values).
  const Fp8Traits& t = traits(f);
  static const std::array<int, 3> n_pos = [] {  // finite values > 0, per format
    std::array<int, 3> n{};
    for (Fp8Format g : {Fp8Format::e4m3fn, Fp8Format::e4m3fnuz, Fp8Format::e5m2})
      for (int b = 1; b < 128; ++b)
        if (std::isfinite(fp8_decode(g, static_cast<std::uint8_t>(b))))
          ++n[static_cast<std::size_t>(g)];
    return n;
  }();
  const int base = n_pos[static_cast<std::size_t>(f)];
  const double a = std::fabs(representable);
  if (a == 0) return base;
  const int e = std::max(std::ilogb(a), 1 - t.bias);
  const int m = static_cast<int>(std::ldexp(a, t.mantissa_bits - e));  // exact: a is on the grid
  const int code = std::ilogb(a) < 1 - t.bias
                       ? m
                       : ((e + t.bias) << t.mantissa_bits) + m - (1 << t.mantissa_bits);
  return representable > 0 ? base + code : base - code;
}

}  // namespace ropecheck
