#include "ropecheck/verify/verify.hpp"

namespace ropecheck::verify {

namespace {
const Mp& mp_of(const reference::MpVector& v, std::int64_t j) { return v(j); }
const Mp& mp_of(const reference::ExactVector& v, std::int64_t j) { return v.mp(j); }

// One definition for both exact types: E gives mp(elem) as the exact MP value.
template <class Exact>
void add_vector_with(Summary& s, const PairChecker& c, const VectorCheck& v, const Location& at,
                     const double* x, const double* got, const Exact& exact) {
  ++s.vectors;
  for (std::int64_t j : v.passthrough_changed)
    s.add_finding(
        {FindingKind::passthrough_changed, at, explain_passthrough(j, got[j], x[j], c.dtype())});
  Location where = at;  // one copy per vector; the pair fields change per pair
  for (const PairCheck& p : v.pairs) {
    where.pair = p.pair;
    where.elem_a = at.elem_a;
    where.elem_b = at.elem_b;
    s.add_pair(p, where);
    if (p.within()) continue;
    if (s.findings.size() >= s.keep) {  // counted, not explained: no MP values needed
      ++s.failures;
      continue;
    }
    where.elem_a = p.elem_a;
    where.elem_b = p.elem_b;
    const auto a = static_cast<std::size_t>(p.elem_a), b = static_cast<std::size_t>(p.elem_b);
    // A failing pair with an infinite output is a non-finite finding even when the infinity was
    // read as an overflow (its error is then finite, and said).
    s.add_finding({p.finite ? FindingKind::exceeds_bound : FindingKind::non_finite_output, where,
                   explain_pair(p, x[a], x[b], got[a], got[b], mp_of(exact, p.elem_a),
                                mp_of(exact, p.elem_b), c.u())});
  }
}
}  // namespace

void add_vector(Summary& s, const PairChecker& c, const VectorCheck& v, const Location& at,
                const double* x, const double* got, const reference::MpVector& exact) {
  add_vector_with(s, c, v, at, x, got, exact);
}

void add_vector(Summary& s, const PairChecker& c, const VectorCheck& v, const Location& at,
                const double* x, const double* got, const reference::ExactVector& exact) {
  add_vector_with(s, c, v, at, x, got, exact);
}

}  // namespace ropecheck::verify
