// Checks of the bound table against values derived by hand from the formulas in bounds.cpp (so a
// change of the table that does not match its written derivation fails here).
#include "ropecheck/bounds.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using namespace ropecheck;

RopeSpec spec128() {
  RopeSpec s;
  s.head_dim = 128;
  return s.normalized();
}

const Policy kF64{Dtype::f64, Dtype::f64, Dtype::f64, AngleRecipe::pow_product, false, ""};
const Policy kHf{Dtype::f32, Dtype::f32, Dtype::f32, AngleRecipe::hf_f32, false, ""};

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

TEST(Bounds, UnderflowMakesTinyPairsLooser) {
  const auto b = bounds::pair_error_bound(kF64, spec128(), Dtype::f16, 1, 10);
  EXPECT_GT(b.total_u(1e-7), b.total_u(1.0));
  EXPECT_TRUE(std::isinf(b.total_u(0)));
}

}  // namespace
