// Checks of the bound table against values derived by hand from the formulas in bounds.cpp (so a
// change of the table that does not match its written derivation fails here).
#include "ropecheck/bounds.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <random>
#include <vector>

namespace {

using namespace ropecheck;

RopeSpec spec128() {
  RopeSpec s;
  s.head_dim = 128;
  return s.normalized();
}

const Policy kF64{Dtype::f64, Dtype::f64, Dtype::f64, AngleRecipe::pow_product, false, ""};
const Policy kHf{Dtype::f32, Dtype::f32, Dtype::f32, AngleRecipe::hf_f32, false, ""};
const Policy kLadder{Dtype::f32, Dtype::f32, Dtype::f32, AngleRecipe::ladder_f32, false, ""};

TEST(Bounds, NoAngleTermAtPositionZero) {
  const auto b = bounds::pair_error_bound(kHf, spec128(), Dtype::f32, 5, 0);
  EXPECT_EQ(b.angle, 0);
  EXPECT_EQ(b.angle_detail.rad, 0);
}

TEST(Bounds, HfRecipeAngleTermByHand) {
  // Pair 0: theta = 1, e = 0: rho = u32 * (0 + 0 + 2 + 1 + 1) = 4u plus the product's u... by the
  // derivation: k = e ln b + [base] e + 2 (pow) + 1 (reciprocal) + 1 (product) = 4 at e = 0.
  const auto s = spec128();
  const auto b = bounds::pair_error_bound(kHf, s, Dtype::f32, 0, 2048);
  EXPECT_DOUBLE_EQ(b.angle_detail.rad, 4 * std::ldexp(1.0, -24) * 2048);
  // Above 2^24 float(m) rounds: one more u.
  const auto c = bounds::pair_error_bound(kHf, s, Dtype::f32, 0, 1 << 25);
  EXPECT_DOUBLE_EQ(c.angle_detail.rad, 5 * std::ldexp(1.0, -24) * (1 << 25));
  // The observed f32-recipe angle errors (~6e-5 rad at m ~ 2k, ~4e-3 at 131k, ~3e-2 at
  // 1e6) must lie under the bound of the worst pair.
  auto worst = [&](double m) {
    double r = 0;
    for (int i = 0; i < 64; ++i)
      r = std::max(r, bounds::pair_error_bound(kHf, s, Dtype::f32, i, m).angle_detail.rad);
    return r;
  };
  EXPECT_GE(worst(2048), 6e-5);
  EXPECT_GE(worst(131072), 4e-3);
  EXPECT_GE(worst(1e6), 3e-2);
}

TEST(Bounds, F64PolicyOnF32StorageIsAboutOneRounding) {
  // trig 2*sqrt2*u64, arith 2*sqrt2*u64, storage 1: total just above 1 u32 at m = 0.
  const auto b = bounds::pair_error_bound(kF64, spec128(), Dtype::f32, 3, 0);
  EXPECT_EQ(b.storage, 1);
  EXPECT_LT(b.total_u(1.0), 1.002);
  EXPECT_GT(b.total_u(1.0), 1.0);
}

// The declared trig error replaces the 2 of a 1-ulp libm in the trig term: sqrt2 * k * u_A per
// pair (section 2), plus the table rounding when the table is coarser than the angle.
TEST(Bounds, DeclaredTrigErrorEntersTheTrigTerm) {
  Policy p = kF64;
  p.trig_error = 6.5;
  const double u64 = std::ldexp(1.0, -53);
  const auto b = bounds::pair_error_bound(p, spec128(), Dtype::f64, 3, 100);
  EXPECT_DOUBLE_EQ(b.trig, std::sqrt(2.0) * 6.5);
  EXPECT_GT(b.total_u(1.0),
            bounds::pair_error_bound(kF64, spec128(), Dtype::f64, 3, 100).total_u(1.0));
  // simd's f32 table: f64 trig (6.5 u64) then one rounding into f32, on bf16 storage.
  Policy t{Dtype::f64, Dtype::f32, Dtype::f32, AngleRecipe::pow_product, true, ""};
  t.trig_error = 6.5;
  const auto c = bounds::pair_error_bound(t, spec128(), Dtype::bf16, 3, 100);
  EXPECT_DOUBLE_EQ(c.trig, std::sqrt(2.0) *
                               (6.5 * u64 + std::ldexp(1.0, -24) + std::ldexp(1.0, -149) / 2) /
                               std::ldexp(1.0, -8));
}

TEST(Bounds, F32ArithmeticOnF32Storage) {
  const auto b = bounds::pair_error_bound(kHf, spec128(), Dtype::f32, 3, 0);
  EXPECT_DOUBLE_EQ(b.trig, 2 * std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(b.arithmetic, 2 * std::sqrt(2.0));
  EXPECT_EQ(b.scale, 0);
}

TEST(Bounds, MonotoneInPosition) {
  const auto s = spec128();
  double prev = 0;
  for (double m : {0.0, 1.0, 255.0, 65536.0, 1048575.0, 16777217.0, 2147483648.0}) {
    const double t = bounds::pair_error_bound(kHf, s, Dtype::bf16, 7, m).total_u(1.0);
    EXPECT_GE(t, prev);
    prev = t;
  }
}

// ---- ladder_f32 (ggml / llama.cpp CPU rope), bounds.cpp section 1 ---------------------------

// The recipe as ggml_rope_cache_init + rope_yarn (ext_factor 0) run it, every step in float:
// ts = powf(base, -2.0f/n_dims), theta = (float)p, theta *= ts per ladder index; then linear
// scaling multiplies by freq_scale = 1.0f/(float)factor, freq factors divide by (float)ff.
std::vector<float> ggml_ladder(double base, std::int64_t dim, std::int64_t p, float freq_scale = 1,
                               const std::vector<double>* ff = nullptr) {
  const float ts = std::pow(static_cast<float>(base), -2.0f / static_cast<float>(dim));
  float theta = static_cast<float>(p);
  std::vector<float> out(static_cast<std::size_t>(dim / 2));
  for (std::size_t j = 0; j < out.size(); ++j) {
    const float t = ff ? theta / static_cast<float>((*ff)[j]) : theta;
    out[j] = freq_scale * t;
    theta *= ts;
  }
  return out;
}

RopeSpec ladder_spec(double base, std::int64_t dim) {
  RopeSpec s;
  s.head_dim = dim;
  s.base = base;
  return s.normalized();
}

// By hand from section 1: L = j lambda + n mu, lambda = e1 ln(b) u + [b] e1 (1+u) mu + mu_2,
// mu = -ln(1-u), mu_2 = -ln(1-2u); rel = expm1(L) (1 + 2^-40). First order: rel = (j (e1 ln b +
// [b] e1 + 2) + n) u, within O(u^2) of it for small j.
TEST(Bounds, LadderF32AngleTermByHand) {
  const double u = std::ldexp(1.0, -24);
  const auto s = spec128();  // base 1e4 (an f32), dim 128: e1 = 1/64
  const double k1 = std::log(1e4) / 64 + 2;
  // Pair 0: the angle is float(m), exact below 2^24: no angle term at all.
  const auto b0 = bounds::pair_error_bound(kLadder, s, Dtype::f32, 0, 2048);
  EXPECT_EQ(b0.angle_detail.rel, 0);
  EXPECT_EQ(b0.angle, 0);
  // Above 2^24 float(m) rounds once: u (hf_f32 has 5u there, see above).
  const auto c0 = bounds::angle_error_bound(kLadder, s, 0, 1 << 25);
  EXPECT_NEAR(c0.rel, u, 1e-6 * u);
  EXPECT_GE(c0.rel, u);
  // Pair 1: ts itself (k1 u) and one product (u).
  EXPECT_NEAR(bounds::angle_error_bound(kLadder, s, 1, 4095).rel, (k1 + 1) * u, 1e-5 * u);
  // Pair 63: 63 (k1 + 1) u ~ 198u, 15x hf_f32's (126/128 ln 1e4 + 4) u ~ 13u for the same pair.
  const double r63 = bounds::angle_error_bound(kLadder, s, 63, 4095).rel;
  const double first63 = 63 * (k1 + 1) * u;  // first order; the product form adds ~first^2/2
  EXPECT_NEAR(r63, first63, first63 * first63);
  EXPECT_GT(r63, 63 * (k1 + 1) * u);  // the product form is above the first-order sum
  EXPECT_NEAR(bounds::angle_error_bound(kHf, s, 63, 4095).rel,
              (126.0 / 128 * std::log(1e4) + 4) * u, 1e-9 * u);
  EXPECT_DOUBLE_EQ(bounds::angle_error_bound(kLadder, s, 63, 4095).rad,
                   r63 * 4095 * std::pow(1e4, -126.0 / 128));
  // Above 2^24 one more u.
  EXPECT_NEAR(bounds::angle_error_bound(kLadder, s, 63, 1 << 25).rel, first63 + u,
              first63 * first63);
  // A base that is not an f32 adds e1 u per ladder step.
  const auto snr = ladder_spec(10000.0 + 1.0 / 3, 128);
  EXPECT_NEAR(bounds::angle_error_bound(kLadder, snr, 10, 100).rel,
              10 * (std::log(snr.base) / 64 + 1.0 / 64 + 2 + 1) * u, 1e-4 * u);
  // linear: freq_scale = 1.0f / float(factor) ([factor not f32] + 1) and its product (1).
  RopeSpec lin = s;
  lin.scaling.kind = ScalingKind::linear;
  lin.scaling.factor = 8;
  EXPECT_NEAR(bounds::angle_error_bound(kLadder, lin, 5, 100).rel, (5 * (k1 + 1) + 2) * u,
              1e-4 * u);
  lin.scaling.factor = 3.3;  // not an f32
  EXPECT_NEAR(bounds::angle_error_bound(kLadder, lin, 5, 100).rel, (5 * (k1 + 1) + 3) * u,
              1e-4 * u);
  // Pair 0 with linear: float(m) exact, then only the scale: 3u (the factor 3.3 is not an f32).
  EXPECT_NEAR(bounds::angle_error_bound(kLadder, lin, 0, 100).rel, 3 * u, 1e-6 * u);
  // freq_factors: [ff not f32] + the division.
  RopeSpec ff = s;
  ff.scaling.kind = ScalingKind::freq_factors;
  ff.scaling.freq_factors.assign(64, 2.0);
  ff.scaling.freq_factors[7] = 1.1;
  EXPECT_NEAR(bounds::angle_error_bound(kLadder, ff, 5, 100).rel, (5 * (k1 + 1) + 1) * u, 1e-4 * u);
  EXPECT_NEAR(bounds::angle_error_bound(kLadder, ff, 7, 100).rel, (7 * (k1 + 1) + 2) * u, 1e-4 * u);
  // Other kinds (here dynamic NTK; yarn and llama3 have ggml's own f32 terms, ladder_scaled.cpp):
  // the table's generic f32 angle, as pow_product with an f32 angle.
  RopeSpec ll = s;
  ll.scaling = example_scaling(ScalingKind::dynamic, s.n_pairs());
  Policy pf32 = kLadder;
  pf32.recipe = AngleRecipe::pow_product;
  EXPECT_EQ(bounds::angle_error_bound(kLadder, ll, 40, 5000).rel,
            bounds::angle_error_bound(pf32, ll, 40, 5000).rel);
  // Outside the f32 normal range the derivation assumes: no angle claim (the term is its cap 2).
  const auto huge = bounds::pair_error_bound(kLadder, ladder_spec(1e39, 8), Dtype::f32, 1, 3);
  EXPECT_TRUE(std::isinf(huge.angle_detail.rad));
  EXPECT_EQ(huge.angle, 2 / u);
}

// head_dim 16384 (kMaxHeadDim): j = 8191 products. The first-order j (rho_ts + u) would drop
// (j rho)^2 / 2, about 2^-10 of the term here; the table keeps the product form.
TEST(Bounds, LadderF32KeepsTheProductFormAtLongLadders) {
  const double u = std::ldexp(1.0, -24);
  const auto s = ladder_spec(1e6, kMaxHeadDim);
  const double j = 8191, e1 = 2.0 / kMaxHeadDim;
  const double first = j * (e1 * std::log(1e6) + 2 + 1) * u;
  const double rel = bounds::angle_error_bound(kLadder, s, 8191, 1000).rel;
  EXPECT_GT(rel, first * (1 + first / 4));
  EXPECT_LT(rel, first * (1 + first));
  const double mu = -std::log1p(-u);
  const double lambda = e1 * std::log(1e6) * u - std::log1p(-2 * u);
  EXPECT_DOUBLE_EQ(rel, std::expm1(j * lambda + j * mu) * (1 + std::ldexp(1.0, -40)));
}

// A declared angle precision does not matter for the f32 recipes: trig is 2 u_f32 per entry.
TEST(Bounds, LadderF32IsAnF32AngleInEveryTerm) {
  Policy p = kLadder;
  p.angle = Dtype::f64;
  const auto b = bounds::pair_error_bound(p, spec128(), Dtype::f32, 3, 100);
  EXPECT_DOUBLE_EQ(b.trig, 2 * std::sqrt(2.0));
  EXPECT_EQ(b.angle_detail.rel, bounds::angle_error_bound(kLadder, spec128(), 3, 100).rel);
}

struct LadderSweep {
  double worst_ratio = 0;  // max observed relative angle error / bound
  std::string where;
  double worst_ladder = 0;  // the same over j >= 1 (pair 0 is float(m): its bound u is attained)
  std::string where_ladder;
  long n = 0;
};

// The faithful ggml computation against long double exact angles: p * base^(-2j/dim) [/ c] in
// long double is within ~2^-62 relatively, 10^-11 of the smallest nonzero bound (~2u); the
// sampled worst observed / bound is a lower bound of the true worst.
template <class BoundFn>
void sweep_ladder(LadderSweep& w, const RopeSpec& s, const std::vector<std::int64_t>& positions,
                  BoundFn bound) {
  const Scaling& sc = s.scaling;
  const float fs = sc.kind == ScalingKind::linear ? 1.0f / static_cast<float>(sc.factor) : 1.0f;
  const auto* ff = sc.kind == ScalingKind::freq_factors ? &sc.freq_factors : nullptr;
  for (std::int64_t p : positions) {
    const auto got = ggml_ladder(s.base, s.rotary_dim, p, fs, ff);
    for (std::int64_t j = 0; j < s.n_pairs(); ++j) {
      long double exact =
          static_cast<long double>(p) * std::pow(static_cast<long double>(s.base),
                                                 -static_cast<long double>(2 * j) / s.rotary_dim);
      if (sc.kind == ScalingKind::linear) exact /= sc.factor;
      if (ff) exact /= (*ff)[static_cast<std::size_t>(j)];
      const double obs =
          static_cast<double>(std::fabs((got[static_cast<std::size_t>(j)] - exact) / exact));
      const double rel = bound(s, j, static_cast<double>(p));
      ++w.n;
      if (rel == 0) {
        EXPECT_EQ(obs, 0) << "j=" << j << " p=" << p;
        continue;
      }
      const double r = obs / rel;
      if (r <= w.worst_ratio && (j == 0 || r <= w.worst_ladder)) continue;
      const std::string at = describe(s) + " j=" + std::to_string(j) + " p=" + std::to_string(p);
      if (r > w.worst_ratio) w.worst_ratio = r, w.where = at;
      if (j >= 1 && r > w.worst_ladder) w.worst_ladder = r, w.where_ladder = at;
    }
  }
}

std::vector<std::int64_t> ladder_positions() {
  std::vector<std::int64_t> v = {1,
                                 2,
                                 3,
                                 7,
                                 255,
                                 2047,
                                 4095,
                                 65535,
                                 65537,
                                 131071,
                                 1048575,
                                 (1 << 24) - 1,
                                 1 << 24,
                                 (1 << 24) + 1,
                                 (1 << 24) + 3,
                                 (1 << 25) + 5,
                                 2147483647,
                                 2147483648LL - 129,
                                 2147483648LL,
                                 -4095,
                                 -2147483648LL};
  std::mt19937_64 rng(4242);
  for (int k = 0; k < 12; ++k)
    v.push_back(std::int64_t{1} +
                static_cast<std::int64_t>(rng() % (std::uint64_t{1} << (4 + 2 * k))));
  return v;
}

std::vector<RopeSpec> ladder_specs() {
  std::vector<RopeSpec> v;
  for (double b : {1e4, 5e5, 1e6, 10000.0 + 1.0 / 3, 3.7, 2.5, 123456.789, 1e7, 1e7 + 0.3})
    for (std::int64_t d : {2, 4, 6, 8, 16, 32, 64, 80, 96, 128, 256, 512})
      v.push_back(ladder_spec(b, d));
  return v;
}

TEST(Bounds, LadderF32HoldsForTheGgmlComputation) {
  const auto pos = ladder_positions();
  const auto ladder = [](const RopeSpec& s, std::int64_t j, double p) {
    return bounds::angle_error_bound(kLadder, s, j, p).rel;
  };
  LadderSweep w;
  for (const auto& s : ladder_specs()) sweep_ladder(w, s, pos, ladder);
  // Scaled: linear (f32 factors and not) and GGUF-style freq factors.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> lf(0, std::log(32.0));
  for (double b : {1e4, 5e5, 3.7})
    for (std::int64_t d : {64, 128, 256}) {
      for (double f : {2.0, 8.0, 3.3, 0.37, 40.0}) {
        RopeSpec s = ladder_spec(b, d);
        s.scaling.kind = ScalingKind::linear;
        s.scaling.factor = f;
        sweep_ladder(w, s.normalized(), pos, ladder);
      }
      RopeSpec s = ladder_spec(b, d);
      s.scaling.kind = ScalingKind::freq_factors;
      for (std::int64_t i = 0; i < d / 2; ++i)
        s.scaling.freq_factors.push_back(i % 3 == 0 ? 4.0 : std::exp(lf(rng)));
      sweep_ladder(w, s.normalized(), pos, ladder);
    }
  std::cout << std::setprecision(9) << "[ladder_f32] " << w.n
            << " angles, worst observed / ladder_f32 bound = " << w.worst_ratio << " at " << w.where
            << " (float(m) rounding, attained); over j >= 1: " << w.worst_ladder << " at "
            << w.where_ladder << "\n";
  EXPECT_GT(w.n, 100000);
  EXPECT_LT(w.worst_ratio, 1.0) << w.where;
  EXPECT_GT(w.worst_ladder, 0.05) << "the bound should not be loose by orders of magnitude";
}

// The false alarm: the same honest computation exceeds the hf_f32 bound (the understated one),
// e.g. ~3x at position 4095 for base 1e4, head_dim 128 (the case). The new term is needed.
TEST(Bounds, LadderF32ExceedsTheHfF32Bound) {
  const auto hf = [](const RopeSpec& s, std::int64_t j, double p) {
    return bounds::angle_error_bound(kHf, s, j, p).rel;
  };
  LadderSweep w;
  for (const auto& s : ladder_specs()) sweep_ladder(w, s, ladder_positions(), hf);
  LadderSweep w128;
  sweep_ladder(w128, spec128(), {4095}, hf);
  std::cout << "[ladder_f32] worst observed / hf_f32 bound = " << w.worst_ratio << " at " << w.where
            << "; base 1e4, dim 128, p = 4095: " << w128.worst_ratio << " at " << w128.where
            << "\n";
  EXPECT_GT(w.worst_ratio, 5.0) << w.where;
  EXPECT_GT(w128.worst_ratio, 2.0) << w128.where;
}

// inv_freq_f64 (gemma.cpp ops/ops.h CreateInvTimescale: inv_timescale = 1 / pow(base, 2i/rd) in
// double, stored as float; angle = float(pos) * inv_timescale in f32): the computation itself
// against long double exact angles, over the ladder sweep's specs and positions.
const Policy kInvF64{Dtype::f32, Dtype::f32, Dtype::f32, AngleRecipe::inv_freq_f64, false, ""};

struct AngleSweep {
  double worst = 0;
  std::string where;
  long n = 0;
};

template <class AngleFn, class BoundFn>
void sweep_angles(AngleSweep& w, AngleFn angle, BoundFn bound) {
  for (const auto& s : ladder_specs())
    for (std::int64_t p : ladder_positions())
      for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
        const long double exact =
            static_cast<long double>(p) *
            std::pow(static_cast<long double>(s.base),
                     -static_cast<long double>(2 * i) / static_cast<long double>(s.rotary_dim));
        const double obs = static_cast<double>(
            std::fabs((static_cast<long double>(angle(s, i, p)) - exact) / exact));
        const double rel = bound(s, i, static_cast<double>(p));
        ++w.n;
        if (obs / rel > w.worst)
          w.worst = obs / rel,
          w.where = describe(s) + " i=" + std::to_string(i) + " p=" + std::to_string(p);
      }
}

float gemma_angle(const RopeSpec& s, std::int64_t i, std::int64_t p) {
  const double inv =
      1.0 / std::pow(s.base, 2.0 * static_cast<double>(i) / static_cast<double>(s.rotary_dim));
  return static_cast<float>(p) * static_cast<float>(inv);
}

float hf_angle(const RopeSpec& s, std::int64_t i, std::int64_t p) {
  const float inv = 1.0f / std::pow(static_cast<float>(s.base),
                                    static_cast<float>(2 * i) / static_cast<float>(s.rotary_dim));
  return static_cast<float>(p) * inv;
}

TEST(Bounds, InvFreqF64HoldsForTheGemmaComputation) {
  AngleSweep w;
  sweep_angles(w, gemma_angle, [](const RopeSpec& s, std::int64_t i, double p) {
    return bounds::angle_error_bound(kInvF64, s, i, p).rel;
  });
  std::cout << std::setprecision(6) << "[inv_freq_f64] " << w.n
            << " angles, worst observed / inv_freq_f64 bound = " << w.worst << " at " << w.where
            << "\n";
  EXPECT_GT(w.n, 100000);
  EXPECT_LT(w.worst, 1.0) << w.where;
  EXPECT_GT(w.worst, 0.5) << "the bound should be tight: two roundings it counts are attained";
}

// Declared inv_freq_f64, an HF f32 computation (f32 inv_freq, its e ln(base) u32 error) exceeds
// the bound: the recipe is not a looser hf_f32, a misdeclaration is caught.
TEST(Bounds, HfF32ExceedsTheInvFreqF64Bound) {
  AngleSweep w;
  sweep_angles(w, hf_angle, [](const RopeSpec& s, std::int64_t i, double p) {
    return bounds::angle_error_bound(kInvF64, s, i, p).rel;
  });
  std::cout << "[inv_freq_f64] HF f32 computation: worst observed / inv_freq_f64 bound = "
            << w.worst << " at " << w.where << "\n";
  EXPECT_GT(w.worst, 2.0) << w.where;
  // And the HF computation stays within its own bound (hf_f32), the same sweep.
  AngleSweep own;
  sweep_angles(own, hf_angle, [](const RopeSpec& s, std::int64_t i, double p) {
    return bounds::angle_error_bound(kHf, s, i, p).rel;
  });
  EXPECT_LT(own.worst, 1.0) << own.where;
}

TEST(Bounds, InvFreqF64AngleTermByHand) {
  // Pair 0: theta = 1 exactly (e = 0): rho = 3 u64 + u32 (the rounding into f32, which 1.0 does
  // not need but the bound counts), plus the product's u32.
  const auto b = bounds::angle_error_bound(kInvF64, spec128(), 0, 2048);
  EXPECT_DOUBLE_EQ(b.rel, 3 * std::ldexp(1.0, -53) + 2 * std::ldexp(1.0, -24));
  // In f64 the rounding into the angle precision is the f64 value itself: no u_A term.
  const Policy f64{Dtype::f64, Dtype::f64, Dtype::f64, AngleRecipe::inv_freq_f64, false, ""};
  EXPECT_DOUBLE_EQ(bounds::angle_error_bound(f64, spec128(), 0, 2048).rel,
                   3 * std::ldexp(1.0, -53) + std::ldexp(1.0, -53));
}

// fast_powf_f32 (FlashInfer, CUDA -use_fast_math __powf): the documented worst case of every
// approximation, pushed in each of the 8 sign combinations as far as PTX allows (lg2.approx within
// 2^-22 of log2 relative, absolute in (0.5, 2); the fast division within 2 ulp; ex2.approx within
// 2 ulp of the correctly rounded value), then the f32 product with float(m), against long double
// exact angles over the ladder sweep's specs and positions.
Policy fast_powf_policy() {
  Policy p{Dtype::f32, Dtype::f32, Dtype::f32, AngleRecipe::fast_powf_f32, true, ""};
  return p;
}

// v moved by whole ulps in direction dir while it stays within max_abs of exact.
float push_ulps(float v, long double exact, int dir, long double max_abs, int steps) {
  for (int k = 0; k < steps; ++k) {
    const float n = std::nextafter(v, dir > 0 ? INFINITY : -INFINITY);
    if (std::fabs(static_cast<long double>(n) - exact) > max_abs) break;
    v = n;
  }
  return v;
}

float fast_powf_worst_angle(const RopeSpec& s, std::int64_t i, std::int64_t p, int signs) {
  const int sl = signs & 1 ? 1 : -1, sy = signs & 2 ? 1 : -1, se = signs & 4 ? 1 : -1;
  const float x = 1.0f / static_cast<float>(s.base);
  const long double lx = std::log2(static_cast<long double>(x));
  const long double lmax = (x > 0.5f && x < 2.0f) ? 0x1p-22L : 0x1p-22L * std::fabs(lx);
  const float L = push_ulps(static_cast<float>(lx), lx, sl, lmax, 64);
  const long double ye = static_cast<long double>(2 * i) / static_cast<long double>(s.rotary_dim);
  const float y0 = static_cast<float>(ye);
  const long double uy = std::ldexp(1.0L, std::ilogb(y0 == 0 ? 1.0f : y0) - 23);
  const float y = y0 == 0 ? 0.0f : push_ulps(y0, ye, sy, 2 * uy, 4);
  const float z = y * L;
  const long double ez = std::exp2(static_cast<long double>(z));
  const float e0 = static_cast<float>(ez);  // correctly rounded 2^z (to long double's precision)
  const float inv = push_ulps(e0, e0, se, 2 * std::ldexp(1.0L, std::ilogb(e0) - 23), 2);
  return static_cast<float>(p) * inv;
}

TEST(Bounds, FastPowfF32HoldsForTheDocumentedWorstCase) {
  AngleSweep w;
  const Policy fp = fast_powf_policy();
  for (int signs = 0; signs < 8; ++signs)
    sweep_angles(
        w,
        [signs](const RopeSpec& s, std::int64_t i, std::int64_t p) {
          return fast_powf_worst_angle(s, i, p, signs);
        },
        [&](const RopeSpec& s, std::int64_t i, double p) {
          return bounds::angle_error_bound(fp, s, i, p).rel;
        });
  std::cout << std::setprecision(6) << "[fast_powf_f32] " << w.n
            << " angles at PTX's worst-case errors, worst observed / fast_powf_f32 bound = "
            << w.worst << " at " << w.where << "\n";
  EXPECT_GT(w.n, 800000);
  EXPECT_LT(w.worst, 1.0) << w.where;
  EXPECT_GT(w.worst, 0.5) << "the bound should be tight: the pushed errors are the ones it counts";
  // The model the FlashInfer engine evaluates (correctly rounded approximations) is inside too.
  AngleSweep model;
  sweep_angles(
      model,
      [](const RopeSpec& s, std::int64_t i, std::int64_t p) {
        return static_cast<float>(p) * fast_powf_f32_inv_freq(s.base, i, s.rotary_dim, 0);
      },
      [&](const RopeSpec& s, std::int64_t i, double p) {
        return bounds::angle_error_bound(fp, s, i, p).rel;
      });
  EXPECT_LT(model.worst, 1.0) << model.where;
}

// Declared hf_f32, the fast-math computation exceeds the bound: every f32 step of __powf's
// exponent is magnified by ln(base), nine times HF's exponent term (bounds.cpp 1.).
TEST(Bounds, FastPowfExceedsTheHfF32Bound) {
  AngleSweep w;
  for (int signs = 0; signs < 8; ++signs)
    sweep_angles(
        w,
        [signs](const RopeSpec& s, std::int64_t i, std::int64_t p) {
          return fast_powf_worst_angle(s, i, p, signs);
        },
        [](const RopeSpec& s, std::int64_t i, double p) {
          return bounds::angle_error_bound(kHf, s, i, p).rel;
        });
  std::cout << "[fast_powf_f32] worst-case fast-math computation / hf_f32 bound = " << w.worst
            << " at " << w.where << "\n";
  EXPECT_GT(w.worst, 2.0) << w.where;
}

// fast_powf_ladder_f32 (ggml / llama.cpp CUDA: __powf(theta_scale, j), theta_scale from the host's
// powf): lg2.approx pushed to PTX's 2^-22 (absolute in (0.5, 2), relative outside) and ex2.approx
// to 2 ulp, each direction, over the ladder sweep.
float fast_powf_ladder_worst_angle(const RopeSpec& s, std::int64_t i, std::int64_t p, int signs) {
  const int sl = signs & 1 ? 1 : -1, se = signs & 2 ? 1 : -1;
  const auto [j, dim] = s.ladder(i);
  const float ts = std::pow(static_cast<float>(s.base), -2.0f / static_cast<float>(dim));
  const long double lt = std::log2(static_cast<long double>(ts));
  const long double lmax = (ts > 0.5f && ts < 2.0f) ? 0x1p-22L : 0x1p-22L * std::fabs(lt);
  const float L = push_ulps(static_cast<float>(lt), lt, sl, lmax, 256);
  const float z = static_cast<float>(j) * L;
  const float e0 = static_cast<float>(std::exp2(static_cast<long double>(z)));
  const float inv = push_ulps(e0, e0, se, 2 * std::ldexp(1.0L, std::ilogb(e0) - 23), 2);
  return static_cast<float>(p) * inv;
}

TEST(Bounds, FastPowfLadderF32HoldsForTheDocumentedWorstCase) {
  const Policy fl{Dtype::f32, Dtype::f32, Dtype::f32, AngleRecipe::fast_powf_ladder_f32, true, ""};
  AngleSweep w, hf;
  for (int signs = 0; signs < 4; ++signs) {
    const auto angle = [signs](const RopeSpec& s, std::int64_t i, std::int64_t p) {
      return fast_powf_ladder_worst_angle(s, i, p, signs);
    };
    sweep_angles(w, angle, [&](const RopeSpec& s, std::int64_t i, double p) {
      return bounds::angle_error_bound(fl, s, i, p).rel;
    });
    sweep_angles(hf, angle, [](const RopeSpec& s, std::int64_t i, double p) {
      return bounds::angle_error_bound(kHf, s, i, p).rel;
    });
  }
  std::cout << std::setprecision(6) << "[fast_powf_ladder_f32] " << w.n
            << " angles at PTX's worst-case errors, worst observed / fast_powf_ladder_f32 bound = "
            << w.worst << " at " << w.where << "; / hf_f32 bound = " << hf.worst << " at "
            << hf.where << "\n";
  EXPECT_LT(w.worst, 1.0) << w.where;
  EXPECT_GT(w.worst, 0.5) << "the bound should be tight: the pushed errors are the ones it counts";
  EXPECT_GT(hf.worst, 2.0) << "the HF recipe's bound does not cover CUDA's __powf ladder";
  AngleSweep model;  // the ggml_cuda engine's model (correctly rounded lg2 / ex2)
  sweep_angles(
      model,
      [](const RopeSpec& s, std::int64_t i, std::int64_t p) {
        const auto [j, dim] = s.ladder(i);
        return static_cast<float>(p) * fast_powf_ladder_f32_inv_freq(s.base, j, dim);
      },
      [&](const RopeSpec& s, std::int64_t i, double p) {
        return bounds::angle_error_bound(fl, s, i, p).rel;
      });
  EXPECT_LT(model.worst, 1.0) << model.where;
}

// trig_argument turns_f32: the argument scaled into turns in f32 perturbs the angle by
// tau ~ 2.68 u relative; the model (policy.cpp turns_f32_angle) stays within it, PTX's documented
// sin.approx figures are within the model plus the declared trig_error 11.32, and the bound's
// angle term grows by exactly tau (1 + rel).
TEST(Bounds, TurnsF32ArgumentTerm) {
  const Policy fp = fast_powf_policy();
  Policy turns = fp;
  turns.trig_argument = TrigArgument::turns_f32;
  const RopeSpec s = spec128();
  const auto exact = bounds::angle_error_bound(fp, s, 5, 70000);
  const auto t = bounds::angle_error_bound(turns, s, 5, 70000);
  const double tau = (t.rel - exact.rel) / (1 + exact.rel);
  const double u = 0x1p-24;
  std::cout << "[turns_f32] tau = " << tau / u << " u\n";
  EXPECT_GT(tau, 2.6 * u);
  EXPECT_LT(tau, 2.8 * u);
  // PTX: 2^-14.7 absolute on [-100pi, 100pi] (and 2^-20.5 on [-2pi, 2pi]) within the model.
  EXPECT_GT(std::ldexp(11.32, -24) + 100 * M_PI * tau, std::exp2(-14.7));
  EXPECT_GT(std::ldexp(11.32, -24), std::exp2(-20.5));
  // The model's angle against x, over f32 angles of every magnitude up to 2^40.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  double worst = 0;
  for (int e = -20; e <= 40; ++e)
    for (int k = 0; k < 2000; ++k) {
      const float x = std::ldexp(mant(rng), e);
      worst = std::max(worst, std::fabs(turns_f32_angle(x) - x) / x / tau);
    }
  std::cout << "[turns_f32] worst |2pi t - x| / (tau |x|) = " << worst << "\n";
  EXPECT_LT(worst, 1.0);
  EXPECT_GT(worst, 0.5);
}

// Declared rounding toward zero (ncnn's bf16 truncation): the table's rounding into T and the
// storage rounding into D each count a whole unit instead of half (bounds.cpp, sections 2 and 5),
// their subnormal quanta whole too; every other term is unchanged.
TEST(Bounds, TowardZeroDoublesTheTableAndStorageRoundings) {
  const Policy rn{Dtype::f32, Dtype::bf16, Dtype::f32, AngleRecipe::hf_f32, false, ""};
  Policy rz = rn;
  rz.table_rounding = rz.output_rounding = Rounding::toward_zero;
  const auto s = spec128();
  const auto a = bounds::pair_error_bound(rn, s, Dtype::bf16, 9, 3000);
  const auto b = bounds::pair_error_bound(rz, s, Dtype::bf16, 9, 3000);
  const double uT = std::ldexp(1.0, -8), uA = std::ldexp(1.0, -24), uD = uT;
  EXPECT_DOUBLE_EQ(a.trig * uD, std::sqrt(2.0) * (2 * uA + uT + std::ldexp(1.0, -133) / 2));
  EXPECT_DOUBLE_EQ(b.trig * uD, std::sqrt(2.0) * (2 * uA + 2 * uT + std::ldexp(1.0, -133)));
  EXPECT_EQ(a.storage, 1);
  EXPECT_EQ(b.storage, 2);
  EXPECT_EQ(a.angle, b.angle);
  EXPECT_EQ(a.arithmetic, b.arithmetic);
  EXPECT_GT(b.underflow_abs, a.underflow_abs);
  EXPECT_GT(b.total_u(1.0), a.total_u(1.0) + 2.4);  // sqrt(2) + 1 more units
  // A table as wide as the angle is not rounded at all: nothing changes.
  Policy wide = kHf;
  wide.table_rounding = Rounding::toward_zero;
  EXPECT_EQ(bounds::pair_error_bound(wide, s, Dtype::f32, 9, 3000).trig,
            bounds::pair_error_bound(kHf, s, Dtype::f32, 9, 3000).trig);
}

// The storage term under truncation is attained: f32 -> bf16 by `bits >> 16` over 2^20 random
// normal f32 values (below bf16's largest finite) errs by more than 0.99 of 2 u |v| and never
// more (0.992 with this seed; the nearest-even conversion by more than 0.99 of u |v|). The
// toward-zero bound would be 2x loose if truncation erred by half.
TEST(Bounds, TruncationIntoBf16AttainsTheWholeUnit) {
  std::mt19937_64 g(29);
  std::uniform_int_distribution<std::uint32_t> bits(0x00800000u, 0x7f7f0000u);
  double worst_rz = 0, worst_rn = 0;
  for (int i = 0; i < (1 << 20); ++i) {
    const float v = std::bit_cast<float>(bits(g));
    const float rz = std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0xffff0000u);
    const double u = std::ldexp(1.0, -8);
    worst_rz = std::max(worst_rz, std::fabs(double(rz) - v) / (2 * u * std::fabs(double(v))));
    const double rn = round_to_dtype(v, Dtype::bf16);
    worst_rn = std::max(worst_rn, std::fabs(rn - v) / (u * std::fabs(double(v))));
  }
  std::cout << "truncation into bf16: worst |err| / (2u|v|) = " << worst_rz
            << ", nearest-even: worst |err| / (u|v|) = " << worst_rn << "\n";
  EXPECT_LT(worst_rz, 1.0);
  EXPECT_GT(worst_rz, 0.99);
  EXPECT_LE(worst_rn, 1.0);
  EXPECT_GT(worst_rn, 0.99);
}

TEST(Bounds, UnderflowMakesTinyPairsLooser) {
  const auto b = bounds::pair_error_bound(kF64, spec128(), Dtype::f16, 1, 10);
  EXPECT_GT(b.total_u(1e-7), b.total_u(1.0));
  EXPECT_TRUE(std::isinf(b.total_u(0)));
}

// PairBounds (the per-spec table front ends use) answers what pair_error_bound answers, bit for
// bit, across recipes, scalings, dtypes and the positions where a term switches (m = 0, the
// angle precision's 2^digits, the ladder's 2^24 and its overflow edge).
TEST(Bounds, PairBoundsTableEqualsTheFreeFunction) {
  std::vector<RopeSpec> specs;
  for (Layout l : {Layout::interleaved, Layout::half}) {
    RopeSpec s;
    s.head_dim = 64;
    s.rotary_dim = 48;
    s.layout = l;
    specs.push_back(s.normalized());
  }
  RopeSpec lin = specs[0];
  lin.scaling.kind = ScalingKind::linear;
  lin.scaling.factor = 3;
  RopeSpec l3 = specs[1];
  l3.base = 500000;
  l3.scaling = llama31_scaling();
  RopeSpec yarn = specs[1];
  yarn.scaling = deepseek_v3_yarn_scaling();
  RopeSpec dyn = specs[0];
  dyn.scaling.kind = ScalingKind::dynamic;
  dyn.scaling.factor = 2;
  dyn.scaling.max_position_embeddings = 4096;
  dyn.scaling.seq_len = 10000;
  RopeSpec ff = specs[0];
  ff.scaling.kind = ScalingKind::freq_factors;
  for (int i = 0; i < 24; ++i) ff.scaling.freq_factors.push_back(1.0 + i % 5);
  for (const RopeSpec& s : {lin, l3, yarn, dyn, ff}) specs.push_back(s.normalized());
  const Policy bf16_table{Dtype::f32, Dtype::bf16, Dtype::f32, AngleRecipe::pow_product, false, ""};
  const double positions[] = {0, 1, -7, 4095, 0x1p24, 0x1p24 + 2, 0x1p53, 0x1p53 + 2, 1e36, 1e40};
  int compared = 0;
  for (const RopeSpec& s : specs)
    for (const Policy& p : {kF64, kHf, kLadder, bf16_table})
      for (Dtype d : kAllDtypes) {
        const bounds::PairBounds table(p, s, d);
        for (std::int64_t i = 0; i < s.n_pairs(); ++i)
          for (double m : positions) {
            const auto a = table.at(i, m), b = bounds::pair_error_bound(p, s, d, i, m);
            for (auto [x, y] : {std::pair{a.angle, b.angle},
                                {a.trig, b.trig},
                                {a.arithmetic, b.arithmetic},
                                {a.scale, b.scale},
                                {a.storage, b.storage},
                                {a.second_order, b.second_order},
                                {a.underflow_abs, b.underflow_abs},
                                {a.underflow_pre_abs, b.underflow_pre_abs},
                                {a.u, b.u},
                                {a.angle_detail.rel, b.angle_detail.rel},
                                {a.angle_detail.theta, b.angle_detail.theta},
                                {a.angle_detail.rad, b.angle_detail.rad}})
              ASSERT_EQ(std::bit_cast<std::uint64_t>(x), std::bit_cast<std::uint64_t>(y))
                  << describe(s) << " pair " << i << " m " << m;
            ++compared;
          }
      }
  EXPECT_GT(compared, 10000);
}

// ---- Every term of the table by hand (bounds.cpp, the section named at each line) ---------------
// Each value is re-derived here from the written derivation, not read off the code, so a term
// that is dropped, halved or counted once too few fails here even where no sweep reaches it.
namespace by_hand {

constexpr double u64 = 0x1p-53, u32 = 0x1p-24, ubf = 0x1p-8;

// Sections 2, 3, 6: arithmetic in bf16 on f32 storage (narrower than the storage: the inputs are
// rounded into it, + u_R) and coarser than the angle and the table (the table entries are
// converted into it, + u_R per entry); the underflow terms of each format.
TEST(BoundsByHand, ArithmeticNarrowerThanStorageAndTable) {
  const Policy p{Dtype::f32, Dtype::f32, Dtype::bf16, AngleRecipe::pow_product, false, ""};
  const auto b = bounds::pair_error_bound(p, spec128(), Dtype::f32, 3, 0);
  const double sub_f32 = std::ldexp(1.0, -149), sub_bf = std::ldexp(1.0, -133);
  EXPECT_DOUBLE_EQ(b.arithmetic * u32, std::sqrt(2.0) * 2 * ubf + ubf);
  EXPECT_DOUBLE_EQ(b.trig * u32, std::sqrt(2.0) * (2 * u32 + ubf + sub_f32 / 2));
  // 6: four roundings of the arithmetic format's subnormal half-quantum per component, then
  // storage's; sqrt(2) per pair.
  EXPECT_DOUBLE_EQ(b.underflow_pre_abs, std::sqrt(2.0) * 4 * sub_bf / 2);
  EXPECT_DOUBLE_EQ(b.underflow_abs, b.underflow_pre_abs + std::sqrt(2.0) * sub_f32 / 2);
}

// Section 4: s rounded into the working precision and multiplied in once, 2 max(u_T, u_R); none
// for a power of two.
TEST(BoundsByHand, ScaleTerm) {
  RopeSpec s = spec128();
  s.scale = 3;
  EXPECT_DOUBLE_EQ(bounds::pair_error_bound(kHf, s.normalized(), Dtype::f32, 3, 10).scale, 2.0);
  const Policy t{Dtype::f32, Dtype::bf16, Dtype::f32, AngleRecipe::pow_product, false, ""};
  EXPECT_DOUBLE_EQ(bounds::pair_error_bound(t, s.normalized(), Dtype::f32, 3, 10).scale,
                   2 * ubf / u32);
  s.scale = 4;
  EXPECT_EQ(bounds::pair_error_bound(kHf, s.normalized(), Dtype::f32, 3, 10).scale, 0.0);
}

// Section 7: second_order = Rr T' + S (T' + Rr) + S Rr T' with T' = trig + scale, on bf16 storage
// where S = 2^-8 makes every product visible.
TEST(BoundsByHand, SecondOrderTerms) {
  RopeSpec s = spec128();
  s.scale = 3;
  const auto b = bounds::pair_error_bound(kHf, s.normalized(), Dtype::bf16, 9, 3000);
  const double T = (b.trig + b.scale) * ubf, R = b.arithmetic * ubf, S = b.storage * ubf;
  EXPECT_DOUBLE_EQ(b.second_order * ubf, R * T + S * (T + R) + S * R * T);
}

// Section 1: |m| = 2^24 is an f32 exactly: no rounding of m; 2^24 + 2 is rounded (one more u).
TEST(BoundsByHand, PositionRoundingStartsAboveTwoToThePrecision) {
  const auto s = spec128();
  EXPECT_DOUBLE_EQ(bounds::angle_error_bound(kHf, s, 0, 0x1p24).rel, 4 * u32);
  EXPECT_DOUBLE_EQ(bounds::angle_error_bound(kHf, s, 0, 0x1p24 + 2).rel, 5 * u32);
  EXPECT_DOUBLE_EQ(bounds::angle_error_bound(kF64, s, 0, 0x1p53).rel, 3 * u64);
}

// Section 8, per scaling kind, with the f64 recipe (u_A = u64): the unscaled rho_theta of section
// 1 is rho0 = (e ln base + 2) u64 (an f64 base, pow within 1 ulp), and every rel adds u64 for the
// product m theta'.
double rho0(const RopeSpec& s, std::int64_t pair, double base) {
  const auto [j, dim] = s.ladder(pair);
  const double e = 2.0 * static_cast<double>(j) / static_cast<double>(dim);
  return (e * std::log(base) + 2) * u64;
}

RopeSpec scaled(ScalingKind kind) {
  RopeSpec s = spec128();
  s.scaling.kind = kind;
  return s;
}

TEST(BoundsByHand, LongropeAndLinearAddOneDivision) {
  RopeSpec lr = scaled(ScalingKind::longrope);
  lr.scaling.original_max_position_embeddings = 4096;
  lr.scaling.max_position_embeddings = 131072;
  for (int i = 0; i < 64; ++i) {
    lr.scaling.short_factor.push_back(1.0 + 0.01 * i);
    lr.scaling.long_factor.push_back(2.0 + 0.1 * i);
  }
  const RopeSpec n = lr.normalized();
  EXPECT_NEAR(bounds::angle_error_bound(kF64, n, 20, 1000).rel, rho0(n, 20, 1e4) + 2 * u64,
              1e-6 * u64);
  // The magnitude: longrope's default attention factor sqrt(1 + ln f / ln orig), f = 32:
  // u / (2 ln orig) + 4u, then scale * factor (u), then section 4's 2 max(u_T, u_R).
  const double af = u64 / (2 * std::log(4096.0)) + 4 * u64;
  EXPECT_NEAR(bounds::pair_error_bound(kF64, n, Dtype::f64, 20, 1000).scale,
              (2 * u64 + af + u64) / u64, 1e-9);
}

TEST(BoundsByHand, YarnMagnitudeAndRamp) {
  // DeepSeek's ratio of two get_mscale (13u), plain yarn's one get_mscale (6u); each then
  // scale * factor (u) and 2 max(u_T, u_R).
  RopeSpec ds = spec128();
  ds.scaling = deepseek_v3_yarn_scaling();
  ds.scaling.mscale = 0.707;  // a ratio that is not 1
  EXPECT_NEAR(bounds::pair_error_bound(kF64, ds.normalized(), Dtype::f64, 5, 100).scale, 2 + 13 + 1,
              1e-9);
  RopeSpec y = scaled(ScalingKind::yarn);
  y.scaling.factor = 8;
  y.scaling.original_max_position_embeddings = 4096;
  EXPECT_NEAR(bounds::pair_error_bound(kF64, y.normalized(), Dtype::f64, 5, 100).scale, 2 + 6 + 1,
              1e-9);
  // The ramp without truncation: e_low = |low| (3u / |L1| + 6u) (and e_high), e_r = (2 e_low +
  // e_high) / |high - low| + 3u; rho = rho0 + (f - 1) e_r + 4u.
  y.scaling.truncate = false;
  const RopeSpec yn = y.normalized();
  const double d = 128, orig = 4096;
  const auto raw = [&](double beta, double& err) {
    const double L1 = std::log(orig / (beta * 2 * M_PI));
    const double v = d * L1 / (2 * std::log(1e4));
    err = std::fabs(v) * (3 * u64 / std::fabs(L1) + 6 * u64);
    return v;
  };
  double el = 0, eh = 0;
  const double lo = raw(32, el), hi = raw(1, eh);
  ASSERT_GT(lo, 0);
  ASSERT_LT(hi, d - 1);
  const double er = (2 * el + eh) / (hi - lo) + 3 * u64;
  EXPECT_NEAR(bounds::angle_error_bound(kF64, yn, 30, 100).rel,
              rho0(yn, 30, 1e4) + 7 * er + 4 * u64 + u64, 1e-6 * u64);
  // Truncated, with low == high (both 0: orig 6 puts the slow correction in (-1, 0)): the guard's
  // 0.001 enters, e_r = u + 2u (high + 1) / 0.001.
  RopeSpec t = y;
  t.scaling.truncate = true;
  t.scaling.original_max_position_embeddings = 6;
  const RopeSpec tn = t.normalized();
  const auto [l, h] = yarn_correction_range_f64(tn);
  ASSERT_EQ(l, h);
  const double ert = u64 + 2 * u64 * (h + 1) / 0.001;
  EXPECT_NEAR(bounds::angle_error_bound(kF64, tn, 30, 100).rel,
              rho0(tn, 30, 1e4) + 7 * ert + 4 * u64 + u64, 1e-6 * u64);
}

TEST(BoundsByHand, Llama3MediumBand) {
  RopeSpec s = spec128();
  s.base = 500000;
  s.scaling = llama31_scaling();
  const RopeSpec n = s.normalized();
  const auto& sc = n.scaling;
  const double r0 = rho0(n, 40, 500000);
  const double es =
      sc.high_freq_factor * (3 * u64 + r0) / (sc.high_freq_factor - sc.low_freq_factor) + 3 * u64;
  EXPECT_NEAR(bounds::angle_error_bound(kF64, n, 40, 100).rel,
              r0 + (sc.factor - 1) * es + 4 * u64 + u64, 1e-6 * u64);
}

TEST(BoundsByHand, DynamicNtkBase) {
  RopeSpec s = scaled(ScalingKind::dynamic);
  s.scaling.factor = 2;
  s.scaling.max_position_embeddings = 4096;
  s.scaling.seq_len = 10000;
  const RopeSpec n = s.normalized();
  // t = f L / L0 - (f - 1); delta_t = (2u f L/L0 + u |f - 1| + u t) / t;
  // delta_b = d/(d-2) (delta_t + u ln t) + 3u; theta_j = base'^(-e): e ln(base') u + 2u + e
  // delta_b.
  const double f = 2, L = 10000, L0 = 4096, d = 128;
  const double t = f * L / L0 - (f - 1);
  const double dt = (2 * u64 * f * L / L0 + u64 * std::fabs(f - 1) + u64 * t) / t;
  const double db = d / (d - 2) * (dt + u64 * std::log(t)) + 3 * u64;
  const auto [j, dim] = n.ladder(25);
  const double e = 2.0 * static_cast<double>(j) / static_cast<double>(dim);
  const double base2 = dynamic_base_f64(n);
  EXPECT_NEAR(bounds::angle_error_bound(kF64, n, 25, 100).rel,
              (e * std::log(base2) + 2) * u64 + e * db + u64, 1e-6 * u64);
}

// fast_powf_f32 (section 1): rho = expm1(ln 2 |z - z*|) + 5u (ex2.approx), |z - z*| <= e (Lambda
// 5u + 4u max(Lambda, 1) + (1 + [b]) u / ln 2), then the product (u).
TEST(BoundsByHand, FastPowfF32) {
  const Policy fp{Dtype::f32, Dtype::f32, Dtype::f32, AngleRecipe::fast_powf_f32, true, ""};
  const auto s = spec128();
  const auto [j, dim] = s.ladder(40);
  const double e = 2.0 * static_cast<double>(j) / static_cast<double>(dim);
  const double lam = std::log2(1e4);
  const double dz = e * (lam * 5 * u32 + 4 * u32 * lam + u32 / std::log(2.0));
  EXPECT_NEAR(bounds::angle_error_bound(fp, s, 40, 100).rel,
              std::expm1(std::log(2.0) * dz) + 5 * u32 + u32, 1e-6 * u32);
}

}  // namespace by_hand

}  // namespace
