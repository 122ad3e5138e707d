// The backward family (Kernel::apply_backward B): the two properties that relate B to the
// forward F on the same call.
//   BackwardIsAdjoint      <F(x,m), g> = <x, B(g,m)> within the sum of the two calls' pair bounds
//   BackwardUndoesForward  B(F(x,m),m) = s^2 x within the composition bound (InverseUndoes with
//                          the backward as the second call: algebraic.hpp second_call_undoes)
// The other eight Backward* properties have no function of their own: they are forward
// properties run on backward_view(k) (properties.cpp check(); their rows in table.hpp name the
// forward property).
#pragma once

#include "algebraic.hpp"
#include "common.hpp"

namespace ropecheck::properties::detail {

// ---------------------------------------------------------------------------------------------
// BackwardIsAdjoint: <F(x,m), g> = <x, B(g,m)> for independent random x and g (same spec,
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
// BackwardUndoesForward: ||B(F(x,m),m)_p - s^2 x_p|| <= composition bound (B rotates by -m:
// InverseUndoes with the backward as the second call); pass-through dims bit for bit. A backward
// that is the forward again (sin not negated) gives s^2 R(2m) x.
template <Dtype D>
void backward_undoes_forward(const Kernel& k, g::Context& c) {
  second_call_undoes<D>(k, c, true);
}

}  // namespace ropecheck::properties::detail
