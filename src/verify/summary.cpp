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

void Summary::append(const Summary& l) {
  if (failures == 0) hint = l.hint;  // the first failing vector's, as one pass gives
  vectors += l.vectors;
  pairs += l.pairs;
  failures += l.failures;
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

}  // namespace ropecheck::verify
