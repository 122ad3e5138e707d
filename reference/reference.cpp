// The multiprecision oracle. Everything that decides a value (theta_i, angles, cos/sin, the
// rotation, the one rounding into a dtype) is done in MPFR at the process-wide precision; doubles
// only carry inputs (exact dtype values) and the final, already correctly rounded outputs.
#include "ropecheck/reference/reference.hpp"

#include <boost/multiprecision/detail/digits.hpp>

#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <regex>
#include <stdexcept>

namespace ropecheck::reference {

namespace bmp = boost::multiprecision;

namespace {

// Boost's own default for variable-precision MPFR is 50 digits10 (168 bits); the project default
// is max(2p + 30, 160) bits for the widest dtype, set before main so a fresh process agrees with
// the header's documentation without every executable having to remember it.
const bool kDefaultPrecisionSet = [] {
  set_precision_bits(default_bits(Dtype::f64));
  return true;
}();

mpfr_ptr raw(Mp& v) { return v.backend().data(); }
mpfr_srcptr raw(const Mp& v) { return v.backend().data(); }

// RAII mpfr_t for the few places that need a precision other than the process default.
struct Scratch {
  mpfr_t v;
  explicit Scratch(mpfr_prec_t prec) { mpfr_init2(v, prec); }
  ~Scratch() { mpfr_clear(v); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// cos and sin of the same argument in one MPFR call (each correctly rounded; MPFR reduces huge
// arguments exactly, so positions like 2^40 or 1e22 are fine).
void sin_cos(const Mp& a, Mp& s, Mp& c) { mpfr_sin_cos(raw(s), raw(c), raw(a), MPFR_RNDN); }

void check_pair(const RopeSpec& spec, std::int64_t pair) {
  if (pair < 0 || pair >= spec.n_pairs())
    throw std::out_of_range("reference: pair " + std::to_string(pair) + " out of range for " +
                            describe(spec));
}

Mp pi() {
  Mp r;
  mpfr_const_pi(raw(r), MPFR_RNDN);
  return r;
}
Mp mp_int(std::int64_t v) { return Mp(v); }  // exact: |v| < 2^63 fits any precision >= 64

// ln(base') of the ladder: ln(base) for every variant but dynamic NTK, whose base is
// (HF _compute_dynamic_ntk_parameters)
//   base' = base * (f L / L0 - (f - 1)) ^ (d / (d - 2)),  L = max(seq_len, L0),
// so ln base' = ln base + d/(d-2) ln(f L / L0 - f + 1), every step rounded once at MP precision.
Mp log_base(const RopeSpec& spec) {
  const Mp lnb = bmp::log(exact(spec.base));
  if (spec.scaling.kind != ScalingKind::dynamic) return lnb;
  const Scaling& sc = spec.scaling;
  const std::int64_t L = std::max(sc.seq_len, sc.max_position_embeddings);
  const Mp f = exact(sc.factor);
  const Mp t = f * mp_int(L) / mp_int(sc.max_position_embeddings) - (f - 1);
  const Mp d = mp_int(spec.ladder_dim());
  return lnb + d / (d - 2) * bmp::log(t);
}

// base^(-2j/dim) = exp(-(2j/dim) ln base); 2j and dim are exact integers, the quotient and every
// step after it are rounded once at MP precision. j = 0 gives exp(-0) = 1 exactly.
Mp theta_from_log_base(const RopeSpec& spec, std::int64_t pair, const Mp& ln_base) {
  const auto [j, dim] = spec.ladder(pair);
  const Mp exponent = Mp(2 * j) / Mp(dim);
  return bmp::exp(-exponent * ln_base);
}

// HF get_mscale: 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1. The recipe's 0.1 is the
// decimal one tenth (its meaning), not the double nearest to it.
Mp yarn_get_mscale(const Mp& scale, const Mp& mscale) {
  if (scale <= 1) return Mp(1);
  return Mp(1) / 10 * mscale * bmp::log(scale) + 1;
}

// The variant's attention factor in MP (precedence as in spec.hpp / HF).
Mp attention_factor(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  switch (sc.kind) {
    case ScalingKind::yarn: {
      if (sc.attention_factor) return exact(*sc.attention_factor);
      const Mp f = exact(sc.factor);
      if (sc.mscale != 0 && sc.mscale_all_dim != 0)
        return yarn_get_mscale(f, exact(sc.mscale)) / yarn_get_mscale(f, exact(sc.mscale_all_dim));
      return yarn_get_mscale(f, Mp(1));
    }
    case ScalingKind::longrope: {
      if (sc.attention_factor) return exact(*sc.attention_factor);
      const Mp orig = mp_int(sc.original_max_position_embeddings);
      const Mp f = mp_int(sc.max_position_embeddings) / orig;
      if (f <= 1) return Mp(1);
      return bmp::sqrt(1 + bmp::log(f) / bmp::log(orig));
    }
    default:
      return Mp(1);
  }
}

// theta_i / c_i per pair: freq_factors (ggml rope_freqs: theta_extrap = theta_base /
// freq_factor) and longrope's extension factors.
void divide_per_pair(std::vector<Mp>& th, const std::vector<double>& c) {
  for (std::size_t i = 0; i < th.size(); ++i) th[i] /= exact(c[i]);
}

// HF _compute_llama3_parameters:
//   wavelen = 2 pi / inv_freq; wavelen > orig/low -> inv_freq / factor;
//   wavelen < orig/high -> inv_freq; otherwise
//   smooth = (orig / wavelen - low) / (high - low),
//   inv_freq = (1 - smooth) * inv_freq / factor + smooth * inv_freq.
void apply_llama3(const Scaling& sc, std::vector<Mp>& th) {
  const Mp orig = mp_int(sc.original_max_position_embeddings);
  const Mp lo = exact(sc.low_freq_factor), hi = exact(sc.high_freq_factor);
  const Mp f = exact(sc.factor);
  const Mp low_wl = orig / lo, high_wl = orig / hi, two_pi = 2 * pi();
  for (auto& t : th) {
    const Mp wavelen = two_pi / t;
    if (wavelen < high_wl) continue;
    if (wavelen > low_wl) {
      t /= f;
      continue;
    }
    const Mp smooth = (orig / wavelen - lo) / (hi - lo);
    t = (1 - smooth) * t / f + smooth * t;
  }
}

// HF _compute_yarn_parameters:
//   find_correction_dim(r) = dim ln(orig / (r 2 pi)) / (2 ln base)
//   low, high = floor/ceil (truncate) of it at beta_fast, beta_slow; max(low, 0),
//   min(high, dim - 1); high += 0.001 when equal;
//   ramp_j = clamp((j - low) / (high - low), 0, 1)
//   inv_freq = (inv_freq / factor) * ramp + inv_freq * (1 - ramp)
// (j runs over the pair index, torch.arange(dim // 2)).
void apply_yarn(const RopeSpec& spec, std::vector<Mp>& th) {
  const Scaling& sc = spec.scaling;
  const Mp d = mp_int(spec.ladder_dim());
  const Mp orig = mp_int(sc.original_max_position_embeddings);
  const Mp lnb = bmp::log(exact(spec.base));
  const Mp two_pi = 2 * pi();
  const auto corr = [&](double rot) {
    return d * bmp::log(orig / (exact(rot) * two_pi)) / (2 * lnb);
  };
  Mp low = corr(sc.beta_fast), high = corr(sc.beta_slow);
  if (sc.truncate) {
    low = bmp::floor(low);
    high = bmp::ceil(high);
  }
  if (low < 0) low = Mp(0);
  if (high > d - 1) high = d - 1;
  if (low == high) high += exact(0.001);  // the double HF adds (a Python float)
  const Mp f = exact(sc.factor);
  for (std::size_t i = 0; i < th.size(); ++i) {
    Mp ramp = (mp_int(spec.ladder(static_cast<std::int64_t>(i)).first) - low) / (high - low);
    if (ramp < 0) ramp = Mp(0);
    if (ramp > 1) ramp = Mp(1);
    Mp& t = th[i];
    t = (t / f) * ramp + t * (1 - ramp);
  }
}

// theta'_i for every pair (MP), the variant applied to the unscaled ladder. Each formula is the
// recipe's (HF transformers modeling_rope_utils) evaluated in exact arithmetic up to one MP
// rounding per operation; comparisons (llama3 bands, yarn floor/ceil) are on MP values.
std::vector<Mp> compute_ladder(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  const Mp ln_base = log_base(spec);  // dynamic NTK's base' is applied here
  std::vector<Mp> th;
  th.reserve(static_cast<std::size_t>(spec.n_pairs()));
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i)
    th.push_back(theta_from_log_base(spec, i, ln_base));
  switch (sc.kind) {
    case ScalingKind::none:
    case ScalingKind::dynamic:
      break;
    case ScalingKind::linear: {
      // HF _compute_linear_scaling_rope_parameters: inv_freq /= factor.
      const Mp f = exact(sc.factor);
      for (auto& t : th) t /= f;
      break;
    }
    case ScalingKind::freq_factors:
      divide_per_pair(th, sc.freq_factors);
      break;
    case ScalingKind::longrope:
      // HF _compute_longrope_parameters: inv_freq = 1 / (ext_factors * base^(2i/dim)); long
      // factors iff seq_len > original_max_position_embeddings (strictly).
      divide_per_pair(
          th, sc.seq_len > sc.original_max_position_embeddings ? sc.long_factor : sc.short_factor);
      break;
    case ScalingKind::llama3:
      apply_llama3(sc, th);
      break;
    case ScalingKind::yarn:
      apply_yarn(spec, th);
      break;
  }
  return th;
}

void check_input(const RopeSpec& spec, const std::vector<double>& x) {
  if (static_cast<std::int64_t>(x.size()) != spec.head_dim)
    throw std::invalid_argument("reference: input has " + std::to_string(x.size()) +
                                " elements, spec wants head_dim " + std::to_string(spec.head_dim));
}

}  // namespace

// ---- precision -------------------------------------------------------------------------------

unsigned default_bits(Dtype d) {
  const int p = traits(d).digits;
  return static_cast<unsigned>(std::max(2 * p + 30, 160));
}

void set_precision_bits(unsigned bits) {
  // Boost 1.74 stores the default as digits10 and allocates digits10_2_2(digits10) bits; take the
  // smallest digits10 that reaches `bits` so the working precision is as close as Boost allows.
  unsigned d10 = 1;
  while (bmp::detail::digits10_2_2(d10) < bits) ++d10;
  Mp::default_precision(d10);
}

unsigned precision_bits() {
  Mp probe;
  return static_cast<unsigned>(mpfr_get_prec(raw(probe)));
}

// ---- exact numerics --------------------------------------------------------------------------

Mp exact(double v) {
  Mp r;
  mpfr_set_d(raw(r), v, MPFR_RNDN);  // exact: precision >= 53 (and keeps -0, inf, NaN)
  return r;
}

Mp parse_decimal(const std::string& s) {
  // Boost's string constructor is lenient (and so is mpfr_set_str with trailing junk); accept
  // only a plain decimal: optional sign, digits with an optional point, optional exponent.
  static const std::regex kDecimal(R"([+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)");
  if (!std::regex_match(s, kDecimal))
    throw std::invalid_argument("not a decimal number: '" + s + "'");
  Mp r;
  if (mpfr_set_str(raw(r), s.c_str(), 10, MPFR_RNDN) != 0)
    throw std::invalid_argument("not a decimal number: '" + s + "'");
  return r;
}

std::string to_decimal(const Mp& v, int significant_digits) {
  if (significant_digits < 1)
    throw std::invalid_argument("to_decimal: significant_digits must be >= 1");
  // Boost's default formatting (neither fixed nor scientific) is %g-like: plain for moderate
  // exponents, scientific otherwise; deterministic for a given value and digit count.
  return v.str(significant_digits, std::ios_base::fmtflags{});
}

namespace {
const std::vector<Mp>& theta_ladder(const RopeSpec& spec);

Positions broadcast(const RopeSpec& spec, const Mp& position) {
  return Positions(static_cast<std::size_t>(spec.n_axes()), position);
}
void check_positions(const RopeSpec& spec, const Positions& p) {
  if (static_cast<std::int64_t>(p.size()) != spec.n_axes())
    throw std::invalid_argument("reference: " + std::to_string(p.size()) +
                                " positions given, the spec has " + std::to_string(spec.n_axes()) +
                                " axes");
}
}  // namespace

Mp magnitude(const RopeSpec& spec) {
  const Mp af = attention_factor(spec);
  return af == 1 ? exact(spec.scale) : exact(spec.scale) * af;
}

std::vector<Mp> inv_freqs(const RopeSpec& spec) { return theta_ladder(spec); }

Mp inv_freq(const RopeSpec& spec, std::int64_t pair) {
  check_pair(spec, pair);
  return theta_ladder(spec)[static_cast<std::size_t>(pair)];
}

Mp angle(const RopeSpec& spec, std::int64_t pair, const Mp& position) {
  return position * inv_freq(spec, pair);
}

MpMatrix rotation(const RopeSpec& spec, const Mp& position) {
  return rotation(spec, broadcast(spec, position));
}

MpMatrix rotation(const RopeSpec& spec, const Positions& positions) {
  check_positions(spec, positions);
  const std::int64_t d = spec.head_dim;
  MpMatrix r = MpMatrix::Zero(d, d);
  const Mp s = magnitude(spec);
  const std::vector<Mp>& theta = theta_ladder(spec);
  Mp sn, cs;
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    const Mp& m = positions[static_cast<std::size_t>(spec.pair_axis(i))];
    sin_cos(m * theta[static_cast<std::size_t>(i)], sn, cs);
    r(a, a) = s * cs;
    r(a, b) = -(s * sn);
    r(b, a) = s * sn;
    r(b, b) = s * cs;
  }
  // Pass-through dims are copied, not scaled: s belongs to the rotation blocks only.
  for (std::int64_t j = 0; j < d; ++j)
    if (spec.is_passthrough(j)) r(j, j) = Mp(1);
  return r;
}

MpVector apply_dense(const RopeSpec& spec, const Mp& position, const std::vector<double>& x) {
  return apply_dense(spec, broadcast(spec, position), x);
}

MpVector apply_dense(const RopeSpec& spec, const Positions& positions,
                     const std::vector<double>& x) {
  check_input(spec, x);
  MpVector v(spec.head_dim);
  for (std::int64_t j = 0; j < spec.head_dim; ++j) v(j) = exact(x[j]);
  // Note: a non-finite input poisons every output here (0 * inf = NaN), as the math does.
  MpVector out = rotation(spec, positions) * v;
  return out;
}

MpVector apply_dense_transpose(const RopeSpec& spec, const Positions& positions,
                               const std::vector<double>& g) {
  check_input(spec, g);
  MpVector v(spec.head_dim);
  for (std::int64_t j = 0; j < spec.head_dim; ++j) v(j) = exact(g[j]);
  MpVector out = rotation(spec, positions).transpose() * v;
  return out;
}

// ---- block-structured paths ------------------------------------------------------------------
// Both go through the same per-position table of s*cos(m theta_i), s*sin(m theta_i), computed
// exactly as rotation() computes its entries (same theta ladder, same product, same correctly
// rounded sin/cos, same product with s), so they differ from the dense product only in how the
// two products of each output are summed: here mpfr_fmms/mpfr_fmma, one rounding per output.

namespace {

// s*cos and s*sin per pair for one (spec, position) at one precision.
struct TrigTable {
  RopeSpec spec;
  mpfr_prec_t prec = 0;
  Positions position;
  std::vector<Mp> sc, ss;
};

// theta ladder per (spec, precision): the exp() of every pair, shared by all positions.
struct Ladder {
  RopeSpec spec;
  mpfr_prec_t prec = 0;
  std::vector<Mp> theta;
};

mpfr_prec_t current_prec() { return static_cast<mpfr_prec_t>(precision_bits()); }

const std::vector<Mp>& theta_ladder(const RopeSpec& spec) {
  // Per thread: sweeps may run the oracle on several threads; no locks, no sharing.
  thread_local std::vector<Ladder> cache;
  const mpfr_prec_t prec = current_prec();
  for (const Ladder& l : cache)
    if (l.prec == prec && l.spec == spec) return l.theta;
  if (cache.size() >= 8) cache.erase(cache.begin());
  Ladder l;
  l.spec = spec;
  l.prec = prec;
  l.theta = compute_ladder(spec);
  cache.push_back(std::move(l));
  return cache.back().theta;
}

void fill_trig(const RopeSpec& spec, const Positions& position, TrigTable& t) {
  t.spec = spec;
  t.prec = current_prec();
  t.position = position;
  const std::vector<Mp>& theta = theta_ladder(spec);
  const Mp s = magnitude(spec);
  const std::size_t np = static_cast<std::size_t>(spec.n_pairs());
  t.sc.resize(np);
  t.ss.resize(np);
  Mp ang, sn, cs;
  for (std::size_t i = 0; i < np; ++i) {
    const Mp& m = position[static_cast<std::size_t>(spec.pair_axis(static_cast<std::int64_t>(i)))];
    mpfr_mul(raw(ang), raw(m), raw(theta[i]), MPFR_RNDN);
    mpfr_sin_cos(raw(sn), raw(cs), raw(ang), MPFR_RNDN);
    // Fresh numbers at the current precision (a cached Mp keeps the precision it was made with).
    t.sc[i] = Mp();
    t.ss[i] = Mp();
    mpfr_mul(raw(t.sc[i]), raw(s), raw(cs), MPFR_RNDN);
    mpfr_mul(raw(t.ss[i]), raw(s), raw(sn), MPFR_RNDN);
  }
}

MpVector rotate_with(const RopeSpec& spec, const TrigTable& t, const std::vector<double>& x) {
  MpVector out(spec.head_dim);
  thread_local Scratch xa(53), xb(53);  // doubles are exact at 53 bits
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    mpfr_set_d(xa.v, x[a], MPFR_RNDN);
    mpfr_set_d(xb.v, x[b], MPFR_RNDN);
    const mpfr_srcptr c = raw(t.sc[static_cast<std::size_t>(i)]);
    const mpfr_srcptr s = raw(t.ss[static_cast<std::size_t>(i)]);
    mpfr_fmms(raw(out(a)), c, xa.v, s, xb.v, MPFR_RNDN);  // s cos x_a - s sin x_b, one rounding
    mpfr_fmma(raw(out(b)), s, xa.v, c, xb.v, MPFR_RNDN);  // s sin x_a + s cos x_b, one rounding
  }
  for (std::int64_t j = 0; j < spec.head_dim; ++j)
    if (spec.is_passthrough(j)) out(j) = exact(x[j]);
  return out;
}

bool same_positions(const Positions& a, const Positions& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!mpfr_equal_p(raw(a[i]), raw(b[i]))) return false;
  return true;
}

}  // namespace

MpVector apply_blocked(const RopeSpec& spec, const Mp& position, const std::vector<double>& x) {
  return apply_blocked(spec, broadcast(spec, position), x);
}

MpVector apply_cached(const RopeSpec& spec, const Mp& position, const std::vector<double>& x) {
  return apply_cached(spec, broadcast(spec, position), x);
}

MpVector apply_blocked(const RopeSpec& spec, const Positions& position,
                       const std::vector<double>& x) {
  check_input(spec, x);
  check_positions(spec, position);
  TrigTable t;
  fill_trig(spec, position, t);
  return rotate_with(spec, t, x);
}

MpVector apply_cached(const RopeSpec& spec, const Positions& position,
                      const std::vector<double>& x) {
  check_input(spec, x);
  check_positions(spec, position);
  // Most-recently-used first; a sweep over vectors at one position hits the front entry.
  thread_local std::vector<std::unique_ptr<TrigTable>> lru;
  const mpfr_prec_t prec = current_prec();
  std::size_t hit = lru.size();
  for (std::size_t k = 0; k < lru.size(); ++k)
    if (lru[k]->prec == prec && same_positions(lru[k]->position, position) &&
        lru[k]->spec == spec) {
      hit = k;
      break;
    }
  if (hit == lru.size()) {
    if (lru.size() >= kTrigCacheEntries) lru.pop_back();
    auto t = std::make_unique<TrigTable>();
    fill_trig(spec, position, *t);
    lru.insert(lru.begin(), std::move(t));
  } else if (hit != 0) {
    std::rotate(lru.begin(), lru.begin() + static_cast<std::ptrdiff_t>(hit),
                lru.begin() + static_cast<std::ptrdiff_t>(hit) + 1);
  }
  return rotate_with(spec, *lru.front(), x);
}

// ---- one correct rounding ---------------------------------------------------------------------

double round_to(const Mp& v, Dtype d) {
  const mpfr_srcptr x = raw(v);
  if (mpfr_nan_p(x)) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = mpfr_signbit(x) != 0;
  const double inf = std::numeric_limits<double>::infinity();
  if (mpfr_inf_p(x)) return neg ? -inf : inf;
  if (mpfr_zero_p(x)) return neg ? -0.0 : 0.0;

  const auto t = traits(d);
  // MPFR writes x = m * 2^E with |m| in [1/2, 1), so floor(log2 |x|) = E - 1. Clamping at emin
  // gives the subnormal quantum below the normal range.
  const long e = std::max<long>(mpfr_get_exp(x) - 1, t.emin);
  const long q_exp = e - (t.digits - 1);  // quantum q = 2^q_exp
  // x / q needs no more bits than x has (power-of-two scaling), and round-half-even of it is an
  // integer of at most p + 1 bits, so a scratch of max(prec(x), p + 2) bits makes every step
  // below exact except the single intended rounding in mpfr_rint.
  Scratch y(std::max<mpfr_prec_t>(mpfr_get_prec(x), t.digits + 2));
  mpfr_div_2si(y.v, x, q_exp, MPFR_RNDN);
  mpfr_rint(y.v, y.v, MPFR_RNDN);  // MPFR_RNDN on rint = nearest, ties to even
  mpfr_mul_2si(y.v, y.v, q_exp, MPFR_RNDN);
  if (mpfr_zero_p(y.v)) return neg ? -0.0 : 0.0;  // underflow keeps the sign of x
  // Rounded (with unbounded exponent) above max finite <=> |x| >= (2 - 2^-p) 2^emax: IEEE
  // overflow under round-to-nearest goes to inf, ties included (the tie's even neighbour is
  // 2^(emax+1)).
  if (mpfr_cmp_d(y.v, max_finite(d)) > 0 || mpfr_cmp_d(y.v, -max_finite(d)) < 0)
    return neg ? -inf : inf;
  return mpfr_get_d(y.v, MPFR_RNDN);  // exact: y is a dtype value and every dtype value is a double
}

std::vector<double> round_to(const MpVector& v, Dtype d) {
  std::vector<double> out(static_cast<std::size_t>(v.size()));
  for (Eigen::Index j = 0; j < v.size(); ++j) out[static_cast<std::size_t>(j)] = round_to(v(j), d);
  return out;
}

double ulp(double y, Dtype d) {
  const auto t = traits(d);
  if (std::isnan(y)) return std::numeric_limits<double>::quiet_NaN();
  if (y == 0) return min_subnormal(d);
  // The exponent from the bits (ilogb and ldexp were a tenth of the report's element loop): a
  // subnormal double lies below every dtype's emin, and 2^k for k >= -1074 is built directly.
  const auto biased = static_cast<int>((std::bit_cast<std::uint64_t>(y) >> 52) & 0x7ff);
  const int e = std::isinf(y) ? t.emax : std::max(biased - 1023, t.emin);
  const int k = e - t.digits + 1;
  return k >= -1022 ? std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52)
                    : std::bit_cast<double>(std::uint64_t{1} << (k + 1074));
}

}  // namespace ropecheck::reference
