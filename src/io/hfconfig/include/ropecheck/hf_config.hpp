// Hugging Face model config (config.json) -> RopeSpec. Reads transformers' standard keys
// (rope_theta, rope_scaling or rope_parameters with rope_type / type, head_dim or hidden_size /
// num_attention_heads, partial_rotary_factor, max_position_embeddings,
// original_max_position_embeddings, the M-RoPE sections) and, by model_type, each known
// family's own spelling of them (hf_families() lists the families: GPT-NeoX rotary_pct /
// rotary_emb_base, GPT-J and CodeGen rotary_dim, DeepSeek-V3 qk_rope_head_dim / rope_interleave,
// ChatGLM rope_ratio, Gemma 3 rope_local_base_freq, ...). A RoPE-looking key the reader does not
// read for that model_type, an unknown model_type, unknown rope fields and types and
// contradictory values are errors (SpecError naming the key), never guessed at.
#pragma once

#include "ropecheck/spec.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck {

struct HfConfigOptions {
  // The current sequence length for the length-dependent variants (dynamic NTK, LongRoPE's
  // short/long switch). 0: none (dynamic uses max_position_embeddings, LongRoPE the short factors).
  std::int64_t seq_len = 0;
  // The layer type whose RoPE to read when a config gives one per layer type (Gemma 3:
  // "full_attention" or "sliding_attention"). Empty: such a config is refused, naming the choice.
  std::string layer_type;
};

// The model_types whose RoPE keys are read, each with its source ("gpt_neox: rotary_pct ...").
std::vector<std::string> hf_families();

// Throws SpecError on unknown/contradictory fields or an invalid resulting spec. The result is
// normalized. Layout: half (HF rotate_half), mrope / imrope when mrope_section is given,
// interleaved for the families that pair (2i, 2i+1) (gptj, codegen, chatglm, deepseek_v3 with
// rope_interleave).
RopeSpec spec_from_hf_config(const nlohmann::json& config, const HfConfigOptions& opts = {});
// Reads the file first (SpecError when it cannot be read or is not JSON).
RopeSpec read_hf_config(const std::string& path, const HfConfigOptions& opts = {});

}  // namespace ropecheck
