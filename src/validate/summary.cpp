// The text outputs of a validation run (outputs.hpp): the plugin's header, --print-plan, the
// summary table with its coverage and n/a lines and each failure's replay, and the verdict lines.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <ostream>

#include "ropecheck/regimes.hpp"
#include "ropecheck/validate/coverage.hpp"
#include "ropecheck/validate/outputs.hpp"
#include "ropecheck/validate/plugin_load.hpp"
#include "ropecheck/validate/run.hpp"

namespace ropecheck::validate {

namespace props = ropecheck::properties;

namespace {

// "f32 angle: rotation unconstrained beyond |m| ~ 2^22.5 (...)": where the bound's angle term
// reaches its cap for this configuration's declared policy, as the differential saw it.
std::string unconstrained_text(const ConfigResult& r) {
  const double m =
      static_cast<double>(std::max<std::int64_t>(1, r.diff.min_unconstrained_position));
  return std::string(name(angle_precision(r.policy))) +
         " angle: rotation unconstrained beyond |m| ~ 2^" + verify::fmt(std::log2(m), 3) + " (" +
         std::to_string(r.diff.unconstrained_pairs) +
         " differential pairs there: the declared angle precision bounds the angle error by more "
         "than 2 rad, so any rotation passes; err and % are over the other pairs)";
}

// The lines under the table that hold for a group of configurations ("<prefix><text> [f32 half,
// bf16 half]"): where the declared angle precision stops constraining the rotation (the * cells),
// which partial-rotary specs and structural variants the differential ran, and the backward's
// directed cases (BackwardMatchesReferenceWithinBound): vectors and figures.
void print_coverage(std::ostream& os, const std::vector<ConfigResult>& results) {
  using Groups = std::map<std::string, std::vector<std::string>>;
  const auto print_groups = [&os](const char* prefix, const Groups& g) {
    for (const auto& [text, cfgs] : g) {
      os << prefix << text << " [";
      for (std::size_t i = 0; i < cfgs.size(); ++i) os << (i ? ", " : "") << cfgs[i];
      os << "]\n";
    }
  };
  Groups capped, partial, structural, backward;
  for (const auto& r : results) {
    const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
    if (r.differential.text == "pass" && r.diff.unconstrained_pairs > 0)
      capped[unconstrained_text(r)].push_back(cfg);
    partial[r.partial_specs.empty() ? std::string("none accepted by supports()") : r.partial_specs]
        .push_back(cfg);
    if (!r.structural.empty()) structural[r.structural].push_back(cfg);
    if (r.bwd.vectors > 0)
      backward[std::to_string(r.bwd.vectors) + " vectors, worst " +
               verify::fmt(r.bwd.max_error_u, 3) + "u, " +
               verify::fmt(100 * r.bwd.max_utilization, 3) + "% of the bound" +
               (r.bwd_structural.empty() ? "" : "; " + r.bwd_structural)]
          .push_back(cfg);
  }
  print_groups("* ", capped);
  print_groups("partial rotary (rotary_dim/head_dim) in the differential: ", partial);
  print_groups("structural variants in the differential (>= 4 pairs): ", structural);
  print_groups(
      "backward directed differential (apply_backward vs s R(m)^T g, the forward's "
      "directed specs and positions): ",
      backward);
}

}  // namespace

bool print_summary(std::ostream& os, const std::vector<ConfigResult>& results, const Options& o) {
  const int w0 = 37;  // the longest property name (35) + 2
  // The differential cells first: the columns are as wide as their widest cell (+ 2), so a
  // failure's figures ("FAIL 336 (3.36e+07u 2.65e+08%)") never push the columns apart.
  std::vector<std::string> diff;
  int w = 30;
  for (const auto& r : results) {
    std::string cell = r.differential.text;
    // A passing cell's figures are those of the pairs the bound constrains: where the angle
    // term is at its cap any rotation passes, and its utilization would read like a near-miss.
    const bool split = cell == "pass" && r.diff.unconstrained_pairs > 0;
    const double err = split ? r.diff.max_error_u_constrained : r.diff.max_error_u;
    const double use = split ? r.diff.max_utilization_constrained : r.diff.max_utilization;
    if (r.diff.vectors && (cell == "pass" || cell == "FAIL"))
      cell += " " + std::to_string(r.diff.vectors) + " (" + verify::fmt(err, 3) + "u " +
              verify::fmt(100 * use, 3) + "%" + (split ? "*" : "") + ")";
    diff.push_back(cell);
    w = std::max(w, static_cast<int>(cell.size()) + 2);
    for (const auto& pc : r.properties)
      w = std::max(w, static_cast<int>(pc.second.text.size()) + 2);
  }
  os << "\n" << std::left << std::setw(w0) << "check (cases run)";
  for (const auto& r : results)
    os << std::setw(w) << (std::string(name(r.dtype)) + " " + name(r.layout));
  os << "\n" << std::setw(w0) << "Differential (vectors, err, %)";
  for (const auto& cell : diff) os << std::setw(w) << cell;
  os << "\n";
  for (std::size_t i = 0; i < props::all_properties().size(); ++i) {
    os << std::setw(w0) << props::name(props::all_properties()[i]);
    for (const auto& r : results) os << std::setw(w) << r.properties[i].second.text;
    os << "\n";
  }
  os << "(cases: property cases that ran and held, of " << max_success_for(o.budget)
     << " per property; vectors: differential vectors vs the exact reference; err: worst "
        "per-pair error in units of the dtype's unit roundoff; %: of the derived bound for "
        "the declared policy)\n";
  print_coverage(os, results);
  // Not applicable: the reason follows from the declaration; one line per property and reason.
  std::map<std::string, std::vector<std::string>> na;
  for (const auto& r : results)
    for (const auto& [p, c] : r.properties)
      if (c.kind == "not_applicable") {
        // A kernel without a backward: one line for the ten, not ten.
        const bool no_backward =
            props::is_backward_property(p) && c.detail.rfind("no backward", 0) == 0;
        const std::string what = no_backward ? "Backward* (all ten)" : props::name(p);
        auto& cfgs = na[what + ": " + c.detail];
        const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
        if (std::find(cfgs.begin(), cfgs.end(), cfg) == cfgs.end()) cfgs.push_back(cfg);
      }
  if (!na.empty()) os << "\nnot applicable (follows from the declaration):\n";
  for (const auto& [what, cfgs] : na) {
    os << "  " << what << " [";
    for (std::size_t i = 0; i < cfgs.size(); ++i) os << (i ? ", " : "") << cfgs[i];
    os << "]\n";
  }
  bool any_fail = false;
  for (const auto& r : results) {
    const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
    auto show = [&](const std::string& check, const Cell& c) {
      if (!c.failed) return;
      any_fail = true;
      if (c.text == "not run") return;
      os << "\n[" << cfg << "] " << check << ": " << c.text;
      if (check != "Differential" && (c.kind == "wrong_results" || c.kind == "non_finite_output"))
        os << " after " << c.cases << " passing case(s)";
      os << "\n  " << c.detail << "\n  replay: " << replay_command(o, r, check)
         << "\n  (declared policy: " << describe(r.policy) << ")\n";
    };
    show("Differential", r.differential);
    for (const auto& [p, c] : r.properties) show(props::name(p), c);
  }
  return any_fail;
}

std::string print_verdict(std::ostream& os, const std::vector<ConfigResult>& results, bool any_fail,
                          std::uint64_t calls, double secs, const Options& o) {
  os << "\nclassification:";
  for (const auto& r : results)
    os << " " << name(r.dtype) << " " << name(r.layout) << " = " << classification(r) << ";";
  int budget_cases = 0;
  for (const auto& r : results)
    for (const auto& pc : r.properties) budget_cases += pc.second.cases;
  os << "\n"
     << (any_fail ? "FAIL" : "PASS") << ": " << results.size() << " configuration(s), "
     << budget_cases << " property cases, " << calls << " plugin calls, " << verify::fmt(secs, 3)
     << " s (budget " << o.budget << ", " << max_success_for(o.budget) << " cases per property"
     << (o.spec.empty() ? "" : "; one spec: positions, inputs, tokens and heads drawn") << ")\n";
  return overall_classification(results);
}

void print_header(std::ostream& os, const plugin::PluginKernel& pk, const Plan& plan,
                  const Options& o) {
  const auto& desc = pk.descriptor();
  os << "ropecheck validate: plugin '" << desc.name << "' (" << o.plugin << ", ABI "
     << desc.abi_version << ")\n  " << desc.description
     << "\n  declared domain: " << describe_domain(pk.domain()) << "\n  backward: "
     << (desc.has_backward ? "apply_backward (the Backward* properties run)"
                           : "none (the Backward* properties are not applicable)")
     << "\n";
  if (desc.abi_version < ROPECHECK_PLUGIN_ABI_VERSION)
    os << "  note: plugin built for ABI " << desc.abi_version
       << ": loaded with that ABI's meaning (trig_error 2, any position, magnitude scale "
          "passed, in-place calls, layouts compared within the bound); rebuild against "
          "this ropecheck/plugin.h (ABI "
       << ROPECHECK_PLUGIN_ABI_VERSION << ") to declare them\n";
  if (plan.only_spec)
    os << "  one configuration (--spec): " << describe(*plan.only_spec)
       << "\n  coverage: the properties draw positions, inputs, tokens and heads only; "
          "checks that relate other specs are not applicable\n";
  else if (plan.hf_spec)
    os << "  on the spec of " << o.hf_path << ": " << describe(*plan.hf_spec) << "\n";
}

// A test pins this output for a few plugins, so a change of the directed lists shows as a diff.
void print_plan(std::ostream& os, const plugin::PluginKernel& pk, const std::vector<Config>& cfgs,
                const Plan& plan) {
  for (const Config& cfg : cfgs) {
    const LayoutRestricted k(pk, cfg.layout);
    std::vector<std::vector<RopeSpec>> groups;
    const std::vector<RopeSpec> specs =
        differential_specs(k, cfg.dtype, cfg.layout, plan.extra_specs, plan.variant_groups, groups);
    os << "plan " << name(cfg.dtype) << " " << name(cfg.layout) << "\n  positions:";
    for (std::int64_t m : run_positions(k, false)) os << " " << m;
    os << "\n";
    for (const RopeSpec& s : specs)
      if (k.supports(s, cfg.dtype))
        os << "  spec " << describe(s) << " [" << scaling_regime(s) << "]\n";
    const PartialCoverage pc = partial_coverage(k, cfg.dtype, cfg.layout, specs);
    const StructuralCoverage sc = structural_coverage(k, cfg.dtype, cfg.layout, specs, groups);
    os << "  partial: " << (pc.ran.empty() ? "-" : pc.ran) << "\n  structural: " << sc.ran << "\n";
    if (!pc.gap.empty() || !sc.gap.empty())
      os << "  gap: " << (pc.gap.empty() ? sc.gap : pc.gap) << "\n";
  }
}

}  // namespace ropecheck::validate
