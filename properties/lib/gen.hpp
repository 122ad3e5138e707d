// Generators for the property suite. RapidCheck's own float generator never produces subnormals,
// -0, inf or NaN and is skewed to huge magnitudes, so values are built here from (sign, exponent,
// mantissa) and bit patterns, rounded once into the dtype. Special values (+-inf, NaN, -0) come
// only from `special_value` and are used only by the special-value properties.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/kernel.hpp"
#include "ropecheck/spec.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace ropecheck::properties::gen {

// Uniform integer in [lo, hi] (inclusive). gen::inRange scales its range with the size parameter;
// resize to the nominal size keeps the full range while still shrinking towards lo.
// Clamped: while shrinking, RapidCheck replays recorded values by their order of drawing; when a
// kernel answers differently between runs (a plugin that faulted and is poisoned: supports() is
// false from then on) a value drawn for another range can arrive here, and an index out of its
// range would be undefined behaviour (seen: a crash of the oracle while shrinking).
template <class T>
T pick(T lo, T hi) {
  if (hi <= lo) return lo;
  const T v = hi == std::numeric_limits<T>::max()
                  ? *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi))
                  : *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi + 1));
  return std::clamp(v, lo, hi);
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

// Shrinking's budget of kernel calls (properties::Options::max_shrink_calls), per check and
// thread: the driver arms it when the first failure starts the shrinking.
struct ShrinkBudget {
  bool shrinking = false;
  long limit = 0, calls = 0;
  bool spent = false;
};
inline ShrinkBudget& shrink_budget() {
  thread_local ShrinkBudget b;
  return b;
}

// The kernel's declared domain as the generators see it, set per check() from Kernel::domain()
// and a probe of supports() (thread-local: checks may run on several threads). Every generated
// case lies inside it; see properties/README.md "Domains and coverage".
struct DomainContext {
  Domain declared;
  // Specs supports() accepted on the probe grid (unscaled, base 1e4, scale 1): the fallbacks when
  // a drawn spec is rejected, and the evidence for what applies. `full`: rotary_dim = head_dim
  // rounded to even; `partial`: rotary_dim < head_dim; `both_layouts`: interleaved specs whose
  // half twin is accepted too; `multi_axis`: mrope / imrope / axial specs.
  std::vector<RopeSpec> full, partial, both_layouts, multi_axis;
};
inline DomainContext& domain_context() {
  thread_local DomainContext c;
  return c;
}

// [lo, hi] = [-limit, limit] intersected with the declared position range.
inline std::pair<std::int64_t, std::int64_t> position_range(std::int64_t limit) {
  const Domain& d = domain_context().declared;
  return {std::max(-limit, d.min_position), std::min(limit, d.max_position)};
}

inline std::int64_t clamp_position(std::int64_t v, std::int64_t limit) {
  const auto [lo, hi] = position_range(limit);
  return std::clamp(v, lo, std::max(lo, hi));
}

// A position in [-limit, limit] and in the declared range: the directed list (and the range's own
// ends when it is narrower than the limit) or a log-uniform magnitude; negative only when the
// range has negative positions.
inline std::int64_t position(std::int64_t limit) {
  const auto [lo, hi] = position_range(limit);
  if (coin(40)) {
    std::vector<std::int64_t> ok;
    for (auto m : directed_positions())
      if (m >= lo && m <= hi) ok.push_back(m);
    if (lo > -limit) ok.push_back(lo);  // a declared end (e.g. INT32_MAX, 0)
    if (hi < limit) ok.push_back(hi);
    if (!ok.empty()) return ok[pick<std::size_t>(0, ok.size() - 1)];
  }
  const bool neg = lo < 0 && (hi <= 0 || coin(25));
  const std::int64_t mag = neg ? -lo : std::max<std::int64_t>(hi, 0);
  const int maxbits = std::ilogb(static_cast<double>(std::max<std::int64_t>(mag, 1)));
  const int bits = pick(0, maxbits);
  const std::int64_t top = std::min<std::int64_t>(mag, (std::int64_t{1} << bits));
  const std::int64_t m = pick<std::int64_t>(0, top);
  return clamp_position(neg ? -m : m, limit);
}

// A shift b for a position a such that b and a + b both lie in the declared range (and within
// limit): the drawn b, moved to the nearest such value.
inline std::int64_t shift_within(std::int64_t a, std::int64_t b, std::int64_t limit) {
  const auto [lo, hi] = position_range(limit);
  const std::int64_t blo = std::max(lo, lo - a);
  const std::int64_t bhi = std::min(hi, hi - a);
  return std::clamp(b, blo, std::max(blo, bhi));
}

// Vector counts: mostly small, sometimes many tokens and heads (kernels tile by 8, 16, 32, ...),
// capped so that a call holds at most `max_elems` elements of head_dim d.
inline std::pair<std::int64_t, std::int64_t> counts(std::int64_t nt_hi, std::int64_t nh_hi,
                                                    std::int64_t d,
                                                    std::int64_t max_elems = 1 << 12) {
  if (!coin(8)) return {pick<std::int64_t>(1, nt_hi), pick<std::int64_t>(1, nh_hi)};
  std::int64_t nt = pick<std::int64_t>(nt_hi + 1, 33), nh = pick<std::int64_t>(nh_hi + 1, 17);
  while (nt * nh * std::max<std::int64_t>(d, 1) > max_elems && nt > 1) --nt;
  while (nt * nh * std::max<std::int64_t>(d, 1) > max_elems && nh > 1) --nh;
  return {nt, nh};
}

// Variant generation, set per check() from properties::Options (thread-local: checks may run on
// several threads).
struct VariantConfig {
  bool enabled = false;
  std::optional<ScalingKind> focus_scaling;
  std::optional<Layout> focus_layout;
};
inline VariantConfig& variant_config() {
  thread_local VariantConfig c;
  return c;
}

struct SpecOptions {
  bool force_unit_scale = false;
  bool force_partial = false;  // rotary_dim < head_dim
  int force_layout = -1;       // -1 any, else static_cast<Layout>
  std::int64_t max_head_dim = 512;
};

inline double log_uniform_real(double lo, double hi) {
  return std::exp(std::log(lo) + uniform01() * (std::log(hi) - std::log(lo)));
}

// k non-negative (min_each = 0) or positive (1) parts summing to n.
inline std::vector<std::int64_t> split(std::int64_t n, int k, std::int64_t min_each) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(k), min_each);
  std::int64_t rest = n - min_each * k;
  for (int i = 0; i + 1 < k; ++i) {
    const std::int64_t x = pick<std::int64_t>(0, rest);
    v[static_cast<std::size_t>(i)] += x;
    rest -= x;
  }
  v.back() += rest;
  return v;
}

// A scaling variant with plausible parameters (real-model values mixed with random ones).
inline void add_scaling(RopeSpec& s, ScalingKind kind, bool unit_magnitude) {
  Scaling& c = s.scaling;
  c = Scaling{};
  c.kind = kind;
  const std::int64_t np = s.rotary_dim / 2;
  const auto orig_ctx = [] {
    static const std::int64_t v[] = {2048, 4096, 8192, 32768};
    return coin(70) ? v[pick<std::size_t>(0, 3)] : pick<std::int64_t>(256, 1 << 17);
  };
  switch (kind) {
    case ScalingKind::none:
      break;
    case ScalingKind::linear:
      c.factor = coin(50) ? static_cast<double>(pick(2, 8)) : log_uniform_real(0.25, 64);
      break;
    case ScalingKind::dynamic:
      c.factor = coin(50) ? static_cast<double>(pick(1, 8)) : log_uniform_real(1, 16);
      c.max_position_embeddings = orig_ctx();
      switch (pick(0, 3)) {
        case 0:
          c.seq_len = 0;
          break;
        case 1:
          c.seq_len = c.max_position_embeddings;
          break;
        default:
          c.seq_len = pick<std::int64_t>(1, 8 * c.max_position_embeddings);
      }
      break;
    case ScalingKind::yarn:
      c.factor = coin(50) ? static_cast<double>(pick(1, 40)) : log_uniform_real(1, 64);
      c.original_max_position_embeddings = orig_ctx();
      if (coin(25)) c.beta_fast = log_uniform_real(4, 64), c.beta_slow = log_uniform_real(0.5, 2);
      c.truncate = coin(70);
      if (coin(35)) {
        c.mscale = coin(50) ? 1.0 : log_uniform_real(0.1, 2);
        c.mscale_all_dim = coin(50) ? c.mscale : log_uniform_real(0.1, 2);
      }
      if (coin(20)) c.attention_factor = log_uniform_real(0.5, 2);
      break;
    case ScalingKind::llama3:
      c.factor = coin(60) ? 8.0 : log_uniform_real(1, 32);
      c.low_freq_factor = coin(60) ? 1.0 : log_uniform_real(0.5, 2);
      c.high_freq_factor =
          coin(60) && c.low_freq_factor < 4 ? 4.0 : c.low_freq_factor * log_uniform_real(1.5, 8);
      c.original_max_position_embeddings = orig_ctx();
      break;
    case ScalingKind::freq_factors:
      for (std::int64_t i = 0; i < np; ++i) c.freq_factors.push_back(log_uniform_real(1, 32));
      break;
    case ScalingKind::longrope:
      for (std::int64_t i = 0; i < np; ++i) {
        c.short_factor.push_back(log_uniform_real(1, 4));
        c.long_factor.push_back(log_uniform_real(1, 64));
      }
      c.original_max_position_embeddings = orig_ctx();
      c.max_position_embeddings = c.original_max_position_embeddings * pick<std::int64_t>(1, 32);
      switch (pick(0, 3)) {
        case 0:
          c.seq_len = 0;
          break;
        case 1:
          c.seq_len = c.original_max_position_embeddings;  // the switch's edge: short factors
          break;
        case 2:
          c.seq_len = c.original_max_position_embeddings + 1;
          break;
        default:
          c.seq_len = pick<std::int64_t>(1, c.max_position_embeddings);
      }
      if (coin(20)) c.attention_factor = log_uniform_real(0.5, 2);
      break;
  }
  // Unit rotations (s = 1): the explicit attention factor wins over every derived one.
  if (unit_magnitude && (kind == ScalingKind::yarn || kind == ScalingKind::longrope))
    c.attention_factor = 1.0;
}

// Head dims of the declared list (those <= max_head_dim when there are any, >= 3 for partial
// rotary), or empty when the kernel takes any head_dim.
inline std::vector<std::int64_t> declared_head_dims(const SpecOptions& o) {
  std::vector<std::int64_t> all = domain_context().declared.head_dims, fit;
  for (auto d : all)
    if (d <= o.max_head_dim && (!o.force_partial || d >= 3)) fit.push_back(d);
  if (fit.empty())
    for (auto d : all)
      if (!o.force_partial || d >= 3) fit.push_back(d);
  return fit.empty() ? all : fit;
}

inline RopeSpec spec(const SpecOptions& o = {}) {
  static const std::int64_t directed_dims[] = {2,  3,  4,  5,   8,   63,  64,
                                               65, 80, 96, 127, 128, 256, 512};
  RopeSpec s;
  const auto listed = declared_head_dims(o);
  do {
    if (!listed.empty()) {
      s.head_dim = listed[pick<std::size_t>(0, listed.size() - 1)];
      break;
    }
    if (coin(35)) {
      s.head_dim = directed_dims[pick<std::size_t>(0, std::size(directed_dims) - 1)];
    } else {
      // Log-uniform dim: small dims (most edge cases) as often as large ones (most cost).
      const int bits = pick(1, 9);
      s.head_dim = pick<std::int64_t>(2, std::int64_t{1} << bits);
    }
  } while (s.head_dim > o.max_head_dim || (o.force_partial && s.head_dim < 3));
  const std::int64_t even = s.head_dim - s.head_dim % 2;
  if (o.force_partial && s.head_dim >= 3) {
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
  if (!o.force_unit_scale && domain_context().declared.magnitude_scale) {
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
  s = s.normalized();
  const VariantConfig& vc = variant_config();
  if (!vc.enabled) return s;
  // Layout: the generated 1-D one, or (unless forced) one of the newer layouts.
  const std::int64_t np = s.n_pairs();
  std::optional<Layout> lay;
  if (o.force_layout < 0) {
    if (vc.focus_layout)
      lay = vc.focus_layout;
    else if (coin(30))
      lay = static_cast<Layout>(pick(2, 5));
  }
  if (lay) {
    RopeSpec t = s;
    t.layout = *lay;
    if (*lay == Layout::mrope || *lay == Layout::imrope) t.sections = split(np, 3, 0);
    if (*lay == Layout::axial && np >= 1)
      t.sections = split(np, static_cast<int>(std::min<std::int64_t>(np, pick(1, 3))), 1);
    if (*lay != Layout::proportional || t.head_dim % 2 == 0) {
      try {
        t.validate();
        s = t;
      } catch (const SpecError&) {
      }
    }
  }
  std::optional<ScalingKind> kind = vc.focus_scaling;
  if (!kind && coin(50)) kind = static_cast<ScalingKind>(pick(1, 6));
  if (kind && s.layout != Layout::axial) {
    RopeSpec t = s;
    add_scaling(t, *kind, o.force_unit_scale);
    try {
      t.validate();
      s = t;
    } catch (const SpecError&) {
    }
  }
  return s;
}

}  // namespace ropecheck::properties::gen

namespace ropecheck::properties::gen {

// A multi-axis spec for the per-axis properties: mrope / imrope (and axial unless mrope_only).
// 40%: a real-model shape (Qwen2-VL [16,24,24], Qwen2.5/3-VL [24,20,20], [8,12,12], CogVideoX
// 3-D t D/8, h 3D/16, w 3D/16 pairs, axial 2-D); otherwise a generated 1-D spec (spec(o), with
// the scaling variant spec() gives when variants are enabled) turned multi-axis with random
// sections. The focused layout (variant_config) wins when it is a multi-axis one. Axial specs
// carry no scaling (as spec()); the scale option of o applies to all.
inline RopeSpec multi_axis_spec(SpecOptions o, bool mrope_only) {
  const VariantConfig& vc = variant_config();
  std::optional<Layout> lay;
  if (vc.focus_layout && is_multi_axis(*vc.focus_layout) &&
      !(mrope_only && *vc.focus_layout == Layout::axial))
    lay = vc.focus_layout;
  if (!lay) lay = static_cast<Layout>(pick(3, mrope_only ? 4 : 5));
  RopeSpec s;
  if (coin(40)) {
    struct Shape {
      std::int64_t hd;
      std::vector<std::int64_t> sec;
    };
    static const std::vector<Shape> mshapes = {
        {128, {16, 24, 24}}, {128, {24, 20, 20}}, {64, {8, 12, 12}}};
    static const std::vector<Shape> ashapes = {
        {64, {8, 12, 12}}, {128, {16, 24, 24}}, {64, {16, 16}}, {96, {12, 18, 18}}};
    const auto& v = *lay == Layout::axial ? ashapes : mshapes;
    const Shape& sh = v[pick<std::size_t>(0, v.size() - 1)];
    o.force_layout = static_cast<int>(Layout::half);
    s = spec(o);  // scale, base and (with variants) a scaling variant
    RopeSpec t = s;
    t.head_dim = sh.hd;
    t.rotary_dim = sh.hd;
    t.layout = *lay;
    t.sections = sh.sec;
    if (s.scaling.kind != ScalingKind::none && *lay != Layout::axial)
      add_scaling(t, s.scaling.kind, o.force_unit_scale);  // per-pair factors for the new dim
    else
      t.scaling = {};
    try {
      return t.normalized();
    } catch (const SpecError&) {
      t.scaling = {};
      return t.normalized();
    }
  }
  o.force_layout = static_cast<int>(Layout::half);
  for (;;) {
    s = spec(o);
    const std::int64_t np = s.n_pairs();
    if (np < (*lay == Layout::axial ? 2 : 1)) continue;
    RopeSpec t = s;
    t.layout = *lay;
    if (*lay == Layout::axial) {
      t.sections = split(np, static_cast<int>(std::min<std::int64_t>(np, pick(2, 3))), 1);
      t.scaling = {};
    } else {
      t.sections = split(np, 3, 0);
    }
    try {
      return t.normalized();
    } catch (const SpecError&) {
    }
  }
}

}  // namespace ropecheck::properties::gen
