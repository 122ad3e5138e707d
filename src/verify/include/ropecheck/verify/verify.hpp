// ropecheck::verify — the one verification engine: every front end that judges a kernel output
// (the properties, the reports' sweeps, `check`, `validate`, `eval`) asks the same question here.
//
// Map of this module:
//   PairChecker   one rotated pair: (policy, spec, dtype, pair, position, input, got, exact) ->
//                 error in u, bound in u (ropecheck::bounds), utilization, finiteness (pair.cpp)
//   check_vector  one head vector: the pass-through dims bit for bit, then every pair (pair.cpp)
//   Location, Finding, Summary
//                 a located failure with its one message, and the running result of many
//                 checks: counts, the worst error and the worst utilization each with its own
//                 location, the first findings (summary.cpp)
//   fmt*, exceeded  number formatting shared by every message (format.cpp)
//   add_vector    one checked vector into a Summary: figures per pair, a located Finding per
//                 failure (record.cpp)
//   compare_vector  ULP statistics of one output vector and its pair figure (`eval`; compare.cpp)
//   advise        the hint of a failing run: a declaration or spec mismatch under which every
//                 vector of the run passes, re-checked on all of them (advise.hpp, advise.cpp)
// Adding a front end: build a PairChecker per (policy, spec, dtype) and a reference::Oracle per
// spec; per position tuple take oracle.at(positions) once, per vector rot.apply(x, exact) and
// check_vector, feed a Summary. The ExactVector overloads give the same figures, bit for bit, as
// the MpVector ones (the oracle's rounding test guarantees it; oracle.hpp) at a fraction of the
// cost; the MpVector overloads stay for callers that hold MP values anyway.
//
// Units: errors and bounds of a pair are relative to s * ||x_pair|| (s: the spec's magnitude,
// attention factor included) in units of the storage dtype's unit roundoff u = 2^-p.
//
// Rounding of the comparison itself: each component difference got_j - exact_j is formed in MP and
// rounded once to double, the pair error is hypot of the two, and error_u divides by a double
// s*||x||*u; every figure is within a few units of 2^-53 (relative) of its exact value. A pair can
// only be misjudged when its exact error lies within that distance of its bound, a band 2^40 times
// narrower than the bound's own slack kSlack = 2^-10 (bounds.hpp).
#pragma once

#include "ropecheck/bounds.hpp"
#include "ropecheck/dtype.hpp"
#include "ropecheck/policy.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/spec.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ropecheck::verify {

using reference::Mp;

// ---- one output element against its exact value ------------------------------------------------
// Overflow is a value. Round-to-nearest-even (IEEE 754-2019, 7.4) takes every |v| >= T =
// (2 - 2^-p) 2^emax (the largest finite value plus half its ulp; T itself is a tie whose even
// neighbour 2^(emax+1) overflows) to an infinity of v's sign, so a stored +inf stands for the
// values [T, inf) and -inf for (-inf, -T]. The difference of an infinite output is read as the
// distance from the exact value to that set: 0 where the exact value's one correct rounding is
// that infinity, and +-T - exact otherwise, finite and judged by the bound as any output is.
// Why the bound decides, both ways: a kernel within its derived bound computes some v near the
// exact value before it stores; near T, v may fall on the other side of T than the exact value.
//   exact >= T, output finite: v < T was stored as a finite value (the largest, at most); its
//     difference max - exact is an ordinary finite difference, within the bound when v could be.
//   exact < T, output +inf: v >= T was stored as inf; T - exact is within the bound when v could
//     be (the bound covers the stored value's error, so it also covers v's).
// Far from T either way the difference exceeds any bound: the wrong infinity (+-T - exact has
// the magnitude of T + |exact|) and an infinity where the exact value is well inside the range
// fail, with a finite figure. Output rounding toward_zero never rounds a finite value to an
// infinity but saturates: there +-max stands for every value at or beyond it (difference 0 where
// the exact value lies beyond), and an infinite output is not a value (difference +inf), as NaN
// never is. (A toward_zero kernel whose wider arithmetic overflowed first stores inf: that is
// not read as a value.)
struct OutputDiff {
  double diff = 0;          // got - exact as read above, rounded once to double; +inf: no value
  bool overflowed = false;  // got read as an overflow: an infinity, or max saturated toward zero
};
// got: a value of dtype d (as a double); exact: the exact output element; r: the declared output
// rounding. For a finite got, diff = RN_double(got - exact).
OutputDiff output_diff(double got, const Mp& exact, Dtype d, Rounding r);
// The same with the exact element j of an oracle answer (ExactVector::diff for a finite got).
OutputDiff output_diff(double got, const reference::ExactVector& exact, std::int64_t j, Dtype d,
                       Rounding r);

// ---- one pair -----------------------------------------------------------------------------------
struct PairCheck {
  std::int64_t pair = -1;                 // i
  std::int64_t elem_a = -1, elem_b = -1;  // the head-vector indices of the pair (layout's pairing)
  // ||(diff_a, diff_b)|| of output_diff: inf for a NaN output or an infinity that is no value.
  double error_abs = 0;
  double scaled_norm = 0;  // s * ||x_pair||
  // error_abs / scaled_norm / u. A zero input pair has no relative error: check_vector gives it
  // relative to the head vector's norm instead (pair.cpp, zero_norm_unit), finite for finite
  // outputs; a lone pair check (no vector) says 0/0 -> 0, e/0 -> inf.
  double error_u = 0;
  double bound_abs = 0;    // bounds::PairBound::abs(scaled_norm)
  double bound_u = 0;      // bounds::PairBound::total_u(scaled_norm)
  double utilization = 0;  // error_abs / bound_abs; 0/0 -> 0, e/0 -> inf
  bool finite = true;      // both outputs finite
  bool got_nan = false, got_inf = false;
  int overflowed = 0;  // outputs read as an overflow (OutputDiff::overflowed): 0, 1 or 2
  // The bound's angle term is at its cap (|dphi| >= 2 rad, bounds.cpp set_angle): the declared
  // angle precision no longer constrains the rotation here (e.g. an f32 angle at |m| ~ 2^23), so
  // any rotation passes and this pair's utilization says nothing about the kernel.
  bool unconstrained = false;
  // The verdict on this pair: false for NaN errors.
  bool within() const { return error_abs <= bound_abs; }
  // A NaN output, or an infinity that is no value: the error has no finite figure. An overflow
  // read as a value is not one (a failing pair with any infinite output is still a
  // non_finite_output finding, and a non_finite_output in `validate`).
  bool non_finite_fault() const { return got_nan || !std::isfinite(error_abs); }
};

// Error in u from the component differences (doubles), the input pair and the magnitude: the one
// formula of every error figure ropecheck prints (reports included). 0 for an exact zero pair,
// +inf for an error on a zero-norm pair.
double pair_error_u(double diff_a, double diff_b, double x_a, double x_b, double magnitude,
                    double u);
// The same with the pair's scale n = hypot(x_a, x_b) * magnitude computed by the caller once (the
// report's sweep asks ~20 figures per pair and vector).
double pair_error_u_of_norm(double diff_a, double diff_b, double n, double u);

// The pair check for one (policy, spec, dtype). spec must be normalized.
class PairChecker {
 public:
  PairChecker(const Policy& policy, const RopeSpec& spec, Dtype dtype);
  // position: the position of the pair's axis (spec.pair_axis(pair) for multi-axis specs).
  PairCheck check(std::int64_t pair, double position, double x_a, double x_b, double got_a,
                  double got_b, const Mp& exact_a, const Mp& exact_b) const;
  // The same check with the exact pair as an oracle answer (elements spec.pair(pair) of exact).
  PairCheck check(std::int64_t pair, double position, double x_a, double x_b, double got_a,
                  double got_b, const reference::ExactVector& exact) const;
  // The same check with the pair's bound given (computed once per position: bounds_at).
  PairCheck check(const bounds::PairBound& bound, std::int64_t pair, double x_a, double x_b,
                  double got_a, double got_b, const reference::ExactVector& exact) const;
  // The bound alone (no output yet), e.g. for an utilization histogram.
  bounds::PairBound bound(std::int64_t pair, double position) const;
  // Every pair's bound at one position tuple (1 value: every axis there, or one per axis): the
  // same for every vector at that position, so a front end computes them once per token.
  void bounds_at(const std::vector<std::int64_t>& positions,
                 std::vector<bounds::PairBound>& out) const;
  const Policy& policy() const { return policy_; }
  const RopeSpec& spec() const { return spec_; }
  Dtype dtype() const { return dtype_; }
  double magnitude() const { return magnitude_; }
  double u() const { return u_; }

 private:
  // The check once the differences got - exact (output_diff) are known.
  PairCheck check_diffs(const bounds::PairBound& bound, std::int64_t pair, double x_a, double x_b,
                        double got_a, double got_b, const OutputDiff& diff_a,
                        const OutputDiff& diff_b) const;
  Policy policy_;
  RopeSpec spec_;
  Dtype dtype_;
  double magnitude_;
  double u_;
  bounds::PairBounds bounds_;  // pow / log per pair once, not per position
};

// ---- one head vector ----------------------------------------------------------------------------
// positions: one per axis of the call (size 1: every axis at that position).
struct VectorCheck {
  std::vector<std::int64_t> passthrough_changed;  // dims >= rotary_dim whose bits changed
  std::vector<PairCheck> pairs;                   // every pair, in pair order
  bool ok() const;                                // nothing changed, every pair within
};
VectorCheck check_vector(const PairChecker& c, const std::vector<std::int64_t>& positions,
                         const double* x, const double* got, const reference::MpVector& exact);
VectorCheck check_vector(const PairChecker& c, const std::vector<std::int64_t>& positions,
                         const double* x, const double* got, const reference::ExactVector& exact);
// As above with the bounds of c.bounds_at(positions), reusing v's storage (no allocation once v
// has held a vector of this spec): the per-vector cost of a front end that checks many vectors
// (heads, batch rows) at one position.
void check_vector(VectorCheck& v, const PairChecker& c,
                  const std::vector<bounds::PairBound>& bounds_at_position, const double* x,
                  const double* got, const reference::ExactVector& exact);

// ---- located findings and the running summary ---------------------------------------------------
struct Location {
  std::string tensor;       // e.g. "q -> q_out" (empty: none)
  std::int64_t batch = -1;  // -1: not batched
  std::int64_t token = -1;
  std::vector<std::int64_t> position;  // one per axis given
  std::int64_t head = -1;
  std::int64_t pair = -1;  // -1: a vector-level finding
  std::int64_t elem_a = -1, elem_b = -1;
  // "batch 1, token 3 (position 7), head 2, pair 5 (elements 10, 11)" with the parts that are set.
  std::string text() const;
};

enum class FindingKind { exceeds_bound, non_finite_output, passthrough_changed };

struct Finding {
  FindingKind kind = FindingKind::exceeds_bound;
  Location where;
  // The explanation, e.g. "error 3.1 u > bound 2.05 u; got (...), expected (...) from x = (...)".
  std::string what;
  std::string message() const { return where.text() + ": " + what; }
};

// The explanation of a pair that is out of bound: why (exceeded()), then got and expected with
// digits enough to tell them apart, and the input.
std::string explain_pair(const PairCheck& p, double x_a, double x_b, double got_a, double got_b,
                         const Mp& exact_a, const Mp& exact_b, double u);
// The explanation of a changed pass-through element.
std::string explain_passthrough(std::int64_t elem, double got, double input, Dtype d);

struct Summary {
  std::int64_t vectors = 0, pairs = 0, failures = 0;
  // Each maximum with its own location; NaN is worse than any number and the first NaN stays.
  double max_error_u = 0, max_utilization = 0;
  Location max_error_at, max_utilization_at;
  // The same maxima over the pairs whose bound still constrains the rotation (not
  // PairCheck::unconstrained), and where that stops: the smallest |position| of an unconstrained
  // pair (-1: none). A Differential cell reporting 99.9 % where every rotation passes reads like
  // a near-failure and is vacuous (#29); these are the figures that mean something.
  double max_error_u_constrained = 0, max_utilization_constrained = 0;
  std::int64_t unconstrained_pairs = 0, min_unconstrained_position = -1;
  // Outputs read as an overflow (OutputDiff::overflowed: +-inf, or +-max saturated toward zero),
  // counted apart; the figures above stay finite for them.
  std::int64_t overflowed = 0;
  bool any = false;               // a pair was recorded (else the maxima and locations are empty)
  std::vector<Finding> findings;  // the first `keep` failures
  std::size_t keep = 10;
  // The run's hint (verify::advise, advise.hpp: confirmed on every vector of the run), set by the
  // front end once the run is over; add_vector never sets it. Empty: none.
  std::string hint;

  void add_pair(const PairCheck& p, const Location& at);
  void add_finding(Finding f);
  // Folds in the summary of the vectors that come after this one's: the figures one pass over
  // both in order gives (a later maximum replaces only when worse, so ties keep the first;
  // findings fill up to keep). How threaded front ends merge per-chunk summaries in chunk order.
  void append(const Summary& later);
  bool passed() const { return failures == 0; }
};

// Nothing checked is not a pass: a verdict resting on zero checked elements (an empty dump, a
// pipeline that dumped nothing, every vector skipped for a non-finite input) says nothing about
// the kernel. Every front end that counts what it checked fails such a run as a coverage failure
// (exit 1) with this one sentence: "coverage: no element was checked (<why>): nothing of <what>
// was exercised".
std::string nothing_checked(const std::string& why, const std::string& what = "the kernel");

// v replaces the running maximum cur: larger, or NaN (the first NaN stays).
inline bool worse(double v, double cur) { return !(cur != cur) && ((v != v) || v > cur); }

// Adds one checked vector (its input x, output got and exact output) to s: counts the vector,
// adds every pair at `at` with its pair index (the elements are named only in findings, so a
// maximum's location reads "..., pair 5"), and a Finding per changed pass-through element and per
// pair out of bound, explained by explain_passthrough / explain_pair. A NaN output is explained as
// a NaN error ("error is NaN (got a NaN output)"), where the verdict counts it as infinite.
// A failure past the first s.keep is counted but not explained (its MP values are not needed).
void add_vector(Summary& s, const PairChecker& c, const VectorCheck& v, const Location& at,
                const double* x, const double* got, const reference::MpVector& exact);
void add_vector(Summary& s, const PairChecker& c, const VectorCheck& v, const Location& at,
                const double* x, const double* got, const reference::ExactVector& exact);

// ---- error statistics of one output vector (reported, not gated) -------------------------------
// For `eval`: per-element ULP errors against the exact output (they explode where a component
// cancels, so they are reported, never gated) and the pair figure of pair_error_u.
struct VectorError {
  double max_ulp = 0;  // max_j |got_j - exact_j| / ulp(round(exact_j))
  std::int64_t max_ulp_index = -1;
  // max over pairs of pair_error_u; a pair with a non-finite input has no relative error and is
  // skipped, a non-finite output counts as +inf.
  double max_pair_error_u = 0;
  std::int64_t max_pair_index = -1;
  double max_abs_error = 0;
  std::int64_t not_correctly_rounded = 0;  // elements with got != round(exact)
  bool passthrough_exact = true;           // dims outside the pairs keep the input's bits
};
// spec must be normalized; input, exact and got hold head_dim values (std::invalid_argument
// otherwise).
VectorError compare_vector(const RopeSpec& spec, Dtype d, const std::vector<double>& input,
                           const reference::MpVector& exact, const std::vector<double>& got);

// ---- numbers in messages ------------------------------------------------------------------------
std::string fmt(double v, int significant = 4);  // "nan" for NaN
// a and b with the fewest significant digits (at least `significant`) that tell them apart when
// they differ: 17 digits tell any two doubles apart.
std::pair<std::string, std::string> fmt_apart(double a, double b, int significant = 4);
// A recorded output and the exact value it is compared with, apart as above; beyond 17 digits
// (the exact value is not a double) both are written from their exact values.
std::pair<std::string, std::string> fmt_got_expected(double got, const Mp& expected);
// Why a pair failed: "error E u > bound B u" with digits enough to tell E from B, in absolute
// terms when the pair's scale (unit = s ||x_pair|| u) is 0 or the division makes E and B equal;
// NaN and infinite errors said as such.
std::string exceeded(double err, double bound, double unit, bool got_nan, bool got_inf);
// What follows exceeded() in every message: " (relative E > B; scale s||x|| = S)", the same
// comparison relative to the input's scale S (s||x_pair||), and S; "" when S is 0 or E not finite.
std::string relative_text(double err, double bound, double scale);

}  // namespace ropecheck::verify
