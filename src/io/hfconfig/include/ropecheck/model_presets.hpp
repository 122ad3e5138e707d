// The RoPE configuration of published model families as data (`report --models`, `ropecheck list
// --models`): presets/<name>.json, compiled in at configure time (presets.cmake), each a minimal
// config.json (only the keys read_hf_config reads) with the Hugging Face Hub repository it comes
// from, where its numbers were found, the context the model was trained at, and the spec its
// source states ("expect", checked by hf_config_test). The config is read by the same
// spec_from_hf_config as `--hf-config`: a preset is a config file a user could have passed.
// A new preset: one JSON file in presets/ (re-run cmake), nothing else.
#pragma once

#include "ropecheck/hf_config.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck {

struct ModelPreset {
  std::string name;      // "llama-3.1-8b"
  std::string hub_repo;  // "meta-llama/Llama-3.1-8B-Instruct" (its file: config.json)
  std::string found_in;  // where the numbers were read
  // The context the model was pre-trained at (original_max_position_embeddings, or
  // max_position_embeddings for an unscaled model): the model atlas runs up to 4x this or to
  // max_position_embeddings, whichever is longer.
  std::int64_t trained_context = 0;
  std::int64_t max_position_embeddings = 0;
  nlohmann::json config;  // the minimal config.json
  nlohmann::json expect;  // the spec its source states (head_dim, rotary_dim, base, ...)
  // The layer whose RoPE the preset reports, for configs with more than one ("layer_type":
  // Gemma 3's full_attention layers take rope_theta and rope_scaling, its sliding ones
  // rope_local_base_freq); empty for one-RoPE models. As --hf-layer-type.
  std::string layer_type;
  RopeSpec spec() const {
    HfConfigOptions o;
    o.layer_type = layer_type;
    return spec_from_hf_config(config, o);
  }
};

// Every preset, sorted by name. Throws SpecError if a compiled-in preset is malformed.
const std::vector<ModelPreset>& model_presets();
// nullptr when no preset has that name.
const ModelPreset* find_model_preset(const std::string& name);
// "deepseek-v3, gemma-2-9b, ...": for error messages.
std::string model_preset_names();

}  // namespace ropecheck
