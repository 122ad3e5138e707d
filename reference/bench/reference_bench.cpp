// Cost of the reference per vector: one head_dim-128 vector at one position, default precision,
// matrix construction included (the dense path builds R_m for every call, as the oracle does).
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

// Arg: 0 = interleaved, 1 = half.
BENCHMARK(BM_ApplyDense)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyBlocked)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  set_precision_bits(default_bits(Dtype::f64));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
