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

// The magnitude scale s of every rotation block. Only `none` exists; a scaling variant that
// changes the magnitude (e.g. YaRN's attention factor) becomes a case here.
Mp magnitude(const RopeSpec& spec) {
  switch (spec.scaling.kind) {
    case ScalingKind::none:
      return exact(spec.scale);
  }
  throw std::invalid_argument("reference: unknown scaling kind");
}

void check_pair(const RopeSpec& spec, std::int64_t pair) {
  if (pair < 0 || pair >= spec.n_pairs())
    throw std::out_of_range("reference: pair " + std::to_string(pair) + " out of range for " +
                            describe(spec));
}

// ln(base), the one transcendental shared by the whole theta ladder.
Mp log_base(const RopeSpec& spec) {
  switch (spec.scaling.kind) {
    case ScalingKind::none:
      return bmp::log(exact(spec.base));
  }
  throw std::invalid_argument("reference: unknown scaling kind");
}

// base^(-2i/rd) = exp(-(2i/rd) ln base); 2i and rd are exact integers, the quotient and every
// step after it are rounded once at MP precision. i = 0 gives exp(-0) = 1 exactly. inv_freq and
// the per-vector paths below all go through here, so they see bit-identical theta_i.
Mp theta_from_log_base(const RopeSpec& spec, std::int64_t pair, const Mp& ln_base) {
  const Mp exponent = Mp(2 * pair) / Mp(spec.rotary_dim);
  return bmp::exp(-exponent * ln_base);
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

Mp inv_freq(const RopeSpec& spec, std::int64_t pair) {
  check_pair(spec, pair);
  return theta_from_log_base(spec, pair, log_base(spec));
}

Mp angle(const RopeSpec& spec, std::int64_t pair, const Mp& position) {
  return position * inv_freq(spec, pair);
}

MpMatrix rotation(const RopeSpec& spec, const Mp& position) {
  const std::int64_t d = spec.head_dim;
  MpMatrix r = MpMatrix::Zero(d, d);
  const Mp s = magnitude(spec);
  const Mp ln_base = log_base(spec);
  Mp sn, cs;
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    sin_cos(position * theta_from_log_base(spec, i, ln_base), sn, cs);
    r(a, a) = s * cs;
    r(a, b) = -(s * sn);
    r(b, a) = s * sn;
    r(b, b) = s * cs;
  }
  // Pass-through dims are copied, not scaled: s belongs to the rotation blocks only.
  for (std::int64_t j = spec.rotary_dim; j < d; ++j) r(j, j) = Mp(1);
  return r;
}

MpVector apply_dense(const RopeSpec& spec, const Mp& position, const std::vector<double>& x) {
  check_input(spec, x);
  MpVector v(spec.head_dim);
  for (std::int64_t j = 0; j < spec.head_dim; ++j) v(j) = exact(x[j]);
  // Note: a non-finite input poisons every output here (0 * inf = NaN), as the math does.
  MpVector out = rotation(spec, position) * v;
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
  Mp position;
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
  const Mp ln_base = log_base(spec);
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i)
    l.theta.push_back(theta_from_log_base(spec, i, ln_base));
  cache.push_back(std::move(l));
  return cache.back().theta;
}

void fill_trig(const RopeSpec& spec, const Mp& position, TrigTable& t) {
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
    mpfr_mul(raw(ang), raw(position), raw(theta[i]), MPFR_RNDN);
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
  for (std::int64_t j = spec.rotary_dim; j < spec.head_dim; ++j) out(j) = exact(x[j]);
  return out;
}

}  // namespace

MpVector apply_blocked(const RopeSpec& spec, const Mp& position, const std::vector<double>& x) {
  check_input(spec, x);
  TrigTable t;
  fill_trig(spec, position, t);
  return rotate_with(spec, t, x);
}

MpVector apply_cached(const RopeSpec& spec, const Mp& position, const std::vector<double>& x) {
  check_input(spec, x);
  // Most-recently-used first; a sweep over vectors at one position hits the front entry.
  thread_local std::vector<std::unique_ptr<TrigTable>> lru;
  const mpfr_prec_t prec = current_prec();
  std::size_t hit = lru.size();
  for (std::size_t k = 0; k < lru.size(); ++k)
    if (lru[k]->prec == prec && mpfr_equal_p(raw(lru[k]->position), raw(position)) &&
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
  const int e = std::isinf(y) ? t.emax : std::max(std::ilogb(y), t.emin);
  return std::ldexp(1.0, e - t.digits + 1);
}

// ---- error of a candidate output -------------------------------------------------------------

VectorError compare(const RopeSpec& spec, Dtype d, const std::vector<double>& input,
                    const MpVector& exact_out, const std::vector<double>& got) {
  check_input(spec, input);
  if (exact_out.size() != spec.head_dim || static_cast<std::int64_t>(got.size()) != spec.head_dim)
    throw std::invalid_argument("compare: exact/got sizes do not match head_dim");
  const double inf = std::numeric_limits<double>::infinity();
  VectorError err;

  for (std::int64_t j = 0; j < spec.head_dim; ++j) {
    const Mp& ex = exact_out(j);
    const double g = got[j];
    const double r = round_to(ex, d);
    const bool ex_finite = mpfr_number_p(raw(ex)) != 0;
    double e_ulp, e_abs;
    if (!ex_finite) {
      // Only reachable from non-finite inputs: the one acceptable output is the same class.
      const bool same = (std::isnan(g) && std::isnan(r)) || g == r;
      e_ulp = e_abs = same ? 0.0 : inf;
    } else if (!std::isfinite(g)) {
      e_ulp = e_abs = inf;
    } else {
      const Mp diff = bmp::abs(exact(g) - ex);
      e_abs = diff.convert_to<double>();
      e_ulp = (diff / exact(ulp(r, d))).convert_to<double>();
    }
    const bool rounded_ok = (std::isnan(g) && std::isnan(r)) || g == r;
    if (!rounded_ok) ++err.not_correctly_rounded;
    if (e_ulp > err.max_ulp || err.max_ulp_index < 0) {
      err.max_ulp = e_ulp;
      err.max_ulp_index = j;
    }
    err.max_abs_error = std::max(err.max_abs_error, e_abs);
  }

  const Mp s = magnitude(spec);
  const Mp u = exact(unit_roundoff(d));
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    double e;
    if (!std::isfinite(input[a]) || !std::isfinite(input[b])) {
      // No relative error exists for a non-finite input; the element checks above cover it.
      continue;
    } else if (!std::isfinite(got[a]) || !std::isfinite(got[b])) {
      e = inf;
    } else {
      const Mp xa = exact(input[a]), xb = exact(input[b]);
      const Mp in_norm = bmp::sqrt(xa * xa + xb * xb);
      if (in_norm == 0) {
        e = (got[a] == 0 && got[b] == 0) ? 0.0 : inf;
      } else {
        const Mp da = exact(got[a]) - exact_out(a), db = exact(got[b]) - exact_out(b);
        e = (bmp::sqrt(da * da + db * db) / (s * in_norm) / u).convert_to<double>();
      }
    }
    if (e > err.max_pair_error_u || err.max_pair_index < 0) {
      err.max_pair_error_u = e;
      err.max_pair_index = i;
    }
  }

  for (std::int64_t j = spec.rotary_dim; j < spec.head_dim; ++j) {
    const bool ok = std::isnan(input[j]) ? std::isnan(got[j])
                                         : std::bit_cast<std::uint64_t>(input[j]) ==
                                               std::bit_cast<std::uint64_t>(got[j]);
    if (!ok) err.passthrough_exact = false;
  }
  return err;
}

}  // namespace ropecheck::reference
