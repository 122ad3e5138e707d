#include "ropecheck/verify/verify.hpp"

namespace ropecheck::verify {

void add_vector(Summary& s, const PairChecker& c, const VectorCheck& v, const Location& at,
                const double* x, const double* got, const reference::MpVector& exact) {
  ++s.vectors;
  for (std::int64_t j : v.passthrough_changed)
    s.add_finding(
        {FindingKind::passthrough_changed, at, explain_passthrough(j, got[j], x[j], c.dtype())});
  for (const PairCheck& p : v.pairs) {
    Location where = at;
    where.pair = p.pair;
    s.add_pair(p, where);
    if (p.within()) continue;
    where.elem_a = p.elem_a;
    where.elem_b = p.elem_b;
    const auto a = static_cast<std::size_t>(p.elem_a), b = static_cast<std::size_t>(p.elem_b);
    s.add_finding(
        {p.finite ? FindingKind::exceeds_bound : FindingKind::non_finite_output, where,
         explain_pair(p, x[a], x[b], got[a], got[b], exact[p.elem_a], exact[p.elem_b], c.u())});
  }
}

}  // namespace ropecheck::verify
