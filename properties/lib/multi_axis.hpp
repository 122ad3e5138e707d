// The multi-axis family (mrope, imrope, axial) with DISTINCT per-axis positions. The properties
// of the other families call multi-axis specs with one position per token (t = h = w), where
// every axis assignment gives the same result; these are the ones that see which axis drives a
// pair.
//   ComposesAdditivelyPerAxis        K(K(x,p),q) and K(x,p+q) against the exact R(p+q) x, each
//                                    pair's bound at its own axis' position
//   ScoresDependOnlyOnAxisOffsets    scores unshifted and after a per-axis shift within the score
//                                    bound of the exact s^2 q^T R(p'-p) k
//   EqualAxesReduceToOneDimensional  mrope / imrope at t = h = w = m is 1-D half RoPE at m
// Rows of the table: table.hpp. Shared helpers: common.hpp (score_pair_bound,
// differ_beyond_twice_the_bound).
#pragma once

#include "common.hpp"

namespace ropecheck::properties::detail {

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

// ComposesAdditivelyPerAxis: with per-axis positions p and q (t != h != w),
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

// ScoresDependOnlyOnAxisOffsets: <K(q,p+d), K(k,p'+d)> for d = 0 and a per-axis shift d
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

// EqualAxesReduceToOneDimensional: M-RoPE / interleaved M-RoPE called with t = h = w = m is
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

}  // namespace ropecheck::properties::detail
