// Every model preset reads through spec_from_hf_config and gives the spec its source states (the
// "expect" block, written from the numbers of the model's config.json, not from the reader's
// output). Fails when a preset's config is misspelt (the reader refuses it or reads another
// value) or when the reader changes what it makes of a real config.
#include "ropecheck/model_presets.hpp"

#include <gtest/gtest.h>

#include <set>

namespace ropecheck {
namespace {

TEST(ModelPresets, AtLeastTenFamilies) {
  std::set<std::string> families;
  for (const auto& p : model_presets()) families.insert(p.config.at("model_type"));
  EXPECT_GE(families.size(), 10u);
}

TEST(ModelPresets, EachGivesTheSpecItsSourceStates) {
  for (const auto& p : model_presets()) {
    SCOPED_TRACE(p.name + " (" + p.hub_repo + ")");
    const RopeSpec s = p.spec();
    const auto& e = p.expect;
    EXPECT_EQ(s.head_dim, e.at("head_dim").get<std::int64_t>());
    EXPECT_EQ(s.rotary_dim, e.at("rotary_dim").get<std::int64_t>());
    EXPECT_EQ(s.base, e.at("base").get<double>());
    EXPECT_EQ(std::string(name(s.layout)), e.at("layout").get<std::string>());
    EXPECT_EQ(std::string(name(s.scaling.kind)), e.at("scaling").get<std::string>());
    if (e.contains("factor")) EXPECT_EQ(s.scaling.factor, e["factor"].get<double>());
    if (e.contains("original_max_position_embeddings"))
      EXPECT_EQ(s.scaling.original_max_position_embeddings,
                e["original_max_position_embeddings"].get<std::int64_t>());
    if (e.contains("sections"))
      EXPECT_EQ(s.sections, e["sections"].get<std::vector<std::int64_t>>());
    if (s.scaling.kind == ScalingKind::longrope) {
      // One factor per rotated pair, taken over unchanged (48 for Phi-3.5-mini's 96-dim heads).
      const auto& r = p.config.at("rope_scaling");
      EXPECT_EQ(s.scaling.long_factor, r.at("long_factor").get<std::vector<double>>());
      EXPECT_EQ(s.scaling.short_factor, r.at("short_factor").get<std::vector<double>>());
      EXPECT_EQ(static_cast<std::int64_t>(s.scaling.long_factor.size()), s.n_pairs());
    }
    EXPECT_GT(p.trained_context, 0);
    EXPECT_GE(p.max_position_embeddings, p.trained_context);
    EXPECT_FALSE(p.found_in.empty());
  }
}

TEST(ModelPresets, LookupByName) {
  ASSERT_NE(find_model_preset("llama-3.1-8b"), nullptr);
  EXPECT_EQ(find_model_preset("llama-9"), nullptr);
  EXPECT_NE(model_preset_names().find("gpt-j-6b"), std::string::npos);
}

}  // namespace
}  // namespace ropecheck
