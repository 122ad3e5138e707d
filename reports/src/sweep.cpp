// The sweep behind `ropecheck report`: kernel x dtype x spec x position bucket, against the exact
// reference and against a recipe-faithful reference; the precision-safe context length search;
// the score-offset search; the special-value cases. Produces the JSON report document.
#include "recipe.hpp"
#include "ropecheck/bounds.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/reports/stats.hpp"
#include "shard.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

namespace ropecheck::reports {

namespace ref = ropecheck::reference;
using nlohmann::json;
using ref::Mp;

namespace {

constexpr std::int64_t kHeads = 4;  // vectors per sampled position (they share the exact trig)
constexpr std::int64_t kTwo20 = std::int64_t{1} << 20;
constexpr int kOctaves = 65;

struct Bucket {
  const char* name;
  std::int64_t lo, hi;  // inclusive
};
constexpr Bucket kBuckets[] = {{"0", 0, 0},
                               {"1-255", 1, 255},
                               {"256-4095", 256, 4095},
                               {"4096-65535", 4096, 65535},
                               {"65536-2^20", 65536, kTwo20},
                               {"beyond", kTwo20 + 1, INT64_MAX}};
constexpr int kNumBuckets = 6;

json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::string hex_bits(double v, Dtype d) {
  char buf[32];
  const int digits = traits(d).bytes * 2;
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits,
                static_cast<unsigned long long>(bits_of(v, d)));
  return buf;
}

std::string exact_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// SplitMix64: independent, reproducible seeds per work unit, whatever thread runs it.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
std::uint64_t unit_seed(std::uint64_t seed, std::initializer_list<std::uint64_t> parts) {
  std::uint64_t h = mix(seed);
  for (auto p : parts) h = mix(h ^ p);
  return h;
}

json spec_json(const RopeSpec& s) {
  json j{{"head_dim", s.head_dim}, {"rotary_dim", s.rotary_dim},
         {"base", s.base},         {"layout", name(s.layout)},
         {"scale", s.scale},       {"scaling", name(s.scaling.kind)}};
  // Variants and multi-axis layouts: the sections and the full parameter list (describe()).
  if (!s.sections.empty()) j["sections"] = s.sections;
  if (s.scaling.kind != ScalingKind::none || !s.sections.empty()) j["detail"] = describe(s);
  return j;
}

}  // namespace

namespace {

// Random inputs: N(0, 1) rounded once into the dtype (activations after a norm layer are O(1)).
std::vector<double> random_vector(std::mt19937_64& rng, std::int64_t n, Dtype d) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = round_to_dtype(nd(rng), d);
  return x;
}

// Positions of a bucket: both ends, then log-uniform in between.
std::vector<std::int64_t> bucket_positions(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi,
                                           std::int64_t count) {
  std::vector<std::int64_t> p;
  if (lo == hi) {
    p.assign(static_cast<std::size_t>(count), lo);
    return p;
  }
  p.push_back(lo);
  if (count > 1) p.push_back(hi);
  std::uniform_real_distribution<double> ud(std::log(static_cast<double>(lo)),
                                            std::log(static_cast<double>(hi) + 1.0));
  while (static_cast<std::int64_t>(p.size()) < count) {
    auto m = static_cast<std::int64_t>(std::floor(std::exp(ud(rng))));
    p.push_back(std::clamp(m, lo, hi));
  }
  return p;
}

// Runs kernel k on n vectors (one per position) of one spec; returns the outputs as doubles, or
// nothing when the kernel reports unsupported/error.
bool run_kernel(const Kernel& k, const RopeSpec& spec, Dtype d,
                const std::vector<std::int64_t>& positions, std::int64_t heads,
                const std::vector<std::vector<double>>& in, std::vector<std::vector<double>>& out) {
  const std::int64_t n_tok = static_cast<std::int64_t>(positions.size());
  const std::int64_t hd = spec.head_dim;
  const int bytes = traits(d).bytes;
  std::vector<unsigned char> bin(static_cast<std::size_t>(n_tok * heads * hd * bytes));
  std::vector<unsigned char> bout(bin.size());
  for (std::int64_t v = 0; v < n_tok * heads; ++v)
    for (std::int64_t j = 0; j < hd; ++j) store(d, bin.data(), v * hd + j, in[v][j]);
  if (apply_contiguous(k, spec, d, n_tok, heads, positions.data(), bin.data(), bout.data()) !=
      KernelStatus::ok)
    return false;
  out.assign(static_cast<std::size_t>(n_tok * heads), std::vector<double>(hd));
  for (std::int64_t v = 0; v < n_tok * heads; ++v)
    for (std::int64_t j = 0; j < hd; ++j) out[v][j] = load(d, bout.data(), v * hd + j);
  return true;
}

// ||got_pair - y_pair|| / (s ||x_pair||) / u, with the reference's convention for zero pairs.
double pair_err_u(double da, double db, double xa, double xb, double scale, double u) {
  const double n = std::hypot(xa, xb) * scale;
  const double e = std::hypot(da, db);
  if (n == 0) return e == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return e / n / u;
}

struct Setup {
  Options o;
  std::vector<const Kernel*> kernels;
  std::vector<RopeSpec> specs;
};

// ---------------------------------------------------------------------------------------------
// Sweep unit: one dtype x spec x bucket, every kernel on the same inputs.
struct SweepResult {
  std::vector<ErrorStats> stats;                       // per kernel
  std::vector<std::array<OctaveStats, kOctaves>> oct;  // per kernel
  std::vector<char> supported;                         // per kernel
};

SweepResult sweep_unit(const Setup& S, int di, int si, int bi) {
  const Dtype d = S.o.dtypes[di];
  const RopeSpec& spec = S.specs[si];
  const Bucket& b = kBuckets[bi];
  const std::int64_t hi = std::min(b.hi, S.o.max_position);
  const double u = unit_roundoff(d);
  const auto nk = S.kernels.size();
  std::mt19937_64 rng(
      unit_seed(S.o.seed, {1, static_cast<std::uint64_t>(di), static_cast<std::uint64_t>(si),
                           static_cast<std::uint64_t>(bi)}));
  const std::int64_t n_pos = (S.o.samples + kHeads - 1) / kHeads;
  const auto positions = bucket_positions(rng, b.lo, hi, n_pos);
  std::vector<std::vector<double>> in;
  for (std::int64_t v = 0; v < n_pos * kHeads; ++v)
    in.push_back(random_vector(rng, spec.head_dim, d));

  SweepResult R;
  R.stats.resize(nk);
  R.oct.resize(nk);
  R.supported.assign(nk, 0);
  std::vector<std::vector<std::vector<double>>> got(nk);
  std::vector<Policy> pol(nk);
  for (std::size_t k = 0; k < nk; ++k) {
    pol[k] = S.kernels[k]->policy(d);
    R.supported[k] = S.kernels[k]->supports(spec, d) &&
                     run_kernel(*S.kernels[k], spec, d, positions, kHeads, in, got[k]);
  }

  const std::int64_t np = spec.n_pairs();
  // Errors are relative to s ||x_pair|| with s the magnitude (scale x the variant's attention
  // factor), as in the property suite and the bounds.
  const double mag = magnitude_f64(spec);
  for (std::int64_t p = 0; p < n_pos; ++p) {
    const std::int64_t m = positions[p];
    const Mp m_mp(static_cast<long long>(m));
    std::map<int, detail::Trig> recipe;
    for (std::size_t k = 0; k < nk; ++k)
      if (R.supported[k] && !recipe.count(detail::recipe_key(pol[k])))
        recipe.emplace(detail::recipe_key(pol[k]), detail::recipe_trig(pol[k], spec, m));
    // The derived bound per kernel and pair at this position (independent of the input).
    std::vector<std::vector<bounds::PairBound>> bnd(nk);
    for (std::size_t k = 0; k < nk; ++k)
      if (R.supported[k])
        for (std::int64_t i = 0; i < np; ++i)
          bnd[k].push_back(bounds::pair_error_bound(pol[k], spec, d, i, static_cast<double>(m)));

    for (std::int64_t h = 0; h < kHeads; ++h) {
      const std::int64_t v = p * kHeads + h;
      const auto& x = in[v];
      // The oracle: the reference's blocked product, trig cached per (spec, position).
      const ref::MpVector y = ref::apply_cached(spec, m_mp, x);
      std::vector<double> yd(spec.head_dim), yr(spec.head_dim), yulp(spec.head_dim);
      for (std::int64_t j = 0; j < spec.head_dim; ++j) {
        yd[j] = static_cast<double>(y[j]);
        yr[j] = ref::round_to(y[j], d);
        yulp[j] = ref::ulp(yr[j], d);
      }
      // Angle-only error per recipe and pair: exact rotation by the recipe's angles vs exact.
      std::map<int, std::vector<double>> angle_u;
      std::map<int, ref::MpVector> yrec;
      for (const auto& [key, tr] : recipe) {
        yrec.emplace(key, detail::rotate(spec, tr, x));
        auto& au = angle_u[key];
        for (std::int64_t i = 0; i < np; ++i) {
          const auto [a, bb] = spec.pair(i);
          au.push_back(pair_err_u(static_cast<double>(yrec.at(key)[a] - y[a]),
                                  static_cast<double>(yrec.at(key)[bb] - y[bb]), x[a], x[bb], mag,
                                  u));
        }
      }
      for (std::size_t k = 0; k < nk; ++k) {
        if (!R.supported[k]) continue;
        auto& st = R.stats[k];
        auto& oc = R.oct[k][static_cast<std::size_t>(octave_of(m))];
        const auto& g = got[k][v];
        ++st.n_vectors;
        std::vector<double> diff(spec.head_dim);
        for (std::int64_t j = 0; j < spec.head_dim; ++j) {
          double e_ulp;
          if (!std::isfinite(g[j])) {
            diff[j] = std::numeric_limits<double>::infinity();
            e_ulp = std::numeric_limits<double>::infinity();
          } else {
            diff[j] = static_cast<double>(ref::exact(g[j]) - y[j]);
            e_ulp = std::fabs(diff[j]) / yulp[j];
          }
          st.add_element(e_ulp);
          if (!(g[j] == yr[j])) ++st.not_correctly_rounded;
          const double ae = std::fabs(diff[j]);
          if (ae > st.max_abs || std::isnan(ae)) st.max_abs = ae;
          st.sum_err2 += diff[j] * diff[j];
          st.sum_exact2 += yd[j] * yd[j];
          if (st.worst_ulp.offer(e_ulp)) {
            auto& w = st.worst_ulp;
            w.value = e_ulp;
            w.spec_index = si;
            w.position = m;
            w.element = j;
            w.got = g[j];
            w.expected = ref::to_decimal(y[j], 25);
            w.expected_rounded = yr[j];
            // The pair the element belongs to (pass-through elements: itself).
            w.pair_a = w.pair_b = j;
            for (std::int64_t i = 0; i < np; ++i) {
              const auto [a, bb] = spec.pair(i);
              if (a == j || bb == j) w.pair_a = a, w.pair_b = bb;
            }
            w.in_a = x[w.pair_a];
            w.in_b = x[w.pair_b];
          }
        }
        const auto& rec = yrec.at(detail::recipe_key(pol[k]));
        const auto& au = angle_u.at(detail::recipe_key(pol[k]));
        for (std::int64_t i = 0; i < np; ++i) {
          const auto [a, bb] = spec.pair(i);
          const double e = pair_err_u(diff[a], diff[bb], x[a], x[bb], mag, u);
          ++st.n_pairs;
          ++oc.n_pairs;
          st.sum_pair2 += e * e;
          oc.sum_pair2 += e * e;
          if (e > oc.max_pair_u || std::isnan(e)) oc.max_pair_u = e;
          const double er = std::isfinite(g[a]) && std::isfinite(g[bb])
                                ? pair_err_u(static_cast<double>(ref::exact(g[a]) - rec[a]),
                                             static_cast<double>(ref::exact(g[bb]) - rec[bb]), x[a],
                                             x[bb], mag, u)
                                : std::numeric_limits<double>::infinity();
          st.max_angle_u = std::fmax(st.max_angle_u, au[i]);
          if (er > st.max_rot_u || std::isnan(er)) st.max_rot_u = er;
          st.sum_angle2 += au[i] * au[i];
          st.sum_rot2 += er * er;
          const double scaled_norm = std::hypot(x[a], x[bb]) * mag;
          const double bound = bnd[k][i].total_u(scaled_norm);
          if (std::isfinite(bound) && bound > 0) {
            ++st.bound_pairs;
            st.bound_min_u = std::fmin(st.bound_min_u, bound);
            st.bound_max_u = std::fmax(st.bound_max_u, bound);
            const double util = e / bound;
            if (util > st.max_utilization || std::isnan(util)) st.max_utilization = util;
            if (!(e <= bound)) ++st.gt_bound;
          }
          if (st.worst_pair.offer(e)) {
            auto& w = st.worst_pair;
            w.value = e;
            w.spec_index = si;
            w.position = m;
            w.element = a;
            w.pair_a = a;
            w.pair_b = bb;
            w.in_a = x[a];
            w.in_b = x[bb];
            w.expected = ref::to_decimal(y[a], 25) + ", " + ref::to_decimal(y[bb], 25);
            w.expected_rounded = yr[a];
            w.got = g[a];
            w.got_b = g[bb];
          }
        }
      }
    }
  }
  return R;
}

// ---------------------------------------------------------------------------------------------
// Searches over position: powers of two up to max_position, then bisection between the last
// passing and the first failing probe. A probe samples a few positions in (m/2, m] (always m).
struct SearchResult {
  bool supported = true;
  std::int64_t safe = -1;           // largest position whose probe passed (-1: none)
  std::int64_t first_failure = -1;  // smallest failing probe position (-1: none up to max)
  double failure_error_u = 0;       // the error seen at first_failure
  double max_error_passing_u = 0;   // largest error among passing probes (<= budget)
  int probes = 0;
};

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

// Max per-pair error (in u) of kernel k over a probe at position m, over every spec.
// A search over a kernel that supports none of the specs would pass vacuously (no probe fails)
// and read as "safe up to the search limit"; it is reported as unsupported instead.
bool any_supported(const Setup& S, std::size_t k, int di) {
  for (const RopeSpec& spec : S.specs)
    if (S.kernels[k]->supports(spec, S.o.dtypes[di])) return true;
  return false;
}

double safe_probe(const Setup& S, std::size_t k, int di, std::int64_t m) {
  const Dtype d = S.o.dtypes[di];
  const double u = unit_roundoff(d);
  double worst = 0;
  for (std::size_t si = 0; si < S.specs.size(); ++si) {
    const RopeSpec& spec = S.specs[si];
    if (!S.kernels[k]->supports(spec, d)) continue;
    std::mt19937_64 rng(unit_seed(
        S.o.seed, {2, k, static_cast<std::uint64_t>(di), si, static_cast<std::uint64_t>(m)}));
    const auto pos = probe_positions(rng, m);
    constexpr std::int64_t heads = 2;
    std::vector<std::vector<double>> in, out;
    for (std::size_t v = 0; v < pos.size() * heads; ++v)
      in.push_back(random_vector(rng, spec.head_dim, d));
    if (!run_kernel(*S.kernels[k], spec, d, pos, heads, in, out)) continue;
    for (std::size_t p = 0; p < pos.size(); ++p) {
      const Mp m_mp(static_cast<long long>(pos[p]));
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::size_t v = p * heads + static_cast<std::size_t>(h);
        const auto y = ref::apply_cached(spec, m_mp, in[v]);
        for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
          const auto [a, b] = spec.pair(i);
          const double e = std::isfinite(out[v][a]) && std::isfinite(out[v][b])
                               ? pair_err_u(static_cast<double>(ref::exact(out[v][a]) - y[a]),
                                            static_cast<double>(ref::exact(out[v][b]) - y[b]),
                                            in[v][a], in[v][b], magnitude_f64(spec), u)
                               : std::numeric_limits<double>::infinity();
          if (!(e <= worst)) worst = e;
        }
      }
    }
  }
  return worst;
}

constexpr std::int64_t kMaxOffset = 64;

// Score error at shift delta: q at position delta, k at delta + c (c in [0, 64]):
// |<K(q,delta), K(k,delta+c)> - s^2 q^T R_c k| / (s^2 ||q|| ||k||) / u, max over samples.
double score_probe(const Setup& S, std::size_t k, int di, std::int64_t delta) {
  const Dtype d = S.o.dtypes[di];
  const double u = unit_roundoff(d);
  double worst = 0;
  for (std::size_t si = 0; si < S.specs.size(); ++si) {
    const RopeSpec& spec = S.specs[si];
    if (!S.kernels[k]->supports(spec, d)) continue;
    std::mt19937_64 rng(unit_seed(
        S.o.seed, {3, k, static_cast<std::uint64_t>(di), si, static_cast<std::uint64_t>(delta)}));
    for (int sample = 0; sample < 2; ++sample) {
      std::uniform_int_distribution<std::int64_t> cd(0, kMaxOffset);
      const std::int64_t c = cd(rng);
      std::vector<std::vector<double>> in{random_vector(rng, spec.head_dim, d),
                                          random_vector(rng, spec.head_dim, d)},
          out;
      if (!run_kernel(*S.kernels[k], spec, d, {delta, delta + c}, 1, in, out)) break;
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
      double e = finite ? std::fabs(static_cast<double>(got_dot - exact_dot)) / denom / u
                        : std::numeric_limits<double>::infinity();
      if (denom == 0) e = 0;
      if (!(e <= worst)) worst = e;
    }
  }
  return worst;
}

// ---------------------------------------------------------------------------------------------
// Special values: what the kernel returns for +-0, +-inf, NaN and subnormal inputs, against the
// policy documented by the property suite (ZeroPositionIsIdentity and the special-value tests):
//   finite inputs at m = 0: output == input bit for bit, except that the sign of a zero is not
//   part of the contract (properties/lib/impl.hpp);
//   finite inputs (incl. +-0, subnormals) at m != 0: outputs finite, within the derived bound;
//   a NaN or +-inf in a pair at m = 0: each output is its own input or NaN (a NaN stays NaN);
//   at m != 0: both outputs NaN when a NaN is in the pair, both non-finite for an inf;
//   every other pair is unaffected (bit-identical to the run with that pair zeroed).
json special_values(const Setup& S, std::size_t k, int di, int& violations) {
  const Dtype d = S.o.dtypes[di];
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double sub = min_subnormal(d);
  // Largest values well inside the range of both the storage and the declared arithmetic format
  // (table_f32 on f64 data cannot hold f64 magnitudes beyond f32's range; that is its policy).
  const Policy pol0 = S.kernels[k]->policy(d);
  const Dtype range_d = traits(pol0.arithmetic).emax < traits(d).emax ? pol0.arithmetic : d;
  const double big = round_to_dtype(max_finite(range_d) / 4, d);
  struct Case {
    const char* what;
    double a, b;
  };
  const Case cases[] = {{"+0, +0", 0.0, 0.0},
                        {"-0, -0", -0.0, -0.0},
                        {"+0, -0", 0.0, -0.0},
                        {"-0, 1", -0.0, 1.0},
                        {"subnormal, subnormal", sub, -3 * sub},
                        {"subnormal, 1", sub, 1.0},
                        {"max/4, max/4", big, big},
                        {"+inf, 1", inf, 1.0},
                        {"1, -inf", 1.0, -inf},
                        {"NaN, 1", nan, 1.0},
                        {"1, NaN", 1.0, nan}};
  RopeSpec spec;
  spec.head_dim = 8;
  spec.base = 10000;
  spec.layout = Layout::interleaved;
  spec = spec.normalized();
  const Kernel& K = *S.kernels[k];
  json out = json::array();
  if (!K.supports(spec, d)) return out;
  const Policy pol = K.policy(d);
  for (std::int64_t m : {std::int64_t{0}, std::int64_t{1000}}) {
    for (const auto& c : cases) {
      // Pair 0 holds the case; pairs 1..3 hold ordinary values to check isolation.
      std::vector<double> x{c.a, c.b, 0.5, -1.25, 2.0, 0.75, -0.375, 1.5};
      for (auto& v : x) v = std::isfinite(v) ? round_to_dtype(v, d) : v;
      std::vector<double> x0 = x;
      x0[0] = x0[1] = 0;
      std::vector<std::vector<double>> o1, o0;
      if (!run_kernel(K, spec, d, {m}, 1, {x}, o1) || !run_kernel(K, spec, d, {m}, 1, {x0}, o0))
        continue;
      const auto& g = o1[0];
      const bool finite_in = std::isfinite(c.a) && std::isfinite(c.b);
      bool ok = true;
      std::string expect;
      const bool has_nan = std::isnan(c.a) || std::isnan(c.b);
      // A kernel whose declared arithmetic is narrower than the storage (table_f32 on f64)
      // computes x*1 - y*0 = round_A(x) at m = 0 (the property suite's rule).
      const bool narrow = traits(pol.arithmetic).digits < traits(d).digits;
      auto same = [&](double got, double in) {
        const double want = narrow ? round_to_dtype(in, pol.arithmetic) : in;
        return want == 0 ? got == 0 : (narrow ? got == want : bits_of(got, d) == bits_of(in, d));
      };
      if (finite_in && m == 0) {
        // Zeros stay zero but their sign is not part of the contract (x*1 - (-0)*0 = +0 in IEEE).
        expect = narrow ? "input rounded to the arithmetic format (zeros: any sign)"
                        : "input bit for bit (zeros: any sign)";
        for (int j = 0; j < 2; ++j) ok = ok && same(g[j], x[j]);
      } else if (finite_in) {
        expect = "finite, within the derived bound";
        const auto b = bounds::pair_error_bound(pol, spec, d, 0, static_cast<double>(m));
        const auto y = ref::apply_blocked(spec, Mp(static_cast<long long>(m)), x);
        const double n = std::hypot(x[0], x[1]) * spec.scale;
        const double e = std::hypot(static_cast<double>(ref::exact(g[0]) - y[0]),
                                    static_cast<double>(ref::exact(g[1]) - y[1]));
        ok = std::isfinite(g[0]) && std::isfinite(g[1]) && e <= b.abs(n);
      } else if (m == 0) {
        // R_0 x = x mathematically; IEEE gives x - inf*0 = NaN. Either, never another value.
        expect = "each output its own input or NaN";
        for (int j = 0; j < 2; ++j) ok = ok && (std::isnan(g[j]) || same(g[j], x[j]));
        if (std::isnan(x[0])) ok = ok && std::isnan(g[0]);
        if (std::isnan(x[1])) ok = ok && std::isnan(g[1]);
      } else {
        // Both outputs mix both inputs with cos, sin != 0: a NaN makes both NaN, an inf makes
        // both non-finite; never a finite number.
        expect = has_nan ? "both outputs NaN" : "both outputs non-finite";
        for (int j = 0; j < 2; ++j) ok = ok && (has_nan ? std::isnan(g[j]) : !std::isfinite(g[j]));
      }
      bool isolated = true;
      for (int j = 2; j < 8; ++j) isolated = isolated && bits_of(g[j], d) == bits_of(o0[0][j], d);
      if (!isolated) expect += "; other pairs unaffected";
      ok = ok && isolated;
      if (!ok) ++violations;
      out.push_back({{"input", c.what},
                     {"position", m},
                     {"input_bits", {hex_bits(x[0], d), hex_bits(x[1], d)}},
                     {"got", {num(g[0]), num(g[1])}},
                     {"got_bits", {hex_bits(g[0], d), hex_bits(g[1], d)}},
                     {"policy", expect},
                     {"other_pairs_unaffected", isolated},
                     {"follows_policy", ok}});
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
json worst_json(const WorstCase& w, const Setup& S, Dtype d, bool pair_case) {
  if (w.value < 0) return nullptr;
  const RopeSpec& spec = S.specs[static_cast<std::size_t>(w.spec_index)];
  // `ropecheck eval` reproduction: the pair's inputs, zeros elsewhere (a pair's output depends only
  // on its own two inputs).
  std::string input;
  for (std::int64_t j = 0; j < spec.head_dim; ++j) {
    if (j) input += ",";
    input += j == w.pair_a ? exact_text(w.in_a) : j == w.pair_b ? exact_text(w.in_b) : "0";
  }
  std::ostringstream cmd;
  cmd << "ropecheck eval --head-dim " << spec.head_dim << " --rotary-dim " << spec.rotary_dim
      << " --base " << exact_text(spec.base) << " --layout " << name(spec.layout) << " --dtype "
      << name(d) << " --position " << w.position << " --input " << input;
  // eval takes the variants' parameters from a config (--hf-config); name them here.
  if (spec.scaling.kind != ScalingKind::none || !spec.sections.empty())
    cmd << "  # with the spec's variant parameters: " << describe(spec);
  json j{{"value", num(w.value)},
         {"spec", spec_json(spec)},
         {"position", w.position},
         {"element", w.element},
         {"pair", {w.pair_a, w.pair_b}},
         {"input", {num(w.in_a), num(w.in_b)}},
         {"input_bits", {hex_bits(w.in_a, d), hex_bits(w.in_b, d)}},
         {"expected", w.expected},
         {"got", num(w.got)},
         {"got_bits", hex_bits(w.got, d)},
         {"reproduce", cmd.str()}};
  if (pair_case) {
    j["got"] = {num(w.got), num(w.got_b)};
    j["got_bits"] = {hex_bits(w.got, d), hex_bits(w.got_b, d)};
  } else {
    j["expected_rounded"] = num(w.expected_rounded);
  }
  return j;
}

json bucket_json(ErrorStats& st, const Setup& S, Dtype d, int bi) {
  const double n = static_cast<double>(st.n_elements);
  const double np = static_cast<double>(st.n_pairs);
  const Bucket& b = kBuckets[bi];
  const double share =
      (st.sum_angle2 + st.sum_rot2) > 0 ? st.sum_angle2 / (st.sum_angle2 + st.sum_rot2) : 0.0;
  json j{{"bucket", b.name},
         {"sampling", "sampled (lower bound)"},
         {"n_vectors", st.n_vectors},
         {"n_elements", st.n_elements},
         {"n_pairs", st.n_pairs},
         {"ulp",
          {{"max", num(st.worst_ulp.value)},
           {"mean", num(st.sum_ulp / n)},
           {"rms", num(std::sqrt(st.sum_ulp2 / n))},
           {"p50", num(st.ulps.percentile(0.5))},
           {"p99", num(st.ulps.percentile(0.99))},
           {"p999", num(st.ulps.percentile(0.999))},
           {"worst", worst_json(st.worst_ulp, S, d, false)}}},
         {"max_abs_error", num(st.max_abs)},
         {"nmse", num(st.sum_exact2 > 0 ? st.sum_err2 / st.sum_exact2 : 0.0)},
         {"pair_error_u",
          {{"max", num(st.worst_pair.value)},
           {"rms", num(std::sqrt(st.sum_pair2 / np))},
           {"worst", worst_json(st.worst_pair, S, d, true)}}},
         {"counts",
          {{"not_correctly_rounded", st.not_correctly_rounded},
           {"gt_1ulp", st.gt_1ulp},
           {"gt_bound", st.gt_bound}}},
         {"bound",
          {{"pairs_checked", st.bound_pairs},
           {"min_u", st.bound_pairs ? num(st.bound_min_u) : json(nullptr)},
           {"max_u", st.bound_pairs ? num(st.bound_max_u) : json(nullptr)},
           {"max_utilization", st.bound_pairs ? num(st.max_utilization) : json(nullptr)}}},
         {"angle_vs_rotation",
          {{"angle_max_u", num(st.max_angle_u)},
           {"rotation_max_u", num(st.max_rot_u)},
           {"angle_rms_u", num(std::sqrt(st.sum_angle2 / np))},
           {"rotation_rms_u", num(std::sqrt(st.sum_rot2 / np))},
           {"angle_share", num(share)}}}};
  // What `report --merge` needs (merge.cpp); only shard reports carry it (most of their size).
  if (S.o.shard_count > 1) j["merge"] = detail::bucket_merge_state(st);
  return j;
}

json search_json(const SearchResult& r, std::int64_t max_pos, double budget) {
  json j{{"supported", r.supported},
         {"budget_u", budget},
         {"probes", r.probes},
         {"max_error_passing_u", num(r.max_error_passing_u)}};
  if (!r.supported) return j;
  j["safe_length"] = r.safe;
  if (r.first_failure < 0) {
    j["status"] = "within budget up to max_position (" + std::to_string(max_pos) + ")";
    j["first_failure"] = nullptr;
    j["failure_error_u"] = nullptr;
  } else {
    j["status"] = "exceeded";
    j["first_failure"] = r.first_failure;
    j["failure_error_u"] = num(r.failure_error_u);
  }
  return j;
}

const char* kDefinitions[][2] = {
    {"ulp",
     "|got - exact| / ulp(round(exact)), ulp(y) = 2^(max(e(y), emin) - p + 1): the exact value "
     "from the MP reference, divided by the ulp of its correctly rounded value (CORE-MATH "
     "convention)."},
    {"mean_ulp", "arithmetic mean of the per-element ULP errors"},
    {"rms_ulp", "sqrt(mean of squared per-element ULP errors)"},
    {"percentiles",
     "nearest-rank p50/p99/p99.9 of the per-element ULP errors, read from a log histogram with "
     "256 bins per binade: the value printed is the upper edge of the bin, at most 0.4% above "
     "the exact percentile and never below it"},
    {"pair_error_u",
     "||got_pair - exact_pair|| / (s ||x_pair||), in units of the storage dtype's unit roundoff "
     "u = 2^-p; the gated metric (per-element ULP explodes where a component cancels)"},
    {"nmse", "sum((got - exact)^2) / sum(exact^2) over the bucket (ggml test-backend-ops NMSE)"},
    {"sampling",
     "every maximum is over random samples: a lower bound on the true maximum, never exhaustive"},
    {"bound",
     "ropecheck::bounds::pair_error_bound for the kernel's declared Policy at the sampled "
     "position (angle + trig + arithmetic + one storage rounding); utilization = pair error / "
     "bound, exceeded when > 1"},
    {"angle_vs_rotation",
     "angle_u: exact rotation by the kernel's own (recipe-rounded) angles vs the exact spec; "
     "rotation_u: kernel vs that recipe-faithful exact rotation (table, arithmetic, storage); "
     "angle_share = sum(angle_u^2) / (sum(angle_u^2) + sum(rotation_u^2)) over the bucket's pairs"},
    {"safe_context",
     "largest position L such that every probe at positions <= L kept the max per-pair error "
     "<= safe_budget_u * u; probes at 0, then powers of two up to max_position, then bisection "
     "between the last passing and the first failing probe; a probe at m samples m and two "
     "random positions in (m/2, m] for every spec, 2 vectors each. Sampled: an estimate"},
    {"score_offset",
     "|<K(q,D), K(k,D+c)> - s^2 q^T R_c k| / (s^2 ||q|| ||k||) in u, c in [0, 64]; the budget "
     "2b + b^2 u (b = safe_budget_u) is what two vectors each within b u per pair can produce "
     "(Cauchy-Schwarz); breaks_at is the smallest shift D found beyond it"},
    {"baseline",
     "regression: max ULP or max pair error of a kernel x dtype x bucket > factor x max(baseline, "
     "1/2) (the floor keeps a change from 0 to a rounding-level error from counting)"},
};

// Dynamic NTK is length-dependent: R_a R_b = R_{a+b} holds for rotations from one table (one
// sequence length), not across tables built for different lengths. A KV cache rotated while the
// sequence was L0 tokens long and a query rotated after it grew to L use different bases once
// L > L0: the relative angle of a pair at offset c then carries a * (theta_i(L) - theta_i(L0))
// for the cached token's position a. Exact (MP) ladders, no kernel involved.
json dynamic_composition() {
  const RopeSpec base = [] {
    for (const auto& vc : variant_cases())
      if (vc.spec.scaling.kind == ScalingKind::dynamic) return vc.spec;
    return RopeSpec{};
  }();
  const std::int64_t L0 = base.scaling.max_position_embeddings;
  RopeSpec at_l0 = base;
  at_l0.scaling.seq_len = L0;
  const auto th0 = ref::inv_freqs(at_l0);
  json j{{"spec", spec_json(at_l0)},
         {"threshold", L0},
         {"cached_position", L0 - 1},
         {"note",
          "KV cache rotated with the table for seq_len = threshold; query rotated with the table "
          "for seq_len = L. max angle mismatch = max_i |(L0 - 1) (theta'_i(L) - theta'_i(L0))| "
          "rad at the last cached position; composes = the two tables are identical (exact)."}};
  j["rows"] = json::array();
  for (std::int64_t L : {L0 / 2, L0 - 1, L0, L0 + 1, L0 + L0 / 8, 2 * L0, 8 * L0}) {
    RopeSpec s = base;
    s.scaling.seq_len = L;
    const auto th = ref::inv_freqs(s);
    ref::Mp worst(0);
    for (std::size_t i = 0; i < th.size(); ++i) {
      const ref::Mp dlt = abs((th[i] - th0[i]) * ref::Mp(static_cast<long long>(L0 - 1)));
      if (dlt > worst) worst = dlt;
    }
    j["rows"].push_back({{"seq_len", L},
                         {"base_f64", num(dynamic_base_f64(s))},
                         {"max_angle_mismatch_rad", num(static_cast<double>(worst))},
                         {"composes", worst == 0}});
  }
  return j;
}

}  // namespace

void validate(const Options& o) {
  auto fail = [](const std::string& m) { throw OptionsError(m); };
  if (o.dtypes.empty()) fail("--dtypes: give at least one dtype");
  if (o.head_dims.empty()) fail("--head-dims: give at least one head dim");
  if (o.bases.empty()) fail("--bases: give at least one base");
  if (o.layouts.empty()) fail("--layouts: give at least one layout");
  for (auto h : o.head_dims)
    if (h < 2 || h > 4096)
      fail("--head-dims: each must be in [2, 4096] (got " + std::to_string(h) + ")");
  for (auto b : o.bases)
    if (!std::isfinite(b) || !(b > 1.0)) fail("--bases: each base must be finite and > 1");
  if (o.max_position < 1 || o.max_position > (std::int64_t{1} << 40))
    fail("--max-position must be in [1, 2^40] (got " + std::to_string(o.max_position) + ")");
  if (o.samples < 1 || o.samples > 100000)
    fail("--samples must be in [1, 100000] (got " + std::to_string(o.samples) + ")");
  if (o.threads > 256) fail("--threads must be <= 256");
  if (o.reference_bits != 0 && (o.reference_bits < 64 || o.reference_bits > 100000))
    fail("--ref-bits must be in [64, 100000]");
  if (!(o.safe_budget_u > 0) || !std::isfinite(o.safe_budget_u))
    fail("--safe-budget-u must be finite and > 0");
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    fail("--shard: index " + std::to_string(o.shard_index) + " of " +
         std::to_string(o.shard_count) + " shards (need 0 <= index < count)");
}

const std::vector<VariantCase>& variant_cases() {
  static const std::vector<VariantCase> cases = [] {
    std::vector<VariantCase> v;
    auto add = [&](std::string n, std::string model, std::int64_t hd, double base, Scaling sc,
                   Layout l = Layout::half, std::vector<std::int64_t> sections = {}) {
      RopeSpec s;
      s.head_dim = hd;
      s.base = base;
      s.layout = l;
      s.scaling = std::move(sc);
      s.sections = std::move(sections);
      v.push_back({std::move(n), std::move(model), s.normalized()});
    };
    Scaling lin;
    lin.kind = ScalingKind::linear;
    lin.factor = 4;
    add("linear", "linear position interpolation, factor 4 (HF linear)", 128, 1e4, lin);
    Scaling dyn;
    dyn.kind = ScalingKind::dynamic;
    dyn.factor = 4;
    dyn.max_position_embeddings = 4096;
    dyn.seq_len = 16384;
    add("dynamic", "HF dynamic NTK, factor 4, L0 4096, table built for 16384 tokens", 128, 1e4,
        dyn);
    add("yarn",
        "DeepSeek-V3-like YaRN: factor 40, original 4096, mscale = mscale_all_dim = 1, "
        "qk_rope_head_dim 64",
        64, 1e4, deepseek_v3_yarn_scaling());
    add("llama3", "Llama-3.1-8B: factor 8, low 1, high 4, original 8192, theta 500000", 128, 5e5,
        llama31_scaling());
    // Phi-3.5-like LongRoPE factors: smooth short factors near 1, long factors growing to ~40
    // (the published lists' shape; exact values are not needed for a precision description).
    for (const bool long_side : {false, true}) {
      Scaling lr;
      lr.kind = ScalingKind::longrope;
      lr.original_max_position_embeddings = 4096;
      lr.max_position_embeddings = 131072;
      lr.seq_len = long_side ? 131072 : 4096;
      for (int i = 0; i < 48; ++i) {
        lr.short_factor.push_back(1.0 + 0.25 * i / 47.0);
        lr.long_factor.push_back(1.0 + 39.0 * (i / 47.0) * (i / 47.0));
      }
      add(long_side ? "longrope_long" : "longrope_short",
          std::string("Phi-3.5-like LongRoPE (head 96, original 4096, max 131072), seq_len ") +
              (long_side ? "131072: long factors" : "4096: short factors (the switch is strict)"),
          96, 1e4, lr);
    }
    add("mrope",
        "Qwen2-VL M-RoPE, mrope_section [16,24,24], theta 1e6 (one position per token: "
        "t = h = w)",
        128, 1e6, Scaling{}, Layout::mrope, {16, 24, 24});
    return v;
  }();
  return cases;
}

json run(const Options& o, const std::vector<const Kernel*>& kernels, const Progress& progress) {
  validate(o);
  if (kernels.empty()) throw OptionsError("no kernels to report on");
  const auto t0 = std::chrono::steady_clock::now();
  Setup S{o, kernels, {}};
  if (o.spec) {
    S.specs.push_back(o.spec->normalized());
  } else {
    for (auto hd : o.head_dims)
      for (auto b : o.bases)
        for (auto l : o.layouts) {
          RopeSpec s;
          s.head_dim = hd;
          s.base = b;
          s.layout = l;
          S.specs.push_back(s.normalized());
        }
  }
  // Variant sections: one Setup per variant (its spec only), the scalar and simd kernels among
  // `kernels`, a quarter of the samples (the statistics are the same, the maxima sampled less).
  std::vector<Setup> VS;
  std::vector<const Kernel*> vkernels;
  if (o.variants && !o.spec) {
    for (const Kernel* k : kernels)
      if (k->name() == "scalar" || k->name() == "simd") vkernels.push_back(k);
    Options ov = o;
    ov.samples = std::max<std::int64_t>(16, o.samples / 4);
    if (!vkernels.empty())
      for (const auto& vc : variant_cases()) VS.push_back(Setup{ov, vkernels, {vc.spec}});
  }
  const int nv = static_cast<int>(VS.size());
  const std::size_t nvk = vkernels.size();
  unsigned bits = o.reference_bits;
  if (!bits)
    for (Dtype d : o.dtypes) bits = std::max(bits, ref::default_bits(d));
  ref::set_precision_bits(bits);

  const int nd = static_cast<int>(o.dtypes.size());
  const int ns = static_cast<int>(S.specs.size());
  const std::size_t nk = kernels.size();
  int n_buckets = 0;
  while (n_buckets < kNumBuckets && kBuckets[n_buckets].lo <= o.max_position) ++n_buckets;

  // Work list. Long sequential searches first so the two threads finish together.
  enum Kind { kSafe, kScore, kSpecial, kSweep, kVarSafe, kVarSweep };
  struct Unit {
    Kind kind;
    int a, b, c;
  };
  std::vector<Unit> units;
  for (std::size_t k = 0; k < nk; ++k)
    for (int di = 0; di < nd; ++di) {
      units.push_back({kSafe, static_cast<int>(k), di, 0});
      units.push_back({kScore, static_cast<int>(k), di, 0});
    }
  for (int di = 0; di < nd; ++di)
    for (int si = 0; si < ns; ++si)
      for (int bi = n_buckets - 1; bi >= 0; --bi) units.push_back({kSweep, di, si, bi});
  // Variant units: safe-context searches (a = kernel, b = dtype, c = variant) before the sweeps
  // (a = dtype, b = variant, c = bucket).
  for (int vi = 0; vi < nv; ++vi)
    for (std::size_t k = 0; k < nvk; ++k)
      for (int di = 0; di < nd; ++di) units.push_back({kVarSafe, static_cast<int>(k), di, vi});
  for (int vi = 0; vi < nv; ++vi)
    for (int di = 0; di < nd; ++di)
      for (int bi = n_buckets - 1; bi >= 0; --bi) units.push_back({kVarSweep, di, vi, bi});
  for (std::size_t k = 0; k < nk; ++k)
    for (int di = 0; di < nd; ++di) units.push_back({kSpecial, static_cast<int>(k), di, 0});

  // Sharding: this run keeps the units whose work-list index is shard_index mod shard_count (the
  // list depends only on the options; unit seeds do not depend on the index). merge.cpp joins.
  const std::size_t units_total = units.size();
  if (o.shard_count > 1) {
    std::vector<Unit> mine;
    for (std::size_t i = 0; i < units.size(); ++i)
      if (i % static_cast<std::size_t>(o.shard_count) == static_cast<std::size_t>(o.shard_index))
        mine.push_back(units[i]);
    units = std::move(mine);
  }
  std::vector<SweepResult> sweep(units.size());
  std::vector<SearchResult> searches(units.size());
  std::vector<json> specials(units.size());
  std::vector<int> special_violations(units.size(), 0);

  const double budget = o.safe_budget_u;
  // Two vectors each within b u per pair: |<q^,k^> - <q,k>| <= (2b u + b^2 u^2) ||q|| ||k||.
  auto score_budget = [&](Dtype d) { return 2 * budget + budget * budget * unit_roundoff(d); };
  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<bool> stopped{false};
  std::vector<std::atomic<bool>> finished(units.size());
  std::mutex mu;
  std::exception_ptr error;
  auto worker = [&] {
    for (;;) {
      // Polled between work units only: a unit's result is all or nothing, and the whole report
      // is dropped on a stop, so the previous report on disk stays the one a reader sees.
      if (o.stop && o.stop()) {
        stopped = true;
        next = units.size();
      }
      const std::size_t i = next++;
      if (i >= units.size()) return;
      try {
        const Unit& w = units[i];
        const auto k = static_cast<std::size_t>(w.a);
        switch (w.kind) {
          case kSweep:
            sweep[i] = sweep_unit(S, w.a, w.b, w.c);
            break;
          case kSafe:
            if (!any_supported(S, k, w.b)) {
              searches[i].supported = false;
              break;
            }
            searches[i] = search(
                o.max_position, [&](std::int64_t m) { return safe_probe(S, k, w.b, m); }, budget);
            break;
          case kScore:
            if (!any_supported(S, k, w.b)) {
              searches[i].supported = false;
              break;
            }
            searches[i] = search(
                o.max_position, [&](std::int64_t m) { return score_probe(S, k, w.b, m); },
                score_budget(o.dtypes[w.b]));
            break;
          case kSpecial:
            specials[i] = special_values(S, k, w.b, special_violations[i]);
            break;
          case kVarSafe:
            if (!any_supported(VS[w.c], k, w.b)) {
              searches[i].supported = false;
              break;
            }
            searches[i] = search(
                o.max_position, [&](std::int64_t m) { return safe_probe(VS[w.c], k, w.b, m); },
                budget);
            break;
          case kVarSweep:
            sweep[i] = sweep_unit(VS[w.b], w.a, 0, w.c);
            break;
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        next = units.size();
      }
      finished[i] = true;
      const std::size_t n = ++done;
      if (progress && (n * 10 / units.size() != (n - 1) * 10 / units.size())) {
        std::lock_guard<std::mutex> lock(mu);
        progress("report: " + std::to_string(n) + "/" + std::to_string(units.size()) +
                 " work units done");
      }
    }
  };
  unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(units.size()));
  {
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
  if (stopped) {
    // Where it stopped: the count, and the first unit (in work-list order) that did not finish.
    auto unit_name = [&](const Unit& w) {
      const char* kinds[] = {
          "safe-context search",         "score-offset search", "special values", "sweep",
          "variant safe-context search", "variant sweep"};
      std::string s = kinds[w.kind];
      if (w.kind == kSweep)
        return s + " " + name(o.dtypes[w.a]) + " " + describe(S.specs[w.b]) + " bucket " +
               kBuckets[w.c].name;
      if (w.kind == kVarSweep)
        return s + " " + variant_cases()[w.b].name + " " + name(o.dtypes[w.a]) + " bucket " +
               kBuckets[w.c].name;
      if (w.kind == kVarSafe)
        return s + " " + variant_cases()[w.c].name + " " + vkernels[w.a]->name() + " " +
               name(o.dtypes[w.b]);
      return s + " " + kernels[w.a]->name() + " " + name(o.dtypes[w.b]);
    };
    std::size_t n_done = 0, first_open = units.size();
    for (std::size_t i = 0; i < units.size(); ++i) {
      if (finished[i])
        ++n_done;
      else if (first_open == units.size())
        first_open = i;
    }
    std::string msg = "stopped after " + std::to_string(n_done) + " of " +
                      std::to_string(units.size()) + " work units";
    if (first_open < units.size()) msg += "; first unfinished: " + unit_name(units[first_open]);
    throw Interrupted(msg);
  }

  // ---- deterministic merge, in unit order ----
  json doc;
  doc["schema_version"] = kSchemaVersion;
  doc["tool"] = "ropecheck report";
  if (o.shard_count > 1)
    doc["shard"] = {{"index", o.shard_index},
                    {"total", o.shard_count},
                    {"units", units.size()},
                    {"units_total", units_total}};
  for (const auto& d : kDefinitions) doc["definitions"][d[0]] = d[1];
  json opt;
  for (const Kernel* k : kernels) opt["kernels"].push_back(k->name());
  for (Dtype d : o.dtypes) opt["dtypes"].push_back(name(d));
  opt["head_dims"] = o.head_dims;
  opt["bases"] = o.bases;
  for (Layout l : o.layouts) opt["layouts"].push_back(name(l));
  opt["max_position"] = o.max_position;
  opt["samples"] = o.samples;
  opt["seed"] = o.seed;
  opt["reference_bits"] = ref::precision_bits();
  opt["safe_budget_u"] = o.safe_budget_u;
  opt["variants"] = nv > 0;
  if (o.spec) opt["spec"] = describe(*o.spec);
  doc["options"] = opt;
  for (const auto& s : S.specs) doc["specs"].push_back(spec_json(s));
  for (int bi = 0; bi < kNumBuckets; ++bi) {
    const Bucket& b = kBuckets[bi];
    json bj{{"name", b.name}, {"lo", b.lo}, {"sampled", bi < n_buckets}};
    bj["hi"] = bi == kNumBuckets - 1 ? json("unbounded") : json(b.hi);
    doc["buckets"].push_back(bj);
  }

  std::vector<ErrorStats> acc(nk * nd * kNumBuckets);
  std::vector<std::array<OctaveStats, kOctaves>> oct(nk * nd);
  std::vector<std::int64_t> supported_specs(nk * nd, 0);
  // Variant accumulators: (variant, kernel, dtype, bucket).
  std::vector<ErrorStats> vacc(static_cast<std::size_t>(nv) * nvk * nd * kNumBuckets);
  std::vector<char> vsupported(static_cast<std::size_t>(nv) * nvk * nd, 0);
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (units[i].kind == kVarSweep) {
      const int di = units[i].a, vi = units[i].b, bi = units[i].c;
      for (std::size_t k = 0; k < nvk; ++k) {
        if (!sweep[i].supported[k]) continue;
        const std::size_t kd = (static_cast<std::size_t>(vi) * nvk + k) * nd + di;
        vsupported[kd] = 1;
        vacc[kd * kNumBuckets + bi].merge(sweep[i].stats[k]);
      }
      sweep[i] = SweepResult{};
      continue;
    }
    if (units[i].kind != kSweep) continue;
    const int di = units[i].a, bi = units[i].c;
    for (std::size_t k = 0; k < nk; ++k) {
      if (!sweep[i].supported[k]) continue;
      if (bi == 0) ++supported_specs[k * nd + di];
      acc[(k * nd + di) * kNumBuckets + bi].merge(sweep[i].stats[k]);
      for (int q = 0; q < kOctaves; ++q) oct[k * nd + di][q].merge(sweep[i].oct[k][q]);
    }
    sweep[i] = SweepResult{};
  }

  doc["results"] = json::array();
  for (std::size_t k = 0; k < nk; ++k)
    for (int di = 0; di < nd; ++di) {
      const Dtype d = o.dtypes[di];
      json r{{"kernel", kernels[k]->name()},
             {"dtype", name(d)},
             {"unit_roundoff", unit_roundoff(d)},
             {"policy", policy_json(kernels[k]->policy(d))},
             {"specs_supported", supported_specs[k * nd + di]}};
      r["buckets"] = json::array();
      std::array<std::int64_t, kUlpBins> hist{};
      for (int bi = 0; bi < n_buckets; ++bi) {
        auto& st = acc[(k * nd + di) * kNumBuckets + bi];
        if (st.n_vectors == 0) continue;
        for (int q = 0; q < kUlpBins; ++q) hist[q] += st.hist[q];
        r["buckets"].push_back(bucket_json(st, S, d, bi));
      }
      r["ulp_histogram"] = json::array();
      for (int q = 0; q < kUlpBins; ++q)
        r["ulp_histogram"].push_back({{"bin", ulp_bin_label(q)}, {"count", hist[q]}});
      r["octaves"] = json::array();
      for (int q = 0; q < kOctaves; ++q) {
        const auto& oc = oct[k * nd + di][q];
        if (!oc.n_pairs) continue;
        const std::int64_t lo = q == 0 ? 0 : std::int64_t{1} << (q - 1);
        r["octaves"].push_back({{"position_lo", lo},
                                {"n_pairs", oc.n_pairs},
                                {"max_pair_u", num(oc.max_pair_u)},
                                {"rms_pair_u", num(std::sqrt(oc.sum_pair2 / oc.n_pairs))},
                                {"sum_pair2", oc.sum_pair2.str()}});
      }
      doc["results"].push_back(r);
    }

  // One section per variant: the same bucket statistics and the safe-context search.
  doc["variants"] = json::array();
  for (int vi = 0; vi < nv; ++vi) {
    const VariantCase& vc = variant_cases()[static_cast<std::size_t>(vi)];
    json vj{{"name", vc.name}, {"model", vc.model}, {"spec", spec_json(vc.spec)}};
    vj["results"] = json::array();
    for (std::size_t k = 0; k < nvk; ++k)
      for (int di = 0; di < nd; ++di) {
        const std::size_t kd = (static_cast<std::size_t>(vi) * nvk + k) * nd + di;
        if (!vsupported[kd]) continue;
        const Dtype d = o.dtypes[di];
        json r{{"kernel", vkernels[k]->name()},
               {"dtype", name(d)},
               {"policy", policy_json(vkernels[k]->policy(d))}};
        r["buckets"] = json::array();
        for (int bi = 0; bi < n_buckets; ++bi) {
          auto& st = vacc[kd * kNumBuckets + bi];
          if (st.n_vectors == 0) continue;
          r["buckets"].push_back(bucket_json(st, VS[vi], d, bi));
        }
        vj["results"].push_back(r);
      }
    vj["safe_context"] = json::array();
    for (std::size_t i = 0; i < units.size(); ++i) {
      const Unit& w = units[i];
      if (w.kind != kVarSafe || w.c != vi) continue;
      json sc{{"kernel", vkernels[static_cast<std::size_t>(w.a)]->name()},
              {"dtype", name(o.dtypes[w.b])}};
      sc.update(search_json(searches[i], o.max_position, budget));
      vj["safe_context"].push_back(sc);
    }
    doc["variants"].push_back(vj);
  }
  if (nv > 0) doc["dynamic_composition"] = dynamic_composition();

  doc["safe_context"] = json::array();
  doc["score_offset"] = json::array();
  doc["special_values"] = json::array();
  for (std::size_t i = 0; i < units.size(); ++i) {
    const Unit& w = units[i];
    if (w.kind == kSweep || w.kind == kVarSweep || w.kind == kVarSafe) continue;
    const auto k = static_cast<std::size_t>(w.a);
    const Dtype d = o.dtypes[w.b];
    json base{{"kernel", kernels[k]->name()}, {"dtype", name(d)}};
    if (w.kind == kSafe) {
      base.update(search_json(searches[i], o.max_position, budget));
      doc["safe_context"].push_back(base);
    } else if (w.kind == kScore) {
      base.update(search_json(searches[i], o.max_position, score_budget(d)));
      base["breaks_at"] = base["first_failure"];
      doc["score_offset"].push_back(base);
    } else {
      base["cases"] = specials[i];
      base["violations"] = special_violations[i];
      doc["special_values"].push_back(base);
    }
  }

  // Checks (one JUnit test case each) and the summary, derived from the document exactly as
  // report --merge derives them, so sharded and unsharded runs cannot disagree.
  detail::add_checks(doc);

  json env = environment(o);
  env["reference_bits"] = ref::precision_bits();
  env["seed"] = o.seed;
  env["threads"] = threads;
  env["wall_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  doc["environment"] = env;
  return doc;
}

int exit_code(const json& report) {
  for (const auto& c : report.at("checks"))
    if (!c.at("passed").get<bool>()) return 1;
  return 0;
}

}  // namespace ropecheck::reports
