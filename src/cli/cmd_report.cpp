// `ropecheck report`: parses options and hands them to ropecheck::reports, which does the work.
// Exit 0 when every check holds, 1 when a derived bound is exceeded, a special-value policy is
// violated or a baseline regressed, 2 for bad usage.
#include <signal.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/kernels/simd_info.hpp"
#include "ropecheck/reports/report.hpp"
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

struct ReportArgs {
  std::string kernels = "all";
  std::string dtypes = "f64,f32,f16,bf16";
  std::string head_dims = "64,128";
  std::string bases = "1e4,1e6";
  std::string layouts = "interleaved,half";
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
  bool no_variants = false;
};

template <class T>
void push_unique(std::vector<T>& v, const T& x, const std::string& what, const std::string& text) {
  for (const auto& y : v)
    if (y == x) throw UsageError(what + ": '" + text + "' given twice");
  v.push_back(x);
}

std::vector<const Kernel*> parse_kernels(const std::string& list) {
  if (list == "all") return builtin_kernels();
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

// The sweep's axes: dtypes, head dims, bases, layouts.
void parse_axes(const ReportArgs& a, reports::Options& o) {
  o.dtypes.clear();
  for (const auto& s : split(a.dtypes, ',', "--dtypes")) {
    const auto d = parse_dtype(s);
    if (!d) throw UsageError("--dtypes: '" + s + "' is not one of f64, f32, f16, bf16");
    push_unique(o.dtypes, *d, "--dtypes", s);
  }
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
  const Shard shard = resolve_shard(a.shard);
  o.shard_index = shard.index;
  o.shard_count = shard.total;
  touch_shard_status_file();
  o.variants = !a.no_variants;
  o.spec = a.hf.read();
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

// Runs the sweep and writes the report set; the exit status (0/1, or 128 + signal).
int sweep_and_write(const ReportArgs& a, reports::Options o,
                    const std::vector<const Kernel*>& kernels, const nlohmann::json& baseline) {
  reports::Progress progress;
  if (!a.quiet) progress = [](const std::string& s) { std::cerr << s << "\n"; };
  install_stop_handlers();
  o.stop = [] { return g_signal != 0; };
  nlohmann::json report;
  try {
    report = reports::run(o, kernels, progress);
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

int run_report(const ReportArgs& a) {
  if (!a.merge.empty()) {
    if (!a.shard.empty()) throw UsageError("--merge and --shard exclude each other");
    return merge_reports(a.merge, a.out, a.baseline, a.baseline_factor);
  }
  const std::vector<const Kernel*> kernels = parse_kernels(a.kernels);
  const reports::Options o = parse_options(a);
  const nlohmann::json baseline = read_baseline(a);
  return sweep_and_write(a, o, kernels, baseline);
}

}  // namespace

void add_report(CLI::App& app, int& status) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand(
      "report",
      "Precision report per kernel x dtype x position bucket: writes report.json, report.md, "
      "report.html and junit.xml into --out");
  cmd->add_option("--kernels", a->kernels, "comma-separated kernel names, or 'all' (default)");
  cmd->add_option("--dtypes", a->dtypes, "comma-separated dtypes (default f64,f32,f16,bf16)");
  cmd->add_option("--head-dims", a->head_dims, "comma-separated head dims (default 64,128)");
  cmd->add_option("--bases", a->bases, "comma-separated bases (default 1e4,1e6)");
  cmd->add_option("--layouts", a->layouts, "interleaved,half (default both)");
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
  cmd->add_flag("--no-variants", a->no_variants,
                "skip the per-variant sections (scaling variants, M-RoPE, dynamic NTK)");
  cmd->callback([a, &status] { status = run_report(*a); });
}

}  // namespace ropecheck::cli
