#include "ropecheck/verify/verify.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ropecheck::verify {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool same_value(double got, double rounded) {
  return (std::isnan(got) && std::isnan(rounded)) || got == rounded;
}

// |got - exact| in absolute terms and in ulps of round(exact). A non-finite exact value only
// comes from a non-finite input: the one acceptable output is then the same class. An infinite
// output is an overflow read as the values that round to it (output_diff: 0 where it is the
// correct rounding).
std::pair<double, double> element_error(double got, const Mp& exact, double rounded, Dtype d) {
  if (!boost::multiprecision::isfinite(exact))
    return same_value(got, rounded) ? std::pair{0.0, 0.0} : std::pair{kInf, kInf};
  if (!std::isfinite(got)) {
    const double e = std::abs(output_diff(got, exact, d, Rounding::nearest_even).diff);
    return {e, e / reference::ulp(rounded, d)};
  }
  const Mp diff = abs(reference::exact(got) - exact);
  return {static_cast<double>(diff),
          static_cast<double>(diff / reference::exact(reference::ulp(rounded, d)))};
}

void add_elements(VectorError& err, Dtype d, const reference::MpVector& exact,
                  const std::vector<double>& got) {
  for (Eigen::Index j = 0; j < exact.size(); ++j) {
    const double g = got[static_cast<std::size_t>(j)];
    const double r = reference::round_to(exact(j), d);
    const auto [e_abs, e_ulp] = element_error(g, exact(j), r, d);
    if (!same_value(g, r)) ++err.not_correctly_rounded;
    if (e_ulp > err.max_ulp || err.max_ulp_index < 0) {
      err.max_ulp = e_ulp;
      err.max_ulp_index = j;
    }
    err.max_abs_error = std::max(err.max_abs_error, e_abs);
  }
}

void add_pairs(VectorError& err, const RopeSpec& spec, Dtype d, const std::vector<double>& x,
               const reference::MpVector& exact, const std::vector<double>& got) {
  const double magnitude = magnitude_f64(spec), u = unit_roundoff(d);
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    if (!std::isfinite(x[a]) || !std::isfinite(x[b])) continue;  // the elements say it
    // The outputs read as every check reads them (output_diff), overflow included.
    const double e = pair_error_u(output_diff(got[a], exact(a), d, Rounding::nearest_even).diff,
                                  output_diff(got[b], exact(b), d, Rounding::nearest_even).diff,
                                  x[a], x[b], magnitude, u);
    if (e > err.max_pair_error_u || err.max_pair_index < 0) {
      err.max_pair_error_u = e;
      err.max_pair_index = i;
    }
  }
}

}  // namespace

VectorError compare_vector(const RopeSpec& spec, Dtype d, const std::vector<double>& input,
                           const reference::MpVector& exact, const std::vector<double>& got) {
  const auto n = static_cast<std::size_t>(spec.head_dim);
  if (input.size() != n || static_cast<std::size_t>(exact.size()) != n || got.size() != n)
    throw std::invalid_argument("compare_vector: input/exact/got sizes do not match head_dim " +
                                std::to_string(spec.head_dim));
  VectorError err;
  add_elements(err, d, exact, got);
  add_pairs(err, spec, d, input, exact, got);
  for (std::int64_t j = 0; j < spec.head_dim; ++j)
    if (spec.is_passthrough(j) && bits_of(got[j], d) != bits_of(input[j], d))
      err.passthrough_exact = false;
  return err;
}

}  // namespace ropecheck::verify
