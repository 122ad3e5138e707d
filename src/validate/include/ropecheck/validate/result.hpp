// The verdict of a validation run: a cell per configuration x check, a configuration's result,
// and their classification (validation.json's names) — plain data, judged by the rules below.
#pragma once

#include "ropecheck/plugin/host.hpp"
#include "ropecheck/properties.hpp"
#include "ropecheck/verify/verify.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ropecheck::validate {

struct Cell {
  Cell() = default;
  Cell(std::string t, bool f, std::string d)
      : text(std::move(t)), failed(f), detail(std::move(d)) {}
  std::string text;  // "pass", "FAIL", "n/a", "coverage", "mismatch", "crashed (signal 11)", ...
  bool failed = false;
  std::string detail;  // counterexample / fault message / reason not applicable
  int cases = 0, budget = 0;
  std::string kind;  // "", "wrong_results", "non_finite_output", "declaration_mismatch",
                     // "coverage_failure", "not_applicable"
};

struct ConfigResult {
  Dtype dtype;
  Layout layout;
  Cell differential;
  // The differential check's vectors through verify: their count, the worst pair error (u) and
  // the worst share of the bound.
  verify::Summary diff;
  std::vector<std::pair<properties::Property, Cell>> properties;
  // A finite input gave a non-finite output in the differential check (NaN/inf written).
  bool nonfinite_output = false;
  // The first fault of this configuration, if any (the named classification comes from it).
  std::optional<plugin::Fault> fault;
  Policy policy{};  // the plugin's declared policy for this dtype (printed with each replay)
  std::string partial_specs;  // the differential's partial-rotary specs, "rd/hd, ..." (coverage)
  std::string structural;     // the structural variants it ran (structural_coverage)
  // The directed backward differential (BackwardMatchesReferenceWithinBound's directed cases):
  // its vectors and figures, and the structural variants and partial specs it ran.
  verify::Summary bwd;
  std::string bwd_partial_specs, bwd_structural;
};

// The named classification of one configuration in validation.json: the fault kind when the
// isolation or the guards caught one (crashed, exited, timeout, out_of_bounds_write,
// unwritten_output, input_modified, protocol_violation, out_of_memory, bad_reply), else
// non_finite_output, wrong_results (a property or the differential check failed), or pass. A plugin
// that prints to stdout is not a fault: the worker's stdout goes to stderr, so it cannot corrupt
// ropecheck's tables/JSON (classified pass). Precedence: a fault, then a non-finite output (seen by
// the differential check or a property), a declaration mismatch, wrong results, and last a coverage
// failure (nothing wrong was seen, but the declared domain was not covered).
std::string classification(const ConfigResult& r);
// The run's: the first configuration's that is not "pass".
std::string overall_classification(const std::vector<ConfigResult>& results);
// Whether any cell of any configuration failed (the exit status 1).
bool any_failed(const std::vector<ConfigResult>& results);

// A fault as a table cell: "crashed (signal 11)", "timeout", "mismatch", ...
std::string fault_short(const plugin::Fault& f);
// Faults that end the configuration: they would repeat in every later check of it.
bool fatal(const plugin::Fault& f);

}  // namespace ropecheck::validate
