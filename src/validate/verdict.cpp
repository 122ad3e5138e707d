// The verdict of a validation run (result.hpp): classification of a configuration and of the
// run, and the faults that end a configuration.
#include "ropecheck/validate/result.hpp"

namespace ropecheck::validate {

std::string classification(const ConfigResult& r) {
  if (r.fault) return plugin::name(r.fault->kind);
  bool nonfinite = r.nonfinite_output, mismatch = false, wrong = false, coverage = false;
  for (const Cell* c : [&] {
         std::vector<const Cell*> v = {&r.differential};
         for (const auto& pc : r.properties) v.push_back(&pc.second);
         return v;
       }()) {
    if (!c->failed) continue;
    nonfinite = nonfinite || c->kind == "non_finite_output";
    mismatch = mismatch || c->kind == "declaration_mismatch";
    coverage = coverage || c->kind == "coverage_failure";
    wrong = wrong || c->kind == "wrong_results" || c->kind.empty();
  }
  if (nonfinite) return "non_finite_output";
  if (mismatch) return "declaration_mismatch";
  if (wrong) return "wrong_results";
  if (coverage) return "coverage_failure";
  return "pass";
}

std::string fault_short(const plugin::Fault& f) {
  switch (f.kind) {
    case plugin::FaultKind::crashed:
      return "crashed (signal " + std::to_string(f.signal) + ")";
    case plugin::FaultKind::exited:
      return "exited (" + std::to_string(f.exit_status) + ")";
    case plugin::FaultKind::timeout:
      return "timeout";
    case plugin::FaultKind::out_of_bounds_write:
      return "out-of-bounds write";
    case plugin::FaultKind::unwritten_output:
      return "unwritten output";
    case plugin::FaultKind::input_modified:
      return "input modified";
    case plugin::FaultKind::declaration_mismatch:
      return "mismatch";
    default:
      return plugin::name(f.kind);
  }
}

bool fatal(const plugin::Fault& f) {
  return f.kind == plugin::FaultKind::crashed || f.kind == plugin::FaultKind::exited ||
         f.kind == plugin::FaultKind::timeout || f.kind == plugin::FaultKind::protocol_violation ||
         f.kind == plugin::FaultKind::out_of_memory ||
         f.kind == plugin::FaultKind::declaration_mismatch;  // said once, at its first call
}

std::string overall_classification(const std::vector<ConfigResult>& results) {
  for (const auto& r : results)
    if (classification(r) != "pass") return classification(r);
  return "pass";
}

bool any_failed(const std::vector<ConfigResult>& results) {
  for (const auto& r : results) {
    if (r.differential.failed) return true;
    for (const auto& pc : r.properties)
      if (pc.second.failed) return true;
  }
  return false;
}

}  // namespace ropecheck::validate
