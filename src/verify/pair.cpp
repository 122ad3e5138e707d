#include "ropecheck/verify/verify.hpp"

#include <cmath>
#include <limits>

namespace ropecheck::verify {

double pair_error_u(double diff_a, double diff_b, double x_a, double x_b, double magnitude,
                    double u) {
  return pair_error_u_of_norm(diff_a, diff_b, std::hypot(x_a, x_b) * magnitude, u);
}

double pair_error_u_of_norm(double diff_a, double diff_b, double n, double u) {
  const double e = std::hypot(diff_a, diff_b);
  if (n == 0) return e == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return e / n / u;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// T = max + ulp(max)/2 = (2 - 2^-p) 2^emax in MP: p + 1 bits, exact at the reference precision
// (>= 160 bits), and beyond double's range for f64 (T > DBL_MAX), so built from two doubles.
Mp overflow_threshold(Dtype d) {
  const double max = max_finite(d);
  return reference::exact(max) + reference::exact(reference::ulp(max, d) / 2);
}

// As a double, for the storage dtypes narrower than f64 (p + 1 <= 53 bits, emax + 1 < 1024).
double overflow_threshold_double(Dtype d) {
  const double max = max_finite(d);
  return max + reference::ulp(max, d) / 2;
}

// The infinity `got` read as the values it stands for, from RN_double(+-T - exact) (output_diff
// in verify.hpp): 0 once the exact value lies in that set.
OutputDiff overflow_diff(double got, double to_threshold) {
  const bool exact_in_set = got > 0 ? to_threshold <= 0 : to_threshold >= 0;
  return {exact_in_set ? 0.0 : to_threshold, true};
}

bool reads_as_overflow(double got, Rounding r) {
  return std::isinf(got) && r == Rounding::nearest_even;
}

// Toward zero saturates: +-max stands for every value at or beyond it.
OutputDiff saturated(double got, double diff, Dtype d, Rounding r) {
  if (r == Rounding::toward_zero && std::fabs(got) == max_finite(d) &&
      (got > 0 ? diff < 0 : diff > 0))
    return {0.0, true};
  return {diff, false};
}

}  // namespace

OutputDiff output_diff(double got, const Mp& exact, Dtype d, Rounding r) {
  if (std::isfinite(got))
    return saturated(got, static_cast<double>(reference::exact(got) - exact), d, r);
  if (!reads_as_overflow(got, r)) return {kInf, false};
  const Mp t = overflow_threshold(d);
  return overflow_diff(got, static_cast<double>((got > 0 ? t : Mp(-t)) - exact));
}

OutputDiff output_diff(double got, const reference::ExactVector& exact, std::int64_t j, Dtype d,
                       Rounding r) {
  if (std::isfinite(got)) return saturated(got, exact.diff(j, got), d, r);
  if (!reads_as_overflow(got, r)) return {kInf, false};
  if (d == Dtype::f64) return output_diff(got, exact.mp(j), d, r);  // T is no double
  const double t = overflow_threshold_double(d);
  return overflow_diff(got, exact.diff(j, got > 0 ? t : -t));
}

PairChecker::PairChecker(const Policy& policy, const RopeSpec& spec, Dtype dtype)
    : policy_(policy),
      spec_(spec),
      dtype_(dtype),
      magnitude_(magnitude_f64(spec)),
      u_(unit_roundoff(dtype)),
      bounds_(policy, spec, dtype) {}

bounds::PairBound PairChecker::bound(std::int64_t pair, double position) const {
  return bounds_.at(pair, position);
}

PairCheck PairChecker::check(std::int64_t pair, double position, double x_a, double x_b,
                             double got_a, double got_b, const Mp& exact_a,
                             const Mp& exact_b) const {
  const Rounding r = policy_.output_rounding;
  return check_diffs(bound(pair, position), pair, x_a, x_b, got_a, got_b,
                     output_diff(got_a, exact_a, dtype_, r),
                     output_diff(got_b, exact_b, dtype_, r));
}

PairCheck PairChecker::check(std::int64_t pair, double position, double x_a, double x_b,
                             double got_a, double got_b,
                             const reference::ExactVector& exact) const {
  return check(bound(pair, position), pair, x_a, x_b, got_a, got_b, exact);
}

PairCheck PairChecker::check(const bounds::PairBound& pb, std::int64_t pair, double x_a, double x_b,
                             double got_a, double got_b,
                             const reference::ExactVector& exact) const {
  const auto [a, b] = spec_.pair(pair);
  const Rounding r = policy_.output_rounding;
  return check_diffs(pb, pair, x_a, x_b, got_a, got_b, output_diff(got_a, exact, a, dtype_, r),
                     output_diff(got_b, exact, b, dtype_, r));
}

void PairChecker::bounds_at(const std::vector<std::int64_t>& positions,
                            std::vector<bounds::PairBound>& out) const {
  out.resize(static_cast<std::size_t>(spec_.n_pairs()));
  for (std::int64_t i = 0; i < spec_.n_pairs(); ++i) {
    const std::size_t ax = positions.size() == 1 ? 0 : static_cast<std::size_t>(spec_.pair_axis(i));
    out[static_cast<std::size_t>(i)] = bound(i, static_cast<double>(positions[ax]));
  }
}

PairCheck PairChecker::check_diffs(const bounds::PairBound& pb, std::int64_t pair, double x_a,
                                   double x_b, double got_a, double got_b, const OutputDiff& oa,
                                   const OutputDiff& ob) const {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const double da = oa.diff, db = ob.diff;
  PairCheck r;
  r.pair = pair;
  const auto [a, b] = spec_.pair(pair);
  r.elem_a = a;
  r.elem_b = b;
  r.got_nan = std::isnan(got_a) || std::isnan(got_b);
  r.got_inf = std::isinf(got_a) || std::isinf(got_b);
  r.finite = !r.got_nan && !r.got_inf;
  r.overflowed = int{oa.overflowed} + int{ob.overflowed};
  r.error_abs = std::hypot(da, db);
  r.scaled_norm = magnitude_ * std::hypot(x_a, x_b);
  // pair_error_u(da, db, x_a, x_b, magnitude_, u_) from the two hypots already taken: the same
  // operations on the same doubles (hypot is the costly part of a check).
  if (r.scaled_norm == 0)
    r.error_u = r.error_abs == 0 ? 0.0 : inf;
  else
    r.error_u = r.error_abs / r.scaled_norm / u_;
  r.bound_abs = pb.abs(r.scaled_norm);
  r.bound_u = pb.total_u(r.scaled_norm);
  r.utilization = r.bound_abs > 0 ? r.error_abs / r.bound_abs : (r.error_abs > 0 ? inf : 0.0);
  r.unconstrained = pb.angle_detail.rad >= 2.0;
  return r;
}

bool VectorCheck::ok() const {
  if (!passthrough_changed.empty()) return false;
  for (const auto& p : pairs)
    if (!p.within()) return false;
  return true;
}

namespace {
// Zero input pairs. The exact output of x_a = x_b = 0 is 0, so the pair has no relative error;
// the verdict is absolute: within() compares ||got|| with bound_abs = (1 + kSlack) *
// underflow_abs (bounds.cpp, section 6 with s||x_pair|| = 0: every relative term vanishes). For an
// IEEE kernel it holds with room to spare: +-0 * c and +-0 +- +-0 are +-0, so a correct kernel
// writes +-0 exactly, and any other finite value is a value moved in from elsewhere (a pairing or
// stride bug) or made up. The figure error_u is then taken relative to the head vector's scaled
// norm s||x|| -- the scale of the values a bug could move into the pair -- or, for an all-zero
// vector, to the dtype's smallest normal 2^emin; either way finite for a finite output (never the
// inf of a division by 0), and the bound in the same unit.
void fix_zero_norm_pairs(VectorCheck& v, const PairChecker& c, const double* x) {
  double n2 = 0;
  bool any_zero = false;
  for (const auto& p : v.pairs) any_zero = any_zero || p.scaled_norm == 0;
  if (!any_zero) return;
  for (std::int64_t j = 0; j < c.spec().head_dim; ++j)
    if (std::isfinite(x[j])) n2 += x[j] * x[j];
  double unit = c.magnitude() * std::sqrt(n2) * c.u();
  if (!(unit > 0)) unit = std::ldexp(1.0, traits(c.dtype()).emin) * c.u();
  for (auto& p : v.pairs) {
    if (p.scaled_norm != 0 || p.non_finite_fault()) continue;
    p.error_u = p.error_abs / unit;
    p.bound_u = p.bound_abs / unit;
  }
}

void check_passthrough(VectorCheck& v, const PairChecker& c, const double* x, const double* got) {
  const RopeSpec& spec = c.spec();
  if (spec.layout != Layout::proportional && spec.rotary_dim == spec.head_dim) return;
  for (std::int64_t j = 0; j < spec.head_dim; ++j)
    if (spec.is_passthrough(j) && bits_of(got[j], c.dtype()) != bits_of(x[j], c.dtype()))
      v.passthrough_changed.push_back(j);
}

PairCheck check_one(const PairChecker& c, std::int64_t i, double m, const double* x,
                    const double* got, const reference::MpVector& exact) {
  const auto [a, b] = c.spec().pair(i);
  return c.check(i, m, x[a], x[b], got[a], got[b], exact[a], exact[b]);
}
PairCheck check_one(const PairChecker& c, std::int64_t i, double m, const double* x,
                    const double* got, const reference::ExactVector& exact) {
  const auto [a, b] = c.spec().pair(i);
  return c.check(i, m, x[a], x[b], got[a], got[b], exact);
}

// One definition for both exact types.
template <class Exact>
void check_vector_with(VectorCheck& v, const PairChecker& c,
                       const std::vector<std::int64_t>& positions, const double* x,
                       const double* got, const Exact& exact) {
  const RopeSpec& spec = c.spec();
  v.passthrough_changed.clear();
  v.pairs.clear();
  check_passthrough(v, c, x, got);
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const std::size_t ax = positions.size() == 1 ? 0 : static_cast<std::size_t>(spec.pair_axis(i));
    v.pairs.push_back(check_one(c, i, static_cast<double>(positions[ax]), x, got, exact));
  }
  fix_zero_norm_pairs(v, c, x);
}
}  // namespace

VectorCheck check_vector(const PairChecker& c, const std::vector<std::int64_t>& positions,
                         const double* x, const double* got, const reference::MpVector& exact) {
  VectorCheck v;
  check_vector_with(v, c, positions, x, got, exact);
  return v;
}

void check_vector(VectorCheck& v, const PairChecker& c,
                  const std::vector<bounds::PairBound>& bounds_at_position, const double* x,
                  const double* got, const reference::ExactVector& exact) {
  const RopeSpec& spec = c.spec();
  v.passthrough_changed.clear();
  v.pairs.clear();
  check_passthrough(v, c, x, got);
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    v.pairs.push_back(c.check(bounds_at_position[static_cast<std::size_t>(i)], i, x[a], x[b],
                              got[a], got[b], exact));
  }
  fix_zero_norm_pairs(v, c, x);
}

VectorCheck check_vector(const PairChecker& c, const std::vector<std::int64_t>& positions,
                         const double* x, const double* got, const reference::ExactVector& exact) {
  VectorCheck v;
  check_vector_with(v, c, positions, x, got, exact);
  return v;
}

}  // namespace ropecheck::verify
