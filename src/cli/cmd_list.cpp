// `ropecheck list`: the built-in kernels with their declared policies, the dtypes, the layouts
// and, with --hf-config, which kernel x dtype runs the model's spec; as text or JSON.
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/model_presets.hpp"

namespace ropecheck::cli {

namespace {

// A plain spec every kernel that stores a dtype at all supports (full rotary, half, base 1e4).
std::vector<const Kernel*> all_kernels() {
  std::vector<const Kernel*> v = builtin_kernels();
  v.insert(v.end(), engine_kernels().begin(), engine_kernels().end());
  return v;
}

RopeSpec probe_spec() {
  RopeSpec s;
  s.head_dim = 128;
  s.layout = Layout::half;
  return s.normalized();
}

nlohmann::json kernel_json(const Kernel& k) {
  nlohmann::json kj{{"name", k.name()}, {"description", k.description()}};
  if (const auto* e = dynamic_cast<const EngineKernel*>(&k)) {
    const Provenance p = e->provenance();
    kj["provenance"] = {{"engine", p.engine},
                        {"upstream", p.upstream},
                        {"checked", p.checked},
                        {"modelled", p.modelled}};
  }
  for (Dtype d : kAllDtypes) {
    // An engine kernel runs only the model dtypes its engine runs: the others have no policy.
    if (!k.supports(probe_spec(), d)) continue;
    kj["policy"][name(d)] = policy_json(k.policy(d));
  }
  return kj;
}

nlohmann::json list_json(const std::optional<RopeSpec>& model, const std::string& model_path) {
  nlohmann::json j;
  j["dtypes"] = nlohmann::json::array();
  for (Dtype d : kAllDtypes) {
    const auto t = traits(d);
    j["dtypes"].push_back({{"name", t.name},
                           {"digits", t.digits},
                           {"emin", t.emin},
                           {"emax", t.emax},
                           {"unit_roundoff", unit_roundoff(d)}});
  }
  j["layouts"] = {{{"name", "interleaved"}, {"pairs", "(2i, 2i+1)"}},
                  {{"name", "half"}, {"pairs", "(i, i + rotary_dim/2)"}}};
  j["kernels"] = nlohmann::json::array();
  for (const Kernel* k : builtin_kernels()) j["kernels"].push_back(kernel_json(*k));
  j["engines"] = nlohmann::json::array();
  for (const Kernel* k : engine_kernels()) j["engines"].push_back(kernel_json(*k));
  if (model) {
    // Which built-in kernels run this model's spec (scaling kind, layout, multi-axis) per dtype:
    // validate/report skip the others as unsupported.
    j["hf_config"] = {{"file", model_path}, {"spec", describe(*model)}};
    for (const Kernel* k : all_kernels())
      for (Dtype d : kAllDtypes)
        j["hf_config"]["supported"][k->name()][name(d)] = k->supports(*model, d);
  }
  return j;
}

std::string policy_line(const nlohmann::json& p) {
  std::string line = "angle " + p["angle"].get<std::string>() + " (" +
                     p["recipe"].get<std::string>() + "), table " + p["table"].get<std::string>() +
                     ", arithmetic " + p["arithmetic"].get<std::string>() +
                     (p["fused"].get<bool>() ? " (fma)" : "");
  if (!p["notes"].get<std::string>().empty()) line += "; " + p["notes"].get<std::string>();
  return line;
}

// A kernel's policy once, with the dtypes that share it: "all dtypes: ..." when every dtype has
// the same policy, else one line per distinct policy ("f32, f16, bf16: ...") in dtype order.
void print_kernels(const char* heading, const nlohmann::json& kernels) {
  std::cout << heading << ":\n";
  for (const auto& kj : kernels) {
    std::cout << "  " << kj["name"].get<std::string>() << ": "
              << kj["description"].get<std::string>() << "\n";
    if (kj.contains("provenance")) {
      const auto& p = kj["provenance"];
      std::cout << "    engine: " << p["engine"].get<std::string>() << "\n"
                << "    upstream: " << p["upstream"].get<std::string>() << "\n"
                << "    checked: " << p["checked"].get<std::string>() << "\n";
      if (!p["modelled"].get<std::string>().empty())
        std::cout << "    modelled: " << p["modelled"].get<std::string>() << "\n";
    }
    std::vector<std::pair<std::string, std::string>> groups;  // (dtypes, policy line)
    for (Dtype d : kAllDtypes) {
      if (!kj["policy"].contains(name(d))) continue;
      const std::string line = policy_line(kj["policy"][name(d)]);
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const auto& e) { return e.second == line; });
      if (g == groups.end())
        groups.emplace_back(name(d), line);
      else
        g->first += std::string(", ") + name(d);
    }
    for (const auto& [dtypes, line] : groups)
      std::cout << "    "
                << (groups.size() == 1 && kj["policy"].size() == kAllDtypes.size() ? "all dtypes"
                                                                                   : dtypes)
                << ": " << line << "\n";
  }
}

void print_text(const nlohmann::json& j, const std::optional<RopeSpec>& model,
                const std::string& model_path) {
  print_kernels("kernels", j["kernels"]);
  print_kernels("engines (the atlas: report --engines)", j["engines"]);
  std::cout << "dtypes:\n";
  for (const auto& d : j["dtypes"])
    std::cout << "  " << d["name"].get<std::string>() << ": p=" << d["digits"]
              << " emin=" << d["emin"] << " emax=" << d["emax"] << " u=2^-" << d["digits"] << "\n";
  std::cout << "layouts:\n  interleaved: pairs (2i, 2i+1)\n  half: pairs (i, i + rotary_dim/2)\n";
  if (!model) return;
  std::cout << "hf-config " << model_path << ": " << describe(*model) << "\n";
  for (const Kernel* k : all_kernels()) {
    std::cout << "  " << k->name() << ":";
    for (Dtype d : kAllDtypes)
      std::cout << " " << name(d) << " " << (k->supports(*model, d) ? "supported" : "unsupported");
    std::cout << "\n";
  }
}

// `list --models`: each preset's name, spec (read by the --hf-config reader) and source.
int print_model_presets(bool as_json) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : model_presets())
    j.push_back({{"name", p.name},
                 {"hub_repo", p.hub_repo},
                 {"file", "config.json"},
                 {"found_in", p.found_in},
                 {"trained_context", p.trained_context},
                 {"spec", describe(p.spec())}});
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "model presets (report --models):\n";
  for (const auto& m : j)
    std::cout << "  " << m["name"].get<std::string>() << ": " << m["spec"].get<std::string>()
              << "\n    from " << m["hub_repo"].get<std::string>() << " config.json; trained at "
              << m["trained_context"] << "\n";
  return 0;
}

}  // namespace

void add_list(CLI::App& app, int& status) {
  auto* cmd = app.add_subcommand(
      "list", "List built-in kernels (with precision policies), dtypes, layouts");
  auto as_json = std::make_shared<bool>(false);
  auto hf = std::make_shared<HfConfigArg>();
  auto models = std::make_shared<bool>(false);
  cmd->add_flag("--json", *as_json, "print JSON instead of text");
  cmd->add_flag("--models", *models,
                "list the model presets of 'report --models' (name, source, spec) instead");
  add_hf_config_options(cmd, *hf,
                        "a Hugging Face config.json: also print its spec and which kernel x "
                        "dtype supports it");
  cmd->callback([as_json, hf, models, &status] {
    if (*models) {
      status = print_model_presets(*as_json);
      return;
    }
    // The config first: a bad one is exit 2 before anything is printed.
    if (hf->path.empty() && hf->seq_len != 0) throw UsageError("--seq-len needs --hf-config");
    const std::optional<RopeSpec> model = hf->read();
    const nlohmann::json j = list_json(model, hf->path);
    if (*as_json)
      std::cout << j.dump(2) << "\n";
    else
      print_text(j, model, hf->path);
    status = 0;
  });
}

}  // namespace ropecheck::cli
