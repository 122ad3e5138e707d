// The file outputs of a validation run (outputs.hpp): validation.json, the report set's
// "validation" block (report.md/html, junit.xml) and the replay line of each failure.
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>

#include "ropecheck/validate/outputs.hpp"
#include "ropecheck/validate/plugin_load.hpp"

namespace ropecheck::validate {

namespace props = ropecheck::properties;

std::string replay_command(const Options& o, const ConfigResult& r, const std::string& check) {
  std::ostringstream c;
  if (o.worker_fds) {  // served by rc.validate: the replay is a Python call
    c << "rc.validate(fn, dtypes=['" << name(r.dtype) << "'], layouts=['" << name(r.layout)
      << "'], properties=['" << check << "'], budget='" << o.budget << "', seed=" << o.seed
      << ")  # plus the call's other arguments: the full line is under 'replay in Python'";
    return c.str();
  }
  c << "ropecheck validate --plugin " << o.plugin << " --dtypes " << name(r.dtype) << " --layouts "
    << name(r.layout) << " --properties " << check << " --budget " << o.budget << " --seed "
    << o.seed;
  if (o.timeout != 10.0) c << " --timeout " << o.timeout;
  if (o.worker_memory != 8192) c << " --worker-memory " << o.worker_memory;
  if (!o.hf_path.empty()) c << " --hf-config " << o.hf_path;
  if (o.hf_seq_len) c << " --seq-len " << o.hf_seq_len;
  if (!o.hf_layer_type.empty()) c << " --hf-layer-type " << o.hf_layer_type;
  if (!o.spec.empty()) c << " --spec '" << o.spec << "'";
  return c.str();
}

namespace {

nlohmann::json cell_json(const Cell& c) {
  return {{"result", c.text},
          {"classification", c.kind.empty() ? (c.failed ? "fault" : "pass") : c.kind},
          {"cases", c.cases},
          {"budget", c.budget},
          {"detail", c.detail}};
}

}  // namespace

nlohmann::json config_json(const ConfigResult& r, const Options& o) {
  nlohmann::json jc{
      {"dtype", name(r.dtype)}, {"layout", name(r.layout)}, {"classification", classification(r)}};
  // The declaration every bound of this configuration was derived from.
  jc["policy"] = policy_json(r.policy);
  nlohmann::json diff = cell_json(r.differential);
  diff["worst_pair_error_u"] = r.diff.max_error_u;
  diff["worst_bound_utilization"] = r.diff.max_utilization;
  diff["vectors"] = r.diff.vectors;
  diff["partial_specs"] = r.partial_specs;
  diff["structural_variants"] = r.structural;
  // Over the pairs whose bound constrains the rotation, and where that stops (null: nowhere).
  diff["worst_pair_error_u_constrained"] = r.diff.max_error_u_constrained;
  diff["worst_bound_utilization_constrained"] = r.diff.max_utilization_constrained;
  diff["unconstrained_pairs"] = r.diff.unconstrained_pairs;
  diff["unconstrained_beyond_position"] = r.diff.min_unconstrained_position >= 0
                                              ? nlohmann::json(r.diff.min_unconstrained_position)
                                              : nlohmann::json(nullptr);
  if (r.differential.failed) diff["replay"] = replay_command(o, r, "Differential");
  jc["differential"] = diff;
  for (const auto& [p, c] : r.properties) {
    nlohmann::json jp = cell_json(c);
    if (p == props::Property::BackwardMatchesReferenceWithinBound && r.bwd.vectors > 0)
      jp["directed"] = {{"vectors", r.bwd.vectors},
                        {"worst_pair_error_u", r.bwd.max_error_u},
                        {"worst_bound_utilization", r.bwd.max_utilization},
                        {"partial_specs", r.bwd_partial_specs},
                        {"structural_variants", r.bwd_structural}};
    if (c.failed && c.text != "not run") jp["replay"] = replay_command(o, r, props::name(p));
    jc["properties"][props::name(p)] = jp;
  }
  return jc;
}

// The report's "validation" block (report.schema.json): the verdict, the first failure with its
// replay, and one case per configuration x check for junit.xml, so that report.md/html and the
// CI's test view say what the exit status says.
nlohmann::json validation_block(const std::vector<ConfigResult>& results, const nlohmann::json& doc,
                                const Options& o) {
  nlohmann::json v{{"plugin", doc["name"]},
                   {"passed", doc["passed"]},
                   {"classification", doc["classification"]},
                   {"exit_code", doc["passed"].get<bool>() ? 0 : 1},
                   {"budget", o.budget},
                   {"cases", nlohmann::json::array()}};
  for (const auto& r : results) {
    const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
    auto add = [&](const std::string& check, const Cell& c) {
      const bool skipped = c.text == "not run" || c.kind == "not_applicable";
      nlohmann::json jc{{"configuration", cfg}, {"check", check},   {"passed", !c.failed},
                        {"skipped", skipped},   {"result", c.text}, {"message", c.detail}};
      if (c.failed && c.text != "not run") {
        jc["reproduce"] = replay_command(o, r, check);
        if (!v.contains("first_failure")) {
          v["first_failure"] = "[" + cfg + "] " + check + ": " + c.detail;
          v["reproduce"] = jc["reproduce"];
        }
      }
      v["cases"].push_back(jc);
    };
    add("Differential", r.differential);
    for (const auto& [p, c] : r.properties) add(props::name(p), c);
  }
  return v;
}

// A plugin's worst cases cannot be rerun with `ropecheck eval` (it runs built-in kernels only):
// their reproduce command becomes the validate line of their configuration.
void plugin_reproduce_commands(nlohmann::json& report, const Options& o) {
  std::function<void(nlohmann::json&, const std::string&)> walk = [&](nlohmann::json& j,
                                                                      const std::string& dtype) {
    if (j.is_object()) {
      if (j.contains("reproduce") && j.contains("spec") && j["spec"].contains("layout")) {
        std::ostringstream c;
        c << "ropecheck validate --plugin " << o.plugin << " --dtypes " << dtype << " --layouts "
          << j["spec"]["layout"].get<std::string>() << " --budget " << o.budget << " --seed "
          << o.seed;
        j["reproduce"] = c.str();
      }
      for (auto& [k, v] : j.items()) walk(v, dtype);
    } else if (j.is_array()) {
      for (auto& v : j) walk(v, dtype);
    }
  };
  for (auto& res : report["results"]) walk(res, res["dtype"].get<std::string>());
}

// --out: the report set of `ropecheck report` on the plugin, and validation.json.
void write_outputs(std::ostream& os, plugin::PluginKernel& pk,
                   const std::vector<ConfigResult>& results, const nlohmann::json& doc,
                   const Options& o) {
  reports::Options ro;
  ro.kernels = {};
  ro.dtypes.clear();
  ro.layouts.clear();
  for (const auto& r : results) {
    if (std::find(ro.dtypes.begin(), ro.dtypes.end(), r.dtype) == ro.dtypes.end())
      ro.dtypes.push_back(r.dtype);
    // The report's sweep is 1-D (its specs carry no sections); the multi-axis configurations are
    // in validation.json's results.
    if (!is_multi_axis(r.layout) &&
        std::find(ro.layouts.begin(), ro.layouts.end(), r.layout) == ro.layouts.end())
      ro.layouts.push_back(r.layout);
  }
  ro.threads = 1;  // the plugin worker serves one call at a time
  pk.reset();
  try {
    const std::vector<std::string> outside = restrict_to_domain(ro, pk, false);
    reports::validate(ro);
    auto report = reports::run(ro, {&pk},
                               [](const std::string& m) { std::cerr << "[report] " << m << "\n"; });
    report["domain"] = {{"declared", describe_domain(pk.domain())}, {"outside", outside}};
    report["validation"] = validation_block(results, doc, o);
    if (!o.worker_fds) plugin_reproduce_commands(report, o);
    reports::write_all(report, o.out);
    nlohmann::json full = doc;
    if (pk.poisoned()) {
      full["report_faults"] = nlohmann::json::array();
      for (const auto& f : pk.faults()) full["report_faults"].push_back(f.message());
    }
    reports::atomic_write(std::filesystem::path(o.out) / "validation.json", full.dump(2) + "\n");
    os << "reports written to " << o.out
       << " (report.json, report.md, report.html, junit.xml, validation.json)\n";
  } catch (const reports::OptionsError& e) {
    throw UsageError(e.what());
  }
}

nlohmann::json validation_json(const std::vector<ConfigResult>& results,
                               const plugin::PluginKernel& pk, const Options& o, double secs,
                               int shard_index, int shard_total) {
  nlohmann::json jconf = nlohmann::json::array();
  for (const auto& r : results) jconf.push_back(config_json(r, o));
  nlohmann::json doc{{"command", "validate"},
                     {"plugin", o.plugin},
                     {"name", pk.descriptor().name},
                     {"budget", o.budget},
                     {"seconds", secs},
                     {"passed", !any_failed(results)},
                     {"classification", overall_classification(results)},
                     {"configurations", jconf},
                     {"has_backward", pk.descriptor().has_backward}};
  if (shard_total > 1) doc["shard"] = {{"index", shard_index}, {"total", shard_total}};
  return doc;
}

}  // namespace ropecheck::validate
