// What every property family shares, templated on the storage dtype: conversions, fail / discard
// (a case's whole message), the shrink budget, usable() (a spec inside the declared domain), run()
// (one checked kernel call: unsupported inside the domain is a mismatch, a finite input must give
// a finite output), finite_input(), PairText (a pair's message in verify's formats), and the two
// bounds several families compare with: twice the pair bound between two outputs of one exact
// rotation, and a pair's share of the score bound.
//
// Every property receives the kernel and the check's gen::Context (domain, variants, shrink
// budget) and draws every random choice through gen.hpp, in a fixed order (a reorder changes the
// cases of a fixed seed). A pair compared with its exact value against the pair bound goes
// through ropecheck::verify (PairChecker, explain_pair): the one definition of that comparison.
// Other claims (norm, composition, scores, faithful rounding) state their own inequality.
#pragma once

#include "gen.hpp"
#include "ropecheck/bounds.hpp"
#include "ropecheck/properties.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/regimes.hpp"
#include "ropecheck/verify/advise.hpp"
#include "ropecheck/verify/verify.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <numeric>
#include <optional>
#include <sstream>
#include <tuple>
#include <vector>

namespace ropecheck::properties::detail {

using reference::Mp;
namespace g = ::ropecheck::properties::gen;

template <Dtype D>
using T = storage_t<D>;

template <Dtype D>
T<D> to_st(double v) {
  if constexpr (D == Dtype::f64)
    return v;
  else if constexpr (D == Dtype::f32)
    return static_cast<float>(v);
  else
    return T<D>(static_cast<float>(v));  // v is representable: exact
}
template <Dtype D>
double to_d(T<D> v) {
  if constexpr (D == Dtype::f64)
    return v;
  else
    return static_cast<double>(static_cast<float>(v));
}
template <class X>
bool same_bits(const X& a, const X& b) {
  return std::memcmp(&a, &b, sizeof(X)) == 0;
}

inline std::string hex(double v) {
  std::ostringstream o;
  o << std::hexfloat << v;
  return o.str();
}

// Counts a kernel call while shrinking; past the budget every further shrink candidate is
// discarded before it calls the kernel, so shrinking ends with the smallest failure found.
inline void count_shrink_call(g::ShrinkBudget& b) {
  if (!b.shrinking) return;
  if (b.past_deadline()) {
    b.spent = b.out_of_time = true;
    throw rc::detail::CaseResult(rc::detail::CaseResult::Type::Discard, "shrink time spent");
  }
  if (b.limit <= 0) return;
  if (++b.calls > b.limit) {
    b.spent = true;
    throw rc::detail::CaseResult(rc::detail::CaseResult::Type::Discard, "shrink budget spent");
  }
}

// A failed / discarded case. The message is the whole description: no source path, no generator
// dump (RapidCheck's RC_FAIL would prefix the build machine's file:line).
[[noreturn]] inline void fail(const std::string& m) {
  throw rc::detail::CaseResult(rc::detail::CaseResult::Type::Failure, m);
}
[[noreturn]] inline void discard(const std::string& m) {
  throw rc::detail::CaseResult(rc::detail::CaseResult::Type::Discard, m);
}
// Message prefixes that classify a failure (properties.cpp turns them into the Verdict's status).
inline constexpr const char* kMismatch = kMismatchPrefix;
inline constexpr const char* kNonFinite = kNonFinitePrefix;

inline Mp ex(double v) { return reference::exact(v); }

// "a > bound b" with as many digits as it takes for the two to print differently (6, else 20),
// and a NaN named as such.
inline std::string exceeds(const Mp& a, const Mp& b) {
  if (isnan(a)) return "NaN (not comparable with the bound " + reference::to_decimal(b, 6) + ")";
  std::string sa = reference::to_decimal(a, 6), sb = reference::to_decimal(b, 6);
  if (sa == sb) sa = reference::to_decimal(a, 20), sb = reference::to_decimal(b, 20);
  return sa + " > bound " + sb;
}
// verify::exceeded for an error computed in MP against a double bound (unit: the pair's scale
// s ||x_pair|| u, 0 when the input pair is zero).
inline std::string exceeded(const Mp& err, double bound, double unit) {
  return verify::exceeded(err.convert_to<double>(), bound, unit, false, false);
}
// The same in u of the dtype (unit = scale * u), relative and with the input's scale: the form
// every property's message takes.
inline std::string exceeded(const Mp& err, double bound, double scale, double u) {
  const double e = err.convert_to<double>();
  return verify::exceeded(e, bound, scale * u, false, false) +
         verify::relative_text(e, bound, scale);
}
// The magnitude s of a spec: scale times the variant's attention factor (exact, and as double).
inline Mp mag(const RopeSpec& s) { return reference::magnitude(s); }
inline double magd(const RopeSpec& s) { return reference::magnitude(s).convert_to<double>(); }
// Dims of no rotated pair (copied bit for bit).
inline std::vector<std::int64_t> pass_dims(const RopeSpec& s) {
  std::vector<std::int64_t> v;
  for (std::int64_t j = 0; j < s.head_dim; ++j)
    if (s.is_passthrough(j)) v.push_back(j);
  return v;
}
inline Mp hyp(const Mp& a, const Mp& b) { return sqrt(a * a + b * b); }
inline double dbl(const Mp& v) { return v.convert_to<double>(); }

inline bool f32_angle(const Policy& p) {
  return traits(angle_precision(p)).digits <= 24;  // hf_f32 and ladder_f32 are f32 angles
}
// Position range for compositions: to 2^24 for f32-angle kernels (beyond that float(m) itself
// rounds and the bound is already near its cap of 2), beyond 2^31 for f64-angle kernels.
inline std::int64_t composition_limit(const Policy& p) {
  return f32_angle(p) ? (std::int64_t{1} << 24) : (std::int64_t{1} << 33);
}

// A spec inside the kernel's domain: a drawn one (a few draws, each also tried in the other basic
// layout unless the layout is forced), else a probed spec the kernel accepted (gen.hpp
// DomainContext) with this draw's base and scale, else discard.
template <Dtype D>
RopeSpec usable(const Kernel& k, const g::Context& c, const g::SpecOptions& o = {}) {
  if (c.only_spec) {  // the one spec, when it has what the property asks of a spec
    const RopeSpec& f = *c.only_spec;
    if (o.force_partial && f.rotary_dim >= f.head_dim) discard("the one spec is full rotary");
    if (o.force_layout >= 0 && f.layout != static_cast<Layout>(o.force_layout))
      discard("the one spec is " + std::string(name(f.layout)));
    return f;
  }
  RopeSpec s;
  // Whether the first draw asked for partial rotary: a rejected partial draw falls back to a probed
  // partial spec, so a kernel that takes one partial ratio still gets its share of partial cases.
  bool wanted_partial = false;
  ScalingKind wanted_kind = ScalingKind::none;  // the first draw's: a rejected one falls back to it
  for (int attempt = 0; attempt < 6; ++attempt) {
    // A rejected partial draw is drawn again as partial: redrawn freely, 65 % of the redraws are
    // full rotary and accepted, and a kernel of one partial ratio got under 1 % partial cases.
    // (An odd head_dim's full rotary, one pass-through dim, is not what such a draw asked for.)
    g::SpecOptions oa = o;
    oa.force_partial = o.force_partial || (attempt > 0 && wanted_partial);
    s = g::spec(c, oa);
    if (attempt == 0) {
      wanted_partial = s.rotary_dim < s.head_dim - s.head_dim % 2 && !is_multi_axis(s.layout);
      wanted_kind = is_multi_axis(s.layout) ? ScalingKind::none : s.scaling.kind;
    }
    if (attempt > 0 && wanted_partial && s.rotary_dim == s.head_dim - 1) continue;
    if (k.supports(s, D)) return s;
    if (o.force_layout < 0 && (s.layout == Layout::half || s.layout == Layout::interleaved)) {
      RopeSpec t = s;
      t.layout = s.layout == Layout::half ? Layout::interleaved : Layout::half;
      if (k.supports(t, D)) return t;
    }
  }
  // A kernel of multi-axis layouts only: the 1-D properties call its specs with one position per
  // token, which the ABI defines as that position on every axis (t = h = w).
  const bool multi_only = c.domain.full.empty() && c.domain.partial.empty();
  const bool partial = o.force_partial || (wanted_partial && !c.domain.partial.empty());
  // A rejected scaled draw: a probed shape that takes its kind, with this draw's base and scale
  // and the kind's parameters drawn again (else the probe's example parameters).
  const auto kind = static_cast<std::size_t>(wanted_kind);
  if (!partial && wanted_kind != ScalingKind::none && kind < c.domain.scaled.size() &&
      o.force_layout < 0) {
    const auto& pool = c.domain.scaled[kind];
    if (!pool.empty()) {
      const RopeSpec t = pool[g::pick<std::size_t>(0, pool.size() - 1)];
      RopeSpec v = t;
      v.base = s.base;
      v.scale = s.scale;
      g::add_scaling(v, wanted_kind);
      try {
        v = v.normalized();
        if (k.supports(v, D)) return v;
      } catch (const SpecError&) {
      }
      return t;  // probed as supported
    }
  }
  const auto& pool = partial ? c.domain.partial : multi_only ? c.domain.multi_axis : c.domain.full;
  std::vector<RopeSpec> fit;
  for (const RopeSpec& t : pool)
    if (o.force_layout < 0 || t.layout == static_cast<Layout>(o.force_layout)) fit.push_back(t);
  // A draw that wanted partial rotary gets a spec that rotates fewer pairs than head_dim holds,
  // where one was probed: the partial pool also holds an odd head_dim's full rotary (one
  // pass-through dim), which the grid probes at a dozen odd dims and would mostly be drawn.
  const auto odd_full = [](const RopeSpec& t) { return t.rotary_dim == t.head_dim - 1; };
  if (wanted_partial && !std::all_of(fit.begin(), fit.end(), odd_full))
    fit.erase(std::remove_if(fit.begin(), fit.end(), odd_full), fit.end());
  if (!fit.empty()) {
    RopeSpec t = fit[g::pick<std::size_t>(0, fit.size() - 1)];
    RopeSpec u = t;
    u.base = s.base;
    u.scale = s.scale;
    if (k.supports(u, D)) return u;
    return t;  // probed as supported
  }
  discard("kernel supports no drawn spec, e.g. " + describe(s));
}

inline std::string ctx(const RopeSpec& s, const std::vector<std::int64_t>& pos) {
  std::ostringstream o;
  o << describe(s) << " positions=[";
  for (std::size_t i = 0; i < pos.size(); ++i) o << (i ? "," : "") << pos[i];
  o << "]";
  return o.str();
}

// A finite input must give a finite output: a pair whose inputs are finite must come out finite,
// and so must a finite pass-through element (inputs are scaled so that no output can overflow).
// Vector v's elements are at in/out + v * stride (the caller flattens tokens and heads).
template <Dtype D>
void expect_finite(const RopeSpec& s, std::int64_t nvec, const T<D>* in, std::int64_t in_stride,
                   const T<D>* out, std::int64_t out_stride, const std::vector<std::int64_t>& pos) {
  for (std::int64_t v = 0; v < nvec; ++v) {
    const T<D>* x = in + v * in_stride;
    const T<D>* y = out + v * out_stride;
    // A non-finite input elsewhere in the vector that reaches a finite pair was moved between
    // pairs (a pairing / layout bug): wrong results, not a kernel making up NaN or inf.
    std::int64_t moved_from = -1;
    for (std::int64_t j = 0; j < s.head_dim && moved_from < 0; ++j)
      if (!std::isfinite(to_d<D>(x[j]))) moved_from = j;
    auto bad = [&](std::int64_t j, bool input_finite) {
      if (!input_finite || std::isfinite(to_d<D>(y[j]))) return;
      std::ostringstream o;
      const double yv = to_d<D>(y[j]);
      if (moved_from >= 0)
        o << "a non-finite input reached another pair (pairing or layout bug?): element "
          << moved_from << " holds " << hex(to_d<D>(x[moved_from])) << ", and ";
      else
        o << kNonFinite;
      o << "vector " << v << " element " << j << " is "
        << (std::isnan(yv) ? "NaN"
            : yv > 0       ? "+inf"
                           : "-inf")
        << " for the finite input " << hex(to_d<D>(x[j]))
        << (s.is_passthrough(j) ? " (pass-through)" : " (pair input)") << " | " << ctx(s, pos);
      fail(o.str());
    };
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [a, b] = s.pair(i);
      const bool fin = std::isfinite(to_d<D>(x[a])) && std::isfinite(to_d<D>(x[b]));
      bad(a, fin);
      bad(b, fin);
    }
    for (std::int64_t j = 0; j < s.head_dim; ++j)
      if (s.is_passthrough(j)) bad(j, std::isfinite(to_d<D>(x[j])));
  }
}

// One kernel call, counted against the shrink budget. A failure names the spec, and the positions
// when given.
inline void apply_checked(const Kernel& k, g::Context& c, const RopeSpec& s, const TensorArgs& a,
                          const std::vector<std::int64_t>* pos = nullptr, bool backward = false) {
  count_shrink_call(c.shrink);
  const KernelStatus st = backward ? k.apply_backward(s, a) : k.apply(s, a);
  if (st == KernelStatus::ok) return;
  const std::string call = pos ? ctx(s, *pos) : describe(s);
  const char* fn = backward ? "apply_backward()" : "apply()";
  if (st == KernelStatus::unsupported)
    fail(std::string(kMismatch) + fn +
         " returned UNSUPPORTED for a call inside the declared "
         "domain (supports() accepted the spec): " +
         call);
  fail(std::string("kernel returned error from ") + fn + " for " + call);
}

// Contiguous [tokens][heads][head_dim] call; n_axes > 1: one position per token and axis.
template <Dtype D>
std::vector<T<D>> run(const Kernel& k, g::Context& c, const RopeSpec& s, std::int64_t nt,
                      std::int64_t nh, const std::vector<std::int64_t>& pos,
                      const std::vector<T<D>>& in, std::int64_t n_axes = 1, bool backward = false) {
  std::vector<T<D>> out(in.size(), to_st<D>(0.0));
  TensorArgs a;
  a.dtype = D;
  a.n_tokens = nt;
  a.n_heads = nh;
  a.n_axes = n_axes;  // positions[t * n_axes + axis]
  a.positions = pos.data();
  a.in = in.data();
  a.out = out.data();
  a.head_stride = s.head_dim;
  a.token_stride = nh * s.head_dim;
  apply_checked(k, c, s, a, &pos, backward);
  expect_finite<D>(s, nt * nh, in.data(), s.head_dim, out.data(), s.head_dim, pos);
  return out;
}

template <Dtype D>
std::vector<T<D>> store_vec(const std::vector<double>& x) {
  std::vector<T<D>> v(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = to_st<D>(x[i]);
  return v;
}
template <Dtype D>
std::vector<double> load_vec(const T<D>* p, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = to_d<D>(p[i]);
  return v;
}

// The domain a policy is checked on: values whose pair outputs fit the storage format *and* the
// formats the policy computes in (a kernel declaring f32 arithmetic cannot hold an f64 value of
// 1e300; that is its declared limitation, not a rounding error). The lower end needs no clamp: the
// bound's underflow terms cover flushes into the arithmetic format's subnormals.
inline double policy_max(const Policy& p) {
  return std::min({max_finite(p.arithmetic), max_finite(p.table)});
}

// Finite input of nvec vectors for a kernel with policy pol.
template <Dtype D>
std::vector<double> finite_input(const Policy& pol, const RopeSpec& s, std::int64_t nvec) {
  const double sm = magd(s);
  const double clamp =
      std::min(g::value_clamp(D, sm), policy_max(pol) / (8 * std::max(1.0, sm * sm)));
  std::vector<double> x;
  // Some vectors carry zero pairs (x_a = x_b = 0): the exact output is 0, and kernels that
  // normalize by the pair norm or take atan2 of it divide by zero there.
  const bool zeros = g::coin(12);
  for (std::int64_t v = 0; v < nvec; ++v) {
    auto one = g::finite_vector(D, s.head_dim, clamp);
    if (zeros)
      for (std::int64_t i = 0; i < s.n_pairs(); ++i)
        if (g::coin(40)) {
          const auto [a, b] = s.pair(i);
          one[static_cast<std::size_t>(a)] = one[static_cast<std::size_t>(b)] = 0.0;
        }
    x.insert(x.end(), one.begin(), one.end());
  }
  return x;
}

// Pair p of a vector in the messages of the pair checks, in verify's formats (the ones `check`,
// `validate` and the reports print): `at` locates the vector (token, position, head) and gains the
// pair; x, got and exact are the vector's head_dim values (exact: the oracle's answers, whose MP
// values are computed only for a message); `call` is the call's context (`<spec>
// positions=[...]`, as in every counterexample).
struct PairText {
  verify::Location at;
  const verify::PairChecker& pc;
  const verify::PairCheck& p;
  double position;
  const double* x;
  const double* got;
  const reference::ExactVector& exact;
  const std::string& call;

  std::size_t a() const { return static_cast<std::size_t>(p.elem_a); }
  std::size_t b() const { return static_cast<std::size_t>(p.elem_b); }
  std::string located() const {
    verify::Location l = at;
    l.pair = p.pair;
    l.elem_a = p.elem_a;
    l.elem_b = p.elem_b;
    return l.text();
  }
  // Suffix of every message: the call and the bound's terms.
  std::string context() const {
    return " | " + call + " | " + pc.bound(p.pair, position).describe();
  }
  // The pair out of its pair bound: where, why (verify::explain_pair), the call, the bound.
  std::string out_of_bound() const {
    return located() + ": " +
           verify::explain_pair(p, x[a()], x[b()], got[a()], got[b()], exact.mp(p.elem_a),
                                exact.mp(p.elem_b), pc.u()) +
           context();
  }
  // The pair's values without a verdict: got, expected and the input.
  std::string values() const {
    const auto ga = verify::fmt_got_expected(got[a()], exact.mp(p.elem_a));
    const auto gb = verify::fmt_got_expected(got[b()], exact.mp(p.elem_b));
    const auto xs = verify::fmt_apart(x[a()], x[b()], 9);
    return located() + ": got (" + ga.first + ", " + gb.first + "), expected (" + ga.second + ", " +
           gb.second + ") from x = (" + xs.first + ", " + xs.second + ")" + context();
  }
};

// Two outputs of the same exact rotation at position m (e.g. one layout and the other, or one
// token batched and alone), each within its pair bound B_i of the exact value s R_m x: they differ
// per pair by at most 2 B_i (triangle inequality), and pass-through dims are copies, bit for bit.
// x is the input in the layout of s (the pair norms); y1, y2 the two outputs, d values each.
// Returns the first violation, or "" when the two agree as far as the bound allows.
template <Dtype D>
std::string differ_beyond_twice_the_bound(const Policy& pol, const RopeSpec& s, std::int64_t m,
                                          const double* x, const T<D>* y1, const T<D>* y2) {
  const auto y1d = load_vec<D>(y1, s.head_dim), y2d = load_vec<D>(y2, s.head_dim);
  for (std::int64_t j : pass_dims(s))
    if (!same_bits(y1[j], y2[j])) return "pass-through dim " + std::to_string(j) + " differs";
  const Mp sm = mag(s);
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    const double xn = dbl(sm * hyp(ex(x[a]), ex(x[b])));
    const double bound = 2 * bounds::pair_error_bound(pol, s, D, i, static_cast<double>(m)).abs(xn);
    const Mp err = hyp(ex(y1d[a]) - ex(y2d[a]), ex(y1d[b]) - ex(y2d[b]));
    if (!(err <= Mp(bound)))
      return "pair " + std::to_string(i) +
             " differs beyond twice the pair bound: " + exceeded(err, bound, xn, unit_roundoff(D));
  }
  return "";
}

// Score bound term of pair i (= bounds::score_pair_abs, in MP): q's pair turned at position pq,
// k's at pk, each kernel output within its pair error bound. Callers sum it in MP: with subnormal
// q and k the products of norms underflow in double while the MP scores do not. sm = mag(s).
template <Dtype D>
Mp score_pair_bound(const Policy& pol, const RopeSpec& s, const Mp& sm, std::int64_t i,
                    std::int64_t pq, std::int64_t pk, const std::vector<double>& q,
                    const std::vector<double>& kv) {
  const auto [a, b] = s.pair(i);
  const auto Bq = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(pq));
  const auto Bk = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(pk));
  const Mp qn = sm * hyp(ex(q[a]), ex(q[b]));
  const Mp kn = sm * hyp(ex(kv[a]), ex(kv[b]));
  const Mp eq = ex(Bq.abs(dbl(qn))), ek = ex(Bk.abs(dbl(kn)));
  return eq * kn + qn * ek + eq * ek;
}

}  // namespace ropecheck::properties::detail
