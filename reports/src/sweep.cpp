// The numerics of the report's work units: kernel x dtype x spec x position bucket against the
// exact reference and against a recipe-faithful reference; the precision-safe context length
// search; the score-offset search; the special-value cases; the dynamic-NTK composition table.
// Every pair error is verify::pair_error_u and every bound verify::PairChecker::bound, the same
// figures the property suite and `check` use.
#include "sweep.hpp"

#include "recipe.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/verify/fp8_chain.hpp"
#include "ropecheck/verify/verify.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>

namespace ropecheck::reports::detail {

namespace ref = ropecheck::reference;
using ref::Mp;
using verify::pair_error_u;

int sampled_buckets(std::int64_t max_position) {
  int n = 0;
  while (n < kNumBuckets && kBuckets[n].lo <= max_position) ++n;
  return n;
}

namespace {

constexpr std::int64_t kHeads = 4;  // vectors per sampled position (they share the exact trig)
constexpr double kInf = std::numeric_limits<double>::infinity();

// SplitMix64: independent, reproducible seeds per work unit, whatever thread (or shard) runs it.
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

// A kernel's outputs as doubles, vector v at [v]: one flat buffer (a vector per output vector, and
// fresh zeroed byte buffers per call, cost a tenth of the f64 sweep in allocation and page faults).
class Outputs {
 public:
  const double* operator[](std::size_t v) const { return data_.get() + v * hd_; }

 private:
  friend bool run_kernel(const Kernel&, const RopeSpec&, Dtype, const std::vector<std::int64_t>&,
                         std::int64_t, const std::vector<std::vector<double>>&, Outputs&);
  std::unique_ptr<double[]> data_;  // not zeroed first: every element is written
  std::size_t hd_ = 0;
};

// Runs kernel k on `heads` vectors per position of one spec; returns the outputs as doubles, or
// false when the kernel reports unsupported/error.
bool run_kernel(const Kernel& k, const RopeSpec& spec, Dtype d,
                const std::vector<std::int64_t>& positions, std::int64_t heads,
                const std::vector<std::vector<double>>& in, Outputs& out) {
  const std::int64_t n_tok = static_cast<std::int64_t>(positions.size());
  const std::int64_t hd = spec.head_dim;
  const auto n = static_cast<std::size_t>(n_tok * heads * hd);
  const int bytes = traits(d).bytes;
  // The dtype buffers of this thread, grown as needed and never shrunk.
  thread_local std::vector<unsigned char> bin, bout;
  if (bin.size() < n * bytes) bin.resize(n * bytes), bout.resize(n * bytes);
  for (std::int64_t v = 0; v < n_tok * heads; ++v)
    for (std::int64_t j = 0; j < hd; ++j) store(d, bin.data(), v * hd + j, in[v][j]);
  if (apply_contiguous(k, spec, d, n_tok, heads, positions.data(), bin.data(), bout.data()) !=
      KernelStatus::ok)
    return false;
  out.hd_ = static_cast<std::size_t>(hd);
  out.data_.reset(new double[n]);
  for (std::size_t i = 0; i < n; ++i)
    out.data_[i] = load(d, bout.data(), static_cast<std::int64_t>(i));
  return true;
}

// Per-pair error in u of an output against the exact vector; +inf when an output is not finite.
double output_pair_error_u(const double* got, const ref::ExactVector& y,
                           const std::vector<double>& x, std::int64_t a, std::int64_t b,
                           double magnitude, double u) {
  if (!std::isfinite(got[a]) || !std::isfinite(got[b])) return kInf;
  return pair_error_u(y.diff(a, got[a]), y.diff(b, got[b]), x[a], x[b], magnitude, u);
}

// ---- sweep unit ---------------------------------------------------------------------------------

// The unit's inputs: positions of the bucket, kHeads vectors each.
struct SweepInputs {
  std::vector<std::int64_t> positions;
  std::vector<std::vector<double>> vectors;  // position p, head h at p * kHeads + h
};
SweepInputs draw_inputs(const Setup& S, int di, int si, int bi) {
  const Dtype d = S.o.dtypes[di];
  const Bucket& b = kBuckets[bi];
  std::mt19937_64 rng(
      unit_seed(S.o.seed, {1, static_cast<std::uint64_t>(di), static_cast<std::uint64_t>(si),
                           static_cast<std::uint64_t>(bi)}));
  const std::int64_t n_pos = (S.o.samples + kHeads - 1) / kHeads;
  SweepInputs in;
  in.positions = bucket_positions(rng, b.lo, std::min(b.hi, S.o.max_position), n_pos);
  for (std::int64_t v = 0; v < n_pos * kHeads; ++v)
    in.vectors.push_back(random_vector(rng, S.specs[si].head_dim, d));
  return in;
}

// One kernel of the unit: its pair checker (policy, bounds) and its outputs.
struct KernelRun {
  verify::PairChecker checker;
  bool supported = false;
  Outputs got;
};

// What one sampled vector is compared with: the exact output (the oracle's answers: as double,
// correctly rounded and the ulp of that), and per recipe slot the recipe-faithful rotation
// (RecipeReference, set to this vector) and its angle-only error per pair. Reused from vector to
// vector of a unit (no allocation once sized).
struct VectorRef {
  std::int64_t spec_index = 0, position = 0;
  const std::vector<double>* x = nullptr;
  ref::ExactVector y;
  std::vector<double> yd, yr, yulp;
  std::vector<std::vector<double>> angle_u;  // per recipe slot, per pair
  std::vector<double> norm;                  // per pair: hypot(x_a, x_b) * magnitude
};

void fill_norms(VectorRef& v, const RopeSpec& spec, double mag) {
  const auto& x = *v.x;
  v.norm.resize(static_cast<std::size_t>(spec.n_pairs()));
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    v.norm[static_cast<std::size_t>(i)] = std::hypot(x[a], x[b]) * mag;
  }
}

void fill_exact(VectorRef& v, const RopeSpec& spec, Dtype d) {
  v.yd.resize(spec.head_dim);
  v.yr.resize(spec.head_dim);
  v.yulp.resize(spec.head_dim);
  for (std::int64_t j = 0; j < spec.head_dim; ++j) {
    v.yd[j] = v.y.value(j);
    v.yr[j] = d == Dtype::f64 ? v.yd[j] : v.y.rounded(j, d);
    v.yulp[j] = ref::ulp(v.yr[j], d);
  }
}

// Angle-only error per recipe slot and pair: exact rotation by the recipe's angles vs exact.
void fill_angle_errors(VectorRef& v, const RopeSpec& spec, RecipeReference& rr, int n_slots,
                       double u) {
  v.angle_u.resize(static_cast<std::size_t>(n_slots));
  for (int r = 0; r < n_slots; ++r) {
    auto& au = v.angle_u[static_cast<std::size_t>(r)];
    au.clear();
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      double da = 0, db = 0;
      rr.angle_diff(r, i, da, db);
      au.push_back(verify::pair_error_u_of_norm(da, db, v.norm[static_cast<std::size_t>(i)], u));
    }
  }
}

// What the sweep derives from one kernel's output vector before any statistic: got - exact per
// element (inf when the output is not finite), and per pair its error vs exact and vs the
// recipe-faithful rotation (in u).
struct Answers {
  std::vector<double> diff, e, er;
};

// Fills A[k] for every supported kernel. A pair whose two outputs are bit-identical to an earlier
// kernel's takes that kernel's answers (functions of the outputs and the vector; the rotation
// error also of the recipe slot): 40% of the pairs in f64 and up to 73% in bf16, where the
// built-in kernels agree to the bit, skip the exact references and two hypot calls.
// f64 outputs: the rotated pairs' differences from RecipeReference::exact_diff (the oracle's
// double-double cannot resolve them and would recompute the vector in MPFR); the same doubles.
void answer(std::vector<Answers>& A, const std::vector<KernelRun>& runs, std::size_t v,
            const std::vector<int>& slot, const RopeSpec& spec, const VectorRef& vr, Dtype d,
            RecipeReference& rr, double u) {
  const auto hd = static_cast<std::size_t>(spec.head_dim);
  const auto np = static_cast<std::size_t>(spec.n_pairs());
  A.resize(runs.size());
  const auto same = [](double p, double q) {
    return std::bit_cast<std::uint64_t>(p) == std::bit_cast<std::uint64_t>(q);
  };
  const auto exact_diff = [&](const double* g, std::int64_t j) {
    return std::isfinite(g[j]) ? vr.y.diff(j, g[j]) : kInf;
  };
  for (std::size_t k = 0; k < runs.size(); ++k) {
    if (!runs[k].supported) continue;
    const double* g = runs[k].got[v];
    Answers& a = A[k];
    a.diff.resize(hd);
    a.e.resize(np);
    a.er.resize(np);
    for (std::size_t i = 0; i < np; ++i) {
      const auto [ea, eb] = spec.pair(static_cast<std::int64_t>(i));
      std::size_t twin = k;
      for (std::size_t k2 = 0; k2 < k && twin == k; ++k2)
        if (runs[k2].supported && same(runs[k2].got[v][ea], g[ea]) &&
            same(runs[k2].got[v][eb], g[eb]))
          twin = k2;
      const bool finite = std::isfinite(g[ea]) && std::isfinite(g[eb]);
      if (twin != k) {
        a.diff[ea] = A[twin].diff[ea];
        a.diff[eb] = A[twin].diff[eb];
        a.e[i] = A[twin].e[i];
      } else {
        if (!(d == Dtype::f64 && finite &&
              rr.exact_diff(static_cast<std::int64_t>(i), g[ea], g[eb], a.diff[ea], a.diff[eb]))) {
          a.diff[ea] = exact_diff(g, ea);
          a.diff[eb] = exact_diff(g, eb);
        }
        a.e[i] = verify::pair_error_u_of_norm(a.diff[ea], a.diff[eb], vr.norm[i], u);
      }
      if (twin != k && slot[twin] == slot[k]) {
        a.er[i] = A[twin].er[i];
      } else if (finite) {
        double ra = 0, rb = 0;
        rr.rotation_diff(slot[k], static_cast<std::int64_t>(i), g[ea], g[eb], d, ra, rb);
        a.er[i] = verify::pair_error_u_of_norm(ra, rb, vr.norm[i], u);
      } else {
        a.er[i] = kInf;
      }
    }
    for (std::int64_t j = 0; j < spec.head_dim; ++j)  // (proportional: not only j >= rotary_dim)
      if (spec.is_passthrough(j)) a.diff[j] = exact_diff(g, j);
  }
}

// Per-element statistics of one output vector.
void add_elements(ErrorStats& st, const RopeSpec& spec, const VectorRef& v, const double* g,
                  const std::vector<double>& diff) {
  const auto& x = *v.x;
  for (std::int64_t j = 0; j < spec.head_dim; ++j) {
    const double e_ulp = std::isfinite(g[j]) ? std::fabs(diff[j]) / v.yulp[j] : kInf;
    st.add_element(e_ulp);
    if (!(g[j] == v.yr[j])) ++st.not_correctly_rounded;
    const double ae = std::fabs(diff[j]);
    if (ae > st.max_abs || std::isnan(ae)) st.max_abs = ae;
    st.sum_err2 += diff[j] * diff[j];
    st.sum_exact2 += v.yd[j] * v.yd[j];
    if (!st.worst_ulp.offer(e_ulp)) continue;
    auto& w = st.worst_ulp;
    w.value = e_ulp;
    w.spec_index = v.spec_index;
    w.position = v.position;
    w.element = j;
    w.got = g[j];
    w.expected_rounded = v.yr[j];  // w.expected: fill_expected, for the unit's final maximum
    // The pair the element belongs to (pass-through elements: itself).
    w.pair_a = w.pair_b = j;
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const auto [a, b] = spec.pair(i);
      if (a == j || b == j) w.pair_a = a, w.pair_b = b;
    }
    w.in_a = x[w.pair_a];
    w.in_b = x[w.pair_b];
  }
}

// The sweep's verdict on one pair: error e (in u) against the derived bound (in u) for the pair's
// scaled norm. Pairs whose bound is infinite or 0 (zero input pair) are not counted.
void add_bound(ErrorStats& st, double e, double bound) {
  if (!(std::isfinite(bound) && bound > 0)) return;
  ++st.bound_pairs;
  st.bound_min_u = std::fmin(st.bound_min_u, bound);
  st.bound_max_u = std::fmax(st.bound_max_u, bound);
  const double util = e / bound;
  if (util > st.max_utilization || std::isnan(util)) st.max_utilization = util;
  if (!(e <= bound)) ++st.gt_bound;
}

void offer_worst_pair(ErrorStats& st, const VectorRef& v, const double* g, std::int64_t a,
                      std::int64_t b, double e) {
  if (!st.worst_pair.offer(e)) return;
  auto& w = st.worst_pair;
  w.value = e;
  w.spec_index = v.spec_index;
  w.position = v.position;
  w.element = a;
  w.pair_a = a;
  w.pair_b = b;
  w.in_a = (*v.x)[a];
  w.in_b = (*v.x)[b];
  w.expected_rounded = v.yr[a];  // w.expected: fill_expected
  w.got = g[a];
  w.got_b = g[b];
}

// Per-pair statistics of one output vector: error vs exact, split into angle-only error and
// rotation error (vs the recipe-faithful rotation), and the bound utilization.
void add_pairs(ErrorStats& st, OctaveStats& oc, const RopeSpec& spec, const VectorRef& v,
               const double* g, const Answers& ans, int slot,
               const std::vector<bounds::PairBound>& bnd) {
  const auto& au = v.angle_u[static_cast<std::size_t>(slot)];
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    const double n = v.norm[static_cast<std::size_t>(i)];
    const double e = ans.e[i], er = ans.er[i];
    ++st.n_pairs;
    ++oc.n_pairs;
    st.sum_pair2 += e * e;
    oc.sum_pair2 += e * e;
    if (e > oc.max_pair_u || std::isnan(e)) oc.max_pair_u = e;
    st.max_angle_u = std::fmax(st.max_angle_u, au[i]);
    if (er > st.max_rot_u || std::isnan(er)) st.max_rot_u = er;
    st.sum_angle2 += au[i] * au[i];
    st.sum_rot2 += er * er;
    add_bound(st, e, bnd[i].total_u(n));
    offer_worst_pair(st, v, g, a, b, e);
  }
}

// The FP8 cache bytes of one output vector, per format of the options (Fp8Stats, stats.hpp). The
// chain starts from the output in its dtype d (the intermediate rounding: a no-op on g, the storage
// rounding on the ends of the accepted range), then fl32, the scale in f32, the format.
// Pass-through elements: P = 0 (their exact value is the input's, kept bit for bit).
void add_fp8(std::vector<Fp8Stats>& st, const Options& o, const RopeSpec& spec, Dtype d,
             const VectorRef& v, const double* g, const std::vector<bounds::PairBound>& bnd,
             std::vector<double>& P) {
  P.assign(static_cast<std::size_t>(spec.head_dim), 0.0);
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    P[a] = P[b] = bnd[i].pre_storage_abs(v.norm[static_cast<std::size_t>(i)]);
  }
  for (std::size_t f = 0; f < o.fp8.size(); ++f) {
    const verify::Fp8Chain ch{o.fp8[f], o.fp8_overflow, o.fp8_divide, d};
    const double max_finite = traits(ch.format).max_finite;
    Fp8Stats& s = st[f];
    for (std::int64_t j = 0; j < spec.head_dim; ++j) {
      ++s.elements;
      const double exact = v.yd[j];
      // Outward by (|exact| + P) 2^-50: more than the exact value's own rounding (half an ulp of
      // it) and the rounding of the sum and difference here (half an ulp of each).
      const double w = (std::fabs(exact) + P[j]) * 0x1p-50;
      const double lo = exact - P[j] - w, hi = exact + P[j] + w;
      const verify::ChainRange range = verify::chain_range(ch, lo, hi, o.fp8_scale);
      const double c = verify::chain_trace(ch, g[j], o.fp8_scale).c;
      const double ideal =
          verify::fp8_correct(v.y, j, o.fp8_scale, o.fp8_divide, ch.format, ch.overflow);
      if (!range.single()) ++s.undetermined;
      if (std::fabs(o.fp8_divide ? exact / o.fp8_scale : exact * o.fp8_scale) > max_finite)
        ++s.overflowed;
      if (std::isnan(c) ? !range.nan_ok : c < range.lo || c > range.hi) ++s.outside;
      if (c == ideal || (std::isnan(c) && std::isnan(ideal))) continue;
      ++s.differ;
      if (std::isfinite(c) && std::isfinite(ideal))
        s.max_ulps = std::max<std::int64_t>(
            s.max_ulps, std::abs(fp8_rank(ch.format, c) - fp8_rank(ch.format, ideal)));
    }
  }
}

// The exact values of a unit's worst cases, in decimal: once per unit and kernel rather than at
// every new maximum (each of which made the oracle compute its whole vector in MPFR). An exact
// element depends only on its pair's inputs, which the worst case holds.
void fill_expected(WorstCase& w, const RopeSpec& spec, bool pair) {
  if (w.value < 0) return;
  std::vector<double> x(static_cast<std::size_t>(spec.head_dim), 0.0);
  x[static_cast<std::size_t>(w.pair_a)] = w.in_a;
  x[static_cast<std::size_t>(w.pair_b)] = w.in_b;
  // One position per axis, as reference::ExactVector asks apply_cached.
  const ref::Positions p(static_cast<std::size_t>(spec.n_axes()),
                         Mp(static_cast<long long>(w.position)));
  const auto y = ref::apply_cached(spec, p, x);
  w.expected = pair ? ref::to_decimal(y[w.pair_a], 25) + ", " + ref::to_decimal(y[w.pair_b], 25)
                    : ref::to_decimal(y[w.element], 25);
}

// A unit's reusable state: the oracle of its spec, the recipe-faithful reference, the vector
// being compared and the buffers the comparison fills.
struct SweepScratch {
  SweepScratch(const RopeSpec& spec, bool mpfr)
      : oracle(spec, mpfr ? ref::OracleMode::mpfr : ref::OracleMode::fast), recipe(spec, mpfr) {}
  ref::Oracle oracle;
  RecipeReference recipe;
  VectorRef vr;
  std::vector<Answers> answers;  // per kernel, for the vector being compared
  std::vector<Policy> slot_policy;
  std::vector<int> slot;  // per kernel: its recipe slot
  std::vector<std::vector<bounds::PairBound>> bnd;
  std::vector<double> fp8_p;  // add_fp8's per-element bounds
};

// One sampled position: every head vector against every supported kernel.
void sweep_position(SweepResult& R, const std::vector<KernelRun>& runs, const Options& o,
                    const RopeSpec& spec, Dtype d, int si, const SweepInputs& in, std::size_t p,
                    SweepScratch& W) {
  const std::int64_t m = in.positions[p];
  const double mag = magnitude_f64(spec), u = unit_roundoff(d);
  // The recipe slots (one per distinct recipe key, in key order as before) and the derived bound
  // per kernel and pair at this position (independent of the input).
  std::map<int, Policy> recipes;
  W.bnd.resize(runs.size());
  for (std::size_t k = 0; k < runs.size(); ++k) {
    W.bnd[k].clear();
    if (!runs[k].supported) continue;
    const Policy& pol = runs[k].checker.policy();
    recipes.emplace(recipe_key(pol), pol);
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i)
      W.bnd[k].push_back(runs[k].checker.bound(i, static_cast<double>(m)));
  }
  W.slot_policy.clear();
  std::map<int, int> slot_of;
  for (const auto& [key, pol] : recipes) {
    slot_of[key] = static_cast<int>(W.slot_policy.size());
    W.slot_policy.push_back(pol);
  }
  W.slot.assign(runs.size(), -1);
  for (std::size_t k = 0; k < runs.size(); ++k)
    if (runs[k].supported) W.slot[k] = slot_of.at(recipe_key(runs[k].checker.policy()));
  W.recipe.set_position(m, W.slot_policy);
  // The exact trig of the position, shared by its heads.
  const ref::Rotation rot = W.oracle.at({m});
  VectorRef& vr = W.vr;
  vr.spec_index = si;
  vr.position = m;
  for (std::int64_t h = 0; h < kHeads; ++h) {
    const std::size_t v = p * kHeads + static_cast<std::size_t>(h);
    vr.x = &in.vectors[v];
    rot.apply(in.vectors[v].data(), vr.y);
    W.recipe.set_vector(in.vectors[v].data());
    fill_exact(vr, spec, d);
    fill_norms(vr, spec, mag);
    fill_angle_errors(vr, spec, W.recipe, static_cast<int>(W.slot_policy.size()), u);
    answer(W.answers, runs, v, W.slot, spec, vr, d, W.recipe, u);
    for (std::size_t k = 0; k < runs.size(); ++k) {
      if (!runs[k].supported) continue;
      auto& st = R.stats[k];
      ++st.n_vectors;
      const double* g = runs[k].got[v];
      add_elements(st, spec, vr, g, W.answers[k].diff);
      add_pairs(st, R.oct[k][static_cast<std::size_t>(octave_of(m))], spec, vr, g, W.answers[k],
                W.slot[k], W.bnd[k]);
      if (!R.fp8[k].empty()) add_fp8(R.fp8[k], o, spec, d, vr, g, W.bnd[k], W.fp8_p);
    }
  }
}

}  // namespace

SweepResult sweep_unit(const Setup& S, int di, int si, int bi) {
  const Dtype d = S.o.dtypes[di];
  const RopeSpec& spec = S.specs[si];
  const auto nk = S.kernels.size();
  const SweepInputs in = draw_inputs(S, di, si, bi);
  SweepResult R;
  R.stats.resize(nk);
  R.oct.resize(nk);
  R.supported.assign(nk, 0);
  R.fp8.assign(nk, std::vector<Fp8Stats>(S.o.fp8.size()));
  std::vector<KernelRun> runs;
  for (std::size_t k = 0; k < nk; ++k) {
    runs.push_back({verify::PairChecker(S.kernels[k]->policy(d), spec, d), false, {}});
    runs[k].supported =
        S.kernels[k]->supports(spec, d) &&
        run_kernel(*S.kernels[k], spec, d, in.positions, kHeads, in.vectors, runs[k].got);
    R.supported[k] = runs[k].supported;
  }
  SweepScratch W(spec, S.o.oracle_mpfr);
  for (std::size_t p = 0; p < in.positions.size(); ++p)
    sweep_position(R, runs, S.o, spec, d, si, in, p, W);
  for (auto& st : R.stats) {
    fill_expected(st.worst_ulp, spec, false);
    fill_expected(st.worst_pair, spec, true);
  }
  R.counts.vectors = W.oracle.vectors();
  R.counts.fallbacks = W.oracle.fallbacks();
  R.counts.recipe_pairs = W.recipe.questions();
  R.counts.recipe_fallbacks = W.recipe.fallbacks();
  return R;
}

// ---- searches -----------------------------------------------------------------------------------
namespace {

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
  if (!run_kernel(*S.kernels[k], spec, d, pos, heads, in, out)) return;
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

// ---- special values -----------------------------------------------------------------------------
// The policy documented by the property suite (ZeroPositionIsIdentity and the special-value
// tests):
//   finite inputs at m = 0: output == input bit for bit, except that the sign of a zero is not
//   part of the contract (properties/lib/impl.hpp);
//   finite inputs (incl. +-0, subnormals) at m != 0: outputs finite, within the derived bound;
//   a NaN or +-inf in a pair at m = 0: each output is its own input or NaN (a NaN stays NaN);
//   at m != 0: both outputs NaN when a NaN is in the pair, both non-finite for an inf;
//   every other pair is unaffected (bit-identical to the run with that pair zeroed).
namespace {

struct SpecialInput {
  const char* what;
  double a, b;
};

std::vector<SpecialInput> special_inputs(const Policy& pol, Dtype d) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double sub = min_subnormal(d);
  // Largest values well inside the range of both the storage and the declared arithmetic format
  // (table_f32 on f64 data cannot hold f64 magnitudes beyond f32's range; that is its policy).
  const Dtype range_d = traits(pol.arithmetic).emax < traits(d).emax ? pol.arithmetic : d;
  const double big = round_to_dtype(max_finite(range_d) / 4, d);
  return {{"+0, +0", 0.0, 0.0},
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
}

// Does the output pair g follow the policy for input pair x at position m? Sets `expect` to the
// policy's wording.
bool follows_policy(const verify::PairChecker& pc, const std::vector<double>& x, const double* g,
                    std::int64_t m, std::string& expect) {
  const Dtype d = pc.dtype();
  const Policy& pol = pc.policy();
  const bool finite_in = std::isfinite(x[0]) && std::isfinite(x[1]);
  const bool has_nan = std::isnan(x[0]) || std::isnan(x[1]);
  // A kernel whose declared arithmetic is narrower than the storage (table_f32 on f64)
  // computes x*1 - y*0 = round_A(x) at m = 0 (the property suite's rule).
  const bool narrow = traits(pol.arithmetic).digits < traits(d).digits;
  auto same = [&](double got, double in) {
    const double want = narrow ? round_to_dtype(in, pol.arithmetic) : in;
    return want == 0 ? got == 0 : (narrow ? got == want : bits_of(got, d) == bits_of(in, d));
  };
  bool ok = true;
  if (finite_in && m == 0) {
    // Zeros stay zero but their sign is not part of the contract (x*1 - (-0)*0 = +0 in IEEE).
    expect = narrow ? "input rounded to the arithmetic format (zeros: any sign)"
                    : "input bit for bit (zeros: any sign)";
    for (int j = 0; j < 2; ++j) ok = ok && same(g[j], x[j]);
  } else if (finite_in) {
    expect = "finite, within the derived bound";
    const auto y = ref::apply_blocked(pc.spec(), Mp(static_cast<long long>(m)), x);
    const auto p = pc.check(0, static_cast<double>(m), x[0], x[1], g[0], g[1], y[0], y[1]);
    ok = p.finite && p.within();
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
  return ok;
}

}  // namespace

SpecialValues special_values(const Setup& S, std::size_t k, int di) {
  const Dtype d = S.o.dtypes[di];
  const Kernel& K = *S.kernels[k];
  RopeSpec spec;
  spec.head_dim = 8;
  spec.base = 10000;
  spec.layout = Layout::interleaved;
  spec = spec.normalized();
  SpecialValues out;
  const auto inputs = special_inputs(K.policy(d), d);
  if (!K.supports(spec, d)) return out;
  const verify::PairChecker pc(K.policy(d), spec, d);
  for (std::int64_t m : {std::int64_t{0}, std::int64_t{1000}}) {
    for (const auto& c : inputs) {
      // Pair 0 holds the case; pairs 1..3 hold ordinary values to check isolation.
      std::vector<double> x{c.a, c.b, 0.5, -1.25, 2.0, 0.75, -0.375, 1.5};
      for (auto& v : x) v = std::isfinite(v) ? round_to_dtype(v, d) : v;
      std::vector<double> x0 = x;
      x0[0] = x0[1] = 0;
      Outputs o1, o0;
      if (!run_kernel(K, spec, d, {m}, 1, {x}, o1) || !run_kernel(K, spec, d, {m}, 1, {x0}, o0))
        continue;
      const double* g = o1[0];
      SpecialCase sc{c.what, m, x[0], x[1], g[0], g[1], {}, true, false};
      bool ok = follows_policy(pc, x, g, m, sc.policy);
      for (int j = 2; j < 8; ++j)
        sc.other_pairs_unaffected =
            sc.other_pairs_unaffected && bits_of(g[j], d) == bits_of(o0[0][j], d);
      if (!sc.other_pairs_unaffected) sc.policy += "; other pairs unaffected";
      sc.follows_policy = ok && sc.other_pairs_unaffected;
      if (!sc.follows_policy) ++out.violations;
      out.cases.push_back(std::move(sc));
    }
  }
  return out;
}

// ---- dynamic NTK composition --------------------------------------------------------------------
// Dynamic NTK is length-dependent: R_a R_b = R_{a+b} holds for rotations from one table (one
// sequence length), not across tables built for different lengths. A KV cache rotated while the
// sequence was L0 tokens long and a query rotated after it grew to L use different bases once
// L > L0: the relative angle of a pair at offset c then carries a * (theta_i(L) - theta_i(L0))
// for the cached token's position a. Exact (MP) ladders, no kernel involved.
DynamicComposition dynamic_composition() {
  const RopeSpec base = [] {
    for (const auto& vc : variant_cases())
      if (vc.spec.scaling.kind == ScalingKind::dynamic) return vc.spec;
    return RopeSpec{};
  }();
  const std::int64_t L0 = base.scaling.max_position_embeddings;
  DynamicComposition dc{base, L0, {}};
  dc.spec.scaling.seq_len = L0;
  const auto th0 = ref::inv_freqs(dc.spec);
  for (std::int64_t L : {L0 / 2, L0 - 1, L0, L0 + 1, L0 + L0 / 8, 2 * L0, 8 * L0}) {
    RopeSpec s = base;
    s.scaling.seq_len = L;
    const auto th = ref::inv_freqs(s);
    ref::Mp worst(0);
    for (std::size_t i = 0; i < th.size(); ++i) {
      const ref::Mp dlt = abs((th[i] - th0[i]) * ref::Mp(static_cast<long long>(L0 - 1)));
      if (dlt > worst) worst = dlt;
    }
    dc.rows.push_back({L, dynamic_base_f64(s), static_cast<double>(worst), worst == 0});
  }
  return dc;
}

}  // namespace ropecheck::reports::detail
