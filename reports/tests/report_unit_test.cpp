// Unit tests of the report library: statistics, the recipe-faithful reference, the validators,
// atomic writes, baseline comparison and determinism of a small report.
#include "../src/recipe.hpp"
#include "ropecheck/bounds.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/kernels/simd_info.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/reports/stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

namespace ropecheck::reports {
namespace {

namespace ref = ropecheck::reference;
namespace fs = std::filesystem;
using nlohmann::json;

TEST(ReportStats, UlpBinsHaveTheDocumentedEdges) {
  EXPECT_EQ(ulp_bin(0.0), 0);
  EXPECT_EQ(ulp_bin(1e-300), 1);
  EXPECT_EQ(ulp_bin(0.5), 1);
  EXPECT_EQ(ulp_bin(std::nextafter(0.5, 1.0)), 2);
  EXPECT_EQ(ulp_bin(1.0), 2);
  EXPECT_EQ(ulp_bin(std::nextafter(1.0, 2.0)), 3);  // (1, 2]
  EXPECT_EQ(ulp_bin(2.0), 3);
  EXPECT_EQ(ulp_bin(3.0), 4);  // (2, 4]
  EXPECT_EQ(ulp_bin(std::ldexp(1.0, 20)), kUlpBins - 2);
  EXPECT_EQ(ulp_bin(std::ldexp(1.0, 20) * 1.5), kUlpBins - 1);
  EXPECT_EQ(ulp_bin(INFINITY), kUlpBins - 1);
  EXPECT_EQ(ulp_bin(NAN), kUlpBins - 1);
  EXPECT_EQ(ulp_bin_label(3), "(2^0, 2^1]");
}

TEST(ReportStats, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  EXPECT_EQ(percentile_sorted(v, 0.5), 500);
  EXPECT_EQ(percentile_sorted(v, 0.99), 990);
  EXPECT_EQ(percentile_sorted(v, 0.999), 999);
  EXPECT_EQ(percentile_sorted(v, 1.0), 1000);
  EXPECT_TRUE(std::isnan(percentile_sorted({}, 0.5)));
  EXPECT_EQ(octave_of(0), 0);
  EXPECT_EQ(octave_of(1), 1);
  EXPECT_EQ(octave_of(3), 2);
  EXPECT_EQ(octave_of(4), 3);
  EXPECT_EQ(octave_of(-4), 3);
}

TEST(ReportStats, SketchPercentilesAreWithinTheDocumentedResolution) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> ld(-1.0, 2.0);
  std::vector<double> v;
  QuantileSketch q;
  for (int i = 0; i < 20000; ++i) {
    const double x = i % 50 == 0 ? 0.0 : ld(rng);
    v.push_back(x);
    q.add(x);
  }
  std::sort(v.begin(), v.end());
  for (double p : {0.01, 0.02, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const double exact = percentile_sorted(v, p), got = q.percentile(p);
    EXPECT_GE(got, exact) << p;                          // upper edge: never below
    EXPECT_LE(got, exact * (1 + 1.0 / 256) + 0.0) << p;  // 256 bins per binade
  }
  EXPECT_EQ(q.percentile(0.01), 0.0);  // 2% zeros: exact
  q.add(INFINITY);
  EXPECT_EQ(q.percentile(1.0), INFINITY);
}

TEST(ReportStats, MergeEqualsOneAccumulatorAndKeepsTheFirstWorstCase) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> ud(0, 3);
  ErrorStats all, a, b;
  for (int i = 0; i < 200; ++i) {
    const double e = ud(rng);
    all.add_element(e);
    (i < 120 ? a : b).add_element(e);
  }
  a.worst_ulp.value = 2.5;
  a.worst_ulp.position = 1;
  b.worst_ulp.value = 2.5;  // tie: the earlier (a) must win
  b.worst_ulp.position = 2;
  a.merge(b);
  EXPECT_EQ(a.n_elements, all.n_elements);
  EXPECT_EQ(a.hist, all.hist);
  EXPECT_EQ(a.gt_1ulp, all.gt_1ulp);
  EXPECT_EQ(a.ulps.count(), all.ulps.count());
  for (double q : {0.5, 0.99, 0.999}) EXPECT_EQ(a.ulps.percentile(q), all.ulps.percentile(q));
  EXPECT_EQ(a.worst_ulp.position, 1);
  ErrorStats c;
  c.worst_ulp.value = 2.6;
  c.worst_ulp.position = 3;
  a.merge(c);
  EXPECT_EQ(a.worst_ulp.position, 3);
  // A tie goes to the lower spec index whatever the order: run() folds a bucket's units in spec
  // order, merge() folds shard reports in the order they were given.
  ErrorStats s3, s1;
  s3.worst_ulp.value = s1.worst_ulp.value = 2.0;
  s3.worst_ulp.spec_index = 3;
  s1.worst_ulp.spec_index = 1;
  ErrorStats fwd = s3, rev = s1;
  fwd.merge(s1);
  rev.merge(s3);
  EXPECT_EQ(fwd.worst_ulp.spec_index, 1);
  EXPECT_EQ(rev.worst_ulp.spec_index, 1);
}

// The exact rotation used by the reports agrees with the reference's own blocked product.
// Shard merges add exact sums: the result must not depend on grouping or order, and value() must
// be the once-rounded exact sum (cases where naive double summation is known to be wrong).
TEST(ReportStats, ExactSumIsExactAndOrderIndependent) {
  auto sum = [](std::initializer_list<double> v) {
    ExactSum s;
    for (double x : v) s += x;
    return s;
  };
  EXPECT_EQ(sum({1e100, 1.0, -1e100}).value(), 1.0);  // naive: 0
  ExactSum tenth;
  for (int i = 0; i < 10; ++i) tenth += 0.1;
  EXPECT_EQ(tenth.value(), 1.0);  // exact 1 + 5.55e-17 rounds to 1; naive gives 1 - 2^-53
  const double two53 = std::ldexp(1.0, 53);
  EXPECT_EQ(sum({two53, 1.0}).value(), two53);                            // tie -> even
  EXPECT_EQ(sum({two53, 1.0, std::ldexp(1.0, -30)}).value(), two53 + 2);  // above the tie
  EXPECT_EQ(sum({two53, 3.0}).value(), two53 + 4);                        // tie -> even (up)
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(sum({tiny, tiny, tiny}).value(), 3 * tiny);
  EXPECT_EQ(sum({-2.5, 0.5}).value(), -2.0);
  EXPECT_EQ(sum({std::numeric_limits<double>::max(), std::numeric_limits<double>::max()}).value(),
            std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(
      sum({1.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()})
          .value()));
  EXPECT_TRUE(std::isnan(sum({std::nan("")}).value()));
  EXPECT_EQ(sum({}).str(), "0");
  // Grouping and order: random magnitudes over 2^-60 .. 2^60, both signs.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> ex(-60, 60);
  std::vector<double> v;
  for (int i = 0; i < 2000; ++i) v.push_back((i % 3 ? 1 : -1) * std::exp2(ex(rng)));
  ExactSum all, a, b, c;
  for (double x : v) all += x;
  for (std::size_t i = 0; i < v.size(); ++i) (i % 3 == 0 ? a : i % 3 == 1 ? b : c) += v[i];
  ExactSum ab = a;
  ab += b;
  ab += c;
  ExactSum cb = c;
  cb += b;
  cb += a;
  EXPECT_EQ(ab.str(), all.str());
  EXPECT_EQ(cb.str(), all.str());
  EXPECT_EQ(ab.value(), all.value());
  // Text round trip, and a naive sum close to the exact one (sanity of value()).
  EXPECT_EQ(ExactSum::parse(all.str()).str(), all.str());
  EXPECT_EQ(ExactSum::parse(all.str()).value(), all.value());
  long double naive = 0;
  for (double x : v) naive += x;
  EXPECT_NEAR(all.value(), static_cast<double>(naive),
              1e-9 * std::fabs(static_cast<double>(naive)));
  for (const char* bad : {"", "0x", "0xzzp0", "1.5", "0x1p", "0x1p-2000"})
    EXPECT_THROW(ExactSum::parse(bad), std::invalid_argument) << bad;
}

TEST(ReportRecipe, ExactRotationMatchesReferenceApplyBlocked) {
  ref::set_precision_bits(160);
  for (Layout l : {Layout::interleaved, Layout::half}) {
    RopeSpec s;
    s.head_dim = 13;  // odd: one pass-through dim
    s.base = 500000;
    s.layout = l;
    s = s.normalized();
    std::vector<double> x;
    for (int j = 0; j < 13; ++j) x.push_back(std::ldexp(j - 6.5, -j % 5));
    for (std::int64_t m : {0LL, 1LL, 4097LL, 1000003LL, -77LL}) {
      const auto a = detail::rotate(s, detail::exact_trig(s, m), x);
      const auto b = ref::apply_blocked(s, ref::Mp(static_cast<long long>(m)), x);
      for (int j = 0; j < 13; ++j) {
        // Both are exact to ~2^-150 relative; 2^-(160-20) leaves room for different op orders.
        EXPECT_LE(std::fabs(static_cast<double>(a[j] - b[j])), std::ldexp(1.0, -140) * 20)
            << "m=" << m << " j=" << j;
      }
    }
  }
}

// The recipe-faithful reference explains a kernel's angle error: against it, what remains is
// within the non-angle part of the derived bound, while against the exact spec the angle term
// dominates at long context. A wrong recipe reproduction (e.g. f64 angles for table_f32) fails.
TEST(ReportRecipe, RecipeFaithfulReferenceLeavesOnlyTableAndArithmeticError) {
  ref::set_precision_bits(160);
  for (const char* kn : {"table_f32", "scalar", "simd"}) {
    const Kernel* k = find_builtin_kernel(kn);
    ASSERT_NE(k, nullptr);
    RopeSpec s;
    s.head_dim = 64;
    s.base = 10000;
    s = s.normalized();
    const Dtype d = Dtype::f32;
    const Policy pol = k->policy(d);
    const double u = unit_roundoff(d);
    std::mt19937_64 rng(3);
    std::normal_distribution<double> nd;
    std::vector<double> x(64);
    for (auto& v : x) v = round_to_dtype(nd(rng), d);
    std::vector<float> in(x.begin(), x.end()), out(64);
    double max_angle_u = 0;
    for (std::int64_t m : {3LL, 70001LL, 1000003LL, 16777219LL}) {
      ASSERT_EQ(apply_contiguous(*k, s, d, 1, 1, &m, in.data(), out.data()), KernelStatus::ok);
      const auto yr = detail::rotate(s, detail::recipe_trig(pol, s, m), x);
      const auto ye = detail::rotate(s, detail::exact_trig(s, m), x);
      for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
        const auto [a, b] = s.pair(i);
        const auto pb = bounds::pair_error_bound(pol, s, d, i, static_cast<double>(m));
        const double n = std::hypot(x[a], x[b]);
        const double rot = std::hypot(static_cast<double>(ref::exact(out[a]) - yr[a]),
                                      static_cast<double>(ref::exact(out[b]) - yr[b])) /
                           n / u;
        const double ang =
            std::hypot(static_cast<double>(yr[a] - ye[a]), static_cast<double>(yr[b] - ye[b])) / n /
            u;
        max_angle_u = std::max(max_angle_u, ang);
        // Everything but the angle term of the derived bound (bounds.cpp, terms 2-6).
        const double non_angle = (pb.total_u(n) - pb.angle) * (1 + bounds::kSlack);
        EXPECT_LE(rot, non_angle) << kn << " m=" << m << " pair " << i;
        EXPECT_LE(ang, pb.angle * (1 + bounds::kSlack) + 1e-9) << kn << " m=" << m << " pair " << i;
      }
    }
    if (pol.recipe == AngleRecipe::hf_f32)
      EXPECT_GT(max_angle_u, 1000.0) << "f32 angles at m ~ 2^24 are off by far more than 1000u";
    else
      EXPECT_LT(max_angle_u, 1.0) << "f64 angles are far below one f32 u";
  }
}

// ladder_f32: the recipe-faithful angle is ggml's f32 ladder bit for bit. Transcribed here the
// way ggml_rope_cache_init walks it (i0 in steps of 2, theta *= theta_scale after each pair,
// rope_yarn's freq_scale * (theta / ff)), on every layout's ladder (axial restarts per section),
// unscaled, linear and freq_factors; recipe_trig uses those angles, the generic f32 path for
// the other kinds; the angles lie within the bound table's ladder_f32 angle term.
TEST(ReportRecipe, LadderF32IsGgmlsFloatLadderBitForBit) {
  ref::set_precision_bits(160);
  const Policy pol{Dtype::f32, Dtype::f32, Dtype::f32, AngleRecipe::ladder_f32, false, ""};
  const auto ggml_cache = [](const RopeSpec& s, std::int64_t dim, std::int64_t first,
                             std::int64_t n, std::int64_t p) {
    const Scaling& sc = s.scaling;
    const float theta_scale = powf(static_cast<float>(s.base), -2.0f / static_cast<float>(dim));
    const float freq_scale =
        sc.kind == ScalingKind::linear ? 1.0f / static_cast<float>(sc.factor) : 1.0f;
    std::vector<float> angles;
    float theta = static_cast<float>(p);
    for (std::int64_t i0 = 0; i0 < 2 * n; i0 += 2) {
      const float ff = sc.kind == ScalingKind::freq_factors
                           ? static_cast<float>(sc.freq_factors[first + i0 / 2])
                           : 1.0f;
      angles.push_back(freq_scale * (theta / ff));
      theta *= theta_scale;
    }
    return angles;
  };
  std::vector<RopeSpec> specs;
  for (double base : {1e4, 5e5, 3.7})
    for (std::int64_t hd : {8, 64, 128, 256}) {
      RopeSpec s;
      s.head_dim = hd;
      s.base = base;
      s.layout = hd == 64 ? Layout::half : Layout::interleaved;
      specs.push_back(s.normalized());
      s.scaling.kind = ScalingKind::linear;
      s.scaling.factor = hd == 128 ? 3.3 : 8;
      specs.push_back(s.normalized());
      s.scaling = {};
      s.scaling.kind = ScalingKind::freq_factors;
      for (std::int64_t i = 0; i < hd / 2; ++i) s.scaling.freq_factors.push_back(1 + 0.37 * i);
      specs.push_back(s.normalized());
    }
  RopeSpec ax;  // axial 2-D: two ladders, base^(-2j/(2 sections[a]))
  ax.head_dim = 24;
  ax.layout = Layout::axial;
  ax.sections = {4, 8};
  specs.push_back(ax.normalized());
  for (const RopeSpec& s : specs)
    for (std::int64_t m : {1LL, 4095LL, 70001LL, 16777219LL, 2147483647LL, -300LL}) {
      const detail::Trig tr = detail::recipe_trig(pol, s, m);
      std::int64_t first = 0;
      const std::vector<std::int64_t> sections =
          s.layout == Layout::axial ? s.sections : std::vector<std::int64_t>{s.n_pairs()};
      for (std::int64_t n : sections) {
        const auto want = ggml_cache(s, s.ladder(first).second, first, n, m);
        for (std::int64_t k = 0; k < n; ++k) {
          const std::int64_t i = first + k;
          const double got = detail::recipe_angle(pol, s, i, m);
          EXPECT_EQ(got, static_cast<double>(want[k])) << describe(s) << " m=" << m << " i=" << i;
          EXPECT_TRUE(tr.c[i] == cos(ref::exact(got)) && tr.s[i] == sin(ref::exact(got)))
              << describe(s) << " m=" << m << " i=" << i;
          const auto ab = bounds::angle_error_bound(pol, s, i, static_cast<double>(m));
          const double err =
              static_cast<double>(abs(ref::exact(got) - ref::angle(s, i, ref::Mp(m))));
          EXPECT_LE(err, ab.rad * (1 + bounds::kSlack)) << describe(s) << " m=" << m << " i=" << i;
        }
        first += n;
      }
    }
  // Its own key (its angles are neither hf_f32's nor an f32 pow_product's).
  Policy hf = pol, pf = pol;
  hf.recipe = AngleRecipe::hf_f32;
  pf.recipe = AngleRecipe::pow_product;
  EXPECT_NE(detail::recipe_key(pol), detail::recipe_key(hf));
  EXPECT_NE(detail::recipe_key(pol), detail::recipe_key(pf));
  const RopeSpec& s128 = specs[6];  // base 1e4, head_dim 128, unscaled
  EXPECT_NE(detail::recipe_angle(pol, s128, 40, 4095), detail::recipe_angle(hf, s128, 40, 4095));
  // Other kinds: the generic f32 path, the same as an f32 pow_product's.
  RopeSpec ll = s128;
  ll.scaling = llama31_scaling();
  const auto a = detail::recipe_trig(pol, ll, 70001), b = detail::recipe_trig(pf, ll, 70001);
  for (std::int64_t i = 0; i < ll.n_pairs(); ++i) EXPECT_TRUE(a.c[i] == b.c[i] && a.s[i] == b.s[i]);
}

// RecipeReference answers exactly what the MP definitions give: RN(rotate(recipe) - apply_cached)
// for the angle error and RN(got - rotate(recipe)) for the rotation error, bit for bit, whether
// its double-double path or its MPFR fallback answered (m = 0 and pair 0, whose angles agree,
// are the fallback's and the identity shortcut's cases; f64 outputs always take MPFR).
TEST(ReportRecipe, RecipeReferenceMatchesTheMpDefinitionsBitForBit) {
  ref::set_precision_bits(160);
  std::vector<RopeSpec> specs;
  for (Layout l : {Layout::interleaved, Layout::half}) {
    RopeSpec s;
    s.head_dim = 32;
    s.base = 10000;
    s.layout = l;
    specs.push_back(s.normalized());
  }
  RopeSpec yarn = specs[0];  // scaled: magnitude != 1
  yarn.scaling = deepseek_v3_yarn_scaling();
  specs.push_back(yarn.normalized());
  std::vector<Policy> pols;
  for (const char* kn : {"table_f32", "scalar", "simd"})
    for (Dtype d : {Dtype::f32, Dtype::f64}) pols.push_back(find_builtin_kernel(kn)->policy(d));
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd;
  for (const RopeSpec& s : specs) {
    detail::RecipeReference rr(s);
    for (std::int64_t m : {0LL, 1LL, 77LL, 4095LL, 70001LL, 1000003LL}) {
      rr.set_position(m, pols);
      for (int v = 0; v < 3; ++v) {
        std::vector<double> x(32);
        for (auto& e : x) e = round_to_dtype(nd(rng), Dtype::bf16);
        rr.set_vector(x.data());
        const auto y = ref::apply_cached(s, ref::Mp(static_cast<long long>(m)), x);
        for (std::size_t r = 0; r < pols.size(); ++r) {
          const auto yr = detail::rotate(s, detail::recipe_trig(pols[r], s, m), x);
          for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
            const auto [a, b] = s.pair(i);
            double da = 0, db = 0;
            rr.angle_diff(static_cast<int>(r), i, da, db);
            EXPECT_EQ(std::fabs(da), std::fabs(static_cast<double>(yr[a] - y[a])))
                << describe(s) << " m=" << m << " i=" << i;
            EXPECT_EQ(std::fabs(db), std::fabs(static_cast<double>(yr[b] - y[b])));
            // A kernel-like output: the exact value rounded to f32 (or f64), nudged.
            for (Dtype d : {Dtype::f32, Dtype::f64}) {
              const double ga = ref::round_to(y[a], d), gb = ref::round_to(y[b], d) * (v == 2);
              double ra = 0, rb = 0;
              rr.rotation_diff(static_cast<int>(r), i, ga, gb, d, ra, rb);
              EXPECT_EQ(std::fabs(ra), std::fabs(static_cast<double>(ref::exact(ga) - yr[a])))
                  << describe(s) << " m=" << m << " i=" << i << " " << name(d);
              EXPECT_EQ(std::fabs(rb), std::fabs(static_cast<double>(ref::exact(gb) - yr[b])));
            }
          }
        }
      }
    }
    // Most answers come from double-double; the fallback was exercised too.
    EXPECT_LT(rr.fallbacks() * 2, rr.questions()) << describe(s);
    EXPECT_GT(rr.fallbacks(), 0) << describe(s);
  }
}

// exact_diff (the sweep's f64 outputs) answers RN(got - y) for apply_cached's y, as
// ExactVector::diff does, bit for bit (it answers false when it cannot decide).
TEST(ReportRecipe, ExactDiffMatchesTheMpDefinitionBitForBit) {
  ref::set_precision_bits(161);
  RopeSpec s;
  s.head_dim = 32;
  s.base = 10000;
  s.layout = Layout::half;
  for (const RopeSpec& sp : {s.normalized(), [&] {
                               RopeSpec y = s;
                               y.scaling = deepseek_v3_yarn_scaling();
                               return y.normalized();
                             }()}) {
    detail::RecipeReference rr(sp);
    const std::vector<Policy> pols{find_builtin_kernel("scalar")->policy(Dtype::f64)};
    std::mt19937_64 rng(9);
    std::normal_distribution<double> nd;
    int answered = 0;
    for (std::int64_t m : {1LL, 77LL, 4095LL, 1000003LL}) {
      rr.set_position(m, pols);
      std::vector<double> x(32);
      for (auto& e : x) e = nd(rng);
      rr.set_vector(x.data());
      const auto y = ref::apply_cached(sp, ref::Mp(static_cast<long long>(m)), x);
      for (std::int64_t i = 0; i < sp.n_pairs(); ++i) {
        const auto [a, b] = sp.pair(i);
        // f64-like outputs: the exact value rounded, one nudged by an ulp.
        const double ga = ref::round_to(y[a], Dtype::f64);
        const double gb = std::nextafter(ref::round_to(y[b], Dtype::f64), 1e300);
        double da = 0, db = 0;
        if (!rr.exact_diff(i, ga, gb, da, db)) continue;
        ++answered;
        EXPECT_EQ(std::fabs(da), std::fabs(static_cast<double>(ref::exact(ga) - y[a])));
        EXPECT_EQ(std::fabs(db), std::fabs(static_cast<double>(ref::exact(gb) - y[b])));
      }
    }
    EXPECT_GT(answered, 4 * sp.n_pairs() * 9 / 10) << describe(sp);
  }
}

// The spec of the two understated-bound tests: head_dim 64, base 1e4, interleaved.
RopeSpec understated_bound_spec() {
  RopeSpec s;
  s.head_dim = 64;
  s.base = 10000;
  s.layout = Layout::interleaved;
  return s.normalized();
}

// Every tolerance must be seen to fail on a broken input: the double-double rotation path at its
// resolution (outputs within an f64 ulp of the recipe rotation, asked as f32 outputs, so that the
// dd path is taken: the differences are ~2^-54 |x|, their last bit ~2^-107 |x|, below the dd
// error) with its bound scaled by 2^-20 accepts answers it cannot vouch for and the comparison
// with MPFR sees them differ; with the stated bound (scale 1) none does.
TEST(ReportRecipe, UnderstatedBoundIsCaught) {
  ref::set_precision_bits(161);
  const RopeSpec s = understated_bound_spec();
  const std::vector<Policy> pols{find_builtin_kernel("table_f32")->policy(Dtype::f32)};
  auto mismatches = [&](double scale) {
    detail::RecipeReference rr(s, false, scale);
    std::mt19937_64 rng(3);
    std::normal_distribution<double> nd;
    int bad = 0;
    for (std::int64_t m : {3LL, 1234LL, 65537LL, 999999LL}) {
      rr.set_position(m, pols);
      for (int v = 0; v < 8; ++v) {
        std::vector<double> x(64);
        for (auto& e : x) e = nd(rng);
        rr.set_vector(x.data());
        const auto yr = detail::rotate(s, detail::recipe_trig(pols[0], s, m), x);
        for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
          const auto [a, b] = s.pair(i);
          const double ga = ref::round_to(yr[a], Dtype::f64);
          const double gb = ref::round_to(yr[b], Dtype::f64);
          double ra = 0, rb = 0;
          rr.rotation_diff(0, i, ga, gb, Dtype::f32, ra, rb);
          bad += std::fabs(ra) != std::fabs(static_cast<double>(ref::exact(ga) - yr[a]));
          bad += std::fabs(rb) != std::fabs(static_cast<double>(ref::exact(gb) - yr[b]));
        }
      }
    }
    return bad;
  };
  const int under = mismatches(0x1p-20);
  std::printf("bound x 2^-20: %d mismatches\n", under);
  EXPECT_GT(under, 0);
  EXPECT_EQ(mismatches(1), 0);
}

// The angle path's bound must be seen to fail too, but random inputs cannot show it: element a's
// angle difference x_a dC - x_b dS (dC = S (cos a' - cos a), dS = S (sin a' - sin a)) has its
// last bit at ~2^-52 of its size, far above the fast path's error (~2^-96 |x| M, M ~ |a' - a|).
// So each pair's x_b is RN(x_a dC / dS) (dC / dS from the MP trig of both angles): element a's
// difference cancels to ~2^-53 |x_b dS|, its last bit ~2^-105 |x| M, at the dd path's
// resolution. With the stated bound the rounding test refuses these (MPFR answers) and every
// answer is the MP definition's; with the bound scaled by 2^-20 the fast path accepts answers that
// differ from it. An f32-angle recipe (large delta) and an f64-angle one (delta ~ 2^-53 |a|).
TEST(ReportRecipe, UnderstatedAngleBoundIsCaught) {
  ref::set_precision_bits(161);
  const RopeSpec s = understated_bound_spec();
  struct Count {
    int bad_a = 0, bad_b = 0;  // answers that differ from the MP definition, per element
    std::int64_t fallbacks = 0, questions = 0;
  };
  auto mismatches = [&](const Policy& pol, double scale) {
    detail::RecipeReference rr(s, false, scale);
    std::mt19937_64 rng(4);
    std::normal_distribution<double> nd;
    Count n;
    for (std::int64_t m : {3LL, 1234LL, 65537LL, 999999LL}) {
      rr.set_position(m, {pol});
      const auto rt = detail::recipe_trig(pol, s, m), et = detail::exact_trig(s, m);
      for (int v = 0; v < 4; ++v) {
        std::vector<double> x(64);
        std::vector<char> use(static_cast<std::size_t>(s.n_pairs()));
        for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
          const auto [a, b] = s.pair(i);
          const auto k = static_cast<std::size_t>(i);
          const ref::Mp ds = rt.s[k] - et.s[k];
          x[a] = nd(rng);
          use[k] = ds != 0;  // the angles agree (pair 0 here): nothing to cancel, not asked
          x[b] =
              use[k] ? static_cast<double>(ref::exact(x[a]) * (rt.c[k] - et.c[k]) / ds) : nd(rng);
        }
        rr.set_vector(x.data());
        const auto y = ref::apply_cached(s, ref::Mp(static_cast<long long>(m)), x);
        const auto yr = detail::rotate(s, rt, x);
        for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
          if (!use[static_cast<std::size_t>(i)]) continue;
          const auto [a, b] = s.pair(i);
          double da = 0, db = 0;
          rr.angle_diff(0, i, da, db);
          n.bad_a += std::fabs(da) != std::fabs(static_cast<double>(yr[a] - y[a]));
          n.bad_b += std::fabs(db) != std::fabs(static_cast<double>(yr[b] - y[b]));
        }
      }
    }
    n.fallbacks = rr.fallbacks();
    n.questions = rr.questions();
    return n;
  };
  for (const Policy& pol : {find_builtin_kernel("table_f32")->policy(Dtype::f32),
                            find_builtin_kernel("scalar")->policy(Dtype::f64)}) {
    for (int e : {-10, -20, -30, 0}) {
      const Count n = mismatches(pol, std::ldexp(1.0, e));
      std::printf(
          "angle %s, bound x 2^%d: %d + %d mismatches (a + b), %lld of %lld pairs by MPFR\n",
          name(angle_precision(pol)), e, n.bad_a, n.bad_b, static_cast<long long>(n.fallbacks),
          static_cast<long long>(n.questions));
      if (e == -20) {
        EXPECT_GT(n.bad_a + n.bad_b, 0) << name(angle_precision(pol));
      }
      if (e == 0) {
        EXPECT_EQ(n.bad_a + n.bad_b, 0) << name(angle_precision(pol));
      }
    }
  }
}

TEST(ReportSchema, ValidatorAcceptsAndRejects) {
  const json schema = json::parse(R"({
    "type": "object", "required": ["a", "n"], "additionalProperties": false,
    "properties": {"a": {"enum": ["x", "y"]}, "n": {"$ref": "#/definitions/num"},
                   "l": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}},
    "definitions": {"num": {"anyOf": [{"type": "number"}, {"const": "inf"}]}}})");
  EXPECT_TRUE(validate_schema(schema, json::parse(R"({"a":"x","n":1.5,"l":[0,3]})")).empty());
  EXPECT_TRUE(validate_schema(schema, json::parse(R"({"a":"y","n":"inf"})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"z","n":1})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x"})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":"nan"})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":1,"extra":0})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":1,"l":[]})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":1,"l":[-1]})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":1,"l":[1.5]})")).empty());
  // A keyword the validator does not implement is an error, not silently ignored.
  EXPECT_FALSE(validate_schema(json::parse(R"({"pattern": "a+"})"), json("b")).empty());
}

TEST(ReportMarkup, CheckerRejectsMalformedDocuments) {
  EXPECT_TRUE(check_html("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><style>a<b"
                         "</style></head><body><p>a &amp; b</p><br><svg><path d=\"M0 0\"/></svg>"
                         "</body></html>")
                  .empty());
  EXPECT_FALSE(check_html("<html><body><p>x</body></html>").empty());               // unclosed <p>
  EXPECT_FALSE(check_html("<html><b><i>x</b></i></html>").empty());                 // bad nesting
  EXPECT_FALSE(check_html("<html>a & b</html>").empty());                           // bare &
  EXPECT_FALSE(check_html("<html><p class=x>y</p></html>").empty());                // unquoted
  EXPECT_FALSE(check_html("<html><img src=\"https://x/y.png\"/></html>").empty());  // network
  EXPECT_FALSE(check_html("<html></html><html></html>").empty());                   // two roots
  EXPECT_FALSE(check_xml("<a><br></a>").empty());  // no void elements in XML
  EXPECT_TRUE(check_xml("<?xml version=\"1.0\"?>\n<a x='1'><b/></a>\n").empty());
}

TEST(ReportIo, AtomicWriteReplacesWholeFilesAndLeavesNoTemporaries) {
  const fs::path dir = fs::temp_directory_path() / ("ropecheck_io_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string big(1 << 20, 'x');
  atomic_write(dir / "f.txt", big);
  atomic_write(dir / "f.txt", "short");
  std::ifstream in(dir / "f.txt");
  std::string got((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(got, "short");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  // Missing directory: throws, creates nothing.
  EXPECT_THROW(atomic_write(dir / "missing" / "f.txt", "x"), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir / "missing"));
  // Target is a directory: rename fails, the temporary is removed.
  fs::create_directories(dir / "d");
  fs::create_directories(dir / "d" / "sub");
  EXPECT_THROW(atomic_write(dir / "d" / "sub", "x"), std::runtime_error);
  int left = 0;
  for (const auto& e : fs::directory_iterator(dir / "d")) left += e.is_regular_file();
  EXPECT_EQ(left, 0);
  fs::remove_all(dir);
}

json tiny_report(double ulp_max, double pair_max) {
  return json{{"schema_version", kSchemaVersion},
              {"options", {{"seed", 1}}},
              {"checks", json::array()},
              {"results",
               {{{"kernel", "k"},
                 {"dtype", "f32"},
                 {"buckets",
                  {{{"bucket", "1-255"},
                    {"ulp", {{"max", ulp_max}}},
                    {"pair_error_u", {{"max", pair_max}}}}}}}}}};
}

TEST(ReportBaseline, FlagsGrowthBeyondTheFactorOnly) {
  auto now = tiny_report(1.0, 1.9);
  EXPECT_EQ(apply_baseline(now, tiny_report(0.6, 1.0), 2.0), 0);  // 1.9 <= 2 * 1.0
  EXPECT_EQ(exit_code(now), 0);
  now = tiny_report(1.0, 2.1);
  EXPECT_EQ(apply_baseline(now, tiny_report(0.6, 1.0), 2.0), 1);
  EXPECT_EQ(exit_code(now), 1);
  now = tiny_report(0.9, 0.9);  // floor: 0 -> 0.9 <= 2 * max(0, 0.5)
  EXPECT_EQ(apply_baseline(now, tiny_report(0.0, 0.0), 2.0), 0);
  auto nan_now = tiny_report(1.0, 1.0);
  nan_now["results"][0]["buckets"][0]["pair_error_u"]["max"] = "nan";
  EXPECT_EQ(apply_baseline(nan_now, tiny_report(1.0, 1.0), 2.0), 1);
  auto old = tiny_report(1, 1);
  old["schema_version"] = kSchemaVersion + 1;
  EXPECT_THROW(apply_baseline(now, old, 2.0), OptionsError);
}

Options small_options() {
  Options o;
  o.dtypes = {Dtype::f32, Dtype::bf16};
  o.head_dims = {8};
  o.bases = {10000};
  o.max_position = 70000;
  o.samples = 8;
  // As the CLI fills them (the reports do not link the kernels; the schema lists real paths).
  o.simd_path = simd_path();
  o.simd_best_path = simd_best_path();
  return o;
}

TEST(ReportRun, SameSeedSameJsonWhateverTheThreadCount) {
  auto o = small_options();
  o.threads = 1;
  auto a = run(o, builtin_kernels());
  o.threads = 2;
  auto b = run(o, builtin_kernels());
  o.seed = 2;
  auto c = run(o, builtin_kernels());
  a.erase("environment");
  b.erase("environment");
  c.erase("environment");
  EXPECT_EQ(a, b);
  EXPECT_NE(a["results"], c["results"]);
  // Structural sanity of the searches: the safe length is below the first failure.
  for (const auto& s : a["safe_context"])
    if (!s["first_failure"].is_null()) {
      EXPECT_LT(s["safe_length"].get<long long>(), s["first_failure"].get<long long>());
    }
}

TEST(ReportRun, ReportValidatesAgainstTheShippedSchema) {
  auto r = run(small_options(), builtin_kernels());
  std::ifstream in(ROPECHECK_REPORT_SCHEMA);
  ASSERT_TRUE(in) << ROPECHECK_REPORT_SCHEMA;
  const json schema = json::parse(in);
  const auto errs = validate_schema(schema, r);
  for (const auto& e : errs) ADD_FAILURE() << e;
  EXPECT_TRUE(check_html(render_html(r)).empty());
  EXPECT_TRUE(check_xml(render_junit(r)).empty());
  // A document missing a required key is rejected by the validator, and the renderers refuse it
  // with an exception rather than reading through a missing map entry (JSON_ASSERT throws, see
  // the top-level CMakeLists.txt; this used to be an intermittent SIGSEGV of this test).
  r["results"][0]["buckets"][0]["ulp"].erase("p99");
  EXPECT_FALSE(validate_schema(schema, r).empty());
  EXPECT_THROW(render_html(r), std::exception);
  EXPECT_THROW(render_markdown(r), std::exception);
}

// `validate --out`: a failed validation block makes every output say FAIL (and exit 1) even when
// every precision check of the sweep holds; a passed one changes nothing of the exit status.
TEST(ReportRun, ValidationBlockCarriesTheVerdictIntoEveryOutput) {
  auto r = run(small_options(), builtin_kernels());
  ASSERT_EQ(exit_code(r), 0);
  const json failed_case = {{"configuration", "f32 half"},
                            {"check", "Differential"},
                            {"passed", false},
                            {"skipped", false},
                            {"result", "unwritten output"},
                            {"message", "unwritten output: 12 element(s) left unwritten"},
                            {"reproduce", "ropecheck validate --plugin p.so --dtypes f32"}};
  const json skipped_case = {{"configuration", "f32 half"},
                             {"check", "PreservesNorm"},
                             {"passed", false},
                             {"skipped", true},
                             {"result", "not run"},
                             {"message", "configuration faulted"}};
  r["validation"] = {{"plugin", "p"},
                     {"passed", false},
                     {"classification", "unwritten_output"},
                     {"exit_code", 1},
                     {"first_failure", "[f32 half] Differential: unwritten output"},
                     {"reproduce", "ropecheck validate --plugin p.so --dtypes f32"},
                     {"cases", {failed_case, skipped_case}}};
  std::ifstream in(ROPECHECK_REPORT_SCHEMA);
  const json schema = json::parse(in);
  for (const auto& e : validate_schema(schema, r)) ADD_FAILURE() << e;
  EXPECT_EQ(exit_code(r), 1);
  const std::string md = render_markdown(r), html = render_html(r), junit = render_junit(r);
  EXPECT_EQ(md.find("# ropecheck precision report\n\n**Validation of plugin 'p': FAIL "
                    "(classification unwritten_output; 1 of 1 checks failed; exit 1)"),
            0u)
      << md.substr(0, 300);
  EXPECT_LT(md.find("First counterexample"), md.find("**Verdict on precision.**"));
  EXPECT_EQ(md.find("exit 0"), std::string::npos);
  EXPECT_EQ(html.find("exit 0"), std::string::npos);
  EXPECT_TRUE(check_html(html).empty());
  EXPECT_TRUE(check_xml(junit).empty());
  EXPECT_NE(junit.find("<testsuite name=\"validate\" tests=\"2\" failures=\"1\" errors=\"0\" "
                       "skipped=\"1\">"),
            std::string::npos)
      << junit;
  EXPECT_NE(junit.find("<failure message=\"unwritten output: 12 element(s)"), std::string::npos);
  r["validation"]["passed"] = true;
  r["validation"]["exit_code"] = 0;
  EXPECT_EQ(exit_code(r), 0);
}

// The scalar kernel with every f32 output scaled by 1 + 2^-6 (2^18 f32 ulps: far outside its
// bound, and enough to move an FP8 byte for a sizeable share of the outputs); other dtypes
// untouched.
class SkewedF32 : public Kernel {
 public:
  std::string name() const override { return "skewed_f32"; }
  std::string description() const override { return "scalar, f32 outputs x (1 + 2^-6)"; }
  Policy policy(Dtype d) const override { return inner().policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override { return inner().supports(s, d); }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    const KernelStatus st = inner().apply(spec, a);
    if (st != KernelStatus::ok || a.dtype != Dtype::f32) return st;
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      for (std::int64_t h = 0; h < a.n_heads; ++h)
        for (std::int64_t j = 0; j < spec.head_dim; ++j) {
          const std::int64_t i = t * a.token_stride + h * a.head_stride + j;
          store(Dtype::f32, a.out, i,
                round_to_dtype(load(Dtype::f32, a.out, i) * (1 + 0x1p-6), Dtype::f32));
        }
    return st;
  }

 private:
  static const Kernel& inner() { return *find_builtin_kernel("scalar"); }
};

Options fp8_options() {
  auto o = small_options();
  o.head_dims = {64};
  o.samples = 64;
  o.max_position = 1 << 20;
  o.variants = false;
  o.fp8 = {Fp8Format::e4m3fn, Fp8Format::e5m2};
  return o;
}

std::vector<const Kernel*> kernels_and_skewed() {
  static const SkewedF32 skewed;
  auto ks = builtin_kernels();
  ks.push_back(&skewed);
  return ks;
}

// report --fp8: every kernel x dtype carries the FP8 cache bytes per format and bucket, on exactly
// the elements of the main sweep; the built-in kernels keep every byte inside the chain image of
// their derived bound, the skewed kernel does not (its check fails and the exit status is 1);
// without --fp8 the document has no FP8 key at all.
TEST(ReportFp8, EveryKernelDescribedAndABrokenOneFails) {
  const json r = run(fp8_options(), kernels_and_skewed());
  std::ifstream in(ROPECHECK_REPORT_SCHEMA);
  const json schema = json::parse(in);
  for (const auto& e : validate_schema(schema, r)) ADD_FAILURE() << e;
  EXPECT_TRUE(check_html(render_html(r)).empty());
  EXPECT_TRUE(check_xml(render_junit(r)).empty());
  EXPECT_NE(render_markdown(r).find("## FP8 cache bytes"), std::string::npos);
  ASSERT_TRUE(r.contains("fp8"));
  int fp8_checks = 0, failed = 0;
  for (const auto& c : r["checks"]) {
    const std::string name = c["check"];
    if (name.rfind("Fp8BytesWithinBound[", 0) != 0) continue;
    ++fp8_checks;
    const bool broken = c["kernel"] == "skewed_f32" && c["dtype"] == "f32";
    EXPECT_EQ(c["passed"].get<bool>(), !broken) << c.dump();
    failed += !c["passed"].get<bool>();
  }
  EXPECT_EQ(fp8_checks, static_cast<int>(r["results"].size()) * 2);
  EXPECT_EQ(failed, 2);  // both formats
  EXPECT_EQ(r["summary"]["fp8_outside_kernel_dtypes"], 2);
  EXPECT_EQ(exit_code(r), 1);
  for (const auto& res : r["results"]) {
    ASSERT_EQ(res["fp8"].size(), 2u);
    for (const auto& f : res["fp8"]) {
      ASSERT_EQ(f["buckets"].size(), res["buckets"].size()) << res["kernel"];
      for (std::size_t b = 0; b < f["buckets"].size(); ++b) {
        const auto& fb = f["buckets"][b];
        EXPECT_EQ(fb["bucket"], res["buckets"][b]["bucket"]);
        EXPECT_EQ(fb["elements"], res["buckets"][b]["n_elements"]);
        EXPECT_LE(fb["differ"].get<long long>(), fb["elements"].get<long long>());
        EXPECT_LE(fb["undetermined"].get<long long>(), fb["elements"].get<long long>());
        if (res["kernel"] == "skewed_f32" && res["dtype"] == "f32" && fb["bucket"] != "0") {
          EXPECT_GT(fb["outside"].get<long long>(), 0) << fb.dump();
          // A shift by v 2^-6 crosses one of the format's rounding boundaries (spacing 2^-m of
          // v's binade, v in [1, 2) scaled) with probability 2^-6 v / 2^-m: at least 1/16 in
          // e5m2 (m = 2), 1/8 in e4m3fn, for outputs in the normal range (nearly all here).
          EXPECT_GT(fb["differ_share"].get<double>(), 0.05) << fb.dump();
        }
      }
    }
  }
  // The f32-angle recipe (table_f32) leaves more bytes open at long context than at short: its
  // derived bound grows with the position (the angle's f32 rounding).
  for (const auto& res : r["results"])
    if (res["kernel"] == "table_f32" && res["dtype"] == "f32") {
      const auto& b = res["fp8"][0]["buckets"];
      EXPECT_GT(b.back()["undetermined_share"].get<double>(),
                b[1]["undetermined_share"].get<double>() + 0.05)
          << b.dump();
    }
  auto o = fp8_options();
  o.fp8.clear();
  const json plain = run(o, builtin_kernels());
  EXPECT_FALSE(plain.contains("fp8"));
  EXPECT_FALSE(plain["summary"].contains("fp8_outside_kernel_dtypes"));
  EXPECT_FALSE(plain["results"][0].contains("fp8"));
}

// Shard reports carry the FP8 counts, and their merge is the unsharded report.
TEST(ReportFp8, ShardsMergeToTheUnshardedReport) {
  auto o = fp8_options();
  json whole = run(o, kernels_and_skewed());
  std::vector<json> shards;
  for (int i = 0; i < 3; ++i) {
    o.shard_index = i;
    o.shard_count = 3;
    shards.push_back(run(o, kernels_and_skewed()));
  }
  json merged = merge(shards);
  for (json* d : {&whole, &merged}) {
    d->erase("environment");
    d->erase("shard");
  }
  EXPECT_EQ(merged["results"], whole["results"]);
  EXPECT_EQ(merged["checks"], whole["checks"]);
  EXPECT_EQ(merged, whole);
  // Different FP8 options do not merge.
  shards[1]["options"]["fp8"]["scale"] = 2.0;
  EXPECT_THROW(merge(shards), OptionsError);
}

TEST(ReportFp8, RejectsBadOptions) {
  auto o = fp8_options();
  o.fp8_scale = 0;
  EXPECT_THROW(validate(o), OptionsError);
  o = fp8_options();
  o.fp8_scale = NAN;
  EXPECT_THROW(validate(o), OptionsError);
  o = fp8_options();
  o.fp8 = {Fp8Format::e5m2, Fp8Format::e5m2};
  EXPECT_THROW(validate(o), OptionsError);
  o = fp8_options();
  o.fp8_overflow = Fp8Overflow::inf;  // e4m3fn has no infinity
  EXPECT_THROW(validate(o), OptionsError);
  o.fp8 = {Fp8Format::e5m2};
  EXPECT_NO_THROW(validate(o));
}

TEST(ReportOptions, RejectsBadOptions) {
  auto o = small_options();
  o.samples = 0;
  EXPECT_THROW(validate(o), OptionsError);
  o = small_options();
  o.max_position = 0;
  EXPECT_THROW(validate(o), OptionsError);
  o = small_options();
  o.head_dims = {1};
  EXPECT_THROW(validate(o), OptionsError);
  o = small_options();
  o.bases = {1.0};
  EXPECT_THROW(validate(o), OptionsError);
  o = small_options();
  o.dtypes.clear();
  EXPECT_THROW(validate(o), OptionsError);
}

}  // namespace
}  // namespace ropecheck::reports
