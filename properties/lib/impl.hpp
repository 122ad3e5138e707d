// Property definitions, templated on the storage dtype (compile-time type list, one translation
// unit per dtype) and taking the kernel as a run-time value. Included only by props_<dtype>.cpp.
//
// Map of this file:
//   helpers      conversions, fail / discard, usable (a spec inside the domain), run (one checked
//                kernel call), finite_input, PairText (a pair's message in verify's formats)
//   1 .. 13      the properties, numbered as in properties.hpp's enum: one function each, its
//                helpers just above it
//   body         Property -> the function RapidCheck runs
//   probe_domain, not_applicable, check_dtype
//                what the kernel declares, what that rules out, and the driver of one check
// Every property receives the kernel and the check's gen::Context (domain, variants, shrink
// budget) and draws every random choice through gen.hpp, in a fixed order (a reorder changes the
// cases of a fixed seed). A pair compared with its exact value against the pair bound goes
// through ropecheck::verify (PairChecker, explain_pair): the one definition of that comparison.
// Other claims (norm, composition, scores, faithful rounding) state their own inequality.
//
// Adding a property:
//   1. properties.hpp: the enum value (and is_multi_axis_property if it needs distinct axes);
//      properties.cpp: all_properties() and name()
//   2. here: the function (numbered section), its case in body(), and a reason in
//      not_applicable() when a declaration can rule it out
//   3. zoo/mutants.cpp: a mutant that only the new property (or it first) catches, named in the
//      mutant's `expected` list; the zoo test then shows the property can fail
//   4. README.md: a row of the property table
// The per-dtype instantiation (props_<dtype>.cpp) and the GTest registration (tests/
// property_main.cpp, from all_properties()) need no change. A new dtype: props_<dtype>.cpp, an
// entry in properties.hpp / properties.cpp check(), and CMakeLists.txt's lists.
//
// Special-value policy (checked by ZeroPositionIsIdentity, PassThroughIsExact; README):
//  * Position 0, finite pair (x_a, x_b): output == input bit for bit for nonzero values. Zeros
//    stay zero but their sign is not part of the contract: x*cos - y*sin at cos = 1, sin = +0 is
//    x + (-(y*0)), and IEEE gives -0 + +0 = +0, so -0 may come out as +0 for any correct kernel.
//    The reference's mathematical result is R_0 x = x with a signless real zero.
//  * A pair containing +-inf or NaN: each output of that pair is either its own input (the
//    mathematical R_0 x = x, e.g. a kernel that short-cuts m = 0) or NaN (IEEE: x*cos - inf*sin
//    = x - inf*0 = NaN even at m = 0); it is never any other value, so a NaN input stays NaN and
//    an inf never becomes a finite number. Other pairs, other heads and other tokens are not
//    affected (they are checked bit for bit as above).
//  * Pass-through dims: every bit pattern is copied bit for bit, except that a NaN may lose its
//    payload / signalling bit (a conversion through f32 canonicalizes it); it stays a NaN.
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

// ---------------------------------------------------------------------------------------------
// 1. PreservesNorm: | ||K(x)_p|| - s||x_p|| | <= norm bound (no angle term: a wrong angle still
// rotates), and the kernel's matrix M (columns K(e_j)) satisfies |M^T M - s^2 I|_jk <=
// s (D_j + D_k) + D_j D_k, with D_j the non-angle pair bound of j's pair (0 for pass-through):
// M = s R(phihat) + E with ||E e_j|| <= D_j, and s R(phihat) is s times an orthogonal matrix.
template <Dtype D>
void norm_per_pair(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable<D>(k, c);
  const std::vector<std::int64_t> pos = {g::position(c, std::int64_t{1} << 31)};
  const auto x = finite_input<D>(pol, s, 1);
  const auto y = load_vec<D>(run<D>(k, c, s, 1, 1, pos, store_vec<D>(x)).data(), s.head_dim);
  const Mp sm = mag(s);  // once per case: a yarn/longrope magnitude takes MP logarithms
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    const Mp sn = sm * hyp(ex(x[a]), ex(x[b]));
    const Mp gn = hyp(ex(y[a]), ex(y[b]));
    const double bound =
        bounds::pair_error_bound(pol, s, D, i, static_cast<double>(pos[0])).norm_abs(dbl(sn));
    if (!(abs(gn - sn) <= Mp(bound)))
      fail("pair " + std::to_string(i) + " norm " + hex(dbl(gn)) + " != s||x|| " + hex(dbl(sn)) +
           ", | ||K(x)|| - s||x|| |: " + exceeded(abs(gn - sn), bound, dbl(sn), unit_roundoff(D)) +
           " | " + ctx(s, pos) + " x=(" + hex(x[a]) + "," + hex(x[b]) + ")");
  }
}

// The matrix part, on dims <= 128 (the Gram matrix is O(d^2)).
template <Dtype D>
void matrix_is_scaled_orthogonal(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  g::SpecOptions o;
  o.max_head_dim = 128;
  const RopeSpec s = usable<D>(k, c, o);
  const std::int64_t d = s.head_dim;
  const std::int64_t m = g::position(c, std::int64_t{1} << 31);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(d), m);
  std::vector<double> e(static_cast<std::size_t>(d * d), 0.0);
  for (std::int64_t j = 0; j < d; ++j) e[j * d + j] = 1.0;
  const auto out = run<D>(k, c, s, d, 1, pos, store_vec<D>(e));
  // col j = out token j. Row-wise sparse accumulation of G = M^T M in MP, over the entries some
  // product reaches (slot >= 0); every other entry is exactly 0 (a rotation's row has 2 nonzeros,
  // so nearly all of the d^2 entries), held as no MP number at all.
  std::vector<std::int32_t> slot(static_cast<std::size_t>(d * d), -1);
  std::vector<Mp> acc;
  for (std::int64_t i = 0; i < d; ++i) {
    std::vector<std::int64_t> nz;
    for (std::int64_t j = 0; j < d; ++j)
      if (to_d<D>(out[j * d + i]) != 0.0) nz.push_back(j);
    for (auto j : nz)
      for (auto kk : nz) {
        std::int32_t& sl = slot[static_cast<std::size_t>(j * d + kk)];
        if (sl < 0) {
          sl = static_cast<std::int32_t>(acc.size());
          acc.emplace_back(0);
        }
        acc[static_cast<std::size_t>(sl)] +=
            ex(to_d<D>(out[j * d + i])) * ex(to_d<D>(out[kk * d + i]));
      }
  }
  const double sm = magd(s);
  std::vector<double> Dj(static_cast<std::size_t>(d), 0.0);
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    const double nb = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(m)).norm_abs(sm);
    Dj[a] = Dj[b] = nb;
  }
  const Mp s2 = mag(s) * mag(s);
  for (std::int64_t j = 0; j < d; ++j)
    for (std::int64_t kk = 0; kk < d; ++kk) {
      const std::int32_t sl = slot[static_cast<std::size_t>(j * d + kk)];
      const double bound = sm * (Dj[j] + Dj[kk]) + Dj[j] * Dj[kk];
      // An entry no product reached, off the diagonal: G = 0 and target = 0 exactly, so the MP
      // test below is |0 - 0| = 0 <= bound (bound a double, converted exactly), which this double
      // comparison decides with no rounding at all (NaN: false in both). Only a pass is taken
      // here; any other outcome goes through the MP test and its message.
      if (sl < 0 && j != kk && 0.0 <= bound) continue;
      const Mp Gjk = sl < 0 ? Mp(0) : acc[static_cast<std::size_t>(sl)];
      // Pass-through columns are e_j itself (identity, not scaled by s).
      const Mp target = j != kk ? Mp(0) : (s.is_passthrough(j) ? Mp(1) : s2);
      if (!(abs(Gjk - target) <= Mp(bound)))
        fail("(M^T M)[" + std::to_string(j) + "," + std::to_string(kk) + "] = " + hex(dbl(Gjk)) +
             ", expected " + hex(dbl(target)) + " within " + hex(bound) + " | " + ctx(s, {m}));
    }
}

template <Dtype D>
void preserves_norm(const Kernel& k, g::Context& c) {
  norm_per_pair<D>(k, c);
  matrix_is_scaled_orthogonal<D>(k, c);
}

// ---------------------------------------------------------------------------------------------
// 2. ZeroPositionIsIdentity (+ the special-value policy at the top of this file).

// Output y is input x at position 0: zeros stay zero (either sign), anything else bit for bit. A
// kernel whose declared arithmetic is narrower than the storage (table_f32 on f64) computes
// x*1 - y*0 = round_A(x): bit for bit that.
template <Dtype D>
bool is_identity_at_zero(const Policy& pol, T<D> x, T<D> y) {
  const bool narrow = traits(pol.arithmetic).digits < traits(D).digits;
  const double xv = narrow ? round_to_dtype(to_d<D>(x), pol.arithmetic) : to_d<D>(x);
  const double yv = to_d<D>(y);
  return xv == 0 ? yv == 0 : (narrow ? yv == xv : same_bits(x, y));
}

// A non-unit magnitude s (scale x the scaling's attention factor: YaRN's 0.1 ln f + 1, LongRoPE's
// sqrt(1 + ln f / ln L), an explicit attention_factor) makes R(0) = s I. The exact output s x is
// in general not representable and the kernel rounds it by its own chain (s folded into a cos/sin
// table of the table precision, or multiplied into the output), so no bit pattern is the one
// answer and the claim is the pair bound at m = 0 (bounds.cpp; the angle term is 0 there, every
// other term is the policy's): verify's PairChecker against the oracle's exact s x, the comparison
// of MatchesReferenceWithinBound, at the position where a dropped or doubled s is the whole error
// (no angle error can hide it). Non-finite pairs: an infinity stays itself (s > 0, s inf = inf) or
// becomes NaN, a NaN stays NaN, and a finite element beside them is NaN (IEEE inf * 0) or s x_j
// within the pair bound of the pair (x_j, 0) (a kernel that short-cuts m = 0 only multiplies by s).
template <Dtype D>
void zero_position_is_scaled_input(const Kernel& k, g::Context& c, const RopeSpec& s,
                                   const std::vector<T<D>>& in, const std::vector<T<D>>& out,
                                   std::int64_t nvec, const std::vector<std::int64_t>& pos) {
  const std::int64_t d = s.head_dim;
  const verify::PairChecker pc(k.policy(D), s, D);
  const reference::Oracle oracle(s, c.oracle);
  const reference::Rotation rot = oracle.at({0});
  const Mp sm = mag(s);
  const std::string call = ctx(s, pos), sname = " (s = " + reference::to_decimal(sm, 9) + ")";
  reference::ExactVector exact;
  for (std::int64_t v = 0; v < nvec; ++v) {
    const auto x = load_vec<D>(in.data() + v * d, d), y = load_vec<D>(out.data() + v * d, d);
    std::vector<double> xf = x;  // non-finite inputs as 0: their pairs are checked below instead
    for (double& e : xf)
      if (!std::isfinite(e)) e = 0;
    rot.apply(xf.data(), exact);
    verify::Location at;
    at.token = v;
    at.position = {0};
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [a, b] = s.pair(i);
      if (std::isfinite(x[a]) && std::isfinite(x[b])) {
        const verify::PairCheck p = pc.check(i, 0.0, x[a], x[b], y[a], y[b], exact);
        if (!p.within())
          fail("not s x at position 0" + sname + ": " +
               PairText{at, pc, p, 0.0, x.data(), y.data(), exact, call}.out_of_bound());
        continue;
      }
      for (auto j : {a, b}) {
        bool ok = std::isnan(y[j]);
        if (std::isinf(x[j])) {
          ok = ok || y[j] == x[j];
        } else if (!ok && std::isfinite(x[j])) {
          const double bound = pc.bound(i, 0.0).abs(dbl(sm * abs(ex(x[j]))));
          ok = std::isfinite(y[j]) && abs(ex(y[j]) - sm * ex(x[j])) <= Mp(bound);
        }
        if (!ok)
          fail("pair with a non-finite input at position 0: vector " + std::to_string(v) +
               " elem " + std::to_string(j) + " in=" + hex(x[j]) + " out=" + hex(y[j]) +
               " is neither NaN nor s times the input" + sname + " | " + call);
      }
    }
  }
}

// At s = 1 (the exact magnitude, so YaRN with an mscale pair of equal values too): the identity
// bit for bit (special-value policy at the top of this file); at s != 1: s x within the pair
// bound (zero_position_is_scaled_input). One path for a drawn spec and the one spec of a kernel
// of one configuration: usable() gives either, the magnitude decides the claim.
template <Dtype D>
void zero_position_is_identity(const Kernel& k, g::Context& c) {
  const RopeSpec s = usable<D>(k, c);
  std::int64_t nt = 0, nh = 0;  // not a structured binding: lambdas capture them (clang 14)
  std::tie(nt, nh) = g::counts(3, 2, s.head_dim);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(nt), 0);
  auto x = finite_input<D>(k.policy(D), s, nt * nh);
  const bool specials = g::coin(40);
  if (specials)
    for (auto& v : x)
      if (g::coin(25)) v = g::special_value();
  const auto in = store_vec<D>(x);
  const auto out = run<D>(k, c, s, nt, nh, pos, in);
  const std::int64_t d = s.head_dim;
  const Policy pol = k.policy(D);
  const bool unit = mag(s) == 1;
  for (std::int64_t v = 0; v < nt * nh; ++v) {
    const T<D>* xi = in.data() + v * d;
    const T<D>* yo = out.data() + v * d;
    auto where = [&](std::int64_t j) {
      return "vector " + std::to_string(v) + " elem " + std::to_string(j) +
             " in=" + hex(to_d<D>(xi[j])) + " out=" + hex(to_d<D>(yo[j])) + " | " + ctx(s, pos);
    };
    for (std::int64_t j : pass_dims(s)) {  // copied, not scaled by s
      const bool ok =
          same_bits(xi[j], yo[j]) || (std::isnan(to_d<D>(xi[j])) && std::isnan(to_d<D>(yo[j])));
      if (!ok) fail("pass-through changed at position 0: " + where(j));
    }
    if (!unit) continue;
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [a, b] = s.pair(i);
      const bool finite = std::isfinite(to_d<D>(xi[a])) && std::isfinite(to_d<D>(xi[b]));
      for (auto j : {a, b}) {
        const bool same = is_identity_at_zero<D>(pol, xi[j], yo[j]);
        if (finite && !same) fail("not the identity at position 0: " + where(j));
        // A non-finite pair: each output is its own input (the mathematical R_0 x = x; a kernel
        // may short-cut m = 0) or NaN (IEEE inf*0); never another value, and NaN stays NaN.
        if (!finite && !same && !std::isnan(to_d<D>(yo[j])))
          fail("pair with a non-finite input: output neither its input nor NaN: " + where(j));
      }
    }
  }
  if (!unit) zero_position_is_scaled_input<D>(k, c, s, in, out, nt * nh, pos);
}

// ---------------------------------------------------------------------------------------------
// 3. ComposesAdditively: K(K(x,a),b) = s K(x,a+b) per pair, with s the spec's whole magnitude
// (scale x attention factor), z = K(x,a) and B_m the pair bound at m (absolute, at its argument):
//   ||K(K(x,a),b)_p - s K(x,a+b)_p|| <= composition_abs(B_a, s||x_p||, B_b, s||z_p||, s)
//                                        + s B_{a+b}(s||x_p||).
// Derivation: triangle inequality through the exact s^2 R_{a+b} x_p. composition_abs bounds
// ||K(K(x,a),b)_p - s^2 R_{a+b} x_p|| (bounds.hpp: the first call's error rotated and scaled by s
// by the second map, plus the second call's error relative to its actual input z), and
// ||s K(x,a+b)_p - s^2 R_{a+b} x_p|| = s ||K(x,a+b)_p - s R_{a+b} x_p|| <= s B_{a+b}(s||x_p||).
// s K(x,a+b) is formed in MP with the exact s: the kernel's own rounding of s is inside each pair
// bound's scale term, none is added by the comparison. At s = 1 this is K(K(x,a),b) = K(x,a+b).
// A kernel that drops s is off by |1 - s| ||x_p||, one that squares it by s^3 |s - 1| ||x_p||.
template <Dtype D>
void composes_additively(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable<D>(k, c);
  const std::int64_t L = composition_limit(pol);
  const std::int64_t a = g::position(c, L);
  // A KV-cache shift back towards 0 (where the declared range has negative positions), or any b;
  // b and a + b stay inside the declared range.
  const std::int64_t b = g::shift_within(
      c, a, g::coin(35) ? -g::pick<std::int64_t>(0, a < 0 ? -a : a) : g::position(c, L), L);
  const auto x = finite_input<D>(k.policy(D), s, 1);
  const auto z = run<D>(k, c, s, 1, 1, {a}, store_vec<D>(x));
  const auto w = load_vec<D>(run<D>(k, c, s, 1, 1, {b}, z).data(), s.head_dim);
  const auto v = load_vec<D>(run<D>(k, c, s, 1, 1, {a + b}, store_vec<D>(x)).data(), s.head_dim);
  const auto zd = load_vec<D>(z.data(), s.head_dim);
  for (std::int64_t j : pass_dims(s))
    if (!(w[j] == x[j] && v[j] == x[j]))
      fail("pass-through dim " + std::to_string(j) + " changed | " + ctx(s, {a, b}));
  const Mp sm = mag(s);
  const double smd = dbl(sm);
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [ia, ib] = s.pair(i);
    const double xn = dbl(sm * hyp(ex(x[ia]), ex(x[ib])));    // s ||x_p||
    const double zn = dbl(sm * hyp(ex(zd[ia]), ex(zd[ib])));  // s ||z_p||
    const auto Ba = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(a));
    const auto Bb = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(b));
    const auto Bab = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(a + b));
    const double bound = bounds::composition_abs(Ba, xn, Bb, zn, smd) + smd * Bab.abs(xn);
    const Mp err = hyp(ex(w[ia]) - sm * ex(v[ia]), ex(w[ib]) - sm * ex(v[ib]));
    if (!(err <= Mp(bound)))
      fail("pair " + std::to_string(i) +
           " |K(K(x,a),b) - s K(x,a+b)|: " + exceeded(err, bound, xn, unit_roundoff(D)) + " | " +
           ctx(s, {a, b}) + " | " + Bab.describe());
  }
}

// ---------------------------------------------------------------------------------------------
// 4. LayoutsArePermutations: K_half(P x) == P K_interleaved(x), bit for bit (the same operations
// per pair, only the indexing differs). P gathers even then odd rotated indices.

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

template <Dtype D>
void layouts_are_permutations(const Kernel& k, g::Context& c) {
  g::SpecOptions o;
  o.force_layout = static_cast<int>(Layout::interleaved);
  RopeSpec si = g::spec(c, o), sh = si;
  sh.layout = Layout::half;
  if (!k.supports(si, D) || !k.supports(sh, D)) {
    const auto& both = c.domain.both_layouts;
    if (both.empty()) discard("no spec supported in both layouts");
    si = both[g::pick<std::size_t>(0, both.size() - 1)];
    sh = si;
    sh.layout = Layout::half;
  }
  std::int64_t nt = 0, nh = 0;  // not a structured binding: lambdas capture them (clang 14)
  std::tie(nt, nh) = g::counts(3, 2, si.head_dim);
  const std::int64_t d = si.head_dim, h = si.rotary_dim / 2;
  const auto pos = g::positions(c, nt, std::int64_t{1} << 31);
  const auto x = finite_input<D>(k.policy(D), si, nt * nh);
  auto P = [&](const std::vector<double>& v) {
    std::vector<double> r(v);
    for (std::int64_t vec = 0; vec < nt * nh; ++vec)
      for (std::int64_t j = 0; j < si.rotary_dim; ++j)
        r[vec * d + j] = v[vec * d + (j < h ? 2 * j : 2 * (j - h) + 1)];
    return r;
  };
  const auto yi = run<D>(k, c, si, nt, nh, pos, store_vec<D>(x));
  const auto yh = run<D>(k, c, sh, nt, nh, pos, store_vec<D>(P(x)));
  const auto Pyi = store_vec<D>(P(load_vec<D>(yi.data(), nt * nh * d)));
  if (k.domain().layouts_bitwise_symmetric) {
    for (std::size_t j = 0; j < yh.size(); ++j)
      if (!same_bits(yh[j], Pyi[j]))
        fail("K_half(Px)[" + std::to_string(j) + "] = " + hex(to_d<D>(yh[j])) +
             " != (P K_interleaved(x)) = " + hex(to_d<D>(Pyi[j])) +
             " bit for bit (declared bitwise symmetric) | " + ctx(si, pos));
    return;
  }
  // Without the declaration: within twice the pair bound (two compiled code paths may contract
  // to FMA differently).
  const auto Px = P(x);
  for (std::int64_t v = 0; v < nt * nh; ++v) {
    const std::int64_t off = v * d;
    const auto why = differ_beyond_twice_the_bound<D>(k.policy(D), sh, pos[v / nh], &Px[off],
                                                      &yh[off], &Pyi[off]);
    if (!why.empty())
      fail("vector " + std::to_string(v) + ": K_half(Px) and P K_interleaved(x): " + why + " | " +
           ctx(si, pos));
  }
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

// ---------------------------------------------------------------------------------------------
// 5. ScoresDependOnlyOnOffset: <K(q,m),K(k,n)> and <K(q,m+D),K(k,n+D)> (exact MP dot products of
// the kernel outputs) each within the score bound of the exact s^2 q^T R_{n-m} k.
template <Dtype D>
void scores_depend_only_on_offset(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable<D>(k, c);
  const std::int64_t L = std::int64_t{1} << 31;
  const std::int64_t m = g::position(c, L), n = g::position(c, L);
  // Both shifted positions stay in the declared range.
  const std::int64_t delta = g::shift_within(
      c, std::min(m, n), g::shift_within(c, std::max(m, n), g::position(c, L), L), L);
  const auto qk = finite_input<D>(k.policy(D), s, 2);
  const std::int64_t d = s.head_dim;
  const std::vector<double> q(qk.begin(), qk.begin() + d), kv(qk.begin() + d, qk.end());
  // Exact: rotated part s * <q_p, (s R_{n-m} k)_p>, pass-through part <q_j, k_j>.
  const auto r = reference::apply_blocked(s, Mp(n - m), kv);
  const Mp sm = mag(s);
  Mp exact_rot = 0, exact_pass = 0;
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    exact_rot += sm * (ex(q[a]) * r[a] + ex(q[b]) * r[b]);
  }
  for (std::int64_t j : pass_dims(s)) exact_pass += ex(q[j]) * ex(kv[j]);
  for (std::int64_t shift : {std::int64_t{0}, delta}) {
    const std::vector<std::int64_t> pos = {m + shift, n + shift};
    const auto y = load_vec<D>(run<D>(k, c, s, 2, 1, pos, store_vec<D>(qk)).data(), 2 * d);
    Mp got_rot = 0, got_pass = 0;
    Mp bound = 0;
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [a, b] = s.pair(i);
      got_rot += ex(y[a]) * ex(y[d + a]) + ex(y[b]) * ex(y[d + b]);
      bound += score_pair_bound<D>(pol, s, sm, i, pos[0], pos[1], q, kv);
    }
    // Pass-through dims carry no error budget; summed in the same order as exact_pass, so a
    // kernel that copies them exactly contributes exactly 0 here.
    for (std::int64_t j : pass_dims(s)) got_pass += ex(y[j]) * ex(y[d + j]);
    const Mp err = abs((got_rot - exact_rot) + (got_pass - exact_pass));
    if (!(err <= bound))
      fail("score at (m,n)=(" + std::to_string(pos[0]) + "," + std::to_string(pos[1]) +
           ") off the exact q^T R_{n-m} k by " + exceeds(err, bound) + " | " + describe(s));
  }
}

// ---------------------------------------------------------------------------------------------
// 6. MatchesReferenceWithinBound: per pair ||got_p - exact_p|| <= bound(policy, position,
// s||x_p||) (verify::PairChecker); per element |got_j - exact_j| <= P + ulp(|exact_j| + P)/2 (P:
// pre-storage bound), i.e. the output is one of the correctly rounded neighbours except within the
// documented slack; pass-through dims bit for bit.

// The faithful-rounding half of property 6 for one pair: each element within P plus half an ulp of
// its exact value (a whole ulp when the output is declared rounded toward zero). The oracle gives
// d = RN(got - exact) and RN is monotone, so |d| < slack and |d| > slack decide
// |got - exact| <= slack as the exact difference would; only |d| == slack needs the MP value.
// Toward zero also fixes the direction: |got| = |RZ(v)| <= |v| <= |exact| + P for the pre-storage
// value v, so an element rounded away from zero by more than P is not a truncation.
template <Dtype D>
void expect_faithful(const PairText& pt) {
  const double P = pt.pc.bound(pt.p.pair, pt.position).pre_storage_abs(pt.p.scaled_norm);
  const bool rz = pt.pc.policy().output_rounding == Rounding::toward_zero;
  for (std::int64_t j : {pt.p.elem_a, pt.p.elem_b}) {
    const double top = std::nextafter(std::fabs(pt.exact.value(j)) + P, INFINITY);
    const double slack = P + reference::ulp(top, D) / (rz ? 1 : 2);
    const double d = std::fabs(pt.exact.diff(j, pt.got[j]));
    const bool within = d != slack ? d < slack : abs(ex(pt.got[j]) - pt.exact.mp(j)) <= Mp(slack);
    if (!within) {
      const Mp err = abs(ex(pt.got[j]) - pt.exact.mp(j));
      const auto [e, sl] = verify::fmt_apart(dbl(err), slack);
      fail("element " + std::to_string(j) + " not faithfully rounded: |got - exact| = " + e +
           (rz ? " > P + ulp = " : " > P + ulp/2 = ") + sl + "; " + pt.values());
    }
    if (rz && std::isfinite(pt.got[j]) && !(abs(ex(pt.got[j])) <= abs(pt.exact.mp(j)) + Mp(P))) {
      const Mp away = abs(ex(pt.got[j])) - abs(pt.exact.mp(j));
      const auto [e, sl] = verify::fmt_apart(dbl(away), P);
      fail("element " + std::to_string(j) +
           " rounded away from zero under a declared "
           "output_rounding toward_zero: |got| - |exact| = " +
           e + " > P = " + sl + "; " + pt.values());
    }
  }
}

template <Dtype D>
void matches_reference_within_bound(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable<D>(k, c);
  std::int64_t nt = 0, nh = 0;  // not a structured binding: lambdas capture them (clang 14)
  std::tie(nt, nh) = g::counts(3, 2, s.head_dim);
  const std::int64_t d = s.head_dim;
  const auto pos = g::positions(c, nt, std::int64_t{1} << 31);
  const auto x = finite_input<D>(pol, s, nt * nh);
  const auto y = load_vec<D>(run<D>(k, c, s, nt, nh, pos, store_vec<D>(x)).data(), nt * nh * d);
  const verify::PairChecker pc(pol, s, D);
  const std::string call = ctx(s, pos);
  const reference::Oracle oracle(s, c.oracle);
  reference::ExactVector exact;
  // A known cause (verify::advise), confirmed on every vector of the case, for the failures.
  const std::vector<std::int64_t> failing =
      verify::failing_in_memory(pc, nt * nh, nh, pos.data(), 1, x.data(), y.data());
  const std::string hint =
      failing.empty()
          ? ""
          : verify::advise(pol, {verify::recorded_in_memory(s, D, nt * nh, nh, pos.data(), 1,
                                                            x.data(), y.data(), failing)})
                .text;
  const std::string tail = hint.empty() ? "" : "\n  hint: " + hint;
  for (std::int64_t t = 0; t < nt; ++t) {
    const reference::Rotation rot = oracle.at({pos[t]});  // shared by the token's heads
    for (std::int64_t h = 0; h < nh; ++h) {
      const std::int64_t off = (t * nh + h) * d;
      const double* xv = x.data() + off;
      const double* got = y.data() + off;
      rot.apply(xv, exact);
      const verify::VectorCheck vc = verify::check_vector(pc, {pos[t]}, xv, got, exact);
      verify::Location at;
      at.token = t;
      at.position = {pos[t]};
      at.head = h;
      for (std::int64_t j : vc.passthrough_changed) {
        at.elem_a = j;
        fail(at.text() + ": " + verify::explain_passthrough(j, got[j], xv[j], D) + " | " + call +
             tail);
      }
      for (const verify::PairCheck& p : vc.pairs) {
        const PairText pt{at, pc, p, static_cast<double>(pos[t]), xv, got, exact, call};
        if (!p.within()) fail(pt.out_of_bound() + tail);
        expect_faithful<D>(pt);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 7. PassThroughIsExact: dims >= rotary_dim hold arbitrary bit patterns (incl. inf, NaN, -0,
// subnormals) and come out bit for bit (NaN stays NaN); rotated dims finite.
template <Dtype D>
void pass_through_is_exact(const Kernel& k, g::Context& c) {
  g::SpecOptions o;
  o.force_partial = true;
  const RopeSpec s = usable<D>(k, c, o);
  if (s.rotary_dim >= s.head_dim) discard("no partial rotary spec drawn");
  std::int64_t nt = 0, nh = 0;  // not a structured binding: lambdas capture them (clang 14)
  std::tie(nt, nh) = g::counts(3, 2, s.head_dim);
  const std::int64_t d = s.head_dim;
  const auto pos = g::positions(c, nt, std::int64_t{1} << 31);
  auto x = finite_input<D>(k.policy(D), s, nt * nh);
  for (std::int64_t v = 0; v < nt * nh; ++v)
    for (std::int64_t j : pass_dims(s)) x[v * d + j] = g::any_bits(D);
  const auto in = store_vec<D>(x);
  const auto out = run<D>(k, c, s, nt, nh, pos, in);
  for (std::int64_t v = 0; v < nt * nh; ++v)
    for (std::int64_t j : pass_dims(s)) {
      const auto xi = in[v * d + j], yo = out[v * d + j];
      const bool ok = same_bits(xi, yo) || (std::isnan(to_d<D>(xi)) && std::isnan(to_d<D>(yo)));
      if (!ok)
        fail("pass-through vector " + std::to_string(v) + " dim " + std::to_string(j) + ": " +
             hex(to_d<D>(xi)) + " -> " + hex(to_d<D>(yo)) + " | " + ctx(s, pos));
    }
}

// Strided layout with guard regions around the tensor (llama.cpp test-backend-ops idea): the
// kernel must touch only its output elements.
struct Strided {
  std::int64_t nt, nh, d, hs, ts, guard = 16;
  std::int64_t size() const { return 2 * guard + nt * ts; }
  std::int64_t idx(std::int64_t t, std::int64_t h, std::int64_t j) const {
    return guard + t * ts + h * hs + j;
  }
  bool is_elem(std::int64_t p) const {
    p -= guard;
    if (p < 0 || p >= nt * ts) return false;
    const std::int64_t r = p % ts;
    return r < nh * hs && r % hs < d;
  }
};

inline Strided gen_strided(const RopeSpec& s) {
  Strided st;
  std::tie(st.nt, st.nh) = g::counts(3, 3, s.head_dim);
  st.d = s.head_dim;
  st.hs = s.head_dim + g::pick(0, 3);
  st.ts = st.nh * st.hs + g::pick(0, 5);
  return st;
}

template <Dtype D>
TensorArgs strided_args(const Strided& st, const std::vector<std::int64_t>& pos, const T<D>* in,
                        T<D>* out) {
  TensorArgs a;
  a.dtype = D;
  a.n_tokens = st.nt;
  a.n_heads = st.nh;
  a.positions = pos.data();
  a.in = in + st.guard;
  a.out = out + st.guard;
  a.token_stride = st.ts;
  a.head_stride = st.hs;
  return a;
}

// ---------------------------------------------------------------------------------------------
// 8a. InputUntouched: out-of-place leaves the input buffer bit for bit unchanged, and writes
// nothing outside its output elements (gaps between heads/tokens and guard regions).
template <Dtype D>
void input_untouched(const Kernel& k, g::Context& c) {
  const RopeSpec s = usable<D>(k, c);
  const Strided st = gen_strided(s);
  const auto pos = g::positions(c, st.nt, std::int64_t{1} << 31);
  const auto in0 =
      store_vec<D>(finite_input<D>(k.policy(D), s, (st.size() + s.head_dim - 1) / s.head_dim));
  std::vector<T<D>> in(in0.begin(), in0.begin() + st.size());
  const std::vector<T<D>> copy = in;
  const T<D> sentinel = to_st<D>(round_to_dtype(-1234.5678, D));
  std::vector<T<D>> out(static_cast<std::size_t>(st.size()), sentinel);
  apply_checked(k, c, s, strided_args<D>(st, pos, in.data(), out.data()));
  for (std::int64_t p = 0; p < st.size(); ++p) {
    if (!same_bits(in[p], copy[p]))
      fail("input element " + std::to_string(p - st.guard) + " modified | " + ctx(s, pos));
    if (!st.is_elem(p) && !same_bits(out[p], sentinel))
      fail("write outside the output tensor at offset " + std::to_string(p - st.guard) + " | " +
           ctx(s, pos));
  }
}

// 8b. InPlaceEqualsOutOfPlace: out == in gives the out-of-place result bit for bit, and leaves the
// buffer's gaps alone.
template <Dtype D>
void in_place_equals_out_of_place(const Kernel& k, g::Context& c) {
  const RopeSpec s = usable<D>(k, c);
  const Strided st = gen_strided(s);
  const auto pos = g::positions(c, st.nt, std::int64_t{1} << 31);
  const auto in0 =
      store_vec<D>(finite_input<D>(k.policy(D), s, (st.size() + s.head_dim - 1) / s.head_dim));
  const std::vector<T<D>> in(in0.begin(), in0.begin() + st.size());
  std::vector<T<D>> out(in.size(), to_st<D>(0.0));
  apply_checked(k, c, s, strided_args<D>(st, pos, in.data(), out.data()));
  std::vector<T<D>> buf = in;
  apply_checked(k, c, s, strided_args<D>(st, pos, buf.data(), buf.data()));
  for (std::int64_t p = 0; p < st.size(); ++p) {
    if (st.is_elem(p) && !same_bits(buf[p], out[p]))
      fail("in-place " + hex(to_d<D>(buf[p])) + " != out-of-place " + hex(to_d<D>(out[p])) +
           " at offset " + std::to_string(p - st.guard) + " | " + ctx(s, pos));
    if (!st.is_elem(p) && !same_bits(buf[p], in[p]))
      fail("in-place call wrote outside the tensor at offset " + std::to_string(p - st.guard) +
           " | " + ctx(s, pos));
  }
}

// ---------------------------------------------------------------------------------------------
// 9. TokensAreIndependent: each (token, head) result equals the single-token single-head call, and
// permuting the tokens permutes the results. Bit for bit, unless the domain declares the kernel
// batch-variant (PyTorch's CPU loops, a vectorised body with a scalar tail): then within twice
// the pair bound, which a token reading another token's position or data still exceeds.
template <Dtype D>
void tokens_are_independent(const Kernel& k, g::Context& c) {
  const RopeSpec s = usable<D>(k, c);
  std::int64_t nt = 0, nh = 0;
  std::tie(nt, nh) = g::counts(5, 3, s.head_dim, 1 << 12);
  nt = std::max<std::int64_t>(nt, 2);
  const std::int64_t d = s.head_dim;
  const bool bitwise = k.domain().batch_invariant;
  const auto pos = g::positions(c, nt, std::int64_t{1} << 31);
  const auto x = finite_input<D>(k.policy(D), s, nt * nh);
  const auto in = store_vec<D>(x);
  const auto out = run<D>(k, c, s, nt, nh, pos, in);
  // Vector v of `got` against vector v of `out`, both at position m.
  auto compare = [&](const T<D>* got, std::int64_t v, std::int64_t m, const std::string& what) {
    const std::int64_t off = v * d;
    if (!bitwise) {
      const auto why = differ_beyond_twice_the_bound<D>(k.policy(D), s, m, &x[off], got, &out[off]);
      if (!why.empty())
        fail(what + " (declared batch-variant, compared within twice the bound): " + why + " | " +
             ctx(s, pos));
      return;
    }
    for (std::int64_t j = 0; j < d; ++j)
      if (!same_bits(got[j], out[off + j]))
        fail(what + ", dim " + std::to_string(j) + ": " + hex(to_d<D>(got[j])) + " != batched " +
             hex(to_d<D>(out[off + j])) + " | " + ctx(s, pos));
  };
  for (std::int64_t t = 0; t < nt; ++t)
    for (std::int64_t h = 0; h < nh; ++h) {
      const std::int64_t v = t * nh + h;
      const std::vector<T<D>> one(in.begin() + v * d, in.begin() + (v + 1) * d);
      const auto single = run<D>(k, c, s, 1, 1, {pos[t]}, one);
      compare(single.data(), v, pos[t],
              "token " + std::to_string(t) + " head " + std::to_string(h) + " alone");
    }
  std::vector<std::int64_t> perm(static_cast<std::size_t>(nt));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::int64_t i = nt - 1; i > 0; --i) std::swap(perm[i], perm[g::pick<std::int64_t>(0, i)]);
  std::vector<T<D>> pin;
  std::vector<std::int64_t> ppos;
  for (auto t : perm) {
    pin.insert(pin.end(), in.begin() + t * nh * d, in.begin() + (t + 1) * nh * d);
    ppos.push_back(pos[t]);
  }
  const auto pout = run<D>(k, c, s, nt, nh, ppos, pin);
  for (std::int64_t r = 0; r < nt; ++r)
    for (std::int64_t h = 0; h < nh; ++h)
      compare(&pout[(r * nh + h) * d], perm[r] * nh + h, pos[perm[r]],
              "permuting tokens changed token " + std::to_string(perm[r]) + " head " +
                  std::to_string(h));
}

// ---------------------------------------------------------------------------------------------
// 10. InverseUndoes: ||K(K(x,m),-m)_p - s^2 x_p|| <= composition bound; pass-through exact.
// The second call undoes the first: K(x,m) then K(.,-m) (InverseUndoes), or the backward B(.,m),
// which rotates by -m (BackwardUndoesForward). Either gives s^2 x within the composition bound;
// pass-through dims come back bit for bit (a NaN stays a NaN).
template <Dtype D>
void second_call_undoes(const Kernel& k, g::Context& c, bool backward) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable<D>(k, c);
  // InverseUndoes: m and -m both in the declared range; the backward is called at m itself.
  const auto [lo, hi] = g::position_range(c, composition_limit(pol));
  const std::int64_t lim = backward ? std::max(hi, -lo) : std::min(hi, -lo);
  const std::int64_t m = g::position(c, std::max<std::int64_t>(0, lim));
  const auto x = finite_input<D>(pol, s, 1);
  const auto z = run<D>(k, c, s, 1, 1, {m}, store_vec<D>(x));
  const auto w =
      load_vec<D>(run<D>(k, c, s, 1, 1, {backward ? m : -m}, z, 1, backward).data(), s.head_dim);
  const auto zd = load_vec<D>(z.data(), s.head_dim);
  const char* what = backward ? "|B(F(x,m),m) - s^2 x|: " : "|K(K(x,m),-m) - s^2 x|: ";
  for (std::int64_t j : pass_dims(s))
    if (!same_bits(to_st<D>(w[j]), to_st<D>(x[j])) && !(std::isnan(w[j]) && std::isnan(x[j])))
      fail("pass-through dim " + std::to_string(j) + " changed: x = " + hex(x[j]) + ", got " +
           hex(w[j]) + " | " + ctx(s, {m}));
  const Mp sm = mag(s), s2 = sm * sm;
  const double smd = dbl(sm);
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    const double xn = dbl(sm * hyp(ex(x[a]), ex(x[b])));
    const double zn = dbl(sm * hyp(ex(zd[a]), ex(zd[b])));
    const auto Bm = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(m));
    const auto Bn = bounds::pair_error_bound(pol, s, D, i, -static_cast<double>(m));
    const double bound = bounds::composition_abs(Bm, xn, Bn, zn, smd);
    const Mp err = hyp(ex(w[a]) - s2 * ex(x[a]), ex(w[b]) - s2 * ex(x[b]));
    if (!(err <= Mp(bound)))
      fail("pair " + std::to_string(i) + " " + what + exceeded(err, bound, xn, unit_roundoff(D)) +
           " | " + ctx(s, {m}));
  }
}

template <Dtype D>
void inverse_undoes(const Kernel& k, g::Context& c) {
  second_call_undoes<D>(k, c, false);
}

// ---------------------------------------------------------------------------------------------
// 14. BackwardIsAdjoint: <F(x,m), g> = <x, B(g,m)> for independent random x and g (same spec,
// positions, tokens and heads), per vector. Derivation: with F(x) = s R x + e_F and
// B(g) = s R^T g + e_B, <F x, g> - <x, B g> = <e_F, g> - <x, e_B> (the exact parts cancel:
// <s R x, g> = <x, s R^T g>); pair by pair Cauchy-Schwarz gives
//   |<F x, g> - <x, B g>| <= sum_p E_F,p(s||x_p||) ||g_p|| + E_B,p(s||g_p||) ||x_p||
// with E the pair bounds (absolute) of each call (the backward's at -m: it rotates by -m).
// Pass-through dims contribute x_j g_j to both sides when each call copies its input, and nothing
// to the bound, so a pass-through gradient written over (Apex PR #1750 wrote 1.0) shows. The dot
// products are summed in MP at precision P; the sums' rounding, at most n 2^(1-P) sum |terms|
// each, is added to the bound. With a constant g (the all-ones test gradient) a transposed pairing
// can cancel; g is drawn like any input.
template <Dtype D>
void backward_is_adjoint(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable<D>(k, c);
  std::int64_t nt = 0, nh = 0;
  std::tie(nt, nh) = g::counts(2, 2, s.head_dim);
  const std::int64_t d = s.head_dim;
  const auto pos = g::positions(c, nt, std::int64_t{1} << 31);
  const auto x = finite_input<D>(pol, s, nt * nh);
  const auto gr = finite_input<D>(pol, s, nt * nh);
  const auto y = load_vec<D>(run<D>(k, c, s, nt, nh, pos, store_vec<D>(x)).data(), nt * nh * d);
  const auto b = load_vec<D>(
      run<D>(k, c, s, nt, nh, pos, store_vec<D>(gr), 1, /*backward=*/true).data(), nt * nh * d);
  const Mp sm = mag(s);
  const Mp rounding =
      Mp(2 * d + 2) * pow(Mp(2), -static_cast<int>(reference::precision_bits()) + 1);
  for (std::int64_t t = 0; t < nt; ++t)
    for (std::int64_t h = 0; h < nh; ++h) {
      const std::int64_t off = (t * nh + h) * d;
      Mp lhs = 0, rhs = 0, abs_l = 0, abs_r = 0, bound = 0;
      for (std::int64_t j = 0; j < d; ++j) {
        const Mp l = ex(y[off + j]) * ex(gr[off + j]), r = ex(x[off + j]) * ex(b[off + j]);
        lhs += l, rhs += r, abs_l += abs(l), abs_r += abs(r);
      }
      const double m = static_cast<double>(pos[t]);
      for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
        const auto [pa, pb] = s.pair(i);
        const Mp xn = hyp(ex(x[off + pa]), ex(x[off + pb]));
        const Mp gn = hyp(ex(gr[off + pa]), ex(gr[off + pb]));
        const auto BF = bounds::pair_error_bound(pol, s, D, i, m);
        const auto BB = bounds::pair_error_bound(pol, s, D, i, -m);
        bound += Mp(BF.abs(dbl(sm * xn))) * gn + Mp(BB.abs(dbl(sm * gn))) * xn;
      }
      bound += rounding * (abs_l + abs_r);
      const Mp err = abs(lhs - rhs);
      if (!(err <= bound))
        fail("token " + std::to_string(t) + " head " + std::to_string(h) +
             ": |<F(x,m), g> - <x, B(g,m)>| = " + exceeds(err, bound) +
             " (the sum of the pair bounds of both calls; <F x, g> = " + hex(dbl(lhs)) +
             ", <x, B g> = " + hex(dbl(rhs)) + ") | " + ctx(s, pos));
    }
}

// ---------------------------------------------------------------------------------------------
// 15. BackwardUndoesForward: ||B(F(x,m),m)_p - s^2 x_p|| <= composition bound (B rotates by -m:
// InverseUndoes with the backward as the second call); pass-through dims bit for bit. A backward
// that is the forward again (sin not negated) gives s^2 R(2m) x.
template <Dtype D>
void backward_undoes_forward(const Kernel& k, g::Context& c) {
  second_call_undoes<D>(k, c, true);
}

// ---------------------------------------------------------------------------------------------
// Multi-axis properties (mrope, imrope, axial) with DISTINCT per-axis positions. The generic
// properties above call multi-axis specs with one position per token (t = h = w), where every
// axis assignment gives the same result; these are the ones that see which axis drives a pair.

// A multi-axis spec the kernel accepts (a few draws, then discard).
template <Dtype D>
RopeSpec usable_multi_axis(const Kernel& k, const g::Context& c, const g::SpecOptions& o,
                           bool mrope_only) {
  for (int i = 0; i < 8; ++i) {
    RopeSpec s = g::multi_axis_spec(c, o, mrope_only);
    if (k.supports(s, D)) return s;
  }
  std::vector<RopeSpec> fit;  // probed multi-axis specs the kernel accepted
  for (const RopeSpec& t : c.domain.multi_axis)
    if (!mrope_only || t.layout != Layout::axial) fit.push_back(t);
  if (fit.empty()) discard("kernel supports none of the drawn multi-axis specs");
  return fit[g::pick<std::size_t>(0, fit.size() - 1)];
}

// Per-axis positions, distinct across axes (t != h != w) for every token.
inline std::vector<std::int64_t> axis_positions(const g::Context& c, std::int64_t n_axes,
                                                std::int64_t limit) {
  const auto [lo, hi] = g::position_range(c, limit);
  std::vector<std::int64_t> p;
  for (std::int64_t a = 0; a < n_axes; ++a) {
    std::int64_t v = g::position(c, limit);
    // One direction per axis, at most n_axes - 1 steps, inside the declared range: down unless
    // that could leave it. Alternating directions cycled forever once shrinking made two axes 0
    // and 1 (seen on a broken kernel).
    const std::int64_t step = v - n_axes >= lo ? -1 : 1;
    while (std::find(p.begin(), p.end(), v) != p.end() && v + step >= lo && v + step <= hi)
      v += step;
    p.push_back(v);
  }
  return p;
}

inline reference::Positions mp_positions(const std::vector<std::int64_t>& p) {
  reference::Positions r;
  for (auto v : p) r.push_back(Mp(v));
  return r;
}

// 11. ComposesAdditivelyPerAxis: with per-axis positions p and q (t != h != w),
// K(K(x,p),q)_i is within the composition bound of the exact s^2 R(p+q) x_i, and K(x,p+q)_i
// within its pair bound of the exact s R(p+q) x_i; each pair's bound is taken at the position of
// the axis that drives it. Both against the exact value, so a kernel that reads the wrong axis
// consistently (composition alone would hold) fails too.
template <Dtype D>
void composes_additively_per_axis(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable_multi_axis<D>(k, c, g::SpecOptions{}, false);
  const std::int64_t A = s.n_axes(), L = composition_limit(pol);
  const auto p = axis_positions(c, A, L);
  auto q = axis_positions(c, A, L);
  std::vector<std::int64_t> pq;
  for (std::int64_t a = 0; a < A; ++a) {
    q[a] = g::shift_within(c, p[a], q[a], L);  // q and p + q inside the declared range
    pq.push_back(p[a] + q[a]);
  }
  const auto x = finite_input<D>(pol, s, 1);
  const auto z = run<D>(k, c, s, 1, 1, p, store_vec<D>(x), A);
  const auto w = load_vec<D>(run<D>(k, c, s, 1, 1, q, z, A).data(), s.head_dim);
  const auto v = load_vec<D>(run<D>(k, c, s, 1, 1, pq, store_vec<D>(x), A).data(), s.head_dim);
  const auto zd = load_vec<D>(z.data(), s.head_dim);
  const reference::Oracle oracle(s, c.oracle);
  // The ExactVector points at its Rotation: both live to the end of the case.
  const reference::Rotation rot = oracle.at(pq);
  const reference::ExactVector exact = rot.apply(x.data());  // s R(p+q) x
  const std::string call =
      ctx(s, p) + " then " + ctx(s, q).substr(describe(s).size()) + " (per axis)";
  for (std::int64_t j : pass_dims(s))
    if (!(w[j] == x[j] && v[j] == x[j]))
      fail("pass-through dim " + std::to_string(j) + " changed | " + call);
  const verify::PairChecker pc(pol, s, D);
  verify::Location at;
  at.position = pq;
  const Mp sm = mag(s);
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [ia, ib] = s.pair(i);
    const auto ax = static_cast<std::size_t>(s.pair_axis(i));
    const double xn = dbl(sm * hyp(ex(x[ia]), ex(x[ib])));
    const double zn = dbl(sm * hyp(ex(zd[ia]), ex(zd[ib])));
    const auto Bp = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(p[ax]));
    const auto Bq = bounds::pair_error_bound(pol, s, D, i, static_cast<double>(q[ax]));
    const double bc = bounds::composition_abs(Bp, xn, Bq, zn, dbl(sm));
    // An MP expression of the exact values (the oracle answers differences with one output).
    const Mp ec = hyp(ex(w[ia]) - sm * exact.mp(ia), ex(w[ib]) - sm * exact.mp(ib));
    if (!(ec <= Mp(bc)))
      fail("pair " + std::to_string(i) + " (axis " + std::to_string(ax) +
           ") |K(K(x,p),q) - s^2 R(p+q) x|: " + exceeded(ec, bc, xn, pc.u()) + " | " + call);
    const auto m = static_cast<double>(pq[ax]);
    const verify::PairCheck pr = pc.check(i, m, x[ia], x[ib], v[ia], v[ib], exact);
    if (!pr.within())
      fail("K(x,p+q) against s R(p+q) x, axis " + std::to_string(ax) + ": " +
           PairText{at, pc, pr, m, x.data(), v.data(), exact, call}.out_of_bound());
  }
}

// 12. ScoresDependOnlyOnAxisOffsets: <K(q,p+d), K(k,p'+d)> for d = 0 and a per-axis shift d
// (different on each axis), each within the score bound of the exact s^2 q^T R(p'-p) k, where
// R(p'-p) turns each pair by its own axis' offset.
template <Dtype D>
void scores_depend_only_on_axis_offsets(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable_multi_axis<D>(k, c, g::SpecOptions{}, false);
  const std::int64_t A = s.n_axes(), L = std::int64_t{1} << 31, d = s.head_dim;
  const auto pm = axis_positions(c, A, L), pn = axis_positions(c, A, L);
  auto delta = axis_positions(c, A, L);
  for (std::int64_t a = 0; a < A; ++a)  // shifted positions inside the declared range
    delta[a] = g::shift_within(c, std::min(pm[a], pn[a]),
                               g::shift_within(c, std::max(pm[a], pn[a]), delta[a], L), L);
  const auto qk = finite_input<D>(pol, s, 2);
  const std::vector<double> q(qk.begin(), qk.begin() + d), kv(qk.begin() + d, qk.end());
  std::vector<std::int64_t> off;
  for (std::int64_t a = 0; a < A; ++a) off.push_back(pn[a] - pm[a]);
  const auto r = reference::apply_blocked(s, mp_positions(off), kv);
  const Mp sm = mag(s);
  Mp exact_rot = 0, exact_pass = 0;
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    exact_rot += sm * (ex(q[a]) * r[a] + ex(q[b]) * r[b]);
  }
  for (std::int64_t j : pass_dims(s)) exact_pass += ex(q[j]) * ex(kv[j]);
  for (bool shifted : {false, true}) {
    std::vector<std::int64_t> pos;  // token 0 (q) then token 1 (k), A positions each
    for (std::int64_t a = 0; a < A; ++a) pos.push_back(pm[a] + (shifted ? delta[a] : 0));
    for (std::int64_t a = 0; a < A; ++a) pos.push_back(pn[a] + (shifted ? delta[a] : 0));
    const auto y = load_vec<D>(run<D>(k, c, s, 2, 1, pos, store_vec<D>(qk), A).data(), 2 * d);
    Mp got_rot = 0, got_pass = 0, bound = 0;
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [a, b] = s.pair(i);
      const std::int64_t ax = s.pair_axis(i);
      got_rot += ex(y[a]) * ex(y[d + a]) + ex(y[b]) * ex(y[d + b]);
      bound += score_pair_bound<D>(pol, s, sm, i, pos[ax], pos[A + ax], q, kv);
    }
    for (std::int64_t j : pass_dims(s)) got_pass += ex(y[j]) * ex(y[d + j]);
    const Mp err = abs((got_rot - exact_rot) + (got_pass - exact_pass));
    if (!(err <= bound))
      fail(std::string("score ") + (shifted ? "after the per-axis shift" : "unshifted") +
           " off the exact q^T R(p'-p) k by " + exceeds(err, bound) + " | q at " + ctx(s, pm) +
           ", k at " + ctx(s, pn).substr(describe(s).size()) + ", shift" +
           ctx(s, delta).substr(describe(s).size()));
  }
}

// 13. EqualAxesReduceToOneDimensional: M-RoPE / interleaved M-RoPE called with t = h = w = m is
// 1-D RoPE (half layout, same ladder, scaling and magnitude) at m, bit for bit: the section
// assignment only chooses which (equal) position a pair reads. A kernel declared batch-variant
// may round the two calls differently: within twice the pair bound of the 1-D spec (the
// mrope_ladder_per_section mutant is far outside it).
template <Dtype D>
void equal_axes_reduce_to_one_dimensional(const Kernel& k, g::Context& c) {
  const RopeSpec s = usable_multi_axis<D>(k, c, g::SpecOptions{}, true);
  RopeSpec h = s;
  h.layout = Layout::half;
  h.sections.clear();
  h = h.normalized();
  if (!k.supports(h, D)) discard("kernel does not support the 1-D half spec");
  std::int64_t nt = 0, nh = 0;  // not a structured binding: lambdas capture them (clang 14)
  std::tie(nt, nh) = g::counts(3, 2, s.head_dim);
  const std::int64_t A = s.n_axes();
  std::vector<std::int64_t> p1, p3;
  for (std::int64_t t = 0; t < nt; ++t) {
    p1.push_back(g::position(c, std::int64_t{1} << 31));
    for (std::int64_t a = 0; a < A; ++a) p3.push_back(p1.back());
  }
  const auto x = finite_input<D>(k.policy(D), s, nt * nh);
  const auto in = store_vec<D>(x);
  const auto y1 = run<D>(k, c, h, nt, nh, p1, in);
  const auto y3 = run<D>(k, c, s, nt, nh, p3, in, A);
  if (!k.domain().batch_invariant) {  // the two calls may round differently (see TokensAre...)
    for (std::int64_t v = 0; v < nt * nh; ++v) {
      const std::int64_t off = v * s.head_dim;
      const auto why =
          differ_beyond_twice_the_bound<D>(k.policy(D), h, p1[v / nh], &x[off], &y1[off], &y3[off]);
      if (!why.empty())
        fail("vector " + std::to_string(v) + ": " + describe(s) + " with t = h = w and 1-D half " +
             "(declared batch-variant, compared within twice the bound): " + why + " | " +
             ctx(h, p1));
    }
    return;
  }
  for (std::size_t j = 0; j < y1.size(); ++j)
    if (!same_bits(y1[j], y3[j]))
      fail("element " + std::to_string(j) + ": " + describe(s) + " with t = h = w gives " +
           hex(to_d<D>(y3[j])) + ", 1-D half gives " + hex(to_d<D>(y1[j])) + " | " + ctx(h, p1));
}

// ---------------------------------------------------------------------------------------------

// The property as RapidCheck runs it: each call draws one case. k and c outlive the check.
template <Dtype D>
std::function<void()> body(Property p, const Kernel& k, g::Context& c) {
  switch (p) {
    case Property::PreservesNorm:
      return [&k, &c] { preserves_norm<D>(k, c); };
    case Property::ZeroPositionIsIdentity:
      return [&k, &c] { zero_position_is_identity<D>(k, c); };
    case Property::ComposesAdditively:
      return [&k, &c] { composes_additively<D>(k, c); };
    case Property::LayoutsArePermutations:
      return [&k, &c] { layouts_are_permutations<D>(k, c); };
    case Property::ScoresDependOnlyOnOffset:
      return [&k, &c] { scores_depend_only_on_offset<D>(k, c); };
    case Property::MatchesReferenceWithinBound:
      return [&k, &c] { matches_reference_within_bound<D>(k, c); };
    case Property::PassThroughIsExact:
      return [&k, &c] { pass_through_is_exact<D>(k, c); };
    case Property::InputUntouched:
      return [&k, &c] { input_untouched<D>(k, c); };
    case Property::InPlaceEqualsOutOfPlace:
      return [&k, &c] { in_place_equals_out_of_place<D>(k, c); };
    case Property::TokensAreIndependent:
      return [&k, &c] { tokens_are_independent<D>(k, c); };
    case Property::InverseUndoes:
      return [&k, &c] { inverse_undoes<D>(k, c); };
    case Property::ComposesAdditivelyPerAxis:
      return [&k, &c] { composes_additively_per_axis<D>(k, c); };
    case Property::ScoresDependOnlyOnAxisOffsets:
      return [&k, &c] { scores_depend_only_on_axis_offsets<D>(k, c); };
    case Property::EqualAxesReduceToOneDimensional:
      return [&k, &c] { equal_axes_reduce_to_one_dimensional<D>(k, c); };
    case Property::BackwardIsAdjoint:
      return [&k, &c] { backward_is_adjoint<D>(k, c); };
    case Property::BackwardUndoesForward:
      return [&k, &c] { backward_undoes_forward<D>(k, c); };
    default:  // the other backward properties run on backward_view (properties.cpp check())
      break;
  }
  return {};
}

// The probe: which specs of a grid (head dims of the declared list, or a grid of common and
// awkward dims; full and partial rotary; both basic layouts; the multi-axis layouts) the kernel
// accepts for dtype D. Unscaled, base 1e4, scale 1: the shapes, not the parameters, decide what
// applies. A few hundred supports() calls at most (each one IPC round trip for a plugin).
template <Dtype D>
g::DomainContext probe_domain(const Kernel& k, const std::optional<RopeSpec>& only_spec,
                              bool variants) {
  g::DomainContext c;
  c.declared = k.domain();
  if (only_spec) {  // the kernel implements this one spec: it alone is the domain
    const RopeSpec& f = *only_spec;
    if (!k.supports(f, D)) return c;
    if (is_multi_axis(f.layout))
      c.multi_axis.push_back(f);
    else if (f.rotary_dim < f.head_dim)
      c.partial.push_back(f);
    else
      c.full.push_back(f);
    return c;
  }
  static const std::vector<std::int64_t> grid = {
      2,  3,  4,  5,  6,  7,  8,  9,   12,  15,  16,  17,  24,  31,  32,  33,  40,
      48, 63, 64, 65, 72, 80, 96, 112, 120, 127, 128, 160, 192, 255, 256, 320, 512};
  const std::vector<std::int64_t>& dims =
      c.declared.head_dims.empty() ? grid : c.declared.head_dims;
  auto make = [](std::int64_t hd, std::int64_t rd, Layout l) {
    RopeSpec s;
    s.head_dim = hd;
    s.rotary_dim = rd;
    s.layout = l;
    return s.normalized();
  };
  for (std::int64_t hd : dims) {
    if (hd < 2 || hd > kMaxHeadDim) continue;
    const std::int64_t full = hd - hd % 2, np = full / 2;
    for (Layout l : {Layout::interleaved, Layout::half}) {
      const RopeSpec f = make(hd, full, l);
      if (k.supports(f, D)) c.full.push_back(f);
      // Partial rotary: a quarter, a half, one pair less (odd counts of pairs included), 1 pair,
      // and the ratios models ship (model_rotary_dims: 0.4, a 64-dim part).
      std::vector<std::int64_t> rds = {2 * std::max<std::int64_t>(1, np / 4),
                                       2 * std::max<std::int64_t>(1, np / 2), full - 2, 2};
      for (std::int64_t rd : model_rotary_dims(hd))
        if (std::find(rds.begin(), rds.end(), rd) == rds.end()) rds.push_back(rd);
      if (hd % 2) rds.push_back(full);  // odd head_dim: the last dim passes through
      for (std::int64_t rd : rds)
        if (rd >= 2 && rd < hd && k.supports(make(hd, rd, l), D))
          c.partial.push_back(make(hd, rd, l));
    }
    for (std::int64_t rd : {full, 2 * std::max<std::int64_t>(1, np / 2)})
      if (rd >= 2 && k.supports(make(hd, rd, Layout::interleaved), D) &&
          k.supports(make(hd, rd, Layout::half), D))
        c.both_layouts.push_back(make(hd, rd, Layout::interleaved));
    for (Layout l : {Layout::mrope, Layout::imrope, Layout::axial}) {
      if (np < 3) continue;
      RopeSpec m;
      m.head_dim = hd;
      m.rotary_dim = full;
      m.layout = l;
      m.sections = {np / 4 + 1, np / 4 + 1, np - 2 * (np / 4 + 1)};
      try {
        m = m.normalized();
      } catch (const SpecError&) {
        continue;
      }
      if (k.supports(m, D)) c.multi_axis.push_back(m);
    }
  }
  // Partial rotary at a ratio of no list above (3/4 of head_dim: 48 of 64, 96 of 128): when no
  // probed spec rotates fewer pairs than head_dim holds (an odd head_dim's one pass-through dim
  // does not count) with kRealisticPairs pairs or more, every even rotary_dim of the realistic
  // head dims (regimes.hpp), the largest accepted one per head dim and layout. Only then: a
  // kernel that takes a listed ratio pays nothing, one that takes no partial rotary a few hundred
  // supports() calls. Without it such a kernel's partial path was never drawn.
  const bool realistic_partial = std::any_of(c.partial.begin(), c.partial.end(), [](const auto& s) {
    return s.rotary_dim < s.head_dim - s.head_dim % 2 && s.n_pairs() >= kRealisticPairs;
  });
  if (!realistic_partial)
    for (std::int64_t hd : realistic_head_dims(c.declared))
      for (Layout l : {Layout::interleaved, Layout::half})
        for (std::int64_t rd = hd - hd % 2 - 2; rd >= 2 * kRealisticPairs; rd -= 2)
          if (k.supports(make(hd, rd, l), D)) {
            c.partial.push_back(make(hd, rd, l));
            break;
          }
  if (variants) {
    c.scaled.resize(7);
    for (int kind = 1; kind <= 6; ++kind)
      for (const RopeSpec& f : c.full) {
        RopeSpec v = f;
        v.scaling = example_scaling(static_cast<ScalingKind>(kind), f.n_pairs());
        try {
          v = v.normalized();
        } catch (const SpecError&) {
          continue;
        }
        if (k.supports(v, D)) c.scaled[static_cast<std::size_t>(kind)].push_back(v);
      }
  }
  return c;
}

// Why a property cannot be exercised on this kernel, from its declaration (Kernel::domain() and
// supports() on the probe grid), or nullopt. The reasons are the user's to read: they name the
// declaration that rules the property out.
template <Dtype D>
std::optional<std::string> not_applicable(Property p, const g::DomainContext& c) {
  const Domain& d = c.declared;
  const std::string dims = d.head_dims.empty() ? std::string("a grid of 2..512") : [&] {
    std::string r;
    for (auto h : d.head_dims) r += (r.empty() ? "" : ",") + std::to_string(h);
    return "{" + r + "}";
  }();
  switch (p) {
    case Property::LayoutsArePermutations:
      if (c.both_layouts.empty())
        return std::string("no spec is supported in both the interleaved and the half layout");
      break;
    case Property::PassThroughIsExact:
      if (c.partial.empty())
        return "no partial rotary in the declared domain: supports() rejected every rotary_dim < "
               "head_dim for head_dim " +
               dims;
      break;
    case Property::InPlaceEqualsOutOfPlace:
      if (!d.in_place) return std::string("declared out-of-place only (no in-place calls)");
      break;
    case Property::InverseUndoes:
      if (d.min_position >= 0 || d.max_position <= 0)
        return "declared positions [" + std::to_string(d.min_position) + ", " +
               std::to_string(d.max_position) + "] hold no pair m, -m with m != 0";
      break;
    case Property::ZeroPositionIsIdentity:
      if (d.min_position > 0 || d.max_position < 0)
        return std::string("position 0 is outside the declared positions");
      break;
    default:
      break;
  }
  if (is_multi_axis_property(p)) {
    bool any = false;
    for (const RopeSpec& m : c.multi_axis)
      any = any || !(p == Property::EqualAxesReduceToOneDimensional && m.layout == Layout::axial);
    if (!any)
      return std::string(p == Property::EqualAxesReduceToOneDimensional
                             ? "kernel supports neither mrope nor imrope"
                             : "kernel does not support multi-axis layouts");
    // The 1-D half spec of an mrope/imrope spec (same head_dim and rotary_dim) is what the
    // property compares with; a kernel declaring only the multi-axis layout has none.
    const auto has_half_twin = [&](const RopeSpec& m) {
      return m.layout != Layout::axial &&
             std::any_of(c.full.begin(), c.full.end(), [&](const RopeSpec& f) {
               return f.layout == Layout::half && f.head_dim == m.head_dim &&
                      f.rotary_dim == m.rotary_dim;
             });
    };
    if (p == Property::EqualAxesReduceToOneDimensional &&
        std::none_of(c.multi_axis.begin(), c.multi_axis.end(), has_half_twin))
      return std::string(
          "kernel supports no 1-D half spec with the head_dim and rotary_dim of "
          "its mrope/imrope specs (declared multi-axis only)");
  }
  return std::nullopt;
}

// RapidCheck's run of f (properties.cpp): the verdict; arms `shrink` when shrinking starts.
Verdict run_check(const std::function<void()>& f, const std::string& id, const Options& o,
                  g::ShrinkBudget& shrink);

template <Dtype D>
Verdict check_dtype(Property p, const Kernel& k, const Options& o) {
  reference::set_precision_bits(reference::default_bits(D));
  g::Context ctx;
  ctx.variants = {o.variants, o.focus_scaling, o.focus_layout};
  ctx.oracle = o.oracle_mpfr ? reference::OracleMode::mpfr : reference::OracleMode::fast;
  ctx.domain = probe_domain<D>(k, o.only_spec, o.variants);
  ctx.only_spec = o.only_spec;
  const g::DomainContext& c = ctx.domain;
  if (c.full.empty() && c.partial.empty() && c.multi_axis.empty()) {
    // Nothing of the probe grid is accepted: no case can be drawn. Not a property of the
    // declaration (it names the dtype), so a coverage failure, never a silent pass.
    Verdict v;
    v.status = Status::gave_up;
    v.budget = o.max_success.value_or(0);
    v.message = std::string("coverage: supports() rejected every probed spec of dtype ") + name(D) +
                " (head dims of the declared list or a grid of 2..512, full and partial rotary, "
                "both layouts, mrope/imrope/axial): no case can be drawn";
    return v;
  }
  if (auto why = not_applicable<D>(p, c)) {
    Verdict v;
    v.status = Status::not_applicable;
    v.message = *why;
    return v;
  }
  const std::string id = o.id.empty() ? test_id("Properties", k.name(), D, p) : o.id;
  return run_check(body<D>(p, k, ctx), id, o, ctx.shrink);
}

}  // namespace ropecheck::properties::detail
