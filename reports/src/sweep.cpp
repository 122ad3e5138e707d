// The sweep unit: kernel x dtype x spec x position bucket against the exact reference and against
// a recipe-faithful reference (sweep.hpp). Every pair error is verify::pair_error_u and every
// bound verify::PairChecker::bound, the same figures the property suite and `check` use. The
// other work units: search.cpp (safe context, score offset), special.cpp (special values, dynamic
// NTK composition).
#include "sweep.hpp"

#include "recipe.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/verify/fp8_chain.hpp"
#include "ropecheck/verify/verify.hpp"
#include "sample.hpp"

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

int sampled_buckets(std::int64_t max_position) {
  int n = 0;
  while (n < kNumBuckets && kBuckets[n].lo <= max_position) ++n;
  return n;
}

namespace {

constexpr std::int64_t kHeads = 4;  // vectors per sampled position (they share the exact trig)

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
  std::vector<char> served;  // per position, when the batch was refused (empty: every position)
  bool serves(std::size_t p) const { return supported && (served.empty() || served[p] != 0); }
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
            std::size_t p, const std::vector<int>& slot, const RopeSpec& spec, const VectorRef& vr,
            Dtype d, RecipeReference& rr, double u) {
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
    if (!runs[k].serves(p)) continue;
    const double* g = runs[k].got[v];
    Answers& a = A[k];
    a.diff.resize(hd);
    a.e.resize(np);
    a.er.resize(np);
    for (std::size_t i = 0; i < np; ++i) {
      const auto [ea, eb] = spec.pair(static_cast<std::int64_t>(i));
      std::size_t twin = k;
      for (std::size_t k2 = 0; k2 < k && twin == k; ++k2)
        if (runs[k2].serves(p) && same(runs[k2].got[v][ea], g[ea]) &&
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
// by_bound: the report does not reproduce this kernel's angles on this spec (recipe_reproduced),
// so "kernel vs the rotation by the recipe's angles" would hold the difference between the
// kernel's own angle steps and the approximation -- an angle error of the same size as the angle
// error itself (a few f32 ulp of theta'_i times |m|) -- and call an angle-limited cell
// rotation-limited, with a fix that does not fix it. Instead each pair's measured error e is
// divided in the proportion of the derived bound's terms (src/bounds): angle part e A / sqrt(A^2
// + R^2), rotation part e R / sqrt(A^2 + R^2), A the bound's angle term, R the sum of its trig,
// arithmetic, scale, storage and second-order terms. The squares add up to e^2 (the share stays a
// share of the measured error); the bucket says "split": "bound".
void add_pairs(ErrorStats& st, OctaveStats& oc, const RopeSpec& spec, const VectorRef& v,
               const double* g, const Answers& ans, int slot,
               const std::vector<bounds::PairBound>& bnd, bool by_bound) {
  const auto& au_recipe = v.angle_u[static_cast<std::size_t>(slot)];
  if (by_bound) st.split_by_bound = true;
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [a, b] = spec.pair(i);
    const double n = v.norm[static_cast<std::size_t>(i)];
    const double e = ans.e[i];
    double angle_u = au_recipe[i], er = ans.er[i];
    if (by_bound) {
      const bounds::PairBound& pb = bnd[static_cast<std::size_t>(i)];
      const double A = pb.angle,
                   R = pb.trig + pb.arithmetic + pb.scale + pb.storage + pb.second_order;
      const double h = std::hypot(A, R);
      angle_u = h > 0 ? e * (A / h) : 0.0;
      er = h > 0 ? e * (R / h) : e;
    }
    ++st.n_pairs;
    ++oc.n_pairs;
    st.sum_pair2 += e * e;
    oc.sum_pair2 += e * e;
    if (e > oc.max_pair_u || std::isnan(e)) oc.max_pair_u = e;
    st.max_angle_u = std::fmax(st.max_angle_u, angle_u);
    if (er > st.max_rot_u || std::isnan(er)) st.max_rot_u = er;
    st.sum_angle2 += angle_u * angle_u;
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
  std::vector<char> by_bound;  // per kernel: recipe_reproduced is false on this spec
  std::vector<double> fp8_p;   // add_fp8's per-element bounds
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
    if (!runs[k].serves(p)) continue;
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
  W.by_bound.assign(runs.size(), 0);
  for (std::size_t k = 0; k < runs.size(); ++k)
    if (runs[k].serves(p)) {
      W.slot[k] = slot_of.at(recipe_key(runs[k].checker.policy()));
      W.by_bound[k] = !recipe_reproduced(runs[k].checker.policy(), spec);
    }
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
    answer(W.answers, runs, v, p, W.slot, spec, vr, d, W.recipe, u);
    for (std::size_t k = 0; k < runs.size(); ++k) {
      if (!runs[k].serves(p)) continue;
      auto& st = R.stats[k];
      ++st.n_vectors;
      const double* g = runs[k].got[v];
      add_elements(st, spec, vr, g, W.answers[k].diff);
      add_pairs(st, R.oct[k][static_cast<std::size_t>(octave_of(m))], spec, vr, g, W.answers[k],
                W.slot[k], W.bnd[k], W.by_bound[k] != 0);
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
  R.refused.assign(nk, 0);
  R.refused_min.assign(nk, std::numeric_limits<std::int64_t>::max());
  R.fp8.assign(nk, std::vector<Fp8Stats>(S.o.fp8.size()));
  std::vector<KernelRun> runs;
  for (std::size_t k = 0; k < nk; ++k) {
    runs.push_back({verify::PairChecker(S.kernels[k]->policy(d), spec, d), false, {}});
    const bool sup = S.kernels[k]->supports(spec, d);
    const KernelStatus st = sup ? run_kernel_status(*S.kernels[k], spec, d, in.positions, kHeads,
                                                    in.vectors, runs[k].got)
                                : KernelStatus::unsupported;
    runs[k].supported = st == KernelStatus::ok;
    // Refused as a batch (unsupported; an error stays a failed unit): one position per call, so
    // the positions below an engine's cache extent are still measured and the refused ones
    // counted (the headline says "not run" from the smallest refused position on).
    if (sup && st == KernelStatus::unsupported &&
        run_kernel_per_position(*S.kernels[k], spec, d, in.positions, kHeads, in.vectors,
                                runs[k].got, runs[k].served)) {
      runs[k].supported = true;
      for (std::size_t t = 0; t < in.positions.size(); ++t)
        if (!runs[k].served[t]) {
          ++R.refused[k];
          R.refused_min[k] = std::min(R.refused_min[k], in.positions[t]);
        }
    }
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
}  // namespace ropecheck::reports::detail
