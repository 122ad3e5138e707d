// Cost of the reference per vector: one head_dim-128 vector at one position, default precision.
// Dense: R_m built and applied for every call (the definition). Blocked: block entries computed
// for every call. Cached: block entries from the per-thread cache, cold (new position every call)
// and hot (positions reused, as in a sweep over many vectors per position).
#include "ropecheck/reference/reference.hpp"

#include <benchmark/benchmark.h>

#include <cmath>

namespace {

using namespace ropecheck;
using namespace ropecheck::reference;

RopeSpec spec128(Layout l) {
  RopeSpec s;
  s.head_dim = 128;
  s.base = 10000.0;
  s.layout = l;
  return s.normalized();
}

std::vector<double> input128() {
  std::vector<double> x(128);
  for (int j = 0; j < 128; ++j) x[j] = std::ldexp(double((j * 7919) % 2003 - 1001), -10);
  return x;
}

void BM_ApplyDense(benchmark::State& state) {
  const RopeSpec s = spec128(static_cast<Layout>(state.range(0)));
  const auto x = input128();
  const Mp m = exact(4097.0);
  for (auto _ : state) benchmark::DoNotOptimize(apply_dense(s, m, x));
  state.counters["bits"] = precision_bits();
}

void BM_ApplyBlocked(benchmark::State& state) {
  const RopeSpec s = spec128(static_cast<Layout>(state.range(0)));
  const auto x = input128();
  const Mp m = exact(4097.0);
  for (auto _ : state) benchmark::DoNotOptimize(apply_blocked(s, m, x));
  state.counters["bits"] = precision_bits();
}

// Cached oracle, every vector at a new position: the cache never hits (cold per-position cost).
void BM_ApplyCachedCold(benchmark::State& state) {
  const RopeSpec s = spec128(static_cast<Layout>(state.range(0)));
  const auto x = input128();
  double m = 4097.0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(apply_cached(s, exact(m), x));
    m += 1;  // never seen before
  }
  state.counters["bits"] = precision_bits();
}

// Cached oracle, many vectors at few positions (a sweep over heads/inputs at the same positions):
// 32 positions cycled, all resident after the first round.
void BM_ApplyCachedHot(benchmark::State& state) {
  const RopeSpec s = spec128(static_cast<Layout>(state.range(0)));
  const auto x = input128();
  std::vector<Mp> ms;
  for (int k = 0; k < 32; ++k) ms.push_back(exact(4097.0 + 1000.0 * k));
  std::size_t k = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(apply_cached(s, ms[k], x));
    k = (k + 1) % ms.size();
  }
  state.counters["bits"] = precision_bits();
}

// Arg: 0 = interleaved, 1 = half.
BENCHMARK(BM_ApplyDense)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyBlocked)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyCachedCold)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyCachedHot)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  set_precision_bits(default_bits(Dtype::f64));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
