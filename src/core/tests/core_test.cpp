// Core vocabulary. The spec's element partition and its normalization: every element of a head
// vector is either in exactly one rotation pair or passes through, for each 1-D layout and
// rotary_dim; a spec built with rotary_dim 0 means full rotary, the largest even rotary_dim (an
// odd head_dim keeps its last element as pass-through). FP8 rounding: every result is a value of
// the format (one of its 256 codes decodes to it), whatever the overflow policy. Angle recipes:
// every recipe with a name is in kAllAngleRecipes, parses back and is named in the usage list.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ropecheck/fp8.hpp"
#include "ropecheck/policy.hpp"
#include "ropecheck/spec.hpp"

namespace {

using ropecheck::Layout;
using ropecheck::RopeSpec;

TEST(CoreSpec, EveryElementIsInOnePairOrPassesThrough) {
  int checked = 0;
  for (Layout l : {Layout::interleaved, Layout::half, Layout::proportional})
    for (std::int64_t hd = 2; hd <= 12; ++hd)
      for (std::int64_t rd = 0; rd <= hd; rd += 2) {
        RopeSpec s;
        s.head_dim = hd, s.rotary_dim = rd, s.layout = l;
        try {
          s = s.normalized();
        } catch (const ropecheck::SpecError&) {
          continue;  // e.g. a layout that needs an even head_dim
        }
        std::vector<int> in_pairs(static_cast<std::size_t>(hd), 0);
        for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
          const auto [a, b] = s.pair(i);
          ASSERT_TRUE(a >= 0 && a < hd && b >= 0 && b < hd && a != b);
          ++in_pairs[static_cast<std::size_t>(a)];
          ++in_pairs[static_cast<std::size_t>(b)];
        }
        for (std::int64_t j = 0; j < hd; ++j) {
          const std::string at = std::string(name(l)) + " head_dim " + std::to_string(hd) +
                                 " rotary_dim " + std::to_string(s.rotary_dim) + " element " +
                                 std::to_string(j);
          EXPECT_EQ(in_pairs[static_cast<std::size_t>(j)] + (s.is_passthrough(j) ? 1 : 0), 1) << at;
        }
        ++checked;
      }
  EXPECT_GT(checked, 60);
}

// rotary_dim 0 (unset) is full rotary: head_dim for an even head_dim, head_dim - 1 for an odd one,
// whose last element passes through; the spec is valid either way.
TEST(CoreSpec, UnsetRotaryDimIsTheLargestEven) {
  for (std::int64_t hd : {1, 2, 7, 8, 65, 128}) {
    for (Layout l : {Layout::interleaved, Layout::half}) {
      RopeSpec s;
      s.head_dim = hd, s.layout = l;
      RopeSpec n;
      ASSERT_NO_THROW(n = s.normalized()) << hd;
      EXPECT_EQ(n.rotary_dim, hd - hd % 2) << hd;
      EXPECT_EQ(n.is_passthrough(hd - 1), hd % 2 == 1) << hd;
    }
  }
}

// fp8_round's result is always a value the format can store (e4m3fn and e4m3fnuz have no
// infinity: overflow "inf" gives NaN there), over finite values across the range, overflowing
// ones and infinities, for each policy.
TEST(CoreFp8, RoundingGivesAValueOfTheFormat) {
  using ropecheck::Fp8Format;
  using ropecheck::Fp8Overflow;
  for (Fp8Format f : {Fp8Format::e4m3fn, Fp8Format::e4m3fnuz, Fp8Format::e5m2}) {
    std::vector<double> values;
    bool has_nan = false;
    for (int b = 0; b < 256; ++b) {
      const double d = ropecheck::fp8_decode(f, static_cast<std::uint8_t>(b));
      if (std::isnan(d))
        has_nan = true;
      else
        values.push_back(d);
    }
    auto storable = [&](double r) {
      if (std::isnan(r)) return has_nan;
      for (double v : values)
        if (v == r) return true;
      return false;
    };
    const double mx = ropecheck::traits(f).max_finite;
    for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nan, Fp8Overflow::inf})
      for (double sign : {1.0, -1.0})
        for (double a : {0.0, 1e-9, 0.3, 1.0625, 7.0, mx, 1.05 * mx, 2 * mx, 1e30,
                         std::numeric_limits<double>::infinity()}) {
          const double r = ropecheck::fp8_round(sign * a, f, o);
          EXPECT_TRUE(storable(r)) << ropecheck::name(f) << " overflow " << ropecheck::name(o)
                                   << ": " << sign * a << " -> " << r;
        }
  }
}

// The enum's values are 0, 1, ...: every value name() knows (its switch is complete, -Wswitch)
// must be in the one list, parse back to itself and appear in angle_recipe_names(), the list the
// usage messages print; the list holds each value once, in enum order.
TEST(CorePolicy, EveryAngleRecipeIsListedParsedAndNamed) {
  using ropecheck::AngleRecipe;
  using ropecheck::kAllAngleRecipes;
  const std::string names = ropecheck::angle_recipe_names();
  int named = 0;
  for (int i = 0; i < 64; ++i) {
    const auto r = static_cast<AngleRecipe>(i);
    const std::string n = ropecheck::name(r);
    if (n == "?") continue;
    ++named;
    SCOPED_TRACE(n);
    EXPECT_NE(std::find(kAllAngleRecipes.begin(), kAllAngleRecipes.end(), r),
              kAllAngleRecipes.end());
    EXPECT_EQ(ropecheck::parse_angle_recipe(n), r);
    // Whole words of the list ("fast_powf_f32" is no part of "fast_powf_ladder_f32").
    const std::string list = " " + names + ",";
    EXPECT_TRUE(list.find(" " + n + ",") != std::string::npos ||
                list.find(" " + n + " ") != std::string::npos)
        << names;
  }
  EXPECT_EQ(named, static_cast<int>(kAllAngleRecipes.size()));
  for (std::size_t i = 0; i < kAllAngleRecipes.size(); ++i)
    EXPECT_EQ(static_cast<std::size_t>(kAllAngleRecipes[i]), i);
  EXPECT_FALSE(ropecheck::parse_angle_recipe("hf_f64").has_value());
}

}  // namespace
