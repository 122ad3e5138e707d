// Cost of the reference per vector: one head_dim-128 vector at one position, default precision.
// Dense: R_m built and applied for every call (the definition). Blocked: block entries computed
// for every call. Cached: block entries from the per-thread cache, cold (new position every call)
// and hot (positions reused, as in a sweep over many vectors per position).
#include "ropecheck/reference/oracle.hpp"
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

// ---- the two-tier oracle (oracle.hpp): the cost of judging one vector --------------------------
// Per iteration: the rotation at a position (fresh: recomputed every iteration, as for a token
// whose heads are all judged once; shared: computed once, as for the 2nd..32nd head of a token),
// the exact vector, and the 128 differences got - exact a check forms. got is the correctly
// rounded output in the dtype (Arg 1: 0 = f64, 1 = f32, 3 = bf16), precomputed for 64 positions.
struct OracleCase {
  RopeSpec spec = spec128(Layout::half);
  std::vector<double> x = input128();
  std::vector<std::int64_t> positions;
  std::vector<std::vector<double>> got;
  explicit OracleCase(Dtype d) {
    for (int k = 0; k < 64; ++k) {
      positions.push_back(4097 + 977 * k);
      got.push_back(round_to(apply_blocked(spec, Mp(positions.back()), x), d));
    }
  }
};

void oracle_loop(benchmark::State& state, OracleMode mode, bool fresh) {
  const OracleCase c(static_cast<Dtype>(state.range(0)));
  const Oracle oracle(c.spec, mode);
  ExactVector e;
  std::size_t k = 0;
  Rotation r = oracle.at({c.positions[0]});
  std::vector<std::int64_t> pos(1);
  for (auto _ : state) {
    const std::size_t p = fresh ? k : 0;
    if (fresh) {
      pos[0] = c.positions[p];
      oracle.at(pos, r);
    }
    r.apply(c.x.data(), e);
    double acc = 0;
    for (std::int64_t j = 0; j < 128; ++j) acc += e.diff(j, c.got[p][static_cast<std::size_t>(j)]);
    benchmark::DoNotOptimize(acc);
    k = (k + 1) % c.positions.size();
  }
  state.counters["mpfr_share"] =
      static_cast<double>(oracle.fallbacks()) / static_cast<double>(oracle.vectors());
}
void BM_OracleFastFresh(benchmark::State& s) { oracle_loop(s, OracleMode::fast, true); }
void BM_OracleFastShared(benchmark::State& s) { oracle_loop(s, OracleMode::fast, false); }
void BM_OracleMpfrFresh(benchmark::State& s) { oracle_loop(s, OracleMode::mpfr, true); }
BENCHMARK(BM_OracleFastFresh)->Arg(3)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OracleFastShared)->Arg(3)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OracleMpfrFresh)->Arg(3)->Unit(benchmark::kMicrosecond);

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
