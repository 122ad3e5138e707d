// The validation plan and its coverage on hand-made kernels whose supports() and domain are chosen
// so that each rule of plan.cpp / coverage.cpp decides the answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "ropecheck/validate/coverage.hpp"
#include "ropecheck/validate/plan.hpp"

namespace ropecheck::validate {
namespace {

// A kernel that is never called: only its declaration matters to the plan.
class Declared final : public Kernel {
 public:
  Domain dom;
  std::function<bool(const RopeSpec&)> accept = [](const RopeSpec&) { return true; };
  std::string name() const override { return "declared"; }
  std::string description() const override { return ""; }
  Policy policy(Dtype) const override { return {}; }
  bool supports(const RopeSpec& s, Dtype) const override { return accept(s); }
  KernelStatus apply(const RopeSpec&, const TensorArgs&) const override {
    return KernelStatus::error;
  }
  Domain domain() const override { return dom; }
};

bool has(const std::vector<RopeSpec>& v, std::int64_t hd, std::int64_t rd) {
  return std::any_of(v.begin(), v.end(),
                     [&](const RopeSpec& s) { return s.head_dim == hd && s.rotary_dim == rd; });
}

TEST(ValidatePlan, DirectedPositionsKeepTheDeclaredRangeAndItsEnds) {
  Domain any;
  const auto all = directed_positions(any);
  EXPECT_EQ(all, (std::vector<std::int64_t>{0, 1, 2, 255, 256, 2047, 2048, 4095, 65535, 65536,
                                            131071, 1048575, -1, -4096}));
  Domain int32;
  int32.min_position = 0;
  int32.max_position = std::numeric_limits<std::int32_t>::max();
  const auto p = directed_positions(int32);
  EXPECT_EQ(std::count_if(p.begin(), p.end(), [](auto m) { return m < 0; }), 0);
  EXPECT_EQ(p.back(), std::numeric_limits<std::int32_t>::max());  // the range's end, appended
  EXPECT_EQ(std::count(p.begin(), p.end(), 0), 1);                // min 0 already listed
}

TEST(ValidatePlan, BackwardPositionsAreTheForwardsNegated) {
  Declared k;
  const auto fwd = run_positions(k, false), bwd = run_positions(k, true);
  ASSERT_EQ(fwd.size(), bwd.size());
  for (std::size_t i = 0; i < fwd.size(); ++i) EXPECT_EQ(bwd[i], -fwd[i]);
}

TEST(ValidatePlan, DirectedSpecsWithoutDeclaredHeadDims) {
  Declared k;  // takes everything
  const auto specs = directed_specs(k, Dtype::f32, Layout::half);
  EXPECT_TRUE(has(specs, 64, 64));
  EXPECT_TRUE(has(specs, 128, 128));
  EXPECT_TRUE(has(specs, 80, 32));  // partial rotary
  EXPECT_TRUE(has(specs, 9, 8));    // odd head_dim, 4 pairs
  EXPECT_TRUE(has(specs, 65, 64));  // odd_head_dim_specs: realistic odd dims, at most two
  EXPECT_TRUE(has(specs, 97, 96));
  EXPECT_FALSE(has(specs, 33, 32));
  for (const RopeSpec& s : specs) EXPECT_EQ(s.layout, Layout::half);
  for (std::size_t i = 0; i < specs.size(); ++i)  // no spec twice
    for (std::size_t j = i + 1; j < specs.size(); ++j) EXPECT_FALSE(specs[i] == specs[j]);
}

TEST(ValidatePlan, DirectedSpecsFollowTheDeclaredHeadDimsAndSupports) {
  Declared k;
  k.dom.head_dims = {128};
  k.accept = [](const RopeSpec& s) { return s.head_dim == 128; };
  const auto specs = directed_specs(k, Dtype::bf16, Layout::interleaved);
  ASSERT_FALSE(specs.empty());
  for (const RopeSpec& s : specs) EXPECT_EQ(s.head_dim, 128);
  EXPECT_TRUE(has(specs, 128, 128));
  EXPECT_TRUE(has(specs, 128, 64));   // an even pair count, about half
  EXPECT_TRUE(has(specs, 128, 126));  // an odd pair count (63) below 64
}

TEST(ValidatePlan, ScaledCopiesOnlyWhenAScaleIsDeclared) {
  Declared k;
  const auto specs = directed_specs(k, Dtype::f32, Layout::half);
  k.dom.magnitude_scale = false;
  EXPECT_TRUE(scaled_specs(k, Dtype::f32, specs).empty());
  k.dom.magnitude_scale = true;
  const auto scaled = scaled_specs(k, Dtype::f32, specs);
  ASSERT_EQ(scaled.size(), 3u);  // the first full, partial and odd-head_dim spec
  for (const RopeSpec& s : scaled) EXPECT_EQ(s.scale, kDirectedScale);
  EXPECT_EQ(scaled[0].rotary_dim, scaled[0].head_dim);
}

TEST(ValidatePlan, VariantGroupsStartAtTheModelDim) {
  const auto groups = variant_groups(Layout::half, {96});
  EXPECT_EQ(groups.size(), 13u);  // every regime of every scaling kind (plan.cpp's list)
  for (const auto& g : groups) {
    ASSERT_EQ(g.size(), 2u);
    EXPECT_TRUE(g[0].head_dim == 64 || g[0].head_dim == 128);
    EXPECT_EQ(g[1].head_dim, 96);
    EXPECT_NE(g[0].scaling.kind, ScalingKind::none);
  }
  for (const auto& g : variant_groups(Layout::half, {4}, false)) {
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].head_dim, 4);
  }
}

TEST(ValidatePlan, LayoutRestrictionAdmitsTheBasicLayoutsForNewerOnes) {
  Declared k;
  RopeSpec half, inter;
  half.layout = Layout::half;
  inter.layout = Layout::interleaved;
  const LayoutRestricted to_half(k, Layout::half), to_mrope(k, Layout::mrope);
  EXPECT_TRUE(to_half.supports(half, Dtype::f32));
  EXPECT_FALSE(to_half.supports(inter, Dtype::f32));
  EXPECT_TRUE(to_mrope.supports(inter, Dtype::f32));
  EXPECT_EQ(to_half.apply(inter, TensorArgs{}), KernelStatus::unsupported);
}

TEST(ValidateCoverage, PartialOnlyBelowFourPairsIsAGap) {
  Declared k;
  k.accept = [](const RopeSpec& s) { return s.rotary_dim == s.head_dim || s.rotary_dim == 2; };
  const auto specs = directed_specs(k, Dtype::f32, Layout::half);
  const PartialCoverage pc = partial_coverage(k, Dtype::f32, Layout::half, specs);
  EXPECT_EQ(pc.ran, "");
  EXPECT_NE(pc.gap.find("coverage gap: supports() accepts partial rotary"), std::string::npos);
  // Full rotary only: nothing partial is accepted, so no gap.
  k.accept = [](const RopeSpec& s) { return s.rotary_dim == s.head_dim; };
  const PartialCoverage full =
      partial_coverage(k, Dtype::f32, Layout::half, directed_specs(k, Dtype::f32, Layout::half));
  EXPECT_EQ(full.ran, "");
  EXPECT_EQ(full.gap, "");
  // Everything: the partial specs are listed once each, rotary_dim/head_dim.
  Declared all;
  const PartialCoverage pa = partial_coverage(all, Dtype::f32, Layout::half,
                                              directed_specs(all, Dtype::f32, Layout::half));
  EXPECT_EQ(pa.gap, "");
  EXPECT_EQ(pa.ran.rfind("32/80, ", 0), 0u) << pa.ran;
}

TEST(ValidateCoverage, StructuralLineNamesWhatRan) {
  Declared k;
  const auto specs = directed_specs(k, Dtype::f32, Layout::half);
  std::vector<std::vector<RopeSpec>> groups;
  const auto all = differential_specs(k, Dtype::f32, Layout::half, {}, {}, groups);
  const StructuralCoverage sc = structural_coverage(k, Dtype::f32, Layout::half, all, groups);
  EXPECT_EQ(sc.ran,
            "odd head_dim 9, 65, 97; scale 0.75 on 3 spec(s); in place (every spec); scaling: none "
            "declared");
  EXPECT_EQ(sc.gap, "");
  // A scale accepted only below 4 pairs: a gap naming the scaled path.
  k.accept = [](const RopeSpec& s) { return s.scale == 1 || s.n_pairs() < 4; };
  const auto few = differential_specs(k, Dtype::f32, Layout::half, {}, {}, groups);
  const StructuralCoverage gap = structural_coverage(k, Dtype::f32, Layout::half, few, groups);
  EXPECT_NE(gap.gap.find("supports() accepts scale != 1"), std::string::npos) << gap.gap;
}

}  // namespace
}  // namespace ropecheck::validate
