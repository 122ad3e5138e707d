// Unit tests of the recipe-faithful reference (recipe.cpp, recipe_reference.cpp): the recipe
// angles bit for bit, the exact rotation, RecipeReference against the MP definitions, and its
// error bounds seen to fail when understated. Part of report_unit_test (ctest report_unit).
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
#include <random>

namespace ropecheck::reports {
namespace {

namespace ref = ropecheck::reference;
using nlohmann::json;

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
}  // namespace
}  // namespace ropecheck::reports
