// The verdict of a validation run on hand-built check results: classification precedence, the
// rules that stop a configuration after a fault, the assembly in check order, budgets, and the
// results' text form (runner -> parent) keeping every bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ropecheck/validate/run.hpp"

namespace ropecheck::validate {
namespace {

namespace props = ropecheck::properties;

Cell failed(const std::string& kind) {
  Cell c{"FAIL", true, "why"};
  c.kind = kind;
  return c;
}

ConfigResult config_with(std::vector<Cell> property_cells) {
  ConfigResult r{};
  r.dtype = Dtype::f32;
  r.layout = Layout::half;
  r.differential = {"pass", false, ""};
  for (std::size_t i = 0; i < property_cells.size(); ++i)
    r.properties.push_back({props::all_properties()[i], property_cells[i]});
  return r;
}

TEST(ValidateVerdict, ClassificationPrecedence) {
  EXPECT_EQ(classification(config_with({{"pass 20", false, ""}})), "pass");
  EXPECT_EQ(classification(config_with({failed("coverage_failure")})), "coverage_failure");
  EXPECT_EQ(classification(config_with({failed("coverage_failure"), failed("wrong_results")})),
            "wrong_results");
  EXPECT_EQ(classification(config_with({failed("")})), "wrong_results");  // no kind: wrong
  EXPECT_EQ(classification(config_with({failed("wrong_results"), failed("declaration_mismatch")})),
            "declaration_mismatch");
  EXPECT_EQ(
      classification(config_with({failed("declaration_mismatch"), failed("non_finite_output")})),
      "non_finite_output");
  ConfigResult r = config_with({failed("non_finite_output")});
  r.fault = plugin::Fault{};
  r.fault->kind = plugin::FaultKind::timeout;
  EXPECT_EQ(classification(r), "timeout");  // a fault above everything
  ConfigResult nf = config_with({});
  nf.nonfinite_output = true;  // seen by the differential, the cell passed
  EXPECT_EQ(classification(nf), "non_finite_output");
  // The run's: the first configuration that is not "pass".
  EXPECT_EQ(overall_classification({config_with({}), config_with({failed("coverage_failure")}),
                                    config_with({failed("wrong_results")})}),
            "coverage_failure");
  EXPECT_FALSE(any_failed({config_with({{"n/a", false, ""}})}));
  EXPECT_TRUE(any_failed({config_with({}), config_with({failed("coverage_failure")})}));
}

TEST(ValidateVerdict, FaultCellsAndFatality) {
  plugin::Fault f;
  f.kind = plugin::FaultKind::crashed;
  f.signal = 11;
  EXPECT_EQ(fault_short(f), "crashed (signal 11)");
  EXPECT_TRUE(fatal(f));
  f.kind = plugin::FaultKind::exited;
  f.exit_status = 3;
  EXPECT_EQ(fault_short(f), "exited (3)");
  f.kind = plugin::FaultKind::out_of_bounds_write;
  EXPECT_EQ(fault_short(f), "out-of-bounds write");
  EXPECT_FALSE(fatal(f));  // a guard fault: the next check may still run
  f.kind = plugin::FaultKind::declaration_mismatch;
  EXPECT_EQ(fault_short(f), "mismatch");
  EXPECT_TRUE(fatal(f));
}

TEST(ValidateRun, StillNeededStopsAfterADifferentialFaultOrAFatalOne) {
  CheckResult ok, guard, crash;
  guard.fault = plugin::Fault{};
  guard.fault->kind = plugin::FaultKind::input_modified;
  crash.fault = plugin::Fault{};
  crash.fault->kind = plugin::FaultKind::crashed;
  EXPECT_TRUE(still_needed({&ok, nullptr, nullptr}, 2));
  EXPECT_FALSE(still_needed({&guard, nullptr, nullptr}, 1));  // the differential's fault
  EXPECT_TRUE(still_needed({&ok, &guard, nullptr}, 2));       // a property's guard fault
  EXPECT_FALSE(still_needed({&ok, &crash, nullptr}, 2));      // a property's crash
  EXPECT_TRUE(still_needed({nullptr, nullptr, nullptr}, 2));  // nothing known yet
}

TEST(ValidateRun, AssembleInCheckOrder) {
  const std::size_t n = props::all_properties().size();
  std::vector<CheckResult> res(n + 1);
  for (auto& r : res) {
    r.cell = {"pass 20", false, ""};
    r.calls = 10;
  }
  res[0].vectors = 336;
  res[0].max_error_u = 0.75;
  res[2].cell = failed("wrong_results");
  res[2].fault = plugin::Fault{};
  res[2].fault->kind = plugin::FaultKind::timeout;  // fatal: the properties after it do not run
  std::vector<const CheckResult*> ptrs;
  for (std::size_t i = 0; i <= n; ++i) ptrs.push_back(i <= 2 ? &res[i] : nullptr);
  Options o;
  std::uint64_t calls = 0;
  const ConfigResult cr = assemble({Dtype::bf16, Layout::interleaved}, ptrs, o, calls);
  EXPECT_EQ(calls, 30u);  // the three checks that ran
  EXPECT_EQ(cr.diff.vectors, 336);
  EXPECT_EQ(cr.diff.max_error_u, 0.75);
  ASSERT_EQ(cr.properties.size(), n);
  EXPECT_EQ(cr.properties[0].second.text, "pass 20");
  EXPECT_EQ(cr.properties[1].second.text, "FAIL");
  EXPECT_EQ(cr.properties[2].second.text, "not run");
  EXPECT_TRUE(cr.properties[2].second.failed);
  EXPECT_EQ(cr.properties[2].second.detail, "configuration faulted: timeout");
  ASSERT_TRUE(cr.fault.has_value());
  EXPECT_EQ(classification(cr), "timeout");
  // --properties: an unselected check is "not run" and not failed.
  o.properties = {"Differential"};
  calls = 0;
  const ConfigResult only = assemble({Dtype::f32, Layout::half}, ptrs, o, calls);
  EXPECT_EQ(calls, 10u);
  EXPECT_EQ(only.properties[0].second.text, "not run");
  EXPECT_FALSE(only.properties[0].second.failed);
}

TEST(ValidateRun, CheckResultTextKeepsEveryBit) {
  CheckResult r;
  r.cell = {"FAIL", true, "detail \"quoted\"\n"};
  r.cell.cases = 7;
  r.cell.budget = 20;
  r.cell.kind = "non_finite_output";
  r.calls = 123;
  r.vectors = 5;
  r.max_error_u = std::numeric_limits<double>::quiet_NaN();
  r.max_utilization = std::numeric_limits<double>::infinity();
  r.max_error_u_constrained = 0.1;
  r.min_unconstrained_position = 1 << 22;
  r.partial_specs = "32/64";
  r.fault = plugin::Fault{};
  r.fault->kind = plugin::FaultKind::unwritten_output;
  r.fault->detail = "element 3";
  const CheckResult b = from_text(to_text(r));
  EXPECT_EQ(b.cell.text, r.cell.text);
  EXPECT_EQ(b.cell.detail, r.cell.detail);
  EXPECT_EQ(b.cell.cases, 7);
  EXPECT_EQ(b.cell.kind, r.cell.kind);
  EXPECT_EQ(b.calls, 123u);
  EXPECT_TRUE(std::isnan(b.max_error_u));
  EXPECT_EQ(b.max_utilization, r.max_utilization);
  EXPECT_EQ(b.max_error_u_constrained, 0.1);
  EXPECT_EQ(b.min_unconstrained_position, 1 << 22);
  EXPECT_EQ(b.partial_specs, "32/64");
  ASSERT_TRUE(b.fault.has_value());
  EXPECT_EQ(b.fault->kind, plugin::FaultKind::unwritten_output);
  EXPECT_EQ(b.fault->detail, "element 3");
  EXPECT_FALSE(from_text(to_text(CheckResult{})).fault.has_value());
}

TEST(ValidateRun, Budgets) {
  EXPECT_EQ(max_success_for("quick"), 20);
  EXPECT_EQ(max_success_for("standard"), 100);
  EXPECT_EQ(max_success_for("deep"), 1000);
  EXPECT_THROW(max_success_for("huge"), UsageError);
  Options o;
  o.budget = "quick";
  EXPECT_EQ(shrink_seconds_for(o), 1);
  o.budget = "deep";
  EXPECT_EQ(shrink_seconds_for(o), 20);
  o.shrink_seconds = 0;  // given: wins over the budget
  EXPECT_EQ(shrink_seconds_for(o), 0);
  EXPECT_TRUE(wanted(o, "Anything"));
  o.properties = {"PreservesNorm"};
  EXPECT_TRUE(wanted(o, "PreservesNorm"));
  EXPECT_FALSE(wanted(o, "Differential"));
}

}  // namespace
}  // namespace ropecheck::validate
