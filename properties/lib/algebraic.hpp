// The algebraic family: what a rotation by m theta is, as claims about the kernel K alone.
//   PreservesNorm            per pair | ||K(x,m)_p|| - s||x_p|| | within the norm bound, and K's
//                            matrix is s times an orthogonal one (M^T M = s^2 I)
//   ZeroPositionIsIdentity   K(x,0) = x bit for bit at s = 1 (the special-value policy below),
//                            s x within the pair bound otherwise
//   ComposesAdditively       K(K(x,a),b) = s K(x,a+b), incl. negative b (a KV-cache shift)
//   InverseUndoes            K(K(x,m),-m) = s^2 x; second_call_undoes() is also the body of
//                            BackwardUndoesForward (backward.hpp)
// Rows of the table: table.hpp. Shared helpers: common.hpp.
//
// Special-value policy (checked by ZeroPositionIsIdentity here and PassThroughIsExact in
// structure.hpp; properties/README.md):
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

#include "common.hpp"

namespace ropecheck::properties::detail {

// ---------------------------------------------------------------------------------------------
// PreservesNorm: | ||K(x)_p|| - s||x_p|| | <= norm bound (no angle term: a wrong angle still
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
// ZeroPositionIsIdentity (+ the special-value policy at the top of this file).

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
// ComposesAdditively: K(K(x,a),b) = s K(x,a+b) per pair, with s the spec's whole magnitude
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
// InverseUndoes: ||K(K(x,m),-m)_p - s^2 x_p|| <= composition bound; pass-through exact.
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

}  // namespace ropecheck::properties::detail
