#include "ropecheck/verify/verify.hpp"

namespace ropecheck::verify {

void Summary::add_pair(const PairCheck& p, const Location& at) {
  ++pairs;
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

void Summary::merge(const Summary& later) {
  vectors += later.vectors;
  pairs += later.pairs;
  failures += later.failures;
  if (later.any) {
    if (!any || worse(later.max_error_u, max_error_u)) {
      max_error_u = later.max_error_u;
      max_error_at = later.max_error_at;
    }
    if (!any || worse(later.max_utilization, max_utilization)) {
      max_utilization = later.max_utilization;
      max_utilization_at = later.max_utilization_at;
    }
    any = true;
  }
  for (const auto& f : later.findings)
    if (findings.size() < keep) findings.push_back(f);
}

}  // namespace ropecheck::verify
