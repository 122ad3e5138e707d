// Generators for the property suite. RapidCheck's own float generator never produces subnormals,
// -0, inf or NaN and is skewed to huge magnitudes, so values are built here from (sign, exponent,
// mantissa) and bit patterns, rounded once into the dtype. Special values (+-inf, NaN, -0) come
// only from `special_value` and are used only by the special-value properties.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/spec.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ropecheck::properties::gen {

// Uniform integer in [lo, hi] (inclusive). gen::inRange scales its range with the size parameter;
// resize to the nominal size keeps the full range while still shrinking towards lo.
template <class T>
T pick(T lo, T hi) {
  if (hi <= lo) return lo;
  if (hi == std::numeric_limits<T>::max())
    return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
  return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi + 1));
}

inline bool coin(int percent) { return pick<int>(0, 99) < percent; }

inline double uniform01() {
  return static_cast<double>(pick<std::int64_t>(0, (std::int64_t{1} << 53) - 1)) * 0x1p-53;
}

// Largest |x| the generic generators produce: s^2 * ||x_pair|| * (1 + bound) must stay finite
// through two kernel applications (composition, inverse), so max_finite / (8 max(1, s)^2).
inline double value_clamp(Dtype d, double scale) {
  const double s = std::max(1.0, scale);
  return max_finite(d) / (8 * s * s);
}

// A finite value of dtype d with |v| <= clamp, |v| = 2^e * (1 + f), e in [elo, ehi]. Rounded once
// into d (so subnormals appear for low e). Never -0.
inline double log_uniform(Dtype d, int elo, int ehi, double clamp) {
  const int e = pick(elo, ehi);
  const double mant = 1.0 + uniform01();
  double v = round_to_dtype(std::ldexp(mant, e), d);
  if (v > clamp) v = round_to_dtype(std::ldexp(1.0, e), d);
  if (v > clamp) v = 0.0;
  return coin(50) ? v : (v == 0 ? 0.0 : -v);
}

inline int max_exponent_below(double clamp) { return std::ilogb(clamp) - 1; }
inline int min_exponent(Dtype d) { return traits(d).emin - traits(d).digits + 1; }

// Values someone chose on purpose: boundaries of the format and of the rounding grid.
inline std::vector<double> awkward_values(Dtype d, double clamp) {
  const auto t = traits(d);
  const double u = unit_roundoff(d);
  std::vector<double> v = {1.0,
                           0.5,
                           3.0,
                           1.0 + 2 * u,
                           1.0 - u,
                           round_to_dtype(0.1, d),
                           round_to_dtype(1.0 / 3.0, d),
                           round_to_dtype(3.14159265358979323846, d),
                           std::ldexp(1.0, t.digits),                   // integer grid boundary
                           std::ldexp(1.0, t.digits) + 2.0,             // first even-only integer
                           std::ldexp(1.0, t.emin),                     // min normal
                           std::ldexp(1.0, t.emin) - min_subnormal(d),  // max subnormal
                           min_subnormal(d),
                           round_to_dtype(clamp * (1 - 4 * u), d),
                           round_to_dtype(65504.0, d)};
  std::vector<double> out;
  for (double x : v)
    if (std::isfinite(x) && x <= clamp && x > 0) out.push_back(x);
  return out;
}

// One finite value by the vector-level mode.
enum class Mode { typical, one_scale, per_element, bits, awkward };

inline Mode pick_mode() {
  const int r = pick(0, 99);
  if (r < 50) return Mode::typical;
  if (r < 70) return Mode::one_scale;
  if (r < 85) return Mode::per_element;
  if (r < 95) return Mode::bits;
  return Mode::awkward;
}

// n finite values (no -0, no inf/NaN) of dtype d, |v| <= clamp.
inline std::vector<double> finite_vector(Dtype d, std::int64_t n, double clamp) {
  const int ehi = max_exponent_below(clamp), elo = min_exponent(d);
  const Mode mode = pick_mode();
  const int shared = pick(elo + traits(d).digits, ehi);
  const auto awk = awkward_values(d, clamp);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x) {
    switch (mode) {
      case Mode::typical:
        v = log_uniform(d, -4, 3, clamp);
        break;
      case Mode::one_scale:
        v = log_uniform(d, std::max(elo, shared - 8), shared, clamp);
        break;
      case Mode::per_element:
        v = log_uniform(d, elo, ehi, clamp);
        break;
      case Mode::bits: {
        const int nbits = traits(d).bytes * 8;
        const std::uint64_t b =
            nbits == 64 ? *rc::gen::resize(rc::kNominalSize, rc::gen::arbitrary<std::uint64_t>())
                        : pick<std::uint64_t>(0, (std::uint64_t{1} << nbits) - 1);
        v = from_bits(b, d);
        if (!std::isfinite(v) || std::fabs(v) > clamp) v = log_uniform(d, elo, ehi, clamp);
        if (v == 0) v = 0.0;  // drop -0
        break;
      }
      case Mode::awkward: {
        v = awk[static_cast<std::size_t>(pick<std::size_t>(0, awk.size() - 1))];
        if (coin(50)) v = -v;
        break;
      }
    }
  }
  return x;
}

// +0, -0, +inf, -inf, NaN (special-value properties only).
inline double special_value() {
  switch (pick(0, 4)) {
    case 0:
      return 0.0;
    case 1:
      return -0.0;
    case 2:
      return std::numeric_limits<double>::infinity();
    case 3:
      return -std::numeric_limits<double>::infinity();
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

// Any bit pattern of dtype d (pass-through dims): includes NaN, inf, -0, subnormals.
inline double any_bits(Dtype d) {
  const int nbits = traits(d).bytes * 8;
  const std::uint64_t b =
      nbits == 64 ? *rc::gen::resize(rc::kNominalSize, rc::gen::arbitrary<std::uint64_t>())
                  : pick<std::uint64_t>(0, (std::uint64_t{1} << nbits) - 1);
  return from_bits(b, d);
}

// Positions: the directed list (block and power-of-two boundaries where tables and f32/f16
// position conversions break) mixed with random magnitudes up to `limit` (log-uniform bit count).
inline const std::vector<std::int64_t>& directed_positions() {
  static const std::vector<std::int64_t> v = [] {
    std::vector<std::int64_t> p = {0,
                                   1,
                                   2,
                                   255,
                                   256,
                                   257,
                                   2047,
                                   2048,
                                   2049,
                                   4095,
                                   65535,
                                   65536,
                                   65537,
                                   131071,
                                   1048575,
                                   (1 << 24) - 1,
                                   1 << 24,
                                   (1 << 24) + 1,
                                   (std::int64_t{1} << 31) - 1,
                                   std::int64_t{1} << 31};
    const auto n = p.size();
    for (std::size_t i = 1; i < n; ++i) p.push_back(-p[i]);
    return p;
  }();
  return v;
}

inline std::int64_t position(std::int64_t limit) {
  if (coin(40)) {
    std::vector<std::int64_t> ok;
    for (auto m : directed_positions())
      if (m <= limit && -m <= limit) ok.push_back(m);
    return ok[pick<std::size_t>(0, ok.size() - 1)];
  }
  const int maxbits = std::ilogb(static_cast<double>(std::max<std::int64_t>(limit, 1)));
  const int bits = pick(0, maxbits);
  const std::int64_t hi = std::min<std::int64_t>(limit, (std::int64_t{1} << bits));
  const std::int64_t m = pick<std::int64_t>(0, hi);
  return coin(25) ? -m : m;
}

struct SpecOptions {
  bool force_unit_scale = false;
  bool force_partial = false;  // rotary_dim < head_dim
  int force_layout = -1;       // -1 any, else static_cast<Layout>
  std::int64_t max_head_dim = 512;
};

inline RopeSpec spec(const SpecOptions& o = {}) {
  static const std::int64_t directed_dims[] = {2,  3,  4,  5,   8,   63,  64,
                                               65, 80, 96, 127, 128, 256, 512};
  RopeSpec s;
  do {
    if (coin(35)) {
      s.head_dim = directed_dims[pick<std::size_t>(0, std::size(directed_dims) - 1)];
    } else {
      // Log-uniform dim: small dims (most edge cases) as often as large ones (most cost).
      const int bits = pick(1, 9);
      s.head_dim = pick<std::int64_t>(2, std::int64_t{1} << bits);
    }
  } while (s.head_dim > o.max_head_dim || (o.force_partial && s.head_dim < 3));
  const std::int64_t even = s.head_dim - s.head_dim % 2;
  if (o.force_partial) {
    const std::int64_t top = (s.head_dim - 1) - (s.head_dim - 1) % 2;  // even, < head_dim
    s.rotary_dim = 2 * pick<std::int64_t>(1, top / 2);
  } else if (coin(35)) {
    s.rotary_dim = 2 * pick<std::int64_t>(1, even / 2);  // partial rotary (or full by chance)
  } else {
    s.rotary_dim = 0;  // default: head_dim rounded down to even
  }
  switch (pick(0, 3)) {
    case 0:
      s.base = 10000.0;
      break;
    case 1:
      s.base = 500000.0;
      break;
    case 2:
      s.base = 1e6;
      break;
    default:
      s.base = std::exp(std::log(2.0) + uniform01() * (std::log(1e7) - std::log(2.0)));
  }
  s.layout = o.force_layout >= 0 ? static_cast<Layout>(o.force_layout)
                                 : (coin(50) ? Layout::interleaved : Layout::half);
  if (!o.force_unit_scale) {
    switch (pick(0, 9)) {
      case 0:
        s.scale = 0.5;
        break;
      case 1:
        s.scale = 2.0;
        break;
      case 2:
        s.scale = std::exp2(uniform01() * 2 - 1);
        break;  // (0.5, 2), not a power of 2
      default:
        s.scale = 1.0;
    }
  }
  return s.normalized();
}

}  // namespace ropecheck::properties::gen
