// Model presets (model_presets.hpp): the compiled-in presets/*.json texts parsed once.
#include "ropecheck/model_presets.hpp"

#include <algorithm>
#include <string_view>

namespace ropecheck {

namespace detail {
const std::vector<std::string_view>& preset_texts();  // model_presets_data.cpp (generated)
}

namespace {

ModelPreset parse_preset(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw SpecError("model preset: not a JSON object");
  try {
    ModelPreset p;
    p.name = j.at("name").get<std::string>();
    p.hub_repo = j.at("hub_repo").get<std::string>();
    p.found_in = j.at("found_in").get<std::string>();
    p.trained_context = j.at("trained_context").get<std::int64_t>();
    p.config = j.at("config");
    p.expect = j.at("expect");
    p.layer_type = j.value("layer_type", std::string{});
    p.max_position_embeddings =
        p.config.value("max_position_embeddings", p.config.value("n_positions", std::int64_t{0}));
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw SpecError(std::string("model preset: ") + e.what());
  }
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = [] {
    std::vector<ModelPreset> v;
    for (auto t : detail::preset_texts()) v.push_back(parse_preset(t));
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.name < b.name; });
    return v;
  }();
  return presets;
}

const ModelPreset* find_model_preset(const std::string& name) {
  for (const auto& p : model_presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string model_preset_names() {
  std::string s;
  for (const auto& p : model_presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace ropecheck
