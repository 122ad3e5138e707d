// Generators for the property suite. RapidCheck's own float generator never produces subnormals,
// -0, inf or NaN and is skewed to huge magnitudes, so values are built here from (sign, exponent,
// mantissa) and bit patterns, rounded once into the dtype. Special values (+-inf, NaN, -0) come
// only from `special_value` and are used only by the special-value properties.
//
// Map of this file:
//   pick, coin, ...       RapidCheck draws (every random choice goes through pick)
//   finite_vector, ...    values of a dtype: typical, one scale, full range, bit patterns, awkward
//   Context               what one check() draws from: the declared domain and its probe, the
//                         variant options, the shrink budget. Built per check (check.hpp
//                         check_dtype) and passed explicitly: no hidden per-thread state.
//   position, shift_within, counts
//                         positions and call shapes inside the declared domain
//   spec, multi_axis_spec specs (head dim, rotary dim, base, layout, scale, then the variant)
// A new dtype needs nothing here (traits come from dtype.hpp); a new layout or scaling kind is
// drawn in with_variant_layout / add_scaling (and multi_axis_spec for a multi-axis layout).
//
// Draw order is part of the behaviour: RapidCheck replays a case (and a `reproduce=` string) by
// the order of the draws, so a reordering changes every generated case of a fixed seed.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/kernel.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/spec.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
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

// ---- the context of one check -------------------------------------------------------------------

// Shrinking's budget of kernel calls (properties::Options::max_shrink_calls) and of wall time
// (max_shrink_seconds, capped by the run's shared pool): the driver arms it when the first
// failure starts the shrinking; the properties count their kernel calls in it and every shrink
// candidate checks the clock before it draws anything.
struct ShrinkBudget {
  bool shrinking = false;
  long limit = 0, calls = 0;
  bool spent = false;
  double seconds = 0;  // this check's wall-time budget for shrinking (0: none)
  std::chrono::steady_clock::time_point started, deadline;
  bool out_of_time = false;  // spent by the clock, not by the count of calls

  bool past_deadline() const {
    return shrinking && seconds > 0 && std::chrono::steady_clock::now() >= deadline;
  }
};

// The kernel's declared domain as the generators see it: Kernel::domain() and a probe of
// supports() (domain.hpp probe_domain). Every generated case lies inside it; see
// properties/README.md "Domains and coverage".
struct DomainContext {
  Domain declared;
  // Specs supports() accepted on the probe grid (unscaled, base 1e4, scale 1): the fallbacks when
  // a drawn spec is rejected, and the evidence for what applies. `full`: rotary_dim = head_dim
  // rounded to even; `partial`: rotary_dim < head_dim; `both_layouts`: interleaved specs whose
  // half twin is accepted too; `multi_axis`: mrope / imrope / axial specs.
  std::vector<RopeSpec> full, partial, both_layouts, multi_axis;
  // With variants: per scaling kind (index = the kind), the full-rotary 1-D shapes supports()
  // accepts with that kind's example_scaling: a kernel that takes a kind at one head dim only
  // still has it drawn (common.hpp usable()).
  std::vector<std::vector<RopeSpec>> scaled;
};

// Variant generation, from properties::Options.
struct VariantConfig {
  bool enabled = false;
  std::optional<ScalingKind> focus_scaling;
  std::optional<Layout> focus_layout;
};

// Everything one check() draws from besides RapidCheck's own state. The RapidCheck property
// captures it by reference and hands it to every generator and property; checks on other threads
// have their own.
struct Context {
  DomainContext domain;
  VariantConfig variants;
  ShrinkBudget shrink;
  reference::OracleMode oracle = reference::OracleMode::fast;  // Options::oracle_mpfr
  std::optional<RopeSpec> only_spec;  // Options::only_spec: every case on this spec
};

// ---- positions and call shapes ------------------------------------------------------------------

// [lo, hi] = [-limit, limit] intersected with the declared position range.
inline std::pair<std::int64_t, std::int64_t> position_range(const Context& c, std::int64_t limit) {
  const Domain& d = c.domain.declared;
  return {std::max(-limit, d.min_position), std::min(limit, d.max_position)};
}

inline std::int64_t clamp_position(const Context& c, std::int64_t v, std::int64_t limit) {
  const auto [lo, hi] = position_range(c, limit);
  return std::clamp(v, lo, std::max(lo, hi));
}

// A position in [-limit, limit] and in the declared range: the directed list (and the range's own
// ends when it is narrower than the limit) or a log-uniform magnitude; negative only when the
// range has negative positions.
inline std::int64_t position(const Context& c, std::int64_t limit) {
  const auto [lo, hi] = position_range(c, limit);
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
  return clamp_position(c, neg ? -m : m, limit);
}

// One position per token.
inline std::vector<std::int64_t> positions(const Context& c, std::int64_t n_tokens,
                                           std::int64_t limit) {
  std::vector<std::int64_t> pos;
  for (std::int64_t t = 0; t < n_tokens; ++t) pos.push_back(position(c, limit));
  return pos;
}

// A shift b for a position a such that b and a + b both lie in the declared range (and within
// limit): the drawn b, moved to the nearest such value.
inline std::int64_t shift_within(const Context& c, std::int64_t a, std::int64_t b,
                                 std::int64_t limit) {
  const auto [lo, hi] = position_range(c, limit);
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

// ---- specs --------------------------------------------------------------------------------------

struct SpecOptions {
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

// Scaling parameters, each kind with plausible values: real-model values mixed with random ones.
// A context length of the original model: the common ones, or any.
inline std::int64_t original_context() {
  static const std::int64_t v[] = {2048, 4096, 8192, 32768};
  return coin(70) ? v[pick<std::size_t>(0, 3)] : pick<std::int64_t>(256, 1 << 17);
}

// Dynamic NTK's three regimes (regimes.hpp) a quarter of the draws each at least: below its
// trained length L0 (HF clamps to L0; vLLM #52665 did not and took a negative number to a
// fractional power), at it (seq_len = L0, or 0: none given), above it. A seq_len drawn over
// [1, 8 L0] reached "below" in 1 of 16 dynamic draws.
inline void draw_dynamic(Scaling& c) {
  c.factor = coin(50) ? static_cast<double>(pick(1, 8)) : log_uniform_real(1, 16);
  c.max_position_embeddings = original_context();
  const std::int64_t L0 = c.max_position_embeddings;
  switch (pick(0, 3)) {
    case 0:
      c.seq_len = coin(50) ? 0 : L0;
      break;
    case 1:
      c.seq_len = pick<std::int64_t>(1, L0 - 1);
      break;
    default:
      c.seq_len = pick<std::int64_t>(L0 + 1, 8 * L0);
  }
}

inline void draw_yarn(Scaling& c) {
  c.factor = coin(50) ? static_cast<double>(pick(1, 40)) : log_uniform_real(1, 64);
  c.original_max_position_embeddings = original_context();
  if (coin(25)) c.beta_fast = log_uniform_real(4, 64), c.beta_slow = log_uniform_real(0.5, 2);
  c.truncate = coin(70);
  if (coin(35)) {
    c.mscale = coin(50) ? 1.0 : log_uniform_real(0.1, 2);
    c.mscale_all_dim = coin(50) ? c.mscale : log_uniform_real(0.1, 2);
  }
  if (coin(20)) c.attention_factor = log_uniform_real(0.5, 2);
}

inline void draw_llama3(Scaling& c) {
  c.factor = coin(60) ? 8.0 : log_uniform_real(1, 32);
  c.low_freq_factor = coin(60) ? 1.0 : log_uniform_real(0.5, 2);
  c.high_freq_factor =
      coin(60) && c.low_freq_factor < 4 ? 4.0 : c.low_freq_factor * log_uniform_real(1.5, 8);
  c.original_max_position_embeddings = original_context();
}

inline void draw_longrope(Scaling& c, std::int64_t n_pairs) {
  for (std::int64_t i = 0; i < n_pairs; ++i) {
    c.short_factor.push_back(log_uniform_real(1, 4));
    c.long_factor.push_back(log_uniform_real(1, 64));
  }
  c.original_max_position_embeddings = original_context();
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
}

// Replaces s's scaling by a variant of this kind.
inline void add_scaling(RopeSpec& s, ScalingKind kind) {
  Scaling& c = s.scaling;
  c = Scaling{};
  c.kind = kind;
  const std::int64_t np = s.rotary_dim / 2;
  switch (kind) {
    case ScalingKind::none:
      break;
    case ScalingKind::linear:
      c.factor = coin(50) ? static_cast<double>(pick(2, 8)) : log_uniform_real(0.25, 64);
      break;
    case ScalingKind::dynamic:
      draw_dynamic(c);
      break;
    case ScalingKind::yarn:
      draw_yarn(c);
      break;
    case ScalingKind::llama3:
      draw_llama3(c);
      break;
    case ScalingKind::freq_factors:
      for (std::int64_t i = 0; i < np; ++i) c.freq_factors.push_back(log_uniform_real(1, 32));
      break;
    case ScalingKind::longrope:
      draw_longrope(c, np);
      break;
  }
}

// Head dims of the declared list (those <= max_head_dim when there are any, >= 3 for partial
// rotary), or empty when the kernel takes any head_dim.
inline std::vector<std::int64_t> declared_head_dims(const Context& c, const SpecOptions& o) {
  std::vector<std::int64_t> all = c.domain.declared.head_dims, fit;
  for (auto d : all)
    if (d <= o.max_head_dim && (!o.force_partial || d >= 3)) fit.push_back(d);
  if (fit.empty())
    for (auto d : all)
      if (!o.force_partial || d >= 3) fit.push_back(d);
  return fit.empty() ? all : fit;
}

// A head dim of the declared list, else a directed or a log-uniform one within o's limits.
inline std::int64_t draw_head_dim(const Context& c, const SpecOptions& o) {
  static const std::int64_t directed_dims[] = {2,  3,  4,  5,   8,   63,  64,
                                               65, 80, 96, 127, 128, 256, 512};
  const auto listed = declared_head_dims(c, o);
  if (!listed.empty()) return listed[pick<std::size_t>(0, listed.size() - 1)];
  for (;;) {
    std::int64_t hd = 0;
    if (coin(35)) {
      hd = directed_dims[pick<std::size_t>(0, std::size(directed_dims) - 1)];
    } else {
      // Log-uniform dim: small dims (most edge cases) as often as large ones (most cost).
      const int bits = pick(1, 9);
      hd = pick<std::int64_t>(2, std::int64_t{1} << bits);
    }
    if (hd <= o.max_head_dim && !(o.force_partial && hd < 3)) return hd;
  }
}

// rotary_dim: partial (forced, or 35%), else 0 (the default: head_dim rounded down to even). Half
// of the partial draws take a model ratio (ropecheck::model_rotary_dims), the rest any even value.
inline std::int64_t draw_rotary_dim(std::int64_t head_dim, const SpecOptions& o) {
  const std::int64_t even = head_dim - head_dim % 2;
  const auto model = ropecheck::model_rotary_dims(head_dim);
  if (o.force_partial && head_dim >= 3) {
    if (!model.empty() && coin(50)) return model[pick<std::size_t>(0, model.size() - 1)];
    const std::int64_t top = (head_dim - 1) - (head_dim - 1) % 2;  // even, < head_dim
    return 2 * pick<std::int64_t>(1, top / 2);
  }
  if (coin(35)) {  // partial rotary (or full by chance)
    if (!model.empty() && coin(50)) return model[pick<std::size_t>(0, model.size() - 1)];
    return 2 * pick<std::int64_t>(1, even / 2);
  }
  return 0;
}

inline double draw_base() {
  switch (pick(0, 3)) {
    case 0:
      return 10000.0;
    case 1:
      return 500000.0;
    case 2:
      return 1e6;
    default:
      return std::exp(std::log(2.0) + uniform01() * (std::log(1e7) - std::log(2.0)));
  }
}

// The magnitude scale of a kernel that declares one: mostly 1, powers of two, or any in (0.5, 2).
inline double draw_scale() {
  switch (pick(0, 9)) {
    case 0:
      return 0.5;
    case 1:
      return 2.0;
    case 2:
      return std::exp2(uniform01() * 2 - 1);  // (0.5, 2), not a power of 2
    default:
      return 1.0;
  }
}

// With variants: the drawn 1-D layout, or (unless the layout is forced) the focused one or one of
// the newer layouts, with random sections. A layout the spec cannot take is not applied.
inline RopeSpec with_variant_layout(const Context& c, const SpecOptions& o, const RopeSpec& s) {
  const VariantConfig& vc = c.variants;
  const std::int64_t np = s.n_pairs();
  std::optional<Layout> lay;
  if (o.force_layout < 0) {
    if (vc.focus_layout)
      lay = vc.focus_layout;
    else if (coin(30))
      lay = static_cast<Layout>(pick(2, 5));
  }
  if (!lay) return s;
  RopeSpec t = s;
  t.layout = *lay;
  if (*lay == Layout::mrope || *lay == Layout::imrope) t.sections = split(np, 3, 0);
  if (*lay == Layout::axial && np >= 1)
    t.sections = split(np, static_cast<int>(std::min<std::int64_t>(np, pick(1, 3))), 1);
  if (*lay == Layout::proportional && t.head_dim % 2 != 0) return s;
  try {
    t.validate();
    return t;
  } catch (const SpecError&) {
    return s;
  }
}

// With variants: the focused scaling kind, or half the time a random one (axial specs carry none).
// A variant the spec cannot take is not applied.
inline RopeSpec with_variant_scaling(const Context& c, const SpecOptions& o, const RopeSpec& s) {
  std::optional<ScalingKind> kind = c.variants.focus_scaling;
  if (!kind && coin(50)) kind = static_cast<ScalingKind>(pick(1, 6));
  if (!kind || s.layout == Layout::axial) return s;
  RopeSpec t = s;
  add_scaling(t, *kind);
  try {
    t.validate();
    return t;
  } catch (const SpecError&) {
    return s;
  }
}

inline RopeSpec spec(const Context& c, const SpecOptions& o = {}) {
  if (c.only_spec) return *c.only_spec;  // a kernel of one configuration (model code)
  RopeSpec s;
  s.head_dim = draw_head_dim(c, o);
  s.rotary_dim = draw_rotary_dim(s.head_dim, o);
  s.base = draw_base();
  s.layout = o.force_layout >= 0 ? static_cast<Layout>(o.force_layout)
                                 : (coin(50) ? Layout::interleaved : Layout::half);
  if (c.domain.declared.magnitude_scale) s.scale = draw_scale();
  s = s.normalized();
  if (!c.variants.enabled) return s;
  s = with_variant_layout(c, o, s);
  return with_variant_scaling(c, o, s);
}

// A real-model multi-axis shape of layout lay (Qwen2-VL [16,24,24], Qwen2.5/3-VL [24,20,20],
// [8,12,12]; axial: CogVideoX 3-D t D/8, h 3D/16, w 3D/16 pairs, and 2-D) on a drawn spec's base,
// scale and (not for axial) scaling kind.
inline RopeSpec model_shape_spec(const Context& c, SpecOptions o, Layout lay) {
  struct Shape {
    std::int64_t hd;
    std::vector<std::int64_t> sec;
  };
  static const std::vector<Shape> mshapes = {
      {128, {16, 24, 24}}, {128, {24, 20, 20}}, {64, {8, 12, 12}}};
  static const std::vector<Shape> ashapes = {
      {64, {8, 12, 12}}, {128, {16, 24, 24}}, {64, {16, 16}}, {96, {12, 18, 18}}};
  const auto& v = lay == Layout::axial ? ashapes : mshapes;
  const Shape& sh = v[pick<std::size_t>(0, v.size() - 1)];
  o.force_layout = static_cast<int>(Layout::half);
  const RopeSpec s = spec(c, o);  // scale, base and (with variants) a scaling variant
  RopeSpec t = s;
  t.head_dim = sh.hd;
  t.rotary_dim = sh.hd;
  t.layout = lay;
  t.sections = sh.sec;
  if (s.scaling.kind != ScalingKind::none && lay != Layout::axial)
    add_scaling(t, s.scaling.kind);  // per-pair factors for the new dim
  else
    t.scaling = {};
  try {
    return t.normalized();
  } catch (const SpecError&) {
    t.scaling = {};
    return t.normalized();
  }
}

// A multi-axis spec for the per-axis properties: mrope / imrope (and axial unless mrope_only).
// 40%: a real-model shape (model_shape_spec); otherwise a generated 1-D spec (spec(c, o), with
// the scaling variant spec() gives when variants are enabled) turned multi-axis with random
// sections. The focused layout (c.variants) wins when it is a multi-axis one. Axial specs carry
// no scaling (as spec()).
inline RopeSpec multi_axis_spec(const Context& c, SpecOptions o, bool mrope_only) {
  const VariantConfig& vc = c.variants;
  std::optional<Layout> lay;
  if (vc.focus_layout && is_multi_axis(*vc.focus_layout) &&
      !(mrope_only && *vc.focus_layout == Layout::axial))
    lay = vc.focus_layout;
  if (!lay) lay = static_cast<Layout>(pick(3, mrope_only ? 4 : 5));
  if (coin(40)) return model_shape_spec(c, o, *lay);
  o.force_layout = static_cast<int>(Layout::half);
  for (;;) {
    const RopeSpec s = spec(c, o);
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
