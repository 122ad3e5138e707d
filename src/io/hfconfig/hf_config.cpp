// Hugging Face config.json -> RopeSpec, in two stages.
// 1. The family (model_type): the language model's part of the config (language_part), the
//    family's row of kFamilies, every RoPE-looking key checked against what that family's
//    transformers code reads (check_rope_keys), then the family's own spelling rewritten into
//    transformers' standard keys (read_family: aliases, defaults, GPT-J's rotary_dim, ChatGLM's
//    rope_ratio, ...) and the layer type chosen where a config has one RoPE per layer type.
// 2. The standard keys: one reader per field group, in the order the errors are checked: the
//    rope dictionary and its type (rope_type_of, check_fields), the base, the head and rotary
//    dims, the M-RoPE sections, then one reader per scaling rope_type (read_linear ...
//    read_longrope).
// A new family: a row of kFamilies (and a branch of read_family if it spells a key its own
// way). A new HF rope_type: its allowed fields in check_fields, a read_<type>, a branch in
// read_scaling.
#include "ropecheck/hf_config.hpp"

#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace ropecheck {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& m) { throw SpecError("hf-config: " + m); }

double num(const json& j, const std::string& key) {
  if (!j.is_number()) fail("'" + key + "' must be a number, got " + j.dump());
  return j.get<double>();
}
std::int64_t integer(const json& j, const std::string& key) {
  const double v = num(j, key);
  if (v != std::floor(v) || std::fabs(v) > 9.0e15) fail("'" + key + "' must be an integer");
  return static_cast<std::int64_t>(v);
}
std::vector<double> numbers(const json& j, const std::string& key) {
  if (!j.is_array()) fail("'" + key + "' must be an array of numbers");
  std::vector<double> v;
  for (const auto& e : j) v.push_back(num(e, key));
  return v;
}
// HF reads optional fields with dict.get(k): a JSON null is the same as an absent key.
bool given(const json& j, const char* k) { return j.contains(k) && !j[k].is_null(); }

// ---- stage 1: the family ----------------------------------------------------------------------
// What each family's transformers code reads, from huggingface/transformers (the commits of the
// files read): configuration_gpt_neox.py @008e5743 (rope_theta <- rotary_emb_base,
// partial_rotary_factor <- rotary_pct, default 0.25); configuration_gptj.py @0bedd330 and
// configuration_codegen.py @0300cc14 (rotary_dim, default 64; n_embd, n_head, n_positions);
// GPT-J's modeling (create_sinusoidal_positions over rotary_dim with base 10000,
// rotate_every_two: pairs (2i, 2i+1); CodeGen copies it); configuration_deepseek_v3.py @0fc683d1
// (qk_rope_head_dim default 64, rope_interleave default true, rope_theta 10000) and
// modeling_deepseek_v3.py @f5a9ec51 (apply_rotary_pos_emb_interleave: q_pe / k_pe taken as pairs
// (2i, 2i+1), de-interleaved, then rotate_half: the rotation pairs interleaved elements);
// configuration_stablelm.py @1459750d (partial_rotary_factor 0.25, rope_theta 10000);
// configuration_phi.py @008e5743 (partial_rotary_factor 0.5); configuration_falcon.py @05585536
// (n_head; alibi: ALiBi biases instead of RoPE); modular_gemma3.py @d903f323
// (Gemma3TextConfig.convert_rope_params_to_dict: full_attention takes rope_theta and
// rope_scaling, sliding_attention rope_local_base_freq with the default rope type; transformers
// 5 rope_parameters keyed by layer type). ChatGLM2/3 and GLM-4 (THUDM's remote code
// modeling_chatglm.py on the Hugging Face Hub: RotaryEmbedding.forward_impl and
// ChatGLMModel.__init__): head dim kv_channels, RotaryEmbedding(kv_channels // 2) rotates the
// first kv_channels / 2 dims in pairs (2i, 2i+1) (apply_rotary_pos_emb reshapes to [..., 2]),
// base 10000 * rope_ratio.
struct Family {
  const char* model_type;
  bool standard;               // its code reads rope_theta / rope_scaling / rope_parameters /
                               // partial_rotary_factor / head_dim (transformers' generic RoPE)
  std::optional<double> base;  // rope_theta when the config gives none (nullopt: must be given)
  double prf;                  // partial_rotary_factor when the config gives none
  std::vector<std::pair<const char*, const char*>> alias;  // the family's key -> standard key
  std::vector<const char*> own;                            // RoPE keys read by read_family
};

// Families whose default base was not read are nullopt: a config of theirs must give rope_theta.
const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"llama", true, 10000.0, 1.0, {}, {}},
      {"mistral", true, std::nullopt, 1.0, {}, {}},
      {"mixtral", true, std::nullopt, 1.0, {}, {}},
      {"qwen2", true, std::nullopt, 1.0, {}, {"use_mrope"}},
      {"qwen2_moe", true, std::nullopt, 1.0, {}, {"use_mrope"}},
      {"qwen3", true, std::nullopt, 1.0, {}, {"use_mrope"}},
      {"qwen3_moe", true, std::nullopt, 1.0, {}, {"use_mrope"}},
      {"qwen2_vl", true, std::nullopt, 1.0, {}, {"use_mrope"}},
      {"qwen2_5_vl", true, std::nullopt, 1.0, {}, {"use_mrope"}},
      {"qwen3_vl", true, std::nullopt, 1.0, {}, {}},
      {"qwen3_vl_text", true, std::nullopt, 1.0, {}, {}},
      {"phi3", true, std::nullopt, 1.0, {}, {}},
      {"phi", true, 10000.0, 0.5, {}, {}},
      {"stablelm", true, 10000.0, 0.25, {}, {}},
      {"gemma", true, std::nullopt, 1.0, {}, {}},
      {"gemma2", true, std::nullopt, 1.0, {}, {}},
      {"gemma3", true, std::nullopt, 1.0, {}, {"rope_local_base_freq"}},
      {"gemma3_text", true, std::nullopt, 1.0, {}, {"rope_local_base_freq"}},
      {"gpt_oss", true, std::nullopt, 1.0, {}, {}},
      {"falcon",
       true,
       10000.0,
       1.0,
       {{"n_head", "num_attention_heads"}, {"n_embed", "hidden_size"}},
       {"alibi"}},
      {"gpt_neox",
       true,
       10000.0,
       0.25,
       {{"rotary_pct", "partial_rotary_factor"}, {"rotary_emb_base", "rope_theta"}},
       {}},
      {"gptj",
       false,
       10000.0,
       1.0,
       {{"n_embd", "hidden_size"},
        {"n_head", "num_attention_heads"},
        {"n_positions", "max_position_embeddings"}},
       {"rotary_dim", "rotary"}},
      {"codegen",
       false,
       10000.0,
       1.0,
       {{"n_embd", "hidden_size"},
        {"n_head", "num_attention_heads"},
        {"n_positions", "max_position_embeddings"}},
       {"rotary_dim", "rotary"}},
      {"deepseek_v3", true, 10000.0, 1.0, {}, {"qk_rope_head_dim", "rope_interleave"}},
      {"chatglm",
       false,
       10000.0,
       0.5,
       {{"kv_channels", "head_dim"}},
       {"rope_ratio", "original_rope"}},
  };
  return f;
}

// A config without model_type: transformers' generic reading (modeling_rope_utils: base 10000).
const Family kGeneric = {"", true, 10000.0, 1.0, {}, {}};

const std::set<std::string> kStandardKeys = {"rope_theta", "rope_scaling", "rope_parameters",
                                             "partial_rotary_factor"};
// Read for every family (the scaling's lengths).
const std::set<std::string> kLengthKeys = {"max_position_embeddings",
                                           "original_max_position_embeddings"};

// "RoPE-looking": a key that could change the rotation. Keys that merely contain "position" or
// "freq" (moe_layer_freq, max_window_layers) are not; a key naming rope, rotary, theta, ALiBi or
// a positional embedding is, and must be read or refused.
bool looks_rope(const std::string& key) {
  std::string k;
  for (char ch : key) k += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* p : {"rope", "rotary", "theta", "alibi", "pos_emb", "position_emb", "rot_dim"})
    if (k.find(p) != std::string::npos) return true;
  return false;
}

bool reads(const Family& f, const std::string& k) {
  if (f.standard && kStandardKeys.count(k)) return true;
  for (const auto& [from, to] : f.alias)
    if (k == from) return true;
  for (const char* o : f.own)
    if (k == o) return true;
  return false;
}

std::string family_names() {
  std::string out;
  for (const auto& f : families()) out += std::string(out.empty() ? "" : ", ") + f.model_type;
  return out;
}

const Family& family_of(const json& c) {
  if (!given(c, "model_type")) return kGeneric;
  if (!c["model_type"].is_string()) fail("'model_type' must be a string");
  const std::string mt = c["model_type"].get<std::string>();
  for (const auto& f : families())
    if (mt == f.model_type) return f;
  fail("model_type '" + mt +
       "' is not a family whose RoPE keys are read (its layout and defaults are not known "
       "here); known: " +
       family_names() + ". Give the spec instead (--spec / rc.Spec)");
}

// Every RoPE-looking key of the config is one its family's code reads, or the config is refused.
void check_rope_keys(const json& c, const Family& fam) {
  for (const auto& item : c.items()) {
    const std::string& k = item.key();
    if (item.value().is_null() || !looks_rope(k) || kLengthKeys.count(k) || reads(fam, k)) continue;
    std::string readers;
    for (const auto& f : families())
      if (reads(f, k) && (!f.standard || !kStandardKeys.count(k)))
        readers += std::string(readers.empty() ? "" : ", ") + f.model_type;
    const std::string who = *fam.model_type ? "model_type '" + std::string(fam.model_type) + "'"
                                            : "a config without model_type";
    fail("'" + k + "' is a RoPE key that is not read for " + who +
         (!readers.empty()              ? " (it is read for model_type " + readers + ")"
          : kStandardKeys.count(k) != 0 ? std::string(" (that family's code does not read it)")
                                        : std::string(" (no known family reads it)")) +
         "; refused rather than ignored");
  }
}

// A vision-language config: the language model's RoPE is in text_config when the top level has
// none (Qwen3-VL, Gemma 3 4B+). Both: refused unless every key agrees.
json language_part(const json& c) {
  if (!c.contains("text_config") || !c["text_config"].is_object()) return c;
  const json& t = c["text_config"];
  bool top = false;
  for (const auto& item : c.items())
    top = top ||
          (!item.value().is_null() && looks_rope(item.key()) && !kLengthKeys.count(item.key()));
  bool any = false;
  for (const auto& item : t.items()) {
    if (item.value().is_null() || !looks_rope(item.key()) || kLengthKeys.count(item.key()))
      continue;
    any = true;
    if (top && (!c.contains(item.key()) || c[item.key()] != item.value()))
      fail("'text_config." + item.key() +
           "' differs from the top level: two RoPE configurations in one config");
  }
  if (!any || top) return c;
  json out = t;
  if (!given(out, "model_type") && given(c, "model_type")) out["model_type"] = c["model_type"];
  return out;
}

struct FamilyReading {
  Layout layout = Layout::half;
  std::optional<std::int64_t> rotary_dim;  // a family that gives it in dims (GPT-J, CodeGen)
};

bool has_in_rope_dict(const json& n, const char* k) {
  for (const char* d : {"rope_scaling", "rope_parameters"})
    if (given(n, d) && n[d].is_object() && n[d].contains(k)) return true;
  return false;
}

// One RoPE configuration per layer type: transformers 5.x rope_parameters keyed by layer type,
// or Gemma 3's rope_local_base_freq beside rope_theta. The layer type is chosen, never guessed.
void select_layer_type(json& n, const Family& fam, const std::string& lt) {
  static const char* kTypes[] = {"full_attention", "sliding_attention"};
  if (!lt.empty() && lt != kTypes[0] && lt != kTypes[1])
    fail("layer type '" + lt + "' is not full_attention or sliding_attention");
  const std::string choose =
      "choose one with --hf-layer-type full_attention|sliding_attention (Python: "
      "Spec.from_hf_config(config, layer_type=...))";
  json& p = n["rope_parameters"];
  const bool nested = p.is_object() && ((p.contains(kTypes[0]) && p[kTypes[0]].is_object()) ||
                                        (p.contains(kTypes[1]) && p[kTypes[1]].is_object()));
  if (p.is_null()) n.erase("rope_parameters");
  if (nested) {
    if (given(n, "rope_local_base_freq"))
      fail(
          "'rope_local_base_freq' beside rope_parameters per layer type: two sliding-window bases");
    if (lt.empty()) fail("rope_parameters gives one RoPE configuration per layer type; " + choose);
    if (!p.contains(lt)) fail("rope_parameters has no '" + lt + "' configuration");
    const json sub = p[lt];
    n["rope_parameters"] = sub;
    return;
  }
  if (std::string(fam.model_type).rfind("gemma3", 0) != 0) return;  // one RoPE for every layer
  if (lt.empty())
    fail(
        "'rope_local_base_freq': Gemma 3 has two RoPE configurations, full_attention layers "
        "(rope_theta, rope_scaling) and sliding_attention layers (rope_local_base_freq, "
        "unscaled); " +
        choose);
  if (lt == kTypes[1]) {
    if (!given(n, "rope_local_base_freq"))
      fail("layer type sliding_attention needs 'rope_local_base_freq'");
    n["rope_theta"] = n["rope_local_base_freq"];
    n.erase("rope_scaling");
    n.erase("rope_parameters");
  }
  n.erase("rope_local_base_freq");
}

// The family's own keys rewritten into the standard ones; its layout and dims.
FamilyReading read_family(json& n, const Family& fam, const std::string& layer_type) {
  FamilyReading out;
  for (const auto& [from, to] : fam.alias) {
    if (!given(n, from)) continue;
    if (given(n, to) && n[to] != n[from])
      fail(std::string("'") + from + "' and '" + to + "' are both given and differ");
    n[to] = n[from];
    n.erase(from);
  }
  const std::string mt = fam.model_type;
  // Flags saved in real configs that the family's transformers code never reads: Qwen's
  // use_mrope (false in Qwen2/2.5 configs; M-RoPE comes from mrope_section) and GPT-J's rotary
  // (true in GPT-J-6B's config; its code always rotates). A value saying otherwise contradicts
  // what the code does and is refused.
  const auto flag = [&n](const char* k) {
    if (!n[k].is_boolean()) fail(std::string("'") + k + "' must be true or false");
    const bool v = n[k].get<bool>();
    n.erase(k);
    return v;
  };
  if (given(n, "use_mrope") && flag("use_mrope") && !has_in_rope_dict(n, "mrope_section"))
    fail("'use_mrope' is true but the rope dictionary has no mrope_section");
  if (given(n, "rotary") && !flag("rotary"))
    fail("'rotary' is false: " + mt + "'s code rotates rotary_dim dims regardless");
  if (mt == "gptj" || mt == "codegen") {
    if (n.contains("rotary_dim") && n["rotary_dim"].is_null())
      fail("'rotary_dim' is null: " + mt + "'s code then rotates by the whole embedding width");
    out.rotary_dim = n.contains("rotary_dim") ? integer(n["rotary_dim"], "rotary_dim") : 64;
    n.erase("rotary_dim");
    n["rope_theta"] = 10000.0;
    out.layout = Layout::interleaved;
  } else if (mt == "deepseek_v3") {
    const std::int64_t d =
        given(n, "qk_rope_head_dim") ? integer(n["qk_rope_head_dim"], "qk_rope_head_dim") : 64;
    if (given(n, "head_dim") && integer(n["head_dim"], "head_dim") != d)
      fail("'head_dim' differs from 'qk_rope_head_dim' (DeepSeek-V3's RoPE head)");
    n["head_dim"] = d;
    // HF permutes q_pe / k_pe from pairs (2i, 2i+1) to rotate_half order before rotating
    // (apply_rotary_pos_emb_interleave): the rotation's pairs are interleaved. HF returns the
    // result in that de-interleaved order (the same permutation of q and k, invisible to the
    // scores); a kernel that rotates in place returns the interleaved order the spec describes.
    bool inter = true;
    if (given(n, "rope_interleave")) {
      if (!n["rope_interleave"].is_boolean()) fail("'rope_interleave' must be true or false");
      inter = n["rope_interleave"].get<bool>();
    }
    out.layout = inter ? Layout::interleaved : Layout::half;
  } else if (mt == "chatglm") {
    const double ratio = given(n, "rope_ratio") ? num(n["rope_ratio"], "rope_ratio") : 1.0;
    if (!(ratio > 0)) fail("'rope_ratio' must be > 0");
    n["rope_theta"] = 10000.0 * ratio;
    out.layout = Layout::interleaved;
  } else if (mt == "falcon" && given(n, "alibi")) {
    if (!n["alibi"].is_boolean()) fail("'alibi' must be true or false");
    if (n["alibi"].get<bool>())
      fail("'alibi' is true: this Falcon model has ALiBi position biases, not RoPE");
  }
  select_layer_type(n, fam, layer_type);
  if (!given(n, "rope_theta") && !has_in_rope_dict(n, "rope_theta")) {
    if (!fam.base)
      fail("no rope_theta, and the default base of model_type '" + mt +
           "' is not read here: give rope_theta");
    n["rope_theta"] = *fam.base;
  }
  if (fam.prf != 1.0 && !given(n, "partial_rotary_factor") &&
      !has_in_rope_dict(n, "partial_rotary_factor"))
    n["partial_rotary_factor"] = fam.prf;
  return out;
}

// ---- stage 2: the standard keys ---------------------------------------------------------------

// The rope dictionary: rope_scaling (transformers 4.x) or rope_parameters (5.x). Both present
// and different is a contradiction.
json rope_dict(const json& c) {
  const bool has_s = given(c, "rope_scaling");
  const bool has_p = given(c, "rope_parameters");
  if (has_s && has_p && c["rope_scaling"] != c["rope_parameters"])
    fail("both rope_scaling and rope_parameters are given and they differ");
  if (has_s) return c["rope_scaling"];
  if (has_p) return c["rope_parameters"];
  return json::object();
}

struct RopeType {
  std::string name;  // the frequency recipe: default, linear, dynamic, yarn, llama3, longrope
  bool mrope;        // Qwen2-VL's {"type": "mrope"}: default frequencies, M-RoPE layout
};

// rope_type (type is its old name): both given and different is a contradiction.
RopeType rope_type_of(const json& r) {
  std::string type = "default";
  if (r.contains("rope_type") && r.contains("type") && r["rope_type"] != r["type"])
    fail("rope_type and type differ");
  for (const char* k : {"rope_type", "type"})
    if (r.contains(k)) {
      if (!r[k].is_string()) fail(std::string("'") + k + "' must be a string");
      type = r[k].get<std::string>();
    }
  if (type == "mrope") return {"default", true};
  return {type, false};
}

// Unknown rope types and fields a type does not read are errors, never ignored: a field we do
// not model would silently change the frequencies.
void check_fields(const json& r, const std::string& type) {
  static const std::set<std::string> common = {"rope_type",     "type",
                                               "rope_theta",    "partial_rotary_factor",
                                               "mrope_section", "mrope_interleaved"};
  static const std::map<std::string, std::set<std::string>> allowed = {
      {"default", {}},
      {"linear", {"factor"}},
      {"dynamic", {"factor", "original_max_position_embeddings"}},
      {"yarn",
       {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "truncate",
        "mscale", "mscale_all_dim", "attention_factor"}},
      {"llama3",
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}},
      {"longrope",
       {"short_factor", "long_factor", "factor", "original_max_position_embeddings",
        "attention_factor"}}};
  const auto it = allowed.find(type);
  if (it == allowed.end())
    fail("unknown rope_type '" + type +
         "' (known: default, linear, dynamic, yarn, llama3, longrope, mrope)");
  for (const auto& item : r.items())
    if (!common.count(item.key()) && !it->second.count(item.key()))
      fail("unknown field '" + item.key() + "' for rope_type '" + type + "'");
}

// rope_theta: top level (4.x) or inside rope_parameters (5.x); both and different: contradiction.
double read_base(const json& c, const json& r) {
  double base = 10000.0;  // HF's default when a config has none
  if (c.contains("rope_theta")) base = num(c["rope_theta"], "rope_theta");
  if (r.contains("rope_theta")) {
    const double b = num(r["rope_theta"], "rope_theta");
    if (c.contains("rope_theta") && b != base)
      fail("rope_theta differs between the top level and rope_parameters");
    base = b;
  }
  return base;
}

// head_dim, or hidden_size / num_attention_heads (exactly divisible). (DeepSeek's MLA RoPE head,
// qk_rope_head_dim, arrives here as head_dim: read_family.)
std::int64_t read_head_dim(const json& c) {
  if (given(c, "head_dim")) return integer(c["head_dim"], "head_dim");
  if (!c.contains("hidden_size") || !c.contains("num_attention_heads"))
    fail("need head_dim or hidden_size and num_attention_heads");
  const std::int64_t h = integer(c["hidden_size"], "hidden_size");
  const std::int64_t n = integer(c["num_attention_heads"], "num_attention_heads");
  if (n < 1 || h % n != 0)
    fail("hidden_size (" + std::to_string(h) + ") is not a multiple of num_attention_heads (" +
         std::to_string(n) + ")");
  return h / n;
}

// partial_rotary_factor (top level or rope dictionary): HF dim = int(head_dim * factor).
std::int64_t read_rotary_dim(const json& c, const json& r, std::int64_t head_dim) {
  double prf = 1.0;
  if (c.contains("partial_rotary_factor"))
    prf = num(c["partial_rotary_factor"], "partial_rotary_factor");
  if (r.contains("partial_rotary_factor")) {
    const double p = num(r["partial_rotary_factor"], "partial_rotary_factor");
    if (c.contains("partial_rotary_factor") && p != prf)
      fail("partial_rotary_factor differs between the top level and the rope dictionary");
    prf = p;
  }
  if (!(prf > 0 && prf <= 1)) fail("partial_rotary_factor must be in (0, 1]");
  const auto rotary_dim = static_cast<std::int64_t>(static_cast<double>(head_dim) * prf);
  if (rotary_dim % 2 != 0)
    fail("int(head_dim * partial_rotary_factor) = " + std::to_string(rotary_dim) +
         " is odd (RoPE rotates pairs)");
  return rotary_dim;
}

// The layout: half (HF rotate_half), or mrope / imrope (mrope_interleaved, Qwen3-VL) when the
// dictionary has mrope_section.
void read_sections(const json& r, bool mrope_type, RopeSpec& s) {
  s.layout = Layout::half;
  if (!r.contains("mrope_section")) {
    if (mrope_type) fail("rope type 'mrope' without mrope_section");
    return;
  }
  // Integers checked before the conversion: a double beyond int64 is UB to convert (found by
  // fuzz_hf_config: "mrope_section": [16, 24, 2.3e112]).
  if (!r["mrope_section"].is_array()) fail("'mrope_section' must be an array of integers");
  for (const auto& e : r["mrope_section"]) s.sections.push_back(integer(e, "mrope_section"));
  const bool inter = r.contains("mrope_interleaved") && r["mrope_interleaved"].is_boolean() &&
                     r["mrope_interleaved"].get<bool>();
  s.layout = inter ? Layout::imrope : Layout::mrope;
}

// What the scaling readers see: the config, its rope dictionary, the rope_type and the
// config's max_position_embeddings (0 when absent).
struct ScalingFields {
  const json& c;
  const json& r;
  const std::string& type;
  std::int64_t max_pos;
  const HfConfigOptions& opts;

  const json& need(const char* k) const {
    if (!r.contains(k)) fail("rope_type '" + type + "' needs '" + k + "'");
    return r[k];
  }
  double factor() const { return num(need("factor"), "factor"); }
  // The rope dictionary's, else the top level's; HF: `... or config.max_position_embeddings`.
  std::int64_t original_max_pos() const {
    const char* k = "original_max_position_embeddings";
    if (r.contains(k)) return integer(r[k], k);
    if (c.contains(k)) return integer(c[k], k);
    if (max_pos == 0)
      fail("rope_type '" + type +
           "' needs original_max_position_embeddings or max_position_embeddings");
    return max_pos;
  }
  void optional_attention_factor(Scaling& sc) const {
    if (given(r, "attention_factor"))
      sc.attention_factor = num(r["attention_factor"], "attention_factor");
  }
};

// linear and llama3 keep the config's max_position_embeddings (0 when absent): no HF formula reads
// it, but an engine's cache extent does (vLLM: ceil(L * factor) rows for linear, L for llama3),
// so positions past it are refused ("not run") instead of extrapolated.
void read_linear(const ScalingFields& f, Scaling& sc) {
  sc.kind = ScalingKind::linear;
  sc.factor = f.factor();
  sc.max_position_embeddings = f.max_pos;
}

void read_dynamic(const ScalingFields& f, Scaling& sc) {
  sc.kind = ScalingKind::dynamic;
  sc.factor = f.factor();
  if (f.max_pos == 0) fail("rope_type 'dynamic' needs max_position_embeddings");
  sc.max_position_embeddings = f.max_pos;
  sc.seq_len = f.opts.seq_len;
}

void read_yarn(const ScalingFields& f, Scaling& sc) {
  const json& r = f.r;
  sc.kind = ScalingKind::yarn;
  sc.factor = f.factor();
  sc.original_max_position_embeddings = f.original_max_pos();
  // HF: beta_fast = get("beta_fast") or 32 (a JSON null or 0 falls back too).
  if (given(r, "beta_fast") && num(r["beta_fast"], "beta_fast") != 0)
    sc.beta_fast = num(r["beta_fast"], "beta_fast");
  if (given(r, "beta_slow") && num(r["beta_slow"], "beta_slow") != 0)
    sc.beta_slow = num(r["beta_slow"], "beta_slow");
  if (r.contains("truncate")) {
    if (!r["truncate"].is_boolean()) fail("'truncate' must be true or false");
    sc.truncate = r["truncate"].get<bool>();
  }
  if (given(r, "mscale")) sc.mscale = num(r["mscale"], "mscale");
  if (given(r, "mscale_all_dim")) sc.mscale_all_dim = num(r["mscale_all_dim"], "mscale_all_dim");
  f.optional_attention_factor(sc);
}

void read_llama3(const ScalingFields& f, Scaling& sc) {
  sc.kind = ScalingKind::llama3;
  sc.factor = f.factor();
  sc.low_freq_factor = num(f.need("low_freq_factor"), "low_freq_factor");
  sc.high_freq_factor = num(f.need("high_freq_factor"), "high_freq_factor");
  sc.original_max_position_embeddings =
      integer(f.need("original_max_position_embeddings"), "original_max_position_embeddings");
  sc.max_position_embeddings = f.max_pos;
}

void read_longrope(const ScalingFields& f, Scaling& sc) {
  sc.kind = ScalingKind::longrope;
  sc.short_factor = numbers(f.need("short_factor"), "short_factor");
  sc.long_factor = numbers(f.need("long_factor"), "long_factor");
  // HF _compute_longrope_parameters: with original_max_position_embeddings (Phi-3), the
  // extended length is max_position_embeddings; without it, max_position_embeddings is the
  // original and the extended one is original * factor.
  const bool has_orig = f.r.contains("original_max_position_embeddings") ||
                        f.c.contains("original_max_position_embeddings");
  if (has_orig) {
    sc.original_max_position_embeddings = f.original_max_pos();
    if (f.max_pos == 0) fail("rope_type 'longrope' needs max_position_embeddings");
    sc.max_position_embeddings = f.max_pos;
  } else {
    if (f.max_pos == 0 || !f.r.contains("factor"))
      fail(
          "rope_type 'longrope' needs original_max_position_embeddings, or "
          "max_position_embeddings and factor");
    sc.original_max_position_embeddings = f.max_pos;
    const double mp = static_cast<double>(f.max_pos) * num(f.r["factor"], "factor");
    if (!(mp >= 0 && mp <= 9.0e15))  // converting a double beyond int64 is UB
      fail("max_position_embeddings x factor = " + std::to_string(mp) + " is out of range");
    sc.max_position_embeddings = static_cast<std::int64_t>(mp);
  }
  f.optional_attention_factor(sc);
  sc.seq_len = f.opts.seq_len;
}

// rope_type "default" (and "mrope") leaves the scaling at none.
void read_scaling(const ScalingFields& f, Scaling& sc) {
  if (f.type == "linear")
    read_linear(f, sc);
  else if (f.type == "dynamic")
    read_dynamic(f, sc);
  else if (f.type == "yarn")
    read_yarn(f, sc);
  else if (f.type == "llama3")
    read_llama3(f, sc);
  else if (f.type == "longrope")
    read_longrope(f, sc);
}

}  // namespace

std::vector<std::string> hf_families() {
  std::vector<std::string> out;
  for (const auto& f : families()) {
    std::string keys =
        f.standard ? "rope_theta, rope_scaling / rope_parameters, partial_rotary_factor" : "";
    for (const auto& [from, to] : f.alias)
      if (looks_rope(from)) keys += std::string(keys.empty() ? "" : ", ") + from;
    for (const char* o : f.own) keys += std::string(keys.empty() ? "" : ", ") + o;
    out.push_back(std::string(f.model_type) + ": " + keys);
  }
  return out;
}

RopeSpec spec_from_hf_config(const json& config, const HfConfigOptions& opts) {
  if (!config.is_object()) fail("the config must be a JSON object");
  json c = language_part(config);
  const Family& fam = family_of(c);
  check_rope_keys(c, fam);
  const FamilyReading fr = read_family(c, fam, opts.layer_type);
  const json r = rope_dict(c);
  if (!r.is_object()) fail("rope_scaling / rope_parameters must be an object");
  const RopeType type = rope_type_of(r);
  check_fields(r, type.name);

  RopeSpec s;
  s.base = read_base(c, r);
  s.head_dim = read_head_dim(c);
  s.rotary_dim = read_rotary_dim(c, r, s.head_dim);
  std::int64_t max_pos = 0;
  if (c.contains("max_position_embeddings"))
    max_pos = integer(c["max_position_embeddings"], "max_position_embeddings");
  read_sections(r, type.mrope, s);
  read_scaling({c, r, type.name, max_pos, opts}, s.scaling);
  if (fr.rotary_dim) {
    if (*fr.rotary_dim < 2 || *fr.rotary_dim > s.head_dim || *fr.rotary_dim % 2 != 0)
      fail("'rotary_dim' = " + std::to_string(*fr.rotary_dim) + " must be even and in [2, " +
           std::to_string(s.head_dim) + "] (the head dim)");
    s.rotary_dim = *fr.rotary_dim;
  }
  if (fr.layout != Layout::half) {
    if (s.layout != Layout::half) fail("mrope_section with an interleaved family");
    s.layout = fr.layout;
  }
  return s.normalized();
}

RopeSpec read_hf_config(const std::string& path, const HfConfigOptions& opts) {
  std::ifstream f(path);
  if (!f) fail("cannot read '" + path + "'");
  json c;
  try {
    c = json::parse(f);
  } catch (const std::exception& e) {
    fail("'" + path + "' is not JSON: " + e.what());
  }
  return spec_from_hf_config(c, opts);
}

}  // namespace ropecheck
