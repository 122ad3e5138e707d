// Hugging Face model config (config.json) -> RopeSpec. Reads rope_theta, rope_scaling or
// rope_parameters (rope_type / type), head_dim or hidden_size / num_attention_heads,
// partial_rotary_factor, max_position_embeddings, original_max_position_embeddings and the
// M-RoPE sections. Unknown rope fields, unknown rope types and contradictory values are errors
// (SpecError with a message naming the field), never guessed at.
#pragma once

#include "ropecheck/spec.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace ropecheck {

struct HfConfigOptions {
  // The current sequence length for the length-dependent variants (dynamic NTK, LongRoPE's
  // short/long switch). 0: none (dynamic uses max_position_embeddings, LongRoPE the short factors).
  std::int64_t seq_len = 0;
};

// Throws SpecError on unknown/contradictory fields or an invalid resulting spec. The result is
// normalized. Layout: half (HF rotate_half), or mrope / imrope when mrope_section is given.
RopeSpec spec_from_hf_config(const nlohmann::json& config, const HfConfigOptions& opts = {});
// Reads the file first (SpecError when it cannot be read or is not JSON).
RopeSpec read_hf_config(const std::string& path, const HfConfigOptions& opts = {});

}  // namespace ropecheck
