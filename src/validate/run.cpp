// The run of a validation plan (run.hpp): one check of one configuration (the directed
// differential, a property with its budget), and every check of every configuration as jobs on
// forked runner processes.
#include <iostream>
#include <memory>

#include "forked_jobs.hpp"
#include "ropecheck/validate/plugin_load.hpp"
#include "ropecheck/validate/run.hpp"

namespace ropecheck::validate {

namespace ref = ropecheck::reference;
namespace props = ropecheck::properties;

namespace {

// One check of one configuration (check 0: Differential; check 1 + i: all_properties()[i]).
struct Job {
  std::size_t config;
  int check;
};

// One property on one configuration, as a cell of the table. Cases are drawn inside the
// plugin's declared domain; the cell carries how many ran of the budget.
Cell run_property(plugin::PluginKernel& pk, const Kernel& k, props::Property p, Dtype d, Layout l,
                  const Options& o, bool variants, const std::optional<RopeSpec>& hf_spec,
                  const std::optional<RopeSpec>& only_spec) {
  pk.reset();
  props::Options popt;
  popt.max_success = max_success_for(o.budget);
  popt.seed = o.seed;
  popt.max_shrink_calls = kShrinkCalls;
  popt.max_shrink_seconds = shrink_seconds_for(o);
  popt.shrink_pool_ns = o.shrink_pool_ns;
  popt.oracle_mpfr = o.oracle == "mpfr";
  popt.id = props::test_id("Validate", pk.name(), d, p) + "_" + name(l);
  popt.variants = variants || hf_spec.has_value();
  // The 1-D layouts keep drawing every scaling kind; a configuration of a newer layout draws that
  // layout (else nearly every case would be discarded by the restriction).
  if (popt.variants && (hf_spec || (l != Layout::interleaved && l != Layout::half)))
    popt.focus_layout = l;
  if (hf_spec && hf_spec->scaling.kind != ScalingKind::none)
    popt.focus_scaling = hf_spec->scaling.kind;
  popt.only_spec = only_spec;
  // LayoutsArePermutations relates the two layouts, so it sees the unrestricted plugin (and the
  // verdict is the same in both layout columns of a dtype).
  const bool both = p == props::Property::LayoutsArePermutations;
  const auto v = both ? props::check(p, pk, d, popt) : props::check(p, k, d, popt);
  Cell c;
  c.cases = v.cases;
  c.budget = v.budget;
  c.detail = v.message;
  c.detail += shrink_note(v, o);
  if (o.verbose && !v.details.empty()) c.detail += "\n" + v.details;
  switch (v.status) {
    case props::Status::passed:
      c.text = "pass " + std::to_string(v.cases);
      break;
    case props::Status::not_applicable:
      c.text = "n/a";
      c.kind = "not_applicable";
      break;
    case props::Status::gave_up:
      c.text = "coverage " + std::to_string(v.cases) + "/" + std::to_string(v.budget);
      c.failed = true;
      c.kind = "coverage_failure";
      break;
    case props::Status::mismatch:
      c.text = "mismatch";
      c.failed = true;
      c.kind = "declaration_mismatch";
      break;
    case props::Status::failed:
      c.text = "FAIL";
      c.failed = true;
      c.kind = v.non_finite ? "non_finite_output" : "wrong_results";
      break;
  }
  return c;
}

// A differential run's figures (the table's and validation.json's) into a job's result.
void take_figures(const ConfigResult& cr, CheckResult& r) {
  r.vectors = cr.diff.vectors;
  r.max_error_u = cr.diff.max_error_u;
  r.max_utilization = cr.diff.max_utilization;
  r.nonfinite_output = cr.nonfinite_output;
  r.partial_specs = cr.partial_specs;
  r.structural = cr.structural;
  r.max_error_u_constrained = cr.diff.max_error_u_constrained;
  r.max_utilization_constrained = cr.diff.max_utilization_constrained;
  r.unconstrained_pairs = cr.diff.unconstrained_pairs;
  r.min_unconstrained_position = cr.diff.min_unconstrained_position;
}

// BackwardMatchesReferenceWithinBound's directed cases, before its random ones: the differential
// check of apply_backward (differential(), backward) on the configuration's directed specs and
// positions. A failure or coverage gap is the property's verdict (r.cell); the figures go to r
// either way (validation.json's "directed", the summary's backward line).
void backward_differential(const plugin::PluginKernel& pk, const Kernel& k, const Config& cfg,
                           const Options& o, const Plan& plan, CheckResult& r) {
  ConfigResult cr{};
  cr.dtype = cfg.dtype;
  cr.layout = cfg.layout;
  differential(pk, k, cr, o.seed, plan.extra_specs, plan.variant_groups,
               o.oracle == "mpfr" ? ref::OracleMode::mpfr : ref::OracleMode::fast, true);
  take_figures(cr, r);
  if (!cr.differential.failed) return;
  r.cell = cr.differential;
  r.cell.cases = 0;  // no random case ran (the cell's "after N passing cases")
  r.cell.detail =
      "directed backward differential (apply_backward against s R(m)^T g on the "
      "directed specs; the view rotates by -m, so the positions shown are negated): " +
      r.cell.detail;
}

}  // namespace

CheckResult run_check(plugin::PluginKernel& pk, const Config& cfg, int check, const Options& o,
                      const Plan& plan) {
  const Dtype d = cfg.dtype;
  LayoutRestricted k(pk, cfg.layout);
  pk.reset();
  const std::uint64_t calls0 = pk.calls();
  CheckResult r;
  if (check == 0) {
    std::cerr << "[validate] " << name(d) << " " << name(cfg.layout)
              << " (declared policy: " << describe(pk.policy(d)) << ")\n";
    ref::set_precision_bits(ref::default_bits(d));
    ConfigResult cr{};
    cr.dtype = d;
    cr.layout = cfg.layout;
    differential(pk, k, cr, o.seed, plan.extra_specs, plan.variant_groups,
                 o.oracle == "mpfr" ? ref::OracleMode::mpfr : ref::OracleMode::fast);
    r.cell = cr.differential;
    take_figures(cr, r);
  } else {
    const props::Property p = props::all_properties()[static_cast<std::size_t>(check - 1)];
    const bool directed =
        p == props::Property::BackwardMatchesReferenceWithinBound && k.has_backward();
    if (directed) backward_differential(pk, k, cfg, o, plan, r);
    if (!r.cell.failed && !pk.poisoned())
      r.cell =
          run_property(pk, k, p, d, cfg.layout, o, plan.variants, plan.hf_spec, plan.only_spec);
  }
  if (pk.poisoned()) {
    const auto& f = pk.faults().front();
    r.cell = {fault_short(f), true, f.message()};
    if (f.kind == plugin::FaultKind::declaration_mismatch) r.cell.kind = "declaration_mismatch";
    r.fault = f;
  }
  r.calls = pk.calls() - calls0;
  return r;
}

std::vector<ConfigResult> run_configs(plugin::PluginKernel& pk, const std::vector<Config>& cfgs,
                                      const Options& o, const Plan& plan, std::uint64_t& calls) {
  const int n_checks = 1 + static_cast<int>(props::all_properties().size());
  auto check_name = [](int check) {
    return check == 0 ? std::string("Differential")
                      : std::string(props::name(props::all_properties()[check - 1]));
  };
  std::vector<Job> jobs;
  for (std::size_t c = 0; c < cfgs.size(); ++c)
    for (int check = 0; check < n_checks; ++check)
      if (wanted(o, check_name(check))) jobs.push_back({c, check});
  // Results so far, per configuration and check (this process only).
  std::vector<std::vector<std::optional<CheckResult>>> got(
      cfgs.size(), std::vector<std::optional<CheckResult>>(static_cast<std::size_t>(n_checks)));
  auto known = [&](std::size_t c) {
    std::vector<const CheckResult*> v;
    for (const auto& r : got[c]) v.push_back(r ? &*r : nullptr);
    return v;
  };
  plugin::PluginKernel* current = &pk;  // a runner's own plugin once it has one
  std::unique_ptr<plugin::PluginKernel> own;
  ForkedJobs fj;
  fj.run = [&](int i) {
    const Job& j = jobs[static_cast<std::size_t>(i)];
    return to_text(run_check(*current, cfgs[j.config], j.check, o, plan));
  };
  fj.wanted = [&](int i) {
    const Job& j = jobs[static_cast<std::size_t>(i)];
    return still_needed(known(j.config), j.check);
  };
  fj.done = [&](int i, const std::string& text) {
    const Job& j = jobs[static_cast<std::size_t>(i)];
    got[j.config][static_cast<std::size_t>(j.check)] = from_text(text);
  };
  fj.runner_start = [&] {
    own = load_plugin(o.plugin, o.worker_fds, o.timeout, o.worker_memory << 20);
    current = own.get();
  };
  fj.runner_end = [&] { own.reset(); };
  run_forked_jobs(static_cast<int>(jobs.size()), o.threads, fj);
  std::vector<ConfigResult> results;
  for (std::size_t c = 0; c < cfgs.size(); ++c) {
    results.push_back(assemble(cfgs[c], known(c), o, calls));
    results.back().policy = pk.policy(cfgs[c].dtype);
  }
  return results;
}

}  // namespace ropecheck::validate
