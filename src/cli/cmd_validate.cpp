// `ropecheck validate --plugin PATH.so`: a third-party kernel, loaded through the C ABI into an
// isolated worker, checked by (1) a guarded differential run against the multiprecision reference
// on directed specs and positions of its declared domain and (2) every property of the property
// suite, per configuration (dtype x layout) the plugin supports. Coverage is part of the verdict.
// Exit 0: all pass; 1: any failure, fault, declaration mismatch or coverage failure; 2: bad usage
// or a plugin that cannot be loaded / has the wrong ABI.
//
// This file only turns options into calls of ropecheck::validate (src/validate, its README maps
// it): options -> plan -> run -> outputs. rc.validate (Python) runs this command with
// --worker-fds, so it reaches the module the same way.
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "cli.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/validate/outputs.hpp"
#include "ropecheck/validate/plan.hpp"
#include "ropecheck/validate/plugin_load.hpp"
#include "ropecheck/validate/run.hpp"
#include "shard.hpp"

namespace ropecheck::cli {

namespace props = ropecheck::properties;

namespace {

int default_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The command's options: those of the run (validate::Options) and those that make the plan or
// choose the outputs.
struct ValidateOptions {
  validate::Options run;
  std::string worker_fds;  // "R,W": a worker already serving on these pipe ends (Python module)
  std::string json;        // validation.json alone, without the report set of --out
  std::vector<std::string> dtypes, layouts;
  HfConfigArg hf;           // validate on this model's spec (see parse_plan)
  std::string shard;        // "i/n"; default GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS
  bool print_plan = false;  // --print-plan: the directed specs and positions, nothing run
  ValidateOptions() { run.threads = default_threads(); }
};

std::vector<Dtype> parse_dtypes(const ValidateOptions& o) {
  std::vector<Dtype> dtypes;
  for (const auto& s : o.dtypes)
    for (const auto& f : split(s, ',', "--dtypes")) {
      auto d = parse_dtype(f);
      if (!d) throw UsageError("--dtypes: '" + f + "' is not one of f64, f32, f16, bf16");
      dtypes.push_back(*d);
    }
  if (dtypes.empty()) dtypes.assign(kAllDtypes.begin(), kAllDtypes.end());
  return dtypes;
}

// --hf-config: the model's spec is checked directly by the differential run, and the properties
// draw their random specs from the same scaling kind and layout (focus), so every verdict is
// about the variant the model uses.
std::vector<Layout> parse_layouts(const ValidateOptions& o, const std::optional<RopeSpec>& hf) {
  std::vector<Layout> layouts;
  for (const auto& s : o.layouts)
    for (const auto& f : split(s, ',', "--layouts")) {
      auto l = parse_layout(f);
      if (!l) throw UsageError("--layouts: '" + f + "' is not " + layout_choices());
      layouts.push_back(*l);
    }
  if (hf) {
    if (!layouts.empty() && layouts != std::vector<Layout>{hf->layout})
      throw UsageError("--layouts contradicts --hf-config / --spec (the layout is " +
                       std::string(name(hf->layout)) + ")");
    return {hf->layout};
  }
  if (layouts.empty()) layouts.assign(std::begin(kAllLayouts), std::end(kAllLayouts));
  return layouts;
}

// --spec: JSON text ('{...}') or a file holding it, with the keys of `check --spec`.
RopeSpec read_only_spec(const std::string& arg) {
  const auto keys = read_spec_arg(arg);
  const auto hd = keys.find("head_dim");
  long long d = 0;
  if (hd == keys.end() || !parse_int64(hd->second, d))
    throw UsageError("--spec: give head_dim (an integer)");
  return resolve_check_spec(keys, d, 3);
}

// The options' part of the plan, parsed before the plugin is loaded.
validate::Plan parse_plan(const ValidateOptions& o) {
  validate::Plan plan;
  plan.dtypes = parse_dtypes(o);
  plan.hf_spec = o.hf.read();
  if (!o.run.spec.empty()) {
    if (plan.hf_spec) throw UsageError("--spec and --hf-config exclude each other");
    plan.only_spec = read_only_spec(o.run.spec);
  }
  // The one spec's layout is the one configuration layout, as --hf-config's.
  plan.layouts = parse_layouts(o, plan.hf_spec ? plan.hf_spec : plan.only_spec);
  return plan;
}

// The options the module checks itself (budget) and the usage rules of the command.
void check_options(ValidateOptions& o) {
  validate::Options& r = o.run;
  validate::max_success_for(r.budget);  // --budget first: a bad one is exit 2 before any load
  if (!(r.timeout > 0) || !std::isfinite(r.timeout)) throw UsageError("--timeout must be > 0");
  if (r.worker_memory > (std::uint64_t{1} << 30))
    throw UsageError("--worker-memory: at most 2^30 MiB (0: no limit)");
  if (r.plugin.empty() && o.worker_fds.empty()) throw UsageError("--plugin is required");
  // Replay lines, shard runs and the report carry the path that was loaded.
  if (o.worker_fds.empty()) r.plugin = validate::resolve_plugin_path(r.plugin);
  if (!o.worker_fds.empty()) {
    // One serving process answers one call at a time and cannot be forked per runner.
    r.threads = 1;
    if (r.plugin.empty()) r.plugin = "rc.validate";  // not the pipe's fd numbers
  }
  r.hf_path = o.hf.path;
  r.hf_seq_len = o.hf.seq_len;
  r.hf_layer_type = o.hf.layer_type;
}

int run_validate(ValidateOptions o) {
  check_options(o);
  validate::Options& r = o.run;
  validate::Plan plan = parse_plan(o);
  if (!o.worker_fds.empty()) r.worker_fds = parse_worker_fds(o.worker_fds);
  const std::unique_ptr<plugin::PluginKernel> pk =
      validate::load_plugin(r.plugin, r.worker_fds, r.timeout, r.worker_memory << 20);
  validate::add_declared(plan, *pk);
  validate::print_header(std::cout, *pk, plan, r);
  std::optional<validate::SharedPool> pool;
  if (validate::shrink_seconds_for(r) > 0) {
    pool.emplace(validate::kShrinkPoolFactor * validate::shrink_seconds_for(r));
    r.shrink_pool_ns = pool->get();
  }
  for (const auto& f : r.properties)
    if (f != "Differential" && !props::parse_property(f))
      throw UsageError("--properties: '" + f + "' is not Differential or a property name");
  const Shard shard = resolve_shard(o.shard);
  touch_shard_status_file();
  const std::vector<validate::Config> cfgs =
      validate::configurations(plan, *pk, !o.dtypes.empty(), shard.index, shard.total, std::cout);
  if (o.print_plan) {
    validate::print_plan(std::cout, *pk, cfgs, plan);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t calls = pk->calls();
  const auto results = validate::run_configs(*pk, cfgs, r, plan, calls);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The files (and the report sweep's progress on stderr) first: the verdict is the last line.
  const bool any_fail = validate::any_failed(results);
  if (!r.out.empty() || !o.json.empty()) {
    const nlohmann::json doc =
        validate::validation_json(results, *pk, r, secs, shard.index, shard.total);
    if (!r.out.empty()) validate::write_outputs(std::cout, *pk, results, doc, r);
    if (!o.json.empty()) reports::atomic_write(o.json, doc.dump(2) + "\n");
  }
  validate::print_summary(std::cout, results, r);
  validate::print_verdict(std::cout, results, any_fail, calls, secs, r);
  std::cout.flush();
  return any_fail ? 1 : 0;  // as `report`: 1 = a check failed
}

}  // namespace

void add_validate(CLI::App& app, int& status) {
  auto o = std::make_shared<ValidateOptions>();
  validate::Options& r = o->run;
  auto* cmd = app.add_subcommand("validate",
                                 "Validate a third-party kernel plugin "
                                 "(ropecheck/plugin.h) in an isolated process");
  cmd->add_option("--plugin", r.plugin, "plugin shared object (required)");
  // Hidden: the Python module (rc.validate) serves its callable on these pipe ends.
  cmd->add_option("--worker-fds", o->worker_fds, "R,W of a worker already serving")->group("");
  cmd->add_option("--json", o->json, "write validation.json (only) to this file");
  cmd->add_option("--dtypes", o->dtypes, "dtypes to check (default: all the plugin supports)")
      ->delimiter(',');
  cmd->add_option("--layouts", o->layouts, "layouts to check (default: all the plugin supports)")
      ->delimiter(',');
  cmd->add_option("--budget", r.budget, "quick | standard | deep (default standard)");
  cmd->add_option("--timeout", r.timeout,
                  "seconds per plugin call before it counts as hung (default 10)");
  cmd->add_option("--worker-memory", r.worker_memory,
                  "MiB of memory the plugin worker may add beyond its start "
                  "before it is stopped "
                  "(classified out_of_memory; default 8192, 0: no limit)");
  cmd->add_option("--oracle", r.oracle,
                  "exact values: fast (double-double, MPFR where it cannot "
                  "certify; default) or "
                  "mpfr (MPFR alone: the same answers, slower)")
      ->check(CLI::IsMember({"fast", "mpfr"}));
  cmd->add_option("--seed", r.seed,
                  "seed of the differential inputs and the properties (default 1)");
  cmd->add_option("--out", r.out,
                  "write the report set (as `ropecheck report`) and validation.json here");
  cmd->add_option("--spec", r.spec,
                  "the plugin implements exactly this spec (JSON text or file, "
                  "keys as `check "
                  "--spec`): the differential check runs it, the properties "
                  "draw only positions, "
                  "inputs, tokens and heads");
  add_hf_config_options(cmd, o->hf,
                        "validate on this Hugging Face config.json's RoPE spec (differential on "
                        "the exact spec, properties focused on its scaling kind and layout)");
  cmd->add_option("--properties", r.properties,
                  "run only these checks (Differential and/or property names; "
                  "the replay "
                  "command of a failure names its one)")
      ->delimiter(',');
  cmd->add_flag("--print-plan", o->print_plan,
                "print each configuration's directed specs (with their scaling regime), "
                "positions and coverage lines, then exit 0 without running a check");
  cmd->add_flag("--verbose", r.verbose,
                "with each failure, also RapidCheck's full report (every "
                "generated value)");
  cmd->add_option("--shrink-seconds", r.shrink_seconds,
                  "wall time one failing property may spend shrinking its "
                  "counterexample "
                  "(default: quick 1, standard 3, deep 20; 0: no time limit, "
                  "the 4000-call "
                  "budget alone); all shrinking of a run shares 5 times this")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--threads", r.threads,
                  "checks run at once, each runner a process with its own plugin worker "
                  "(default: the hardware threads); the verdicts do not depend on it "
                  "(how far a "
                  "counterexample shrinks within --shrink-seconds may)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shard", o->shard,
                  "i/n: check only configurations c with c mod n == i (default: "
                  "GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS when set)");
  cmd->callback([o, &status] { status = run_validate(*o); });
}

}  // namespace ropecheck::cli
