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

}  // namespace ropecheck::verify
