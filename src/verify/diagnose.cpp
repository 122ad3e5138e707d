// Known causes of a failing vector, named as hints. Each hint is a re-check of the same output
// under one alternative hypothesis with the same verify machinery: the hint is given only when
// the output passes under that hypothesis (every pair within its derived bound), so a hint is
// evidence, never a guess from the error's size alone.
#include "ropecheck/verify/verify.hpp"

#include <cmath>
#include <string>

namespace ropecheck::verify {

namespace {

// |exact_j| as a double (rounded; the hint only compares magnitudes).
double magnitude(const reference::ExactVector& v, std::int64_t j) { return std::fabs(v.value(j)); }
double magnitude(const reference::MpVector& v, std::int64_t j) {
  return std::fabs(static_cast<double>(v(j)));
}

// Every pair of `got` within the bound of checker c against the exact output `exact`.
template <class Exact>
bool all_within(const PairChecker& c, const std::vector<std::int64_t>& positions, const double* x,
                const double* got, const Exact& exact) {
  const VectorCheck v = check_vector(c, positions, x, got, exact);
  for (const auto& p : v.pairs)
    if (!p.within()) return false;
  return true;
}

// The output is the other basic layout's exact rotation of x (within that layout's bound).
std::string other_layout_hint(const PairChecker& c, const std::vector<std::int64_t>& positions,
                              const double* x, const double* got) {
  const RopeSpec& s = c.spec();
  if (s.layout != Layout::interleaved && s.layout != Layout::half) return "";
  RopeSpec o = s;
  o.layout = s.layout == Layout::half ? Layout::interleaved : Layout::half;
  const reference::Oracle oracle(o);
  const PairChecker oc(c.policy(), o, c.dtype());
  if (!all_within(oc, positions, x, got, oracle.at(positions).apply(x))) return "";
  return o.layout == Layout::half
             ? "the output matches the half layout: your kernel pairs (i, i + rd/2) where the "
               "spec says interleaved (2i, 2i+1); declare layout 'half' if that is the model's"
             : "the output matches the interleaved layout: your kernel pairs (2i, 2i+1) where "
               "the spec says half (i, i + rd/2); declare layout 'interleaved' if that is the "
               "model's";
}

// The errors fit a policy whose table and arithmetic are f16 / bf16 (narrower than declared).
// The storage dtype first (HF code in bf16 casts cos/sin to x.dtype and multiplies there), then
// the tighter f16 before bf16 (what fits f16 mostly fits bf16 too).
template <class Exact>
std::string lower_precision_hint(const PairChecker& c, const std::vector<std::int64_t>& positions,
                                 const double* x, const double* got, const Exact& exact) {
  const bool bf16_first = c.dtype() == Dtype::bf16;
  for (Dtype lo : {bf16_first ? Dtype::bf16 : Dtype::f16, bf16_first ? Dtype::f16 : Dtype::bf16}) {
    const Policy& p = c.policy();
    if (traits(p.table).digits <= traits(lo).digits &&
        traits(p.arithmetic).digits <= traits(lo).digits)
      continue;  // not narrower than what is declared
    Policy q = p;
    q.table = lo;
    q.arithmetic = lo;
    const PairChecker qc(q, c.spec(), c.dtype());
    if (!all_within(qc, positions, x, got, exact)) continue;
    const std::string n = name(lo), N = n == "bf16" ? "BF16" : "F16";
    return "the errors fit a " + n + " cos/sin table and " + n +
           " arithmetic: declare Policy(table='" + n + "', arithmetic='" + n +
           "') if your kernel computes in " + n +
           " (C: policies[dtype].table = .arithmetic = "
           "ROPECHECK_DTYPE_" +
           N + "; spec keys table_precision / arithmetic_precision = " + n + ")";
  }
  return "";
}

// The errors fit the declared policy with cos/sin and results rounded toward zero, and the
// outputs lean toward zero: at least 7/8 of the elements (of 16 or more whose exact value is not
// tiny) have |got| < |exact|. Round-to-nearest puts about half on each side; truncation puts all
// but the few that pre-storage error pushes outward below. Both conditions are needed: the fit
// alone is also met by a kernel whose error is merely within the doubled table/storage terms.
template <class Exact>
std::string toward_zero_hint(const PairChecker& c, const std::vector<std::int64_t>& positions,
                             const double* x, const double* got, const Exact& exact) {
  const Policy& p = c.policy();
  if (p.output_rounding == Rounding::toward_zero && p.table_rounding == Rounding::toward_zero)
    return "";
  Policy q = p;
  q.table_rounding = q.output_rounding = Rounding::toward_zero;
  const PairChecker qc(q, c.spec(), c.dtype());
  if (!all_within(qc, positions, x, got, exact)) return "";
  const RopeSpec& s = c.spec();
  const double tiny = std::ldexp(4.0, traits(c.dtype()).emin);
  std::int64_t n = 0, below = 0;
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    for (std::int64_t j : {a, b}) {
      const double e = magnitude(exact, j);
      if (!(e > tiny) || !std::isfinite(got[j])) continue;
      ++n;
      below += std::fabs(got[j]) < e ? 1 : 0;
    }
  }
  if (n < 16 || 8 * below < 7 * n) return "";
  return std::to_string(below) + " of " + std::to_string(n) +
         " outputs lie below the exact magnitude and the errors fit cos/sin and results rounded "
         "toward zero (truncated, e.g. bf16 as the top 16 bits of an f32): if your kernel "
         "truncates on purpose, declare Policy(table_rounding='toward_zero', "
         "output_rounding='toward_zero') (C: policies[dtype].rounding = "
         "ROPECHECK_ROUNDING_TABLE_TOWARD_ZERO | ROPECHECK_ROUNDING_OUTPUT_TOWARD_ZERO; spec keys "
         "table_rounding / output_rounding = toward_zero)";
}

template <class Exact>
std::string diagnose_with(const PairChecker& c, const std::vector<std::int64_t>& positions,
                          const double* x, const double* got, const VectorCheck& v,
                          const Exact& exact) {
  const RopeSpec& s = c.spec();
  bool pairs_fail = false, finite = true;
  for (const auto& p : v.pairs) {
    pairs_fail = pairs_fail || !p.within();
    finite = finite && p.finite;
  }
  if (!v.passthrough_changed.empty() && !pairs_fail && s.rotary_dim < s.head_dim)
    return "only pass-through dims changed (rotary_dim " + std::to_string(s.rotary_dim) +
           " < head_dim " + std::to_string(s.head_dim) +
           "): they must be copied bit for bit; a kernel written for full rotary rotates or "
           "overwrites them";
  if (!pairs_fail || !finite || positions.empty() || s.n_axes() != 1) return "";
  std::string h = other_layout_hint(c, positions, x, got);
  if (h.empty()) h = toward_zero_hint(c, positions, x, got, exact);
  if (h.empty()) h = lower_precision_hint(c, positions, x, got, exact);
  return h;
}

}  // namespace

std::string diagnose(const PairChecker& c, const std::vector<std::int64_t>& positions,
                     const double* x, const double* got, const VectorCheck& v,
                     const reference::ExactVector& exact) {
  return diagnose_with(c, positions, x, got, v, exact);
}

std::string diagnose(const PairChecker& c, const std::vector<std::int64_t>& positions,
                     const double* x, const double* got, const VectorCheck& v,
                     const reference::MpVector& exact) {
  return diagnose_with(c, positions, x, got, v, exact);
}

}  // namespace ropecheck::verify
