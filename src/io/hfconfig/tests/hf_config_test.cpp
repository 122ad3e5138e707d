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
  // Not in HF's formula, but the extent of an engine's cache (vLLM's llama3 class: 131072 rows):
  // without it the atlas ran vllm_native to 1M as if served.
  EXPECT_EQ(s.scaling.max_position_embeddings, 131072);
}

TEST(HfConfig, LinearKeepsMaxPositionEmbeddings) {
  const RopeSpec s = spec_from_hf_config(json::parse(R"({
    "head_dim": 256, "max_position_embeddings": 131072, "rope_theta": 1000000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0}})"));
  EXPECT_EQ(s.scaling.kind, ScalingKind::linear);
  EXPECT_EQ(s.scaling.max_position_embeddings, 131072);  // vLLM: ceil(131072 * 8) cache rows
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
  json c = json::parse(R"({
    "model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "kv_lora_rank": 512, "moe_layer_freq": 1,
    "max_position_embeddings": 163840, "rope_theta": 10000,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                     "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
                     "type": "yarn"}})");
  RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 64);
  // rope_interleave (default true): the pairs are (2i, 2i+1).
  EXPECT_EQ(s.layout, Layout::interleaved);
  c["rope_interleave"] = false;
  s = spec_from_hf_config(c);
  EXPECT_EQ(s.layout, Layout::half);
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

// ---- families: each written by hand from the keys of the model's real config.json -------------

std::string refusal(const json& c, const HfConfigOptions& o = {}) {
  try {
    spec_from_hf_config(c, o);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}

// The issue's case: Pythia-1.4B (hidden 2048, 16 heads) rotates a quarter of each head with
// rotary_emb_base; read as 128 of 128 at the default base before.
TEST(HfFamilies, GptNeoxPythia) {
  json c = json::parse(R"({
    "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": 2048,
    "num_attention_heads": 16, "num_hidden_layers": 24, "intermediate_size": 8192,
    "max_position_embeddings": 2048, "rotary_emb_base": 10000, "rotary_pct": 0.25,
    "use_parallel_residual": true, "layer_norm_eps": 1e-05, "vocab_size": 50304})");
  RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.rotary_dim, 32);
  EXPECT_EQ(s.base, 10000.0);
  EXPECT_EQ(s.layout, Layout::half);
  c["rotary_emb_base"] = 500000;  // the base is read, not defaulted
  EXPECT_EQ(spec_from_hf_config(c).base, 500000.0);
  c.erase("rotary_pct");  // GPTNeoXConfig's default: 0.25, not 1
  EXPECT_EQ(spec_from_hf_config(c).rotary_dim, 32);
  c["partial_rotary_factor"] = 0.5;  // both spellings, different values: a contradiction
  c["rotary_pct"] = 0.25;
  EXPECT_NE(refusal(c).find("'rotary_pct' and 'partial_rotary_factor' are both given and differ"),
            std::string::npos);
  // Without model_type nobody reads rotary_pct: refused, naming the key and its family.
  json bare = c;
  bare.erase("model_type");
  bare.erase("partial_rotary_factor");
  bare.erase("rotary_emb_base");
  EXPECT_NE(refusal(bare).find("'rotary_pct' is a RoPE key that is not read for a config without "
                               "model_type (it is read for model_type gpt_neox)"),
            std::string::npos);
}

// GPT-J-6B: 64 of a 256-wide head, pairs (2i, 2i+1), base 10000 fixed in its code.
TEST(HfFamilies, GptJ) {
  json c = json::parse(R"({
    "architectures": ["GPTJForCausalLM"], "model_type": "gptj", "n_embd": 4096, "n_head": 16,
    "n_layer": 28, "n_positions": 2048, "rotary": true, "rotary_dim": 64,
    "activation_function": "gelu_new",
    "layer_norm_epsilon": 1e-05, "vocab_size": 50400, "tie_word_embeddings": false})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 256);
  EXPECT_EQ(s.rotary_dim, 64);
  EXPECT_EQ(s.base, 10000.0);
  EXPECT_EQ(s.layout, Layout::interleaved);
  EXPECT_EQ(s.pair(31), (std::pair<std::int64_t, std::int64_t>{62, 63}));
  c["rotary"] = false;  // an unread flag that contradicts the code: refused
  EXPECT_NE(refusal(c).find("'rotary' is false"), std::string::npos);
  c["rotary"] = true;
  c["rope_theta"] = 500000;  // GPT-J's code does not read it: refused, not ignored
  EXPECT_NE(refusal(c).find("'rope_theta' is a RoPE key that is not read for model_type 'gptj'"),
            std::string::npos);
}

TEST(HfFamilies, CodeGen) {
  const json c = json::parse(R"({
    "architectures": ["CodeGenForCausalLM"], "model_type": "codegen", "n_embd": 1024,
    "n_head": 16, "n_layer": 20, "n_ctx": 2048, "n_positions": 2048, "rotary_dim": 32,
    "vocab_size": 51200})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.rotary_dim, 32);
  EXPECT_EQ(s.layout, Layout::interleaved);
}

TEST(HfFamilies, FalconAndAlibi) {
  json c = json::parse(R"({
    "architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 4544,
    "n_head": 71, "n_layer": 32, "alibi": false, "multi_query": true, "parallel_attn": true,
    "new_decoder_architecture": false, "bias": false, "vocab_size": 65024})");
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.base, 10000.0);
  EXPECT_EQ(s.layout, Layout::half);
  c["alibi"] = true;
  EXPECT_NE(refusal(c).find("ALiBi"), std::string::npos);
}

TEST(HfFamilies, StableLmAndPhi2PartialRotary) {
  const RopeSpec st = spec_from_hf_config(json::parse(R"({
    "model_type": "stablelm", "hidden_size": 2048, "num_attention_heads": 32,
    "num_key_value_heads": 32, "max_position_embeddings": 4096, "partial_rotary_factor": 0.25,
    "rope_theta": 10000, "rope_scaling": null, "qk_layernorm": false, "use_qkv_bias": true})"));
  EXPECT_EQ(st.head_dim, 64);
  EXPECT_EQ(st.rotary_dim, 16);
  const RopeSpec phi2 = spec_from_hf_config(json::parse(R"({
    "model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32,
    "max_position_embeddings": 2048, "partial_rotary_factor": 0.4, "rope_theta": 10000.0,
    "rope_scaling": null, "qk_layernorm": false})"));
  EXPECT_EQ(phi2.head_dim, 80);
  EXPECT_EQ(phi2.rotary_dim, 32);
  // PhiConfig's default partial_rotary_factor is 0.5.
  EXPECT_EQ(spec_from_hf_config(json::parse(R"({"model_type": "phi", "hidden_size": 2048,
    "num_attention_heads": 32, "rope_theta": 10000.0})"))
                .rotary_dim,
            32);
}

// Phi-4-mini: LongRoPE over 96 of 128 dims (48 factors per list).
TEST(HfFamilies, Phi4MiniLongRopePartial) {
  json c = json::parse(R"({
    "model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 24,
    "num_key_value_heads": 8, "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096, "partial_rotary_factor": 0.75,
    "rope_theta": 10000.0, "sliding_window": 262144})");
  json r = {{"type", "longrope"}};
  r["short_factor"] = std::vector<double>(48, 1.0);
  r["long_factor"] = std::vector<double>(48, 2.5);
  c["rope_scaling"] = r;
  const RopeSpec s = spec_from_hf_config(c);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.rotary_dim, 96);
  EXPECT_EQ(s.scaling.kind, ScalingKind::longrope);
}

TEST(HfFamilies, LlamaMistralQwen) {
  EXPECT_EQ(spec_from_hf_config(json::parse(R"({
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
    "rope_type": "llama3"}})"))
                .scaling.kind,
            ScalingKind::llama3);
  const RopeSpec m = spec_from_hf_config(json::parse(R"({
    "model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
    "num_key_value_heads": 8, "rope_theta": 1000000.0, "sliding_window": null})"));
  EXPECT_EQ(m.base, 1e6);
  const RopeSpec q = spec_from_hf_config(json::parse(R"({
    "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
    "max_position_embeddings": 32768, "rope_theta": 1000000.0, "use_sliding_window": false,
    "use_mrope": false,
    "max_window_layers": 28, "rope_scaling": {"factor": 4.0,
    "original_max_position_embeddings": 32768, "type": "yarn"}})"));
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.scaling.kind, ScalingKind::yarn);
  EXPECT_EQ(q.scaling.factor, 4.0);
  EXPECT_NE(refusal(json::parse(R"({"model_type": "qwen2", "hidden_size": 3584,
    "num_attention_heads": 28, "rope_theta": 1000000.0, "use_mrope": true})"))
                .find("'use_mrope' is true but the rope dictionary has no mrope_section"),
            std::string::npos);
  // Families whose default base is not read here must give rope_theta.
  EXPECT_NE(refusal(json::parse(R"({"model_type": "qwen2", "hidden_size": 3584,
    "num_attention_heads": 28})"))
                .find("give rope_theta"),
            std::string::npos);
  const RopeSpec vl = spec_from_hf_config(json::parse(R"({
    "model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
    "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "embed_dim": 1280, "spatial_patch_size": 14}})"));
  EXPECT_EQ(vl.layout, Layout::mrope);
}

// Qwen3-VL nests the language model (and its interleaved M-RoPE) in text_config.
TEST(HfFamilies, Qwen3VlTextConfig) {
  const RopeSpec s = spec_from_hf_config(json::parse(R"({
    "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
    "image_token_id": 151655, "vision_config": {"depth": 27, "hidden_size": 1152,
      "num_position_embeddings": 2304, "patch_size": 16},
    "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096,
      "num_attention_heads": 32, "max_position_embeddings": 262144, "rope_theta": 5000000,
      "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20],
                       "rope_type": "default"}}})"));
  EXPECT_EQ(s.layout, Layout::imrope);
  EXPECT_EQ(s.base, 5e6);
  EXPECT_EQ(s.head_dim, 128);
}

TEST(HfFamilies, GptOssAndGemma2) {
  const RopeSpec o = spec_from_hf_config(json::parse(R"({
    "model_type": "gpt_oss", "head_dim": 64, "hidden_size": 2880, "num_attention_heads": 64,
    "max_position_embeddings": 131072, "rope_theta": 150000, "sliding_window": 128,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
    "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false}})"));
  EXPECT_FALSE(o.scaling.truncate);
  const RopeSpec g = spec_from_hf_config(json::parse(R"({
    "model_type": "gemma2", "head_dim": 256, "hidden_size": 3584, "num_attention_heads": 16,
    "rope_theta": 10000.0, "sliding_window": 4096, "query_pre_attn_scalar": 256})"));
  EXPECT_EQ(g.head_dim, 256);
}

// Gemma 3: the full-attention layers' RoPE (rope_theta, rope_scaling) and the sliding-window
// layers' (rope_local_base_freq, unscaled); 4B and up nest the language model in text_config.
TEST(HfFamilies, Gemma3LayerTypes) {
  const json c = json::parse(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"model_type": "gemma3_text", "head_dim": 256, "hidden_size": 2560,
      "num_attention_heads": 8, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "patch_size": 14}})");
  EXPECT_NE(refusal(c).find("'rope_local_base_freq': Gemma 3 has two RoPE configurations"),
            std::string::npos);
  HfConfigOptions o;
  o.layer_type = "full_attention";
  RopeSpec s = spec_from_hf_config(c, o);
  EXPECT_EQ(s.base, 1e6);
  EXPECT_EQ(s.scaling.kind, ScalingKind::linear);
  EXPECT_EQ(s.head_dim, 256);
  o.layer_type = "sliding_attention";
  s = spec_from_hf_config(c, o);
  EXPECT_EQ(s.base, 10000.0);
  EXPECT_EQ(s.scaling.kind, ScalingKind::none);
  o.layer_type = "global";
  EXPECT_NE(refusal(c, o).find("not full_attention or sliding_attention"), std::string::npos);
  // transformers 5: rope_parameters per layer type.
  const json v5 = json::parse(R"({
    "model_type": "gemma3_text", "head_dim": 256, "hidden_size": 1152, "num_attention_heads": 4,
    "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  EXPECT_NE(refusal(v5).find("one RoPE configuration per layer type"), std::string::npos);
  o.layer_type = "full_attention";
  EXPECT_EQ(spec_from_hf_config(v5, o).base, 1e6);
}

// ChatGLM3 / GLM-4 (remote code): kv_channels 128, the first 64 dims rotated in pairs
// (2i, 2i+1), base 10000 * rope_ratio.
TEST(HfFamilies, ChatGlm) {
  const RopeSpec s = spec_from_hf_config(json::parse(R"({
    "architectures": ["ChatGLMModel"], "model_type": "chatglm", "hidden_size": 4096,
    "num_attention_heads": 32, "kv_channels": 128, "multi_query_attention": true,
    "multi_query_group_num": 2, "original_rope": true, "rope_ratio": 500, "seq_length": 131072,
    "padded_vocab_size": 151552})"));
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.rotary_dim, 64);
  EXPECT_EQ(s.base, 5e6);
  EXPECT_EQ(s.layout, Layout::interleaved);
}

TEST(HfFamilies, RefusedRatherThanGuessed) {
  // An unknown family: its layout and defaults are not known (Cohere pairs (2i, 2i+1)).
  EXPECT_NE(refusal(json::parse(R"({"model_type": "cohere", "hidden_size": 8192,
    "num_attention_heads": 64, "rope_theta": 8000000.0})"))
                .find("model_type 'cohere' is not a family whose RoPE keys are read"),
            std::string::npos);
  // RoPE-looking keys nobody reads for that family.
  for (const char* bad : {R"({"model_type": "llama", "hidden_size": 4096,
                              "num_attention_heads": 32, "rope_interleave": true})",
                          R"({"model_type": "stablelm", "hidden_size": 2048,
                              "num_attention_heads": 32, "yarn_rope_scaling": {"factor": 4}})",
                          R"({"hidden_size": 768, "num_attention_heads": 12,
                              "position_embedding_type": "rotary"})",
                          R"({"hidden_size": 7168, "num_attention_heads": 128,
                              "qk_rope_head_dim": 64})"}) {
    const std::string m = refusal(json::parse(bad));
    EXPECT_NE(m.find("is a RoPE key that is not read"), std::string::npos) << bad << ": " << m;
  }
  // Keys that merely mention frequency or positions are not RoPE keys.
  EXPECT_EQ(refusal(json::parse(R"({"model_type": "deepseek_v3", "hidden_size": 7168,
    "num_attention_heads": 128, "qk_rope_head_dim": 64, "moe_layer_freq": 1,
    "max_window_layers": 4})")),
            "no error");
  EXPECT_GE(hf_families().size(), 12u);
}

}  // namespace
}  // namespace ropecheck
