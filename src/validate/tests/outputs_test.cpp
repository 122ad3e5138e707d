// The outputs of a validation run on hand-built results: replay lines (command line and Python),
// validation.json's configuration entries, the report block (junit.xml's cases), the summary
// table and the verdict lines.
#include <gtest/gtest.h>

#include <sstream>

#include "ropecheck/validate/outputs.hpp"
#include "ropecheck/validate/run.hpp"

namespace ropecheck::validate {
namespace {

namespace props = ropecheck::properties;

// A configuration as assemble() makes it: the differential and every property passed with 20
// cases, except property `failing` (index into all_properties(); -1: none).
ConfigResult result(Dtype d, Layout l, int failing) {
  const std::size_t n = props::all_properties().size();
  std::vector<CheckResult> res(n + 1);
  for (auto& r : res) {
    r.cell = {"pass 20", false, ""};
    r.cell.cases = 20;
  }
  res[0].cell = {"pass", false, ""};
  res[0].cell.cases = 336;
  res[0].vectors = 336;
  res[0].max_error_u = 0.5;
  res[0].max_utilization = 0.25;
  res[0].partial_specs = "32/80";
  if (failing >= 0) {
    Cell& c = res[static_cast<std::size_t>(failing) + 1].cell;
    c = {"FAIL", true, "counterexample: m = 7"};
    c.kind = "wrong_results";
    c.cases = 3;
  }
  std::vector<const CheckResult*> ptrs;
  for (const auto& r : res) ptrs.push_back(&r);
  Options o;
  std::uint64_t calls = 0;
  return assemble({d, l}, ptrs, o, calls);
}

Options cli_options() {
  Options o;
  o.plugin = "/abs/libk.so";
  o.budget = "quick";
  o.seed = 7;
  return o;
}

TEST(ValidateOutputs, ReplayCommandNamesOneCheckAndTheRunsOptions) {
  Options o = cli_options();
  const ConfigResult r = result(Dtype::bf16, Layout::half, -1);
  EXPECT_EQ(replay_command(o, r, "PreservesNorm"),
            "ropecheck validate --plugin /abs/libk.so --dtypes bf16 --layouts half --properties "
            "PreservesNorm --budget quick --seed 7");
  o.timeout = 2.5;
  o.hf_path = "cfg.json";
  o.hf_seq_len = 9000;
  o.spec = "{\"head_dim\": 64}";
  EXPECT_EQ(replay_command(o, r, "Differential"),
            "ropecheck validate --plugin /abs/libk.so --dtypes bf16 --layouts half --properties "
            "Differential --budget quick --seed 7 --timeout 2.5 --hf-config cfg.json --seq-len "
            "9000 --spec '{\"head_dim\": 64}'");
  o.worker_fds = std::make_pair(3, 4);  // served by rc.validate: a Python call
  EXPECT_EQ(
      replay_command(o, r, "PreservesNorm")
          .rfind("rc.validate(fn, dtypes=['bf16'], layouts=['half'], properties=['PreservesNorm'], "
                 "budget='quick', seed=7)",
                 0),
      0u);
}

TEST(ValidateOutputs, ConfigJsonCarriesFiguresAndReplaysOfFailuresOnly) {
  const Options o = cli_options();
  const std::string bad = props::name(props::all_properties()[1]);
  const nlohmann::json j = config_json(result(Dtype::f32, Layout::half, 1), o);
  EXPECT_EQ(j["classification"], "wrong_results");
  EXPECT_EQ(j["differential"]["vectors"], 336);
  EXPECT_EQ(j["differential"]["worst_pair_error_u"], 0.5);
  EXPECT_EQ(j["differential"]["partial_specs"], "32/80");
  EXPECT_TRUE(j["differential"]["unconstrained_beyond_position"].is_null());
  EXPECT_FALSE(j["differential"].contains("replay"));
  EXPECT_EQ(j["properties"][bad]["classification"], "wrong_results");
  EXPECT_EQ(j["properties"][bad]["replay"],
            replay_command(o, result(Dtype::f32, Layout::half, 1), bad));
  const std::string good = props::name(props::all_properties()[0]);
  EXPECT_EQ(j["properties"][good]["classification"], "pass");
  EXPECT_FALSE(j["properties"][good].contains("replay"));
}

TEST(ValidateOutputs, ReportBlockHasOneCasePerCheckAndTheFirstFailure) {
  const Options o = cli_options();
  const std::vector<ConfigResult> rs = {result(Dtype::f32, Layout::half, -1),
                                        result(Dtype::bf16, Layout::half, 2)};
  const nlohmann::json doc{{"name", "k"}, {"passed", false}, {"classification", "wrong_results"}};
  const nlohmann::json v = validation_block(rs, doc, o);
  EXPECT_EQ(v["exit_code"], 1);
  EXPECT_EQ(v["cases"].size(), 2 * (1 + props::all_properties().size()));
  const std::string bad = props::name(props::all_properties()[2]);
  EXPECT_EQ(v["first_failure"], "[bf16 half] " + bad + ": counterexample: m = 7");
  EXPECT_EQ(v["reproduce"], replay_command(o, rs[1], bad));
  int failed = 0;
  for (const auto& c : v["cases"]) failed += !c["passed"].get<bool>();
  EXPECT_EQ(failed, 1);
}

TEST(ValidateOutputs, SummaryTableAndVerdict) {
  const Options o = cli_options();
  const std::vector<ConfigResult> rs = {result(Dtype::f32, Layout::half, 0)};
  std::ostringstream os;
  EXPECT_TRUE(print_summary(os, rs, o));
  const std::string t = os.str();
  EXPECT_NE(t.find("check (cases run)                    f32 half"), std::string::npos) << t;
  EXPECT_NE(t.find("Differential (vectors, err, %)       pass 336 (0.5u 25%)"), std::string::npos)
      << t;
  EXPECT_NE(t.find("partial rotary (rotary_dim/head_dim) in the differential: 32/80 [f32 half]"),
            std::string::npos);
  const std::string bad = props::name(props::all_properties()[0]);
  EXPECT_NE(t.find("\n[f32 half] " + bad +
                   ": FAIL after 3 passing case(s)\n  counterexample: m = "
                   "7\n  replay: " +
                   replay_command(o, rs[0], bad) + "\n"),
            std::string::npos)
      << t;
  std::ostringstream vs;
  EXPECT_EQ(print_verdict(vs, rs, true, 99, 1.5, o), "wrong_results");
  const std::size_t cases = 3 + 20 * (props::all_properties().size() - 1);
  EXPECT_EQ(vs.str(), "\nclassification: f32 half = wrong_results;\nFAIL: 1 configuration(s), " +
                          std::to_string(cases) +
                          " property cases, 99 plugin calls, 1.5 s (budget quick, 20 cases per "
                          "property)\n");
}

}  // namespace
}  // namespace ropecheck::validate
