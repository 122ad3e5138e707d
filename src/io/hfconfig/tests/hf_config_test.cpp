// HF config.json -> RopeSpec, on configs written here in the shape of real model configs.
#include "ropecheck/hf_config.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace ropecheck {
namespace {

using json = nlohmann::json;

TEST(HfConfig, Llama31_8B) {
  const json c = json::parse(R"({
    "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.rotary_dim, 128);
  EXPECT_EQ(s.base, 500000.0);
  EXPECT_EQ(s.layout, Layout::half);
  EXPECT_EQ(s.scaling.kind, ScalingKind::llama3);
  EXPECT_EQ(s.scaling.factor, 8.0);
  EXPECT_EQ(s.scaling.low_freq_factor, 1.0);
  EXPECT_EQ(s.scaling.high_freq_factor, 4.0);
  EXPECT_EQ(s.scaling.original_max_position_embeddings, 8192);
}

TEST(HfConfig, Qwen2VL_MRope) {
  const json c = json::parse(R"({
    "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.layout, Layout::mrope);
  EXPECT_EQ(s.sections, (std::vector<std::int64_t>{16, 24, 24}));
  EXPECT_EQ(s.scaling.kind, ScalingKind::none);
  EXPECT_EQ(s.n_axes(), 3);
}

TEST(HfConfig, Qwen3VL_InterleavedMRope) {
  const json c = json::parse(R"({
    "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 5000000,
    "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20],
                     "mrope_interleaved": true}})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.layout, Layout::imrope);
  EXPECT_EQ(s.sections, (std::vector<std::int64_t>{24, 20, 20}));
}

TEST(HfConfig, Phi35_LongRope) {
  json c = json::parse(R"({
    "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096, "rope_theta": 10000.0})");
  json r = {{"type", "longrope"}};
  std::vector<double> sf, lf;
  for (int i = 0; i < 48; ++i) sf.push_back(1.0 + 0.01 * i), lf.push_back(1.0 + 1.25 * i);
  r["short_factor"] = sf;
  r["long_factor"] = lf;
  c["rope_scaling"] = r;
  HfConfigOptions o;
  o.seq_len = 8192;
  const RopeSpec s = spec_from_hf_config(c, o);
  EXPECT_EQ(s.head_dim, 96);
  EXPECT_EQ(s.scaling.kind, ScalingKind::longrope);
  EXPECT_EQ(s.scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.scaling.max_position_embeddings, 131072);
  EXPECT_EQ(s.scaling.seq_len, 8192);
  EXPECT_EQ(s.scaling.long_factor, lf);
  // HF: attention_factor = sqrt(1 + ln(131072/4096) / ln(4096)) = sqrt(1 + 5/12) (ln 32/ln 4096).
  EXPECT_NEAR(attention_factor_f64(s.scaling, s.ladder_dim()), std::sqrt(1.0 + 5.0 / 12.0), 1e-15);
  // A wrong number of factors is an error, not a truncation.
  c["rope_scaling"]["short_factor"] = std::vector<double>(47, 1.0);
  EXPECT_THROW(spec_from_hf_config(c, o), SpecError);
}

TEST(HfConfig, DeepSeekYarnWithMscale) {
  const json c = json::parse(R"({
    "hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64,
    "max_position_embeddings": 163840, "rope_theta": 10000,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                     "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
                     "type": "yarn"}})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.scaling.kind, ScalingKind::yarn);
  EXPECT_EQ(s.scaling.factor, 40.0);
  EXPECT_EQ(s.scaling.mscale, 1.0);
  EXPECT_EQ(s.scaling.mscale_all_dim, 0.707);
  EXPECT_TRUE(s.scaling.truncate);
  EXPECT_FALSE(s.scaling.attention_factor.has_value());
  const double g1 = 0.1 * std::log(40.0) + 1, g2 = 0.1 * 0.707 * std::log(40.0) + 1;
  EXPECT_NEAR(attention_factor_f64(s.scaling, 64), g1 / g2, 1e-15);
}

TEST(HfConfig, GptOssYarnNoTruncate) {
  const json c = json::parse(R"({
    "head_dim": 64, "hidden_size": 2880, "num_attention_heads": 64,
    "max_position_embeddings": 131072, "rope_theta": 150000,
    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                     "truncate": false, "original_max_position_embeddings": 4096}})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_FALSE(s.scaling.truncate);
  EXPECT_NEAR(attention_factor_f64(s.scaling, 64), 0.1 * std::log(32.0) + 1, 1e-15);
  const auto [low, high] = yarn_correction_range_f64(s);
  EXPECT_NE(low, std::floor(low));  // not truncated
  EXPECT_LT(low, high);
}

TEST(HfConfig, RopeParametersFormAndPartialRotary) {
  const json c = json::parse(R"({
    "head_dim": 256, "hidden_size": 2048, "num_attention_heads": 8,
    "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0,
                        "partial_rotary_factor": 0.25}})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.rotary_dim, 64);
  EXPECT_EQ(s.base, 1e6);
  EXPECT_EQ(s.scaling.kind, ScalingKind::linear);
}

TEST(HfConfig, UnknownOrContradictoryFieldsAreErrors) {
  const auto bad = [](const char* text) {
    try {
      spec_from_hf_config(json::parse(text));
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      bad(R"({"head_dim":64,"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":4096,"betafast":32}})")
          .find("unknown field 'betafast'"),
      std::string::npos);
  EXPECT_NE(bad(R"({"head_dim":64,"rope_scaling":{"rope_type":"ntk-by-parts","factor":4}})")
                .find("unknown rope_type"),
            std::string::npos);
  EXPECT_NE(
      bad(R"({"head_dim":64,"rope_theta":10000,"rope_parameters":{"rope_type":"default","rope_theta":500000}})")
          .find("rope_theta differs"),
      std::string::npos);
  EXPECT_NE(
      bad(R"({"head_dim":64,"rope_scaling":{"rope_type":"linear","type":"dynamic","factor":2}})")
          .find("differ"),
      std::string::npos);
  EXPECT_NE(bad(R"({"head_dim":64,"rope_scaling":{"rope_type":"linear"}})").find("needs 'factor'"),
            std::string::npos);
  EXPECT_NE(bad(R"({"head_dim":128,"rope_scaling":{"type":"mrope","mrope_section":[16,24,16]}})")
                .find("sum to 56"),
            std::string::npos);
  EXPECT_NE(bad(R"({"hidden_size":100,"num_attention_heads":3})").find("not a multiple"),
            std::string::npos);
  EXPECT_NE(bad(R"({"head_dim":64,"rope_scaling":{"rope_type":"yarn","factor":4}})")
                .find("original_max_position_embeddings"),
            std::string::npos);
}

}  // namespace
}  // namespace ropecheck
