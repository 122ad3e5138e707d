// `ropecheck report`: parses options and hands them to ropecheck::reports, which does the work.
// Exit 0 when every check holds, 1 when a derived bound is exceeded, a special-value policy is
// violated or a baseline regressed, 2 for bad usage.
#include <signal.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli.hpp"
#include "cmd_report_models.hpp"
#include "ropecheck/fp8.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/kernels/simd_info.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/validate/plugin_load.hpp"
#include "shard.hpp"

namespace ropecheck::cli {

namespace {

// SIGINT/SIGTERM during a sweep: the handler only records the signal; the sweep stops between
// work units, nothing is written (the previous report in --out stays byte-identical) and the
// process exits with 128 + signal (130 / 143) after saying where it stopped. A signal that
// arrives once the sweep is done lets the few-millisecond atomic writes finish (the new report is
// complete) and still exits 128 + signal. A second signal terminates at once (default action);
// the atomic writes still never leave a half-written report file (at worst a hidden
// .<name>.tmp.XXXXXX next to it).
// The one mutable process-wide variable of the CLI, on purpose: a signal handler receives nothing
// but the signal number, so the flag it sets must be a global of type volatile sig_atomic_t
// (the only object a handler may portably write). Everything else reads it through
// Options::stop, which is how the reports library sees it.
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  g_signal = sig;
  std::signal(sig, SIG_DFL);
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// The interrupted run's message; returns its exit status 128 + signal.
int interrupted(const std::string& where) {
  const int sig = g_signal;
  std::cerr << "ropecheck report: interrupted by " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": "
            << where << "\n";
  std::cout.flush();
  return 128 + sig;
}

// What one `report` runs (run_report): ropecheck's own kernels (--kernels), the engine atlas
// (--engines), both (neither option: the atlas first), or one plugin (--plugin / --worker-fds).
struct ReportArgs {
  std::string kernels;  // empty: not given
  std::string engines;  // empty: not given
  std::string plugin;
  std::string worker_fds;  // "R,W": a worker already serving (the Python module's rc.report)
  double timeout = 10;     // per plugin call
  std::uint64_t worker_memory = 8192;  // MiB the plugin's worker may add (0: no limit)
  // The sweep's axes; empty: the defaults of what runs (kAxes / kAtlasAxes).
  std::string dtypes;
  std::string head_dims;
  std::string bases;
  std::string layouts;
  long long max_position = 1LL << 20;
  long long samples = reports::Options{}.samples;
  unsigned long long seed = 1;
  unsigned threads = 0;
  std::string oracle = "fast";
  unsigned ref_bits = 0;
  std::string out;
  std::string baseline;
  double baseline_factor = reports::kDefaultBaselineFactor;
  double safe_budget_u = reports::Options{}.safe_budget_u;
  bool quiet = false;
  std::string shard;               // "i/n" (wins over GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS)
  std::vector<std::string> merge;  // shard reports to merge instead of running a sweep
  HfConfigArg hf;                  // restrict the sweep to this model's spec
  std::string models;              // the model atlas: presets (cmd_report_models.cpp)
  bool no_variants = false;
  Fp8Arg fp8;  // FP8 cache bytes (formats also accepted inside --dtypes)
};

template <class T>
void push_unique(std::vector<T>& v, const T& x, const std::string& what, const std::string& text) {
  for (const auto& y : v)
    if (y == x) throw UsageError(what + ": '" + text + "' given twice");
  v.push_back(x);
}

std::vector<const Kernel*> parse_kernels(const std::string& list) {
  if (list.empty() || list == "all") return builtin_kernels();
  std::vector<const Kernel*> kernels;
  for (const auto& n : split(list, ',', "--kernels")) {
    const Kernel* k = find_builtin_kernel(n);
    if (!k) {
      std::string names;
      for (const Kernel* b : builtin_kernels()) names += (names.empty() ? "" : ", ") + b->name();
      throw UsageError("--kernels: no built-in kernel named '" + n + "' (available: " + names +
                       ", or 'all')");
    }
    push_unique(kernels, k, "--kernels", n);
  }
  return kernels;
}

// The axes' defaults: ropecheck's own kernels (and plugins) sweep every dtype at head dims 64 and
// 128 and bases 1e4 and 1e6; the atlas sweeps the dtypes models run in, at the head dim of most
// current models and the bases of Llama 2 (1e4) and Llama 3 (5e5), each engine in its own layout.
struct Axes {
  const char *dtypes, *head_dims, *bases, *layouts;
};
constexpr Axes kAxes{"f64,f32,f16,bf16", "64,128", "1e4,1e6", "interleaved,half"};
constexpr Axes kAtlasAxes{"f32,bf16,f16", "128", "1e4,5e5", "half,interleaved"};

ReportArgs with_axes(ReportArgs a, const Axes& def, bool keep_given) {
  const auto pick = [&](std::string& v, const char* d) {
    if (!keep_given || v.empty()) v = d;
  };
  pick(a.dtypes, def.dtypes);
  pick(a.head_dims, def.head_dims);
  pick(a.bases, def.bases);
  pick(a.layouts, def.layouts);
  return a;
}

// The sweep's axes: dtypes, head dims, bases, layouts. An FP8 name in --dtypes (f8e4m3, ...) is
// a cache storage format, not a dtype the rotation runs in: it joins --fp8's formats.
void parse_axes(const ReportArgs& a, reports::Options& o) {
  o.dtypes.clear();
  for (const auto& s : split(a.dtypes, ',', "--dtypes")) {
    if (const auto f = parse_fp8_format(s)) {
      push_unique(o.fp8, *f, "--dtypes/--fp8", s);
      continue;
    }
    const auto d = parse_dtype(s);
    if (!d)
      throw UsageError("--dtypes: '" + s +
                       "' is not one of f64, f32, f16, bf16 (or an FP8 cache format: f8e4m3, "
                       "f8e4m3fnuz, f8e5m2)");
    push_unique(o.dtypes, *d, "--dtypes", s);
  }
  if (o.dtypes.empty())
    throw UsageError(
        "--dtypes: FP8 formats are what the cache stores; name the dtype(s) the "
        "rotation runs in as well, e.g. --dtypes bf16,f8e4m3");
  o.head_dims.clear();
  for (const auto& s : split(a.head_dims, ',', "--head-dims")) {
    long long v = 0;
    if (!parse_int64(s, v)) throw UsageError("--head-dims: '" + s + "' is not an integer");
    push_unique(o.head_dims, static_cast<std::int64_t>(v), "--head-dims", s);
  }
  o.bases.clear();
  for (const auto& s : split(a.bases, ',', "--bases"))
    push_unique(o.bases, parse_finite_double(s, "--bases"), "--bases", s);
  o.layouts.clear();
  for (const auto& s : split(a.layouts, ',', "--layouts")) {
    const auto l = parse_layout(s);
    if (!l) throw UsageError("--layouts: '" + s + "' is not interleaved or half");
    push_unique(o.layouts, *l, "--layouts", s);
  }
}

// --fp8 FORMATS, --fp8-scale, --fp8-convention, --fp8-overflow (after parse_axes: --dtypes may
// have named formats already).
void parse_fp8_options(const ReportArgs& a, reports::Options& o) {
  for (Fp8Format f : a.fp8.parsed_formats()) push_unique(o.fp8, f, "--dtypes/--fp8", name(f));
  o.fp8_overflow = a.fp8.parsed_overflow();
  o.fp8_divide = a.fp8.divide();
  o.fp8_scale = a.fp8.scale;  // reports::validate checks it
}

// Every option of the sweep, validated (UsageError naming the option).
reports::Options parse_options(const ReportArgs& a) {
  reports::Options o;
  o.simd_path = simd_path();
  o.simd_best_path = simd_best_path();
  parse_axes(a, o);
  o.max_position = a.max_position;
  o.samples = a.samples;
  o.seed = a.seed;
  o.threads = a.threads;
  o.oracle_mpfr = a.oracle == "mpfr";
  o.reference_bits = a.ref_bits;
  o.safe_budget_u = a.safe_budget_u;
  parse_fp8_options(a, o);
  const Shard shard = resolve_shard(a.shard);
  o.shard_index = shard.index;
  o.shard_count = shard.total;
  touch_shard_status_file();
  o.variants = !a.no_variants;
  o.spec = a.hf.read();
  // Dynamic NTK and LongRoPE depend on the call's length: transformers takes max(position) + 1,
  // so a report whose sampled positions reach max_position reads a call that long (LongRoPE's
  // long factors past the original context); --seq-len, when given, must cover it.
  if (o.spec)
    o.spec = with_runtime_seq_len(*o.spec, o.max_position, "--seq-len",
                                  std::to_string(o.max_position) + " (--max-position)");
  if (a.out.empty()) throw UsageError("--out: give the output directory");
  try {
    reports::validate(o);
  } catch (const reports::OptionsError& e) {
    throw UsageError(e.what());
  }
  return o;
}

// Read before the (long) sweep so a bad path fails fast; null when no --baseline.
nlohmann::json read_baseline(const ReportArgs& a) {
  nlohmann::json baseline;
  if (a.baseline.empty()) return baseline;
  std::ifstream in(a.baseline);
  if (!in) throw UsageError("--baseline: cannot read '" + a.baseline + "'");
  try {
    baseline = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw UsageError("--baseline: '" + a.baseline + "' is not JSON: " + e.what());
  }
  if (!baseline.is_object() || !baseline.contains("schema_version"))
    throw UsageError("--baseline: '" + a.baseline + "' is not a ropecheck report");
  if (!(a.baseline_factor >= 1.0)) throw UsageError("--baseline-factor must be >= 1");
  return baseline;
}

// Produces the report document (one or two sweeps) with the progress callback and stop poll.
using Sweep = std::function<nlohmann::json(const reports::Progress&, std::function<bool()>)>;

// Runs the sweep and writes the report set; the exit status (0/1, or 128 + signal).
int sweep_and_write(const ReportArgs& a, const Sweep& sweep, const nlohmann::json& baseline) {
  reports::Progress progress;
  if (!a.quiet) progress = [](const std::string& s) { std::cerr << s << "\n"; };
  install_stop_handlers();
  nlohmann::json report;
  try {
    report = sweep(progress, [] { return g_signal != 0; });
  } catch (const reports::Interrupted& e) {
    return interrupted(std::string(e.what()) + "; nothing written, the previous report in '" +
                       a.out + "' (if any) is unchanged");
  }
  if (g_signal)
    return interrupted(
        "after the sweep, before writing; nothing written, the previous report in '" + a.out +
        "' (if any) is unchanged");
  if (!a.baseline.empty()) {
    try {
      reports::apply_baseline(report, baseline, a.baseline_factor);
    } catch (const reports::OptionsError& e) {
      throw UsageError(e.what());
    }
  }
  reports::write_all(report, a.out);
  if (g_signal)
    return interrupted("while writing; the writes finished, the report in '" + a.out +
                       "' is the new, complete one");
  std::cout << "wrote " << a.out << "/report.json, report.md, report.html, junit.xml ("
            << report["environment"]["wall_seconds"].get<double>() << " s)\n";
  return report_verdict(report);
}

// --engines all|a,b: the engine kernels with their provenance, in atlas order.
std::vector<reports::AtlasEngine> parse_engines(const std::string& list) {
  std::vector<const EngineKernel*> ks;
  if (list.empty() || list == "all") {
    ks = engine_kernels();
  } else {
    for (const auto& n : split(list, ',', "--engines")) {
      const EngineKernel* k = find_engine_kernel(n);
      if (!k) {
        std::string names;
        for (const EngineKernel* e : engine_kernels())
          names += (names.empty() ? "" : ", ") + e->name();
        throw UsageError("--engines: no engine named '" + n + "' (available: " + names +
                         ", or 'all')");
      }
      push_unique(ks, k, "--engines", n);
    }
  }
  std::vector<reports::AtlasEngine> out;
  for (const EngineKernel* k : ks) {
    const Provenance p = k->provenance();
    out.push_back({k, p.engine, p.upstream, p.checked, p.modelled});
  }
  return out;
}

nlohmann::json run_atlas_checked(const reports::Options& o,
                                 const std::vector<reports::AtlasEngine>& engines,
                                 const reports::Progress& progress) {
  try {
    return reports::run_atlas(o, engines, progress);
  } catch (const reports::OptionsError& e) {
    throw UsageError(e.what());
  }
}

// --plugin / --worker-fds: the report of one third-party kernel, swept inside its declared domain
// (what was left out is said in the report's "domain" lines and on stderr).
int report_plugin(const ReportArgs& a) {
  if (!a.kernels.empty() || !a.engines.empty())
    throw UsageError("--plugin reports one plugin: --kernels and --engines do not go with it");
  if (!a.merge.empty() || !a.shard.empty())
    throw UsageError("--plugin does not take --shard or --merge");
  if (!(a.timeout > 0) || !std::isfinite(a.timeout)) throw UsageError("--timeout must be > 0");
  if (a.worker_memory > (std::uint64_t{1} << 30))
    throw UsageError("--worker-memory: at most 2^30 MiB (0: no limit)");
  reports::Options o = parse_options(with_axes(a, kAxes, true));
  const nlohmann::json baseline = read_baseline(a);
  const auto pk = validate::load_plugin(
      a.plugin.empty() ? "worker:" + a.worker_fds : a.plugin,
      a.worker_fds.empty() ? std::nullopt : std::optional(parse_worker_fds(a.worker_fds)),
      a.timeout, a.worker_memory << 20);
  const std::vector<std::string> notes = validate::restrict_to_domain(o, *pk, !a.head_dims.empty());
  try {
    reports::validate(o);
  } catch (const reports::OptionsError& e) {
    throw UsageError(e.what());
  }
  o.threads = 1;  // the plugin worker serves one call at a time
  for (const auto& n : notes) std::cerr << "ropecheck report: outside the domain: " << n << "\n";
  const Sweep sweep = [&](const reports::Progress& progress, std::function<bool()> stop) {
    reports::Options x = o;
    x.stop = stop;
    nlohmann::json doc = reports::run(x, {pk.get()}, progress);
    doc["domain"] = {{"declared", validate::describe_domain(pk->domain())}, {"outside", notes}};
    if (pk->poisoned()) {
      // A fault during the sweep: the figures after it are the poisoned kernel's errors, so the
      // report must fail, whatever the bounds say.
      nlohmann::json c{{"kernel", pk->name()},
                       {"dtype", name(o.dtypes.front())},
                       {"check", "PluginRanWithoutFaults"},
                       {"passed", false},
                       {"message", pk->faults().front().message()}};
      doc["checks"].insert(doc["checks"].begin(), c);
    }
    return doc;
  };
  return sweep_and_write(a, sweep, baseline);
}

int run_report(const ReportArgs& a) {
  if (!a.merge.empty()) {
    if (!a.shard.empty()) throw UsageError("--merge and --shard exclude each other");
    return merge_reports(a.merge, a.out, a.baseline, a.baseline_factor);
  }
  if (!a.plugin.empty() || !a.worker_fds.empty()) return report_plugin(a);
  if (!a.models.empty()) {
    if (!a.kernels.empty() || !a.shard.empty())
      throw UsageError("--models runs the engine atlas per model: no --kernels or --shard");
    const reports::Progress progress =
        a.quiet ? reports::Progress{} : [](const std::string& m) { std::cerr << m << "\n"; };
    return report_models(a.models, parse_options(with_axes(a, kAtlasAxes, true)),
                         parse_engines(a.engines), a.out, progress);
  }
  const bool own = !a.kernels.empty() || a.engines.empty();
  // The atlas: asked for, or by default when the sweep is the whole default one (a shard or a
  // model's spec describes ropecheck's own kernels only).
  const bool atlas = !a.engines.empty() || (a.kernels.empty() && a.shard.empty() &&
                                            a.hf.path.empty() && !engine_kernels().empty());
  if (!a.engines.empty() && !a.shard.empty())
    throw UsageError("--engines runs the engine atlas, which --shard does not take");
  const std::vector<const Kernel*> kernels =
      own ? parse_kernels(a.kernels) : std::vector<const Kernel*>{};
  const std::vector<reports::AtlasEngine> engines =
      atlas ? parse_engines(a.engines) : std::vector<reports::AtlasEngine>{};
  // The axes given apply to ropecheck's own kernels; to the atlas only when it runs alone.
  const reports::Options o = parse_options(with_axes(a, kAxes, true));
  const reports::Options ao = parse_options(with_axes(a, kAtlasAxes, !own));
  const nlohmann::json baseline = read_baseline(a);
  const Sweep sweep = [&](const reports::Progress& progress, std::function<bool()> stop) {
    nlohmann::json atlas_doc;
    if (atlas) {
      reports::Options x = ao;
      x.stop = stop;
      const reports::Progress p =
          progress ? [&](const std::string& m) { progress("[atlas] " + m); } : reports::Progress{};
      atlas_doc = run_atlas_checked(x, engines, p);
      if (!own) return atlas_doc;
    }
    reports::Options x = o;
    x.stop = stop;
    nlohmann::json doc = reports::run(x, kernels, progress);
    if (atlas) reports::embed_atlas(doc, atlas_doc);
    return doc;
  };
  return sweep_and_write(a, sweep, baseline);
}

}  // namespace

void add_report(CLI::App& app, int& status) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand(
      "report",
      "Precision report per kernel x dtype x position bucket: writes report.json, report.md, "
      "report.html and junit.xml into --out");
  cmd->add_option("--kernels", a->kernels,
                  "ropecheck's own kernels, comma-separated, or 'all'; without --kernels and "
                  "--engines: the engine atlas, then all of ropecheck's own kernels");
  cmd->add_option("--engines", a->engines,
                  "the engine atlas: engine kernels (see 'ropecheck list'), comma-separated, or "
                  "'all'; alone, the axes below apply to the atlas");
  cmd->add_option("--plugin", a->plugin,
                  "report one third-party kernel (.so, plugin ABI) inside its declared domain");
  cmd->add_option("--worker-fds", a->worker_fds,
                  "R,W: report a kernel served on these descriptors (the Python module)");
  cmd->add_option("--timeout", a->timeout, "per plugin call, seconds (default 10)");
  cmd->add_option("--worker-memory", a->worker_memory,
                  "MiB of address space the plugin's worker may add (default 8192; 0: no limit)");
  cmd->add_option("--dtypes", a->dtypes,
                  "comma-separated dtypes (default f64,f32,f16,bf16; atlas: f32,bf16,f16)");
  cmd->add_option("--head-dims", a->head_dims,
                  "comma-separated head dims (default 64,128; atlas: 128; plugin: its declared "
                  "list)");
  cmd->add_option("--bases", a->bases, "comma-separated bases (default 1e4,1e6; atlas: 1e4,5e5)");
  cmd->add_option("--layouts", a->layouts,
                  "interleaved,half (default both; the atlas runs each engine in its own)");
  cmd->add_option("--max-position", a->max_position, "largest position sampled (default 2^20)");
  cmd->add_option("--samples", a->samples,
                  "vectors per kernel x dtype x spec x bucket (default " +
                      std::to_string(reports::Options{}.samples) + ")");
  cmd->add_option("--seed", a->seed, "random seed (default 1); same seed -> same report.json");
  cmd->add_option("--threads", a->threads, "worker threads (default: all hardware threads)");
  cmd->add_option("--oracle", a->oracle,
                  "exact values: fast (double-double, MPFR where it cannot certify; default) or "
                  "mpfr (MPFR alone: the same answers, slower)")
      ->check(CLI::IsMember({"fast", "mpfr"}));
  cmd->add_option("--ref-bits", a->ref_bits, "reference precision in bits (default 160)");
  cmd->add_option("--safe-budget-u", a->safe_budget_u,
                  "per-pair error budget (in u of the dtype) defining the precision-safe context "
                  "length (default 2)");
  cmd->add_option("--out", a->out, "output directory (created if missing)")->required();
  cmd->add_option("--baseline", a->baseline,
                  "older report.json: exit 1 when a max ULP or max pair error grew beyond "
                  "--baseline-factor x max(baseline, 0.5)");
  cmd->add_option("--baseline-factor", a->baseline_factor, "regression factor (default 2)");
  cmd->add_flag("--quiet", a->quiet, "no progress lines on stderr");
  cmd->add_option("--shard", a->shard,
                  "i/n: run only shard i of n of the work units (default: GTEST_SHARD_INDEX / "
                  "GTEST_TOTAL_SHARDS when set); join the shard reports with --merge");
  cmd->add_option("--merge", a->merge,
                  "shard report.json files to merge into one report set in --out (no sweep)")
      ->expected(1, -1);
  add_hf_config_options(cmd, a->hf,
                        "restrict the sweep to the RoPE spec of this Hugging Face config.json "
                        "(--head-dims/--bases/--layouts are ignored; no variant sections)");
  cmd->add_option("--models", a->models,
                  "the model atlas: model presets ('ropecheck list --models'), comma-separated, or "
                  "'all'; one engine atlas per model into --out/<name>/ and an index "
                  "(--max-position is per model: 4x its trained context)");
  cmd->add_flag("--no-variants", a->no_variants,
                "skip the per-variant sections (scaling variants, M-RoPE, dynamic NTK)");
  add_fp8_options(cmd, a->fp8,
                  "FP8 cache formats, comma-separated: e4m3fn (f8e4m3), e4m3fnuz, e5m2; each "
                  "output is also quantized into them (the 'FP8 cache bytes' section)");
  cmd->callback([a, &status] { status = run_report(*a); });
}

}  // namespace ropecheck::cli
