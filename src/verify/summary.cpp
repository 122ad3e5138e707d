#include "ropecheck/verify/verify.hpp"

#include <algorithm>
#include <cstdint>

namespace ropecheck::verify {

void Summary::add_pair(const PairCheck& p, const Location& at) {
  ++pairs;
  overflowed += p.overflowed;
  if (p.unconstrained) {
    ++unconstrained_pairs;
    std::int64_t m = 0;
    for (std::int64_t v : at.position)
      m = std::max(m, v == INT64_MIN ? INT64_MAX : (v < 0 ? -v : v));
    if (min_unconstrained_position < 0 || m < min_unconstrained_position)
      min_unconstrained_position = m;
  } else {
    if (worse(p.error_u, max_error_u_constrained)) max_error_u_constrained = p.error_u;
    if (worse(p.utilization, max_utilization_constrained))
      max_utilization_constrained = p.utilization;
  }
  if (!any || worse(p.error_u, max_error_u)) {
    max_error_u = p.error_u;
    max_error_at = at;
  }
  if (!any || worse(p.utilization, max_utilization)) {
    max_utilization = p.utilization;
    max_utilization_at = at;
  }
  any = true;
}

void Summary::add_finding(Finding f) {
  ++failures;
  if (findings.size() < keep) findings.push_back(std::move(f));
}

void Summary::append(const Summary& l) {
  if (failures == 0) hint = l.hint;  // the first failing vector's, as one pass gives
  vectors += l.vectors;
  pairs += l.pairs;
  failures += l.failures;
  unconstrained_pairs += l.unconstrained_pairs;
  overflowed += l.overflowed;
  if (l.min_unconstrained_position >= 0 &&
      (min_unconstrained_position < 0 || l.min_unconstrained_position < min_unconstrained_position))
    min_unconstrained_position = l.min_unconstrained_position;
  if (worse(l.max_error_u_constrained, max_error_u_constrained))
    max_error_u_constrained = l.max_error_u_constrained;
  if (worse(l.max_utilization_constrained, max_utilization_constrained))
    max_utilization_constrained = l.max_utilization_constrained;
  if (l.any) {
    if (!any || worse(l.max_error_u, max_error_u)) {
      max_error_u = l.max_error_u;
      max_error_at = l.max_error_at;
    }
    if (!any || worse(l.max_utilization, max_utilization)) {
      max_utilization = l.max_utilization;
      max_utilization_at = l.max_utilization_at;
    }
    any = true;
  }
  for (const auto& f : l.findings)
    if (findings.size() < keep) findings.push_back(f);
}

std::string nothing_checked(const std::string& why, const std::string& what) {
  return "coverage: no element was checked (" + why + "): nothing of " + what + " was exercised";
}

}  // namespace ropecheck::verify
