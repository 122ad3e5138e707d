// The speed and memory budgets of the main command (issue #39, item 5), measured on the real built
// executable: `ropecheck report` (default report: <= 10 s on 2 idle cores, <= 128 MiB) and
// `ropecheck report --models all` (<= 60 s), each run as a child process and timed from spawn to
// exit. A Google Benchmark binary, not a ctest test: timings gate nothing, they are reported with
// the machine's load and as ratios measured in the same run.
//
// Map:
//   Child            run_child(): posix_spawn + wait4 -> wall seconds, exit code, peak RSS of the
//                    child (ru_maxrss, which covers the descendants it waited for; what GNU time
//                    prints as %M)
//   calibrations     the yardsticks, registered (so run) first: BM_CalibrationCpu, a fixed
//                    single-thread CPU workload (this machine's speed now), and `ropecheck list`
//                    through BM_Command (process start-up of the same binary)
//   BM_Command       one ropecheck command per iteration, UseRealTime, a fixed iteration count;
//                    counters: wall_s, peak_rss_mib, exit_code, the budget ratios
//                    (wall / budget, RSS / 128 MiB) and the ratios to the calibrations
//   main             our flags, then Google Benchmark's (--benchmark_format=json,
//                    --benchmark_out=..., --benchmark_repetitions, --benchmark_filter all work)
//
// Usage: report_bench [--ropecheck=PATH] [--threads=N] [Google Benchmark flags]
//   PATH: the ropecheck executable (default: $ROPECHECK_EXE, else the one this build made,
//   ROPECHECK_EXE_BUILT). N: the report's --threads (default 2, the budget's two cores).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct Config {
  std::string exe = ROPECHECK_EXE_BUILT;
  int threads = 2;
};

Config& config() {
  static Config c;
  return c;
}

// ---- child -------------------------------------------------------------------------------------

struct ChildRun {
  double wall_s = 0;
  int exit_code = -1;  // the exit status, or 128 + signal
  double peak_rss_mib = 0;
};

// argv[0] is the executable; stdout and stderr go to `log` (kept for a failed run's message).
ChildRun run_child(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  ChildRun r;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int err = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return r;
  int status = 0;
  rusage ru{};
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
  return r;
}

// A scratch directory per benchmark, removed at the end of it.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string t = (fs::temp_directory_path() / "report_bench.XXXXXX").string();
    if (mkdtemp(t.data())) dir = t;
  }
  ~Scratch() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

double load_avg_1m() {
  double l = -1;
  std::ifstream("/proc/loadavg") >> l;
  return l;
}

std::string tail(const fs::path& log) {
  std::ifstream f(log);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s.size() > 400 ? s.substr(s.size() - 400) : s;
}

// ---- the benchmarks ----------------------------------------------------------------------------

// Seconds per iteration of each calibration, for the ratios of the later benchmarks (0: not run,
// e.g. filtered out; the ratio counter is then absent).
double g_list_s = 0, g_cpu_s = 0;

struct Command {
  const char* label;
  std::vector<std::string> args;  // after the executable; "@OUT@" is the scratch output directory
  double wall_budget_s;           // 0: none
  double rss_budget_mib;          // 0: none
};

void BM_Command(benchmark::State& state, const Command& c, double* calibration_out) {
  Scratch scratch;
  if (scratch.dir.empty()) {
    state.SkipWithError("cannot create a scratch directory");
    return;
  }
  double wall = 0, rss = 0;
  int exit_code = 0;
  int run = 0;
  for (auto _ : state) {
    std::vector<std::string> argv = {config().exe};
    for (const auto& a : c.args)
      argv.push_back(a == "@OUT@" ? (scratch.dir / ("out" + std::to_string(run))).string() : a);
    const ChildRun r = run_child(argv, scratch.dir / "log");
    ++run;
    wall += r.wall_s;
    rss = std::max(rss, r.peak_rss_mib);
    if (r.exit_code != 0 && exit_code == 0) {
      exit_code = r.exit_code;
      std::fprintf(stderr, "report_bench: %s exited %d: %s\n", c.label, r.exit_code,
                   tail(scratch.dir / "log").c_str());
    }
  }
  const double n = static_cast<double>(state.iterations());
  if (n == 0) return;
  const double per_run = wall / n;
  if (calibration_out) *calibration_out = per_run;
  state.counters["wall_s"] = per_run;
  state.counters["peak_rss_mib"] = rss;
  state.counters["exit_code"] = exit_code;
  state.counters["load_avg_1m"] = load_avg_1m();
  if (c.wall_budget_s > 0) state.counters["wall_over_budget"] = per_run / c.wall_budget_s;
  if (c.rss_budget_mib > 0) state.counters["rss_over_budget"] = rss / c.rss_budget_mib;
  if (!calibration_out) {
    if (g_list_s > 0) state.counters["x_list_startup"] = per_run / g_list_s;
    if (g_cpu_s > 0) state.counters["x_cpu_calibration"] = per_run / g_cpu_s;
  }
}

// A fixed single-thread workload (2^22 libm sin calls and adds): the machine's speed at this
// moment, in the same units as a command's wall time.
void BM_CalibrationCpu(benchmark::State& state) {
  double wall = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    double sum = 0;
    for (int i = 0; i < (1 << 22); ++i) sum += std::sin(1e-3 * static_cast<double>(i));
    benchmark::DoNotOptimize(sum);
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (state.iterations() == 0) return;
  g_cpu_s = wall / static_cast<double>(state.iterations());
  state.counters["wall_s"] = g_cpu_s;
  state.counters["load_avg_1m"] = load_avg_1m();
}

void register_all() {
  const std::string threads = std::to_string(config().threads);
  static const Command list{"ropecheck list", {"list"}, 0, 0};
  static const Command report{
      "ropecheck report", {"report", "--quiet", "--threads", threads, "--out", "@OUT@"}, 10, 128};
  static const Command models{
      "ropecheck report --models all",
      {"report", "--models", "all", "--quiet", "--threads", threads, "--out", "@OUT@"},
      60,
      0};
  // Registration order is run order: the calibrations first, so the commands' ratios use them.
  benchmark::RegisterBenchmark("calibration/cpu_sin_2^22", BM_CalibrationCpu)
      ->Iterations(5)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("calibration/ropecheck_list", BM_Command, list, &g_list_s)
      ->Iterations(5)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("report/default", BM_Command, report, nullptr)
      ->Iterations(3)
      ->UseRealTime()
      ->Unit(benchmark::kSecond);
  benchmark::RegisterBenchmark("report/models_all", BM_Command, models, nullptr)
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kSecond);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* e = std::getenv("ROPECHECK_EXE"); e && *e) config().exe = e;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--ropecheck=", 0) == 0) {
      config().exe = a.substr(12);
    } else if (a.rfind("--threads=", 0) == 0) {
      config().threads = std::atoi(a.c_str() + 10);
      if (config().threads < 1) {
        std::fprintf(stderr, "report_bench: --threads must be >= 1\n");
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (access(config().exe.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "report_bench: %s is not an executable (give --ropecheck=PATH)\n",
                 config().exe.c_str());
    return 2;
  }
  int ac = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  benchmark::Initialize(&ac, rest.data());
  if (benchmark::ReportUnrecognizedArguments(ac, rest.data())) return 1;
  benchmark::AddCustomContext("ropecheck", config().exe);
  benchmark::AddCustomContext("report_threads", std::to_string(config().threads));
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
