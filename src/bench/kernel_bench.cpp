// Throughput of the built-in kernels against the physical limit of RoPE: a memcpy of the same
// tensor. RoPE reads and writes every element once, so `kernel time / memcpy time` (the ratio) is
// how far a kernel is from the memory bandwidth of this machine.
//
// Every case is [T][32][128], positions 0..T-1, out-of-place, one thread. Each kernel call does
// its own angle and cos/sin work for those positions (nothing is cached across calls), as a real
// RoPE call would.
//
// Map:
//   Buffers          the tensors, sized for the largest case
//   BM_Memcpy        memcpy alone: the bandwidth row of the table
//   BM_Kernel        kernel and memcpy interleaved, call after call: the ratio
//   defaults         Google Benchmark flags the user did not pass (repetitions, min time,
//                    aggregates only)
//   Collecting       the display reporter the flags ask for, plus the medians for the table
//   print_table      ratio median [min, max] over repetitions, rows that ran only
//
// Why the ratio is measured interleaved: on this shared machine the memcpy baseline of the 2-byte
// dtypes at T = 2048 sits in L3 and swings by about 30% between runs (cache contention from other
// processes, frequency). Kernel and memcpy timed in separate benchmarks see different swings, so
// their ratio carries both; timed alternately in one loop a swing hits both, and each repetition
// gives one ratio. The table reports the median of those ratios and their range.
//
// Usage: kernel_bench [Google Benchmark flags] [--ratio_out=ratios.json]
//   Defaults when not given: --benchmark_repetitions=5 --benchmark_min_time=0.1
//   --benchmark_report_aggregates_only=true (mean, median, stddev, cv, min, max per case).
//   --benchmark_format=json|csv: that format on stdout; the ratio table then goes to stderr.
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/kernels/simd_info.hpp"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace ropecheck;

constexpr std::int64_t kHeads = 32, kHeadDim = 128;
constexpr std::int64_t kTokens[] = {64, 2048, 8192};

// One pair of buffers sized for the largest case, refilled only when the dtype changes (cases are
// registered dtype-major). Inputs are finite values in [-1, 1] exactly representable in the dtype:
// no NaN/subnormal slow paths skew a timing.
struct Buffers {
  std::size_t bytes = 0;
  void* in = nullptr;
  void* out = nullptr;
  int filled_for = -1;
  std::vector<std::int64_t> positions;

  Buffers() {
    bytes = static_cast<std::size_t>(kTokens[2] * kHeads * kHeadDim) * sizeof(double);
    in = std::aligned_alloc(64, bytes);
    out = std::aligned_alloc(64, bytes);
    std::memset(out, 0, bytes);  // fault the pages in before any timing
    positions.resize(static_cast<std::size_t>(kTokens[2]));
    for (std::int64_t t = 0; t < kTokens[2]; ++t) positions[static_cast<std::size_t>(t)] = t;
  }
  void fill(Dtype d) {
    if (filled_for == static_cast<int>(d)) return;
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    const std::int64_t n = kTokens[2] * kHeads * kHeadDim;
    for (std::int64_t j = 0; j < n; ++j) store(d, in, j, round_to_dtype(u(rng), d));
    filled_for = static_cast<int>(d);
  }
};

Buffers& buffers() {
  static Buffers b;
  return b;
}

std::size_t tensor_bytes(std::int64_t T, Dtype d) {
  return static_cast<std::size_t>(T * kHeads * kHeadDim * traits(d).bytes);
}

void BM_Memcpy(benchmark::State& state, Dtype d, std::int64_t T) {
  Buffers& b = buffers();
  b.fill(d);
  const std::size_t n = tensor_bytes(T, d);
  for (auto _ : state) {
    std::memcpy(b.out, b.in, n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * n) * state.iterations());
}

// Each iteration: one kernel call, then one memcpy of the same bytes between the same buffers.
// The benchmark's time is the kernel's (manual time); the counters are per repetition:
// memcpy_ms (per call) and ratio (kernel time / memcpy time, summed over the repetition's calls).
void BM_Kernel(benchmark::State& state, const Kernel* k, Dtype d, Layout l, std::int64_t T) {
  using clock = std::chrono::steady_clock;
  Buffers& b = buffers();
  b.fill(d);
  RopeSpec spec;
  spec.head_dim = kHeadDim;
  spec.layout = l;
  spec = spec.normalized();
  if (!k->supports(spec, d)) {
    state.SkipWithError("unsupported");
    return;
  }
  const std::size_t n = tensor_bytes(T, d);
  double kernel_s = 0, memcpy_s = 0;
  for (auto _ : state) {
    const auto t0 = clock::now();
    const KernelStatus st =
        apply_contiguous(*k, spec, d, T, kHeads, b.positions.data(), b.in, b.out);
    benchmark::ClobberMemory();
    const auto t1 = clock::now();
    std::memcpy(b.out, b.in, n);
    benchmark::ClobberMemory();
    const auto t2 = clock::now();
    if (st != KernelStatus::ok) {
      state.SkipWithError("kernel returned an error");
      break;
    }
    const double ks = std::chrono::duration<double>(t1 - t0).count();
    kernel_s += ks;
    memcpy_s += std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(ks);
  }
  if (state.iterations() == 0 || memcpy_s <= 0) return;
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * n) * state.iterations());
  state.counters["memcpy_ms"] = 1e3 * memcpy_s / static_cast<double>(state.iterations());
  state.counters["ratio"] = kernel_s / memcpy_s;
}

// (kernel or "memcpy", dtype, layout or "-", T) of every registered case, by benchmark name.
using Key = std::tuple<std::string, std::string, std::string, std::int64_t>;
std::map<std::string, Key>& case_keys() {
  static std::map<std::string, Key> m;
  return m;
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// Repetitions and min time come from the flags (see defaults()): nothing fixed here, since a
// Benchmark's own Repetitions()/MinTime() would override the user's flags. min and max join
// Google Benchmark's mean/median/stddev/cv so the ratio's spread is in every output format.
void configure(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMillisecond)
      ->ComputeStatistics("min", min_of)
      ->ComputeStatistics("max", max_of);
}

void register_all() {
  for (Dtype d : kAllDtypes) {
    for (std::int64_t T : kTokens) {
      const std::string dt = name(d), ts = std::to_string(T);
      const std::string mname = "memcpy/" + dt + "/T:" + ts;
      configure(benchmark::RegisterBenchmark(mname.c_str(), BM_Memcpy, d, T)->UseRealTime());
      case_keys()[mname] = {"memcpy", dt, "-", T};
      for (const Kernel* k : builtin_kernels()) {
        for (Layout l : {Layout::interleaved, Layout::half}) {
          const std::string kname =
              "rope/" + k->name() + "/" + dt + "/" + ropecheck::name(l) + "/T:" + ts;
          configure(
              benchmark::RegisterBenchmark(kname.c_str(), BM_Kernel, k, d, l, T)->UseManualTime());
          case_keys()[kname] = {k->name(), dt, ropecheck::name(l), T};
        }
      }
    }
  }
}

// ---- flags -------------------------------------------------------------------------------------

bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  for (const auto& a : args)
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  return false;
}

std::string flag_value(const std::vector<std::string>& args, const std::string& flag,
                       const std::string& fallback) {
  std::string v = fallback;
  for (const auto& a : args)
    if (a.rfind(flag + "=", 0) == 0) v = a.substr(flag.size() + 1);  // the last one wins, as GB
  return v;
}

// The flags the user did not pass, with this binary's defaults: 5 repetitions (a median and a
// range need several), 0.1 s each, aggregates only (the medians; per-repetition rows are noise
// to a reader, and --benchmark_report_aggregates_only=false brings them back).
std::vector<std::string> defaults(const std::vector<std::string>& args) {
  std::vector<std::string> d;
  if (!has_flag(args, "--benchmark_repetitions")) d.push_back("--benchmark_repetitions=5");
  if (!has_flag(args, "--benchmark_min_time")) d.push_back("--benchmark_min_time=0.1");
  if (!has_flag(args, "--benchmark_report_aggregates_only") &&
      !has_flag(args, "--benchmark_display_aggregates_only"))
    d.push_back("--benchmark_report_aggregates_only=true");
  return d;
}

// ---- reporting ---------------------------------------------------------------------------------

// What the table needs of one case: the median (and range) of the time per call and of the ratio.
struct Stats {
  double median_s = 0, ratio_median = 0, ratio_min = 0, ratio_max = 0;
  bool ratio = false;
};

// The display reporter --benchmark_format asks for (RunSpecifiedBenchmarks only builds one from
// the flags when given none), collecting each case's median, min and max on the way. With a single
// repetition Google Benchmark computes no aggregates: that run is its own median, min and max.
class Collecting final : public benchmark::BenchmarkReporter {
 public:
  explicit Collecting(const std::string& format, bool color, bool tabular) {
    if (format == "json") {
      inner_ = std::make_unique<benchmark::JSONReporter>();
    } else if (format == "csv") {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      inner_ = std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
    } else {
      int o = benchmark::ConsoleReporter::OO_None;
      if (color) o |= benchmark::ConsoleReporter::OO_Color;
      if (tabular) o |= benchmark::ConsoleReporter::OO_Tabular;
      inner_ = std::make_unique<benchmark::ConsoleReporter>(
          static_cast<benchmark::ConsoleReporter::OutputOptions>(o));
    }
  }
  std::map<Key, Stats> stats;

  bool ReportContext(const Context& c) override { return inner_->ReportContext(c); }
  void Finalize() override { inner_->Finalize(); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const auto it = case_keys().find(r.run_name.function_name);
      if (it == case_keys().end()) continue;
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      const std::string agg = single ? "" : r.aggregate_name;
      if (!single && r.run_type != Run::RT_Aggregate) continue;
      Stats& s = stats[it->second];
      const auto ratio = r.counters.find("ratio");
      const double rv = ratio == r.counters.end() ? 0.0 : ratio->second.value;
      s.ratio = s.ratio || ratio != r.counters.end();
      if (single || agg == "median") {
        // Adjusted time is in the run's unit (ms, configure()); iterations are already divided.
        s.median_s = r.GetAdjustedRealTime() * 1e-3;
        s.ratio_median = rv;
      }
      if (single || agg == "min") s.ratio_min = rv;
      if (single || agg == "max") s.ratio_max = rv;
    }
    inner_->ReportRuns(runs);
  }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
};

std::string json_number(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// Only the rows and columns of cases that ran (a --benchmark_filter'ed run prints its cases).
void print_table(const std::map<Key, Stats>& st, const std::string& ratio_out, std::FILE* out) {
  std::vector<std::int64_t> Ts;
  for (std::int64_t T : kTokens)
    for (const auto& [k, s] : st)
      if (std::get<3>(k) == T && std::find(Ts.begin(), Ts.end(), T) == Ts.end()) Ts.push_back(T);
  if (Ts.empty()) return;
  std::fprintf(out,
               "\nratio = kernel time / memcpy time, timed alternately call by call: median "
               "[min, max] over repetitions; memcpy rows: median ms per call of memcpy alone. "
               "[T][%lld][%lld], positions 0..T-1, out-of-place, 1 thread, simd path %s\n",
               static_cast<long long>(kHeads), static_cast<long long>(kHeadDim), simd_path());
  std::fprintf(out, "%-10s %-5s %-12s", "kernel", "dtype", "layout");
  for (std::int64_t T : Ts) std::fprintf(out, " %20s", ("T=" + std::to_string(T)).c_str());
  std::fprintf(out, "\n");
  std::string json = "[";
  auto row = [&](const std::string& kn, const std::string& dt, const std::string& layout,
                 const std::string& label) {
    bool any = false;
    for (std::int64_t T : Ts) any = any || st.count(Key{kn, dt, layout, T});
    if (!any) return;
    std::fprintf(out, "%-10s %-5s %-12s", kn.c_str(), dt.c_str(), label.c_str());
    for (std::int64_t T : Ts) {
      const auto it = st.find(Key{kn, dt, layout, T});
      char cell[64] = "-";
      if (it != st.end() && kn == "memcpy") {
        std::snprintf(cell, sizeof cell, "%.3f", it->second.median_s * 1e3);
      } else if (it != st.end() && it->second.ratio) {
        const Stats& s = it->second;
        std::snprintf(cell, sizeof cell, "%.2f [%.2f, %.2f]", s.ratio_median, s.ratio_min,
                      s.ratio_max);
        if (json.size() > 1) json += ",";
        json += "{\"kernel\":\"" + kn + "\",\"dtype\":\"" + dt + "\",\"layout\":\"" + layout +
                "\",\"tokens\":" + std::to_string(T) +
                ",\"kernel_seconds_median\":" + json_number(s.median_s) +
                ",\"ratio_median\":" + json_number(s.ratio_median) +
                ",\"ratio_min\":" + json_number(s.ratio_min) +
                ",\"ratio_max\":" + json_number(s.ratio_max) + "}";
      }
      std::fprintf(out, " %20s", cell);
    }
    std::fprintf(out, "\n");
  };
  for (Dtype d : kAllDtypes) {
    const std::string dt = name(d);
    row("memcpy", dt, "-", "(ms)");
    for (const Kernel* k : builtin_kernels())
      for (Layout l : {Layout::interleaved, Layout::half})
        row(k->name(), dt, ropecheck::name(l), ropecheck::name(l));
  }
  json += "]\n";
  if (!ratio_out.empty()) {
    std::ofstream f(ratio_out);
    f << json;
    if (!f) std::fprintf(stderr, "kernel_bench: cannot write %s\n", ratio_out.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Our one flag; everything else goes to Google Benchmark, after its defaults.
  std::string ratio_out;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--ratio_out=", 0) == 0)
      ratio_out = a.substr(12);
    else
      args.push_back(a);
  }
  std::vector<std::string> full = defaults(args);
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> av = {argv[0]};
  for (auto& a : full) av.push_back(a.data());
  int ac = static_cast<int>(av.size());
  av.push_back(nullptr);
  register_all();
  benchmark::Initialize(&ac, av.data());
  if (benchmark::ReportUnrecognizedArguments(ac, av.data())) return 1;
  const std::string format = flag_value(full, "--benchmark_format", "console");
  if (format != "console" && format != "json" && format != "csv") {
    std::fprintf(stderr, "kernel_bench: --benchmark_format must be console, json or csv\n");
    return 1;
  }
  const std::string color = flag_value(full, "--benchmark_color", "auto");
  const bool use_color =
      color == "auto" ? isatty(STDOUT_FILENO) != 0 : (color == "true" || color == "yes");
  const std::string tab = flag_value(full, "--benchmark_counters_tabular", "false");
  Collecting reporter(format, use_color, tab == "true" || tab == "yes" || tab == "1");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  // The table is for people: after console output on stdout, else on stderr (stdout is JSON/CSV).
  print_table(reporter.stats, ratio_out, format == "console" ? stdout : stderr);
  benchmark::Shutdown();
  return 0;
}
