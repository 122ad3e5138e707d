// The reference and bound family: the differential against the exact value.
//   MatchesReferenceWithinBound  per pair ||got_p - exact_p|| within the pair bound
//                                (verify::PairChecker), per element faithful rounding, pass-through
//                                bit for bit; a failure carries verify::advise's hint
// Rows of the table: table.hpp. Shared helpers: common.hpp.
#pragma once

#include "common.hpp"
#include "ropecheck/verify/advise.hpp"

namespace ropecheck::properties::detail {

// ---------------------------------------------------------------------------------------------
// MatchesReferenceWithinBound: per pair ||got_p - exact_p|| <= bound(policy, position,
// s||x_p||) (verify::PairChecker); per element |got_j - exact_j| <= P + ulp(|exact_j| + P)/2 (P:
// pre-storage bound), i.e. the output is one of the correctly rounded neighbours except within the
// documented slack; pass-through dims bit for bit.

// The faithful-rounding half of MatchesReferenceWithinBound for one pair: each element within P
// plus half an ulp of its exact value (a whole ulp when the output is declared rounded toward
// zero). The oracle gives d = RN(got - exact) and RN is monotone, so |d| < slack and |d| > slack
// decide |got - exact| <= slack as the exact difference would; only |d| == slack needs the MP
// value. Toward zero also fixes the direction: |got| = |RZ(v)| <= |v| <= |exact| + P for the
// pre-storage value v, so an element rounded away from zero by more than P is not a truncation.
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

}  // namespace ropecheck::properties::detail
