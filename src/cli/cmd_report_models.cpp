// `report --models`: one atlas per model preset, an index over them (cmd_report_models.hpp). The
// model's spec comes from its preset's config.json through the same reader as --hf-config; each
// atlas is run_atlas over that spec, so a model atlas is the --hf-config report of that config.
#include "cmd_report_models.hpp"

#include "cli.hpp"
#include "ropecheck/model_presets.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

namespace ropecheck::cli {

namespace {

using json = nlohmann::json;

std::vector<const ModelPreset*> parse_models(const std::string& list) {
  std::vector<const ModelPreset*> out;
  if (list == "all") {
    for (const auto& p : model_presets()) out.push_back(&p);
    return out;
  }
  for (const auto& n : split(list, ',', "--models")) {
    const ModelPreset* p = find_model_preset(n);
    if (!p)
      throw UsageError("--models: no preset named '" + n + "' (available: " + model_preset_names() +
                       ", or 'all'; see 'ropecheck list --models')");
    if (std::find(out.begin(), out.end(), p) != out.end())
      throw UsageError("--models: '" + n + "' given twice");
    out.push_back(p);
  }
  return out;
}

// Contexts up to 4x what the model was trained at, or its max_position_embeddings when longer
// (at least 2: the atlas's first context).
std::int64_t model_max_position(const ModelPreset& p) {
  return std::min<std::int64_t>(
      std::max({4 * p.trained_context, p.max_position_embeddings, std::int64_t{2}}),
      std::int64_t{1} << 40);
}

// The engines that ran the spec, each in the layout its atlas row says.
std::vector<reports::DiffEngine> ran_engines(const json& atlas,
                                             const std::vector<reports::AtlasEngine>& engines) {
  std::vector<reports::DiffEngine> out;
  for (const auto& e : engines)
    for (const auto& r : atlas["rows"])
      if (r["engine"] == e.kernel->name() && r["supported"].get<bool>()) {
        out.push_back({e.kernel, *parse_layout(r["layout"].get<std::string>())});
        break;
      }
  return out;
}

json model_block(const ModelPreset& p, const RopeSpec& s, std::int64_t max_position) {
  return {{"name", p.name},
          {"hub_repo", p.hub_repo},
          {"file", "config.json"},
          {"found_in", p.found_in},
          {"trained_context", p.trained_context},
          {"max_position_embeddings", p.max_position_embeddings},
          {"atlas_max_position", max_position},
          {"spec", describe(s)}};
}

std::string index_markdown(const json& idx) {
  std::ostringstream o;
  o << "# Model atlas\n\nOne engine atlas per model preset (its RoPE read from the config.json "
       "named, by the same reader as `--hf-config`). Each row links its report.\n\n"
    << "| model | source | spec | contexts to | engines ran | not implemented | engine "
       "differences | checks |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : idx["models"]) {
    std::string ran, ni;
    for (const auto& e : m["engines_ran"]) ran += (ran.empty() ? "" : ", ") + e.get<std::string>();
    for (const auto& e : m["not_implemented"])
      ni += (ni.empty() ? "" : ", ") + e.get<std::string>();
    o << "| [" << m["name"].get<std::string>() << "](" << m["name"].get<std::string>()
      << "/report.md) | " << m["hub_repo"].get<std::string>() << " | "
      << m["spec"].get<std::string>() << " | " << m["atlas_max_position"] << " | "
      << (ran.empty() ? "none" : ran) << " | " << (ni.empty() ? "-" : ni) << " | "
      << m["engine_differences"] << " | " << (m["passed"].get<bool>() ? "pass" : "FAIL") << " |\n";
  }
  return o.str();
}

json index_row(const json& doc, int verdict) {
  json m = doc["model"];
  m["engines_ran"] = json::array();
  m["not_implemented"] = json::array();
  std::vector<std::string> seen;
  for (const auto& r : doc["atlas"]["rows"]) {
    const std::string e = r["engine"];
    if (std::find(seen.begin(), seen.end(), e) != seen.end()) continue;
    if (r.value("not_implemented", false)) {
      m["not_implemented"].push_back(e), seen.push_back(e);
    } else if (r["supported"].get<bool>()) {
      m["engines_ran"].push_back(e + " (" + r["layout"].get<std::string>() + ")"),
          seen.push_back(e);
    }
  }
  m["engine_differences"] = doc["model"]["engine_differences"].size();
  m["passed"] = verdict == 0;
  return m;
}

}  // namespace

int report_models(const std::string& list, const reports::Options& base,
                  const std::vector<reports::AtlasEngine>& engines, const std::string& out,
                  const reports::Progress& progress) {
  if (base.spec) throw UsageError("--models and --hf-config exclude each other");
  const auto models = parse_models(list);
  json index{{"models", json::array()}};
  int status = 0;
  for (const ModelPreset* p : models) {
    reports::Options o = base;
    o.max_position = model_max_position(*p);
    // A call as long as the atlas's longest context (as for --hf-config): LongRoPE's long factors
    // and dynamic NTK's base at that length, what a model served at that context computes.
    o.spec = with_runtime_seq_len(p->spec(), o.max_position, p->name, "");
    const reports::Progress prog =
        progress ? [&](const std::string& m) { progress("[" + p->name + "] " + m); }
                 : reports::Progress{};
    json doc = reports::run_atlas(o, engines, prog);
    doc["model"] = model_block(*p, *o.spec, o.max_position);
    json pairs;
    doc["model"]["engine_differences"] = reports::engine_differences(
        *o.spec, ran_engines(doc["atlas"], engines), o.dtypes, o.max_position, o.seed, &pairs);
    doc["model"]["engine_pairs"] = pairs;
    reports::write_all(doc, std::filesystem::path(out) / p->name);
    const int v = report_verdict(doc);
    status = std::max(status, v);
    index["models"].push_back(index_row(doc, v));
    std::cout << "wrote " << out << "/" << p->name << "/ (" << (v == 0 ? "pass" : "FAIL") << ")\n";
  }
  reports::atomic_write(std::filesystem::path(out) / "index.json", index.dump(1) + "\n");
  reports::atomic_write(std::filesystem::path(out) / "index.md", index_markdown(index));
  std::cout << "wrote " << out << "/index.json, index.md\n";
  return status;
}

}  // namespace ropecheck::cli
