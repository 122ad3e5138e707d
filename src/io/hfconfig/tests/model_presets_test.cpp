// Every model preset reads through spec_from_hf_config and gives the spec its source states (the
// "expect" block, written from the numbers of the model's config.json, not from the reader's
// output). Fails when a preset's config is misspelt (the reader refuses it or reads another
// value) or when the reader changes what it makes of a real config.
//
// The "expect" block sits in the same file as the config, so one typo copied into both (or into
// a key "expect" does not list: llama3's low/high_freq_factor, YaRN's betas, mscale pair and
// truncate, max_position_embeddings) would pass that test. kSourceNumbers pins each preset's RoPE
// numbers to the values its source note ("found_in") states, written here from those notes:
// a number the note does not state is not pinned.
#include "ropecheck/model_presets.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <utility>
#include <vector>

namespace ropecheck {
namespace {

using nlohmann::json;

// (preset, [(JSON pointer into its config, the value its source note states)]).
const std::vector<std::pair<std::string, std::vector<std::pair<std::string, json>>>>&
source_numbers() {
  static const std::vector<std::pair<std::string, std::vector<std::pair<std::string, json>>>> t = {
      {"deepseek-v3",
       {{"/qk_rope_head_dim", 64},
        {"/rope_theta", 10000},
        {"/max_position_embeddings", 163840},
        {"/rope_scaling/type", "yarn"},
        {"/rope_scaling/factor", 40},
        {"/rope_scaling/mscale", 1},
        {"/rope_scaling/mscale_all_dim", 1},
        {"/rope_scaling/original_max_position_embeddings", 4096}}},
      {"gemma-2-9b",
       {{"/head_dim", 256},
        {"/hidden_size", 3584},
        {"/num_attention_heads", 16},
        {"/rope_theta", 10000},
        {"/max_position_embeddings", 8192}}},
      {"gemma-3-12b",
       {{"/head_dim", 256},
        {"/hidden_size", 3840},
        {"/num_attention_heads", 16},
        {"/rope_theta", 1e6},
        {"/rope_local_base_freq", 10000},
        {"/max_position_embeddings", 131072},
        {"/rope_scaling/rope_type", "linear"},
        {"/rope_scaling/factor", 8}}},
      {"gpt-j-6b",
       {{"/n_embd", 4096}, {"/n_head", 16}, {"/rotary_dim", 64}, {"/n_positions", 2048}}},
      {"gpt-oss-20b",
       {{"/head_dim", 64},
        {"/hidden_size", 2880},
        {"/num_attention_heads", 64},
        {"/rope_theta", 150000},
        {"/max_position_embeddings", 131072},
        {"/rope_scaling/rope_type", "yarn"},
        {"/rope_scaling/factor", 32},
        {"/rope_scaling/beta_fast", 32},
        {"/rope_scaling/beta_slow", 1},
        {"/rope_scaling/original_max_position_embeddings", 4096},
        {"/rope_scaling/truncate", false}}},
      {"llama-3.1-8b",
       {{"/hidden_size", 4096},
        {"/num_attention_heads", 32},
        {"/rope_theta", 500000},
        {"/rope_scaling/rope_type", "llama3"},
        {"/rope_scaling/factor", 8},
        {"/rope_scaling/low_freq_factor", 1},
        {"/rope_scaling/high_freq_factor", 4},
        {"/rope_scaling/original_max_position_embeddings", 8192}}},
      {"llama-3.2-1b",
       {{"/rope_theta", 500000},
        {"/max_position_embeddings", 131072},
        {"/rope_scaling/rope_type", "llama3"},
        {"/rope_scaling/factor", 32},
        {"/rope_scaling/original_max_position_embeddings", 8192}}},
      {"mistral-7b",
       {{"/hidden_size", 4096},
        {"/num_attention_heads", 32},
        {"/rope_theta", 10000},
        {"/max_position_embeddings", 32768}}},
      {"phi-3.5-mini",
       {{"/hidden_size", 3072},
        {"/num_attention_heads", 32},
        {"/rope_theta", 10000},
        {"/max_position_embeddings", 131072},
        {"/original_max_position_embeddings", 4096},
        {"/rope_scaling/type", "longrope"},
        {"/rope_scaling/long_factor/0", 1.0800000429153442},
        {"/rope_scaling/long_factor/47", 64.83999633789062},
        {"/rope_scaling/short_factor/0", 1.0},
        {"/rope_scaling/short_factor/47", 2.8399994373321533}}},
      {"pythia-6.9b",
       {{"/hidden_size", 4096},
        {"/num_attention_heads", 32},
        {"/rotary_pct", 0.25},
        {"/rotary_emb_base", 10000},
        {"/max_position_embeddings", 2048}}},
      {"qwen2-vl-7b",
       {{"/hidden_size", 3584},
        {"/rope_theta", 1e6},
        {"/rope_scaling/type", "mrope"},
        {"/rope_scaling/mrope_section", {16, 24, 24}}}},
      {"qwen2.5-7b",
       {{"/hidden_size", 3584},
        {"/num_attention_heads", 28},
        {"/rope_theta", 1e6},
        {"/max_position_embeddings", 32768},
        {"/rope_scaling/type", "yarn"},
        {"/rope_scaling/factor", 4},
        {"/rope_scaling/original_max_position_embeddings", 32768}}},
  };
  return t;
}

// Numbers compare as numbers (10000 == 10000.0), everything else exactly.
bool same_value(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

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

TEST(ModelPresets, EachConfigHasTheNumbersItsSourceNoteStates) {
  std::set<std::string> pinned;
  for (const auto& [preset, numbers] : source_numbers()) {
    SCOPED_TRACE(preset);
    pinned.insert(preset);
    const ModelPreset* p = find_model_preset(preset);
    ASSERT_NE(p, nullptr);
    for (const auto& [pointer, value] : numbers) {
      const json::json_pointer ptr(pointer);
      ASSERT_TRUE(p->config.contains(ptr)) << pointer;
      EXPECT_TRUE(same_value(p->config.at(ptr), value))
          << pointer << ": config has " << p->config.at(ptr).dump() << ", the source "
          << value.dump();
    }
  }
  for (const auto& p : model_presets()) EXPECT_TRUE(pinned.count(p.name)) << p.name << " unpinned";
  // Phi-3.5-mini's 96 LongRoPE factors: the count and the sum its note states (summed in order).
  const auto& r = find_model_preset("phi-3.5-mini")->config.at("rope_scaling");
  for (const auto& [key, sum] : {std::pair{"long_factor", 1828.040079832077},
                                 std::pair{"short_factor", 83.46998918056488}}) {
    const auto f = r.at(key).get<std::vector<double>>();
    EXPECT_EQ(f.size(), 48u) << key;
    EXPECT_EQ(std::accumulate(f.begin(), f.end(), 0.0), sum) << key;
  }
}

TEST(ModelPresets, LookupByName) {
  ASSERT_NE(find_model_preset("llama-3.1-8b"), nullptr);
  EXPECT_EQ(find_model_preset("llama-9"), nullptr);
  EXPECT_NE(model_preset_names().find("gpt-j-6b"), std::string::npos);
}

}  // namespace
}  // namespace ropecheck
