// Throughput of the built-in kernels against the physical limit of RoPE: a memcpy of the same
// tensor. RoPE reads and writes every element once, so `kernel time / memcpy time` (the ratio) is
// how far a kernel is from the memory bandwidth of this machine.
//
// Every case is [T][32][128], positions 0..T-1, out-of-place, one thread. Each kernel call does
// its own angle and cos/sin work for those positions (nothing is cached across calls), as a real
// RoPE call would. Each case is repeated (kRepetitions) and the table uses the fastest
// repetition of both the kernel and its memcpy: on a shared machine the minimum is the estimate
// least disturbed by other processes. The raw per-repetition times are in --benchmark_out JSON.
//
// Usage: kernel_bench [--benchmark_out=kernel_bench.json --benchmark_out_format=json]
//                     [--ratio_out=ratios.json] [--benchmark_filter=...]
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/kernels/simd_info.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace ropecheck;

constexpr std::int64_t kHeads = 32, kHeadDim = 128;
constexpr std::int64_t kTokens[] = {64, 2048, 8192};
constexpr int kRepetitions = 3;
constexpr double kMinTime = 0.1;  // seconds per repetition

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

void BM_Kernel(benchmark::State& state, const Kernel* k, Dtype d, Layout l, std::int64_t T) {
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
  for (auto _ : state) {
    const KernelStatus st =
        apply_contiguous(*k, spec, d, T, kHeads, b.positions.data(), b.in, b.out);
    if (st != KernelStatus::ok) {
      state.SkipWithError("kernel returned an error");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * tensor_bytes(T, d)) * state.iterations());
}

// (kernel or "memcpy", dtype, layout or "-", T) of every registered case, by benchmark name.
using Key = std::tuple<std::string, std::string, std::string, std::int64_t>;
std::map<std::string, Key>& case_keys() {
  static std::map<std::string, Key> m;
  return m;
}

void configure(benchmark::internal::Benchmark* b) {
  b->Repetitions(kRepetitions)->MinTime(kMinTime)->UseRealTime()->Unit(benchmark::kMillisecond);
}

void register_all() {
  for (Dtype d : kAllDtypes) {
    for (std::int64_t T : kTokens) {
      const std::string dt = name(d), ts = std::to_string(T);
      const std::string mname = "memcpy/" + dt + "/T:" + ts;
      configure(benchmark::RegisterBenchmark(mname.c_str(), BM_Memcpy, d, T));
      case_keys()[mname] = {"memcpy", dt, "-", T};
      for (const Kernel* k : builtin_kernels()) {
        for (Layout l : {Layout::interleaved, Layout::half}) {
          const std::string kname =
              "rope/" + k->name() + "/" + dt + "/" + ropecheck::name(l) + "/T:" + ts;
          configure(benchmark::RegisterBenchmark(kname.c_str(), BM_Kernel, k, d, l, T));
          case_keys()[kname] = {k->name(), dt, ropecheck::name(l), T};
        }
      }
    }
  }
}

// Console output as usual, plus the fastest repetition of every case for the ratio table.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  std::map<Key, double> best_seconds;  // per call
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred || r.iterations == 0) continue;
      const auto it = case_keys().find(r.run_name.function_name);
      if (it == case_keys().end()) continue;
      const double sec = r.real_accumulated_time / static_cast<double>(r.iterations);
      auto [pos, fresh] = best_seconds.emplace(it->second, sec);
      if (!fresh) pos->second = std::min(pos->second, sec);
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

void print_table(const std::map<Key, double>& best, const std::string& ratio_out) {
  std::printf(
      "\nratio = kernel time / memcpy time of the same bytes (fastest of %d repetitions "
      "each); [T][%lld][%lld], positions 0..T-1, out-of-place, 1 thread, simd path %s\n",
      kRepetitions, static_cast<long long>(kHeads), static_cast<long long>(kHeadDim), simd_path());
  std::printf("%-10s %-5s %-12s", "kernel", "dtype", "layout");
  for (std::int64_t T : kTokens) std::printf(" %10s", ("T=" + std::to_string(T)).c_str());
  std::printf("\n");
  std::string json = "[";
  auto memcpy_row = [&](const std::string& dt) {
    std::printf("%-10s %-5s %-12s", "memcpy", dt.c_str(), "(ms)");
    for (std::int64_t T : kTokens) {
      const auto it = best.find(Key{"memcpy", dt, "-", T});
      std::printf(" %10.3f", it == best.end() ? 0.0 : it->second * 1e3);
    }
    std::printf("\n");
  };
  for (Dtype d : kAllDtypes) {
    const std::string dt = name(d);
    memcpy_row(dt);
    for (const Kernel* k : builtin_kernels()) {
      for (Layout l : {Layout::interleaved, Layout::half}) {
        std::printf("%-10s %-5s %-12s", k->name().c_str(), dt.c_str(), ropecheck::name(l));
        for (std::int64_t T : kTokens) {
          const auto km = best.find(Key{k->name(), dt, ropecheck::name(l), T});
          const auto mm = best.find(Key{"memcpy", dt, "-", T});
          if (km == best.end() || mm == best.end()) {
            std::printf(" %10s", "-");
            continue;
          }
          const double ratio = km->second / mm->second;
          std::printf(" %10.2f", ratio);
          if (json.size() > 1) json += ",";
          json += "{\"kernel\":\"" + k->name() + "\",\"dtype\":\"" + dt + "\",\"layout\":\"" +
                  ropecheck::name(l) + "\",\"tokens\":" + std::to_string(T) +
                  ",\"kernel_seconds\":" + std::to_string(km->second) +
                  ",\"memcpy_seconds\":" + std::to_string(mm->second) +
                  ",\"ratio\":" + std::to_string(ratio) + "}";
        }
        std::printf("\n");
      }
    }
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
  // Our one flag; everything else goes to Google Benchmark.
  std::string ratio_out;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--ratio_out=", 0) == 0)
      ratio_out = a.substr(12);
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_table(reporter.best_seconds, ratio_out);
  benchmark::Shutdown();
  return 0;
}
