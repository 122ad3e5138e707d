// The searches over position (sweep.hpp): the precision-safe context length and the
// score-offset search, each a doubling-then-bisection over probes.
#include "sweep.hpp"

#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/verify/verify.hpp"
#include "sample.hpp"

#include <cmath>
#include <limits>
#include <memory>
#include <random>

namespace ropecheck::reports::detail {

namespace ref = ropecheck::reference;
using ref::Mp;
using verify::pair_error_u;

namespace {

// Per-pair error in u of an output against the exact vector; +inf when an output is not finite.
double output_pair_error_u(const double* got, const ref::ExactVector& y,
                           const std::vector<double>& x, std::int64_t a, std::int64_t b,
                           double magnitude, double u) {
  if (!std::isfinite(got[a]) || !std::isfinite(got[b])) return kInf;
  return pair_error_u(y.diff(a, got[a]), y.diff(b, got[b]), x[a], x[b], magnitude, u);
}

// A probe samples a few positions in (m/2, m] (always m) and returns its worst error.
template <class Probe>
SearchResult search(std::int64_t max_pos, const Probe& probe, double budget) {
  SearchResult r;
  auto run = [&](std::int64_t m) {
    ++r.probes;
    const double e = probe(m);
    if (e <= budget) r.max_error_passing_u = std::fmax(r.max_error_passing_u, e);
    return e;
  };
  std::int64_t lo = -1, hi = -1;
  double hi_err = 0;
  for (std::int64_t m = 0;;) {
    const double e = run(m);
    if (!(e <= budget)) {
      hi = m;
      hi_err = e;
      break;
    }
    lo = m;
    if (m >= max_pos) break;
    m = (m == 0) ? 1 : (m > max_pos / 2 ? max_pos : 2 * m);
  }
  if (hi >= 0) {
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      const double e = run(mid);
      if (e <= budget)
        lo = mid;
      else
        hi = mid, hi_err = e;
    }
  }
  r.safe = lo;
  r.first_failure = hi;
  r.failure_error_u = hi_err;
  return r;
}

std::vector<std::int64_t> probe_positions(std::mt19937_64& rng, std::int64_t m) {
  std::vector<std::int64_t> p{m};
  if (m >= 4) {
    std::uniform_int_distribution<std::int64_t> ud(m / 2 + 1, m);
    p.push_back(ud(rng));
    p.push_back(ud(rng));
  }
  return p;
}

bool any_supported(const Setup& S, std::size_t k, int di) {
  for (const RopeSpec& spec : S.specs)
    if (S.kernels[k]->supports(spec, S.o.dtypes[di])) return true;
  return false;
}

// The oracles of a search, one per spec (made on first use), and their counts at the end.
struct Oracles {
  std::vector<std::unique_ptr<ref::Oracle>> per_spec;
  const ref::Oracle& at(const Setup& S, std::size_t si) {
    if (per_spec.size() < S.specs.size()) per_spec.resize(S.specs.size());
    if (!per_spec[si])
      per_spec[si] = std::make_unique<ref::Oracle>(
          S.specs[si], S.o.oracle_mpfr ? ref::OracleMode::mpfr : ref::OracleMode::fast);
    return *per_spec[si];
  }
  void count(OracleCounts& c) const {
    for (const auto& o : per_spec)
      if (o) c.vectors += o->vectors(), c.fallbacks += o->fallbacks();
  }
};

// Folds the per-pair errors (in u) of kernel k over one spec's probe at position m into worst.
void safe_probe_spec(const Setup& S, std::size_t k, int di, std::size_t si, std::int64_t m,
                     double& worst, Oracles& oracles) {
  const Dtype d = S.o.dtypes[di];
  const RopeSpec& spec = S.specs[si];
  std::mt19937_64 rng(unit_seed(
      S.o.seed, {2, k, static_cast<std::uint64_t>(di), si, static_cast<std::uint64_t>(m)}));
  const auto pos = probe_positions(rng, m);
  constexpr std::int64_t heads = 2;
  std::vector<std::vector<double>> in;
  Outputs out;
  for (std::size_t v = 0; v < pos.size() * heads; ++v)
    in.push_back(random_vector(rng, spec.head_dim, d));
  if (!run_kernel(*S.kernels[k], spec, d, pos, heads, in, out)) {
    // A spec it supports but positions it refuses (past an engine's cache): not safe there -- a
    // skipped probe would pass and extend the safe context past what the engine serves.
    if (S.kernels[k]->supports(spec, d)) worst = std::numeric_limits<double>::infinity();
    return;
  }
  const ref::Oracle& oracle = oracles.at(S, si);
  ref::ExactVector y;
  for (std::size_t p = 0; p < pos.size(); ++p) {
    const ref::Rotation rot = oracle.at({pos[p]});
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::size_t v = p * heads + static_cast<std::size_t>(h);
      rot.apply(in[v].data(), y);
      for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
        const auto [a, b] = spec.pair(i);
        const double e =
            output_pair_error_u(out[v], y, in[v], a, b, magnitude_f64(spec), unit_roundoff(d));
        if (!(e <= worst)) worst = e;
      }
    }
  }
}

// Max per-pair error (in u) of kernel k over a probe at position m, over every spec.
double safe_probe(const Setup& S, std::size_t k, int di, std::int64_t m, Oracles& oracles) {
  double worst = 0;
  for (std::size_t si = 0; si < S.specs.size(); ++si)
    if (S.kernels[k]->supports(S.specs[si], S.o.dtypes[di]))
      safe_probe_spec(S, k, di, si, m, worst, oracles);
  return worst;
}

constexpr std::int64_t kMaxOffset = 64;

// Score error of one sample: q at position delta, k at delta + c:
// |<K(q,delta), K(k,delta+c)> - s^2 q^T R_c k| / (s^2 ||q|| ||k||) / u. False: kernel failed.
bool score_sample(const Kernel& K, const RopeSpec& spec, Dtype d, std::mt19937_64& rng,
                  std::int64_t delta, double& e) {
  std::uniform_int_distribution<std::int64_t> cd(0, kMaxOffset);
  const std::int64_t c = cd(rng);
  std::vector<std::vector<double>> in{random_vector(rng, spec.head_dim, d),
                                      random_vector(rng, spec.head_dim, d)};
  Outputs out;
  if (!run_kernel(K, spec, d, {delta, delta + c}, 1, in, out)) return false;
  const auto rk = ref::apply_cached(spec, Mp(static_cast<long long>(c)), in[1]);
  Mp got_dot(0), exact_dot(0);
  double nq = 0, nk = 0;
  bool finite = true;
  for (std::int64_t j = 0; j < spec.head_dim; ++j) {
    finite = finite && std::isfinite(out[0][j]) && std::isfinite(out[1][j]);
    got_dot += ref::exact(out[0][j]) * ref::exact(out[1][j]);
    exact_dot += ref::exact(in[0][j]) * rk[j];
    nq += in[0][j] * in[0][j];
    nk += in[1][j] * in[1][j];
  }
  // rk carries one factor s; the kernel outputs carry s each.
  exact_dot *= ref::magnitude(spec);
  const double mag = magnitude_f64(spec);
  const double denom = mag * mag * std::sqrt(nq) * std::sqrt(nk);
  e = finite ? std::fabs(static_cast<double>(got_dot - exact_dot)) / denom / unit_roundoff(d)
             : kInf;
  if (denom == 0) e = 0;
  return true;
}

// Max score error (in u) at shift delta over every spec, c in [0, 64], two samples per spec.
double score_probe(const Setup& S, std::size_t k, int di, std::int64_t delta) {
  const Dtype d = S.o.dtypes[di];
  double worst = 0;
  for (std::size_t si = 0; si < S.specs.size(); ++si) {
    const RopeSpec& spec = S.specs[si];
    if (!S.kernels[k]->supports(spec, d)) continue;
    std::mt19937_64 rng(unit_seed(
        S.o.seed, {3, k, static_cast<std::uint64_t>(di), si, static_cast<std::uint64_t>(delta)}));
    for (int sample = 0; sample < 2; ++sample) {
      double e = 0;
      if (!score_sample(*S.kernels[k], spec, d, rng, delta, e)) break;
      if (!(e <= worst)) worst = e;
    }
  }
  return worst;
}

}  // namespace

double score_budget(double b, Dtype d) { return 2 * b + b * b * unit_roundoff(d); }

SearchResult safe_context_search(const Setup& S, std::size_t k, int di) {
  SearchResult r;
  r.supported = any_supported(S, k, di);
  if (!r.supported) return r;
  Oracles oracles;
  r = search(
      S.o.max_position, [&](std::int64_t m) { return safe_probe(S, k, di, m, oracles); },
      S.o.safe_budget_u);
  oracles.count(r.counts);
  return r;
}

SearchResult score_offset_search(const Setup& S, std::size_t k, int di) {
  SearchResult r;
  r.supported = any_supported(S, k, di);
  if (!r.supported) return r;
  return search(
      S.o.max_position, [&](std::int64_t m) { return score_probe(S, k, di, m); },
      score_budget(S.o.safe_budget_u, S.o.dtypes[di]));
}

}  // namespace ropecheck::reports::detail
