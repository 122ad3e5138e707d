// `check`'s angle_recipe key (check_spec.cpp): every recipe of the one list (kAllAngleRecipes in
// ropecheck/policy.hpp) is accepted and declared, and the refusal of an unknown name lists every
// recipe, so the message cannot lag behind the recipes (it once lacked vllm_f32).
#include <gtest/gtest.h>

#include <string>

#include "check_spec.hpp"
#include "cli.hpp"
#include "ropecheck/policy.hpp"

namespace {

using ropecheck::cli::Keys;

Keys half_keys(const std::string& recipe) {
  return {{"layout", "half"}, {"head_dim", "8"}, {"angle_recipe", recipe}};
}

TEST(CheckSpec, EveryAngleRecipeIsAccepted) {
  for (ropecheck::AngleRecipe r : ropecheck::kAllAngleRecipes) {
    SCOPED_TRACE(ropecheck::name(r));
    EXPECT_EQ(ropecheck::cli::resolve(half_keys(ropecheck::name(r)), 8, 2).policy.recipe, r);
  }
}

TEST(CheckSpec, UnknownAngleRecipeNamesEveryRecipe) {
  std::string message;
  try {
    ropecheck::cli::resolve(half_keys("hf_f16"), 8, 2);
  } catch (const ropecheck::cli::UsageError& e) {
    message = e.what();
  }
  ASSERT_NE(message.find("angle_recipe must be "), std::string::npos) << message;
  EXPECT_NE(message.find("(got 'hf_f16')"), std::string::npos) << message;
  for (ropecheck::AngleRecipe r : ropecheck::kAllAngleRecipes)
    EXPECT_NE(message.find(std::string(" ") + ropecheck::name(r)), std::string::npos)
        << ropecheck::name(r) << " missing from: " << message;
}

}  // namespace
