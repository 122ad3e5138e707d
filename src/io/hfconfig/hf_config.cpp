#include "ropecheck/hf_config.hpp"

#include <cmath>
#include <fstream>
#include <map>
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

// The rope dictionary: rope_scaling (transformers 4.x) or rope_parameters (5.x). Both present
// and different is a contradiction.
json rope_dict(const json& c) {
  const bool has_s = c.contains("rope_scaling") && !c["rope_scaling"].is_null();
  const bool has_p = c.contains("rope_parameters") && !c["rope_parameters"].is_null();
  if (has_s && has_p && c["rope_scaling"] != c["rope_parameters"])
    fail("both rope_scaling and rope_parameters are given and they differ");
  if (has_s) return c["rope_scaling"];
  if (has_p) return c["rope_parameters"];
  return json::object();
}

}  // namespace

RopeSpec spec_from_hf_config(const json& c, const HfConfigOptions& opts) {
  if (!c.is_object()) fail("the config must be a JSON object");
  const json r = rope_dict(c);
  if (!r.is_object()) fail("rope_scaling / rope_parameters must be an object");

  // rope_type (type is its old name): both given and different is a contradiction.
  std::string type = "default";
  if (r.contains("rope_type") && r.contains("type") && r["rope_type"] != r["type"])
    fail("rope_type and type differ");
  for (const char* k : {"rope_type", "type"})
    if (r.contains(k)) {
      if (!r[k].is_string()) fail(std::string("'") + k + "' must be a string");
      type = r[k].get<std::string>();
    }
  // Qwen2-VL writes {"type": "mrope", "mrope_section": [...]}: default frequencies, M-RoPE layout.
  const bool mrope_type = type == "mrope";
  if (mrope_type) type = "default";

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
  for (const auto& [k, v] : r.items())
    if (!common.count(k) && !it->second.count(k))
      fail("unknown field '" + k + "' for rope_type '" + type + "'");

  RopeSpec s;
  // rope_theta: top level (4.x) or inside rope_parameters (5.x); both and different: contradiction.
  s.base = 10000.0;  // HF's default when a config has none
  if (c.contains("rope_theta")) s.base = num(c["rope_theta"], "rope_theta");
  if (r.contains("rope_theta")) {
    const double b = num(r["rope_theta"], "rope_theta");
    if (c.contains("rope_theta") && b != s.base)
      fail("rope_theta differs between the top level and rope_parameters");
    s.base = b;
  }

  // head_dim, or hidden_size / num_attention_heads (exactly divisible). DeepSeek (MLA) rotates
  // only the qk_rope_head_dim part of each head: that is the RoPE head.
  if (c.contains("qk_rope_head_dim") && !c["qk_rope_head_dim"].is_null()) {
    s.head_dim = integer(c["qk_rope_head_dim"], "qk_rope_head_dim");
  } else if (c.contains("head_dim") && !c["head_dim"].is_null()) {
    s.head_dim = integer(c["head_dim"], "head_dim");
  } else {
    if (!c.contains("hidden_size") || !c.contains("num_attention_heads"))
      fail("need head_dim or hidden_size and num_attention_heads");
    const std::int64_t h = integer(c["hidden_size"], "hidden_size");
    const std::int64_t n = integer(c["num_attention_heads"], "num_attention_heads");
    if (n < 1 || h % n != 0)
      fail("hidden_size (" + std::to_string(h) + ") is not a multiple of num_attention_heads (" +
           std::to_string(n) + ")");
    s.head_dim = h / n;
  }

  // partial_rotary_factor: HF dim = int(head_dim * partial_rotary_factor).
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
  s.rotary_dim = static_cast<std::int64_t>(static_cast<double>(s.head_dim) * prf);
  if (s.rotary_dim % 2 != 0)
    fail("int(head_dim * partial_rotary_factor) = " + std::to_string(s.rotary_dim) +
         " is odd (RoPE rotates pairs)");
  s.layout = Layout::half;

  std::int64_t max_pos = 0;
  if (c.contains("max_position_embeddings"))
    max_pos = integer(c["max_position_embeddings"], "max_position_embeddings");

  if (r.contains("mrope_section")) {
    // Integers checked before the conversion: a double beyond int64 is UB to convert (found by
    // fuzz_hf_config: "mrope_section": [16, 24, 2.3e112]).
    if (!r["mrope_section"].is_array()) fail("'mrope_section' must be an array of integers");
    for (const auto& e : r["mrope_section"]) s.sections.push_back(integer(e, "mrope_section"));
    const bool inter = r.contains("mrope_interleaved") && r["mrope_interleaved"].is_boolean() &&
                       r["mrope_interleaved"].get<bool>();
    s.layout = inter ? Layout::imrope : Layout::mrope;
  } else if (mrope_type) {
    fail("rope type 'mrope' without mrope_section");
  }

  Scaling& sc = s.scaling;
  const auto need = [&](const char* k) -> const json& {
    if (!r.contains(k)) fail(std::string("rope_type '") + type + "' needs '" + k + "'");
    return r[k];
  };
  const auto orig_from = [&](bool required) {
    if (r.contains("original_max_position_embeddings"))
      return integer(r["original_max_position_embeddings"], "original_max_position_embeddings");
    if (c.contains("original_max_position_embeddings"))
      return integer(c["original_max_position_embeddings"], "original_max_position_embeddings");
    if (required && max_pos == 0)
      fail("rope_type '" + type +
           "' needs original_max_position_embeddings or max_position_embeddings");
    return max_pos;  // HF: `... or config.max_position_embeddings`
  };
  if (type == "linear") {
    sc.kind = ScalingKind::linear;
    sc.factor = num(need("factor"), "factor");
  } else if (type == "dynamic") {
    sc.kind = ScalingKind::dynamic;
    sc.factor = num(need("factor"), "factor");
    if (max_pos == 0) fail("rope_type 'dynamic' needs max_position_embeddings");
    sc.max_position_embeddings = max_pos;
    sc.seq_len = opts.seq_len;
  } else if (type == "yarn") {
    sc.kind = ScalingKind::yarn;
    sc.factor = num(need("factor"), "factor");
    sc.original_max_position_embeddings = orig_from(true);
    // HF: beta_fast = get("beta_fast") or 32 (a JSON null or 0 falls back too).
    if (r.contains("beta_fast") && !r["beta_fast"].is_null() &&
        num(r["beta_fast"], "beta_fast") != 0)
      sc.beta_fast = num(r["beta_fast"], "beta_fast");
    if (r.contains("beta_slow") && !r["beta_slow"].is_null() &&
        num(r["beta_slow"], "beta_slow") != 0)
      sc.beta_slow = num(r["beta_slow"], "beta_slow");
    if (r.contains("truncate")) {
      if (!r["truncate"].is_boolean()) fail("'truncate' must be true or false");
      sc.truncate = r["truncate"].get<bool>();
    }
    if (r.contains("mscale") && !r["mscale"].is_null()) sc.mscale = num(r["mscale"], "mscale");
    if (r.contains("mscale_all_dim") && !r["mscale_all_dim"].is_null())
      sc.mscale_all_dim = num(r["mscale_all_dim"], "mscale_all_dim");
    if (r.contains("attention_factor") && !r["attention_factor"].is_null())
      sc.attention_factor = num(r["attention_factor"], "attention_factor");
  } else if (type == "llama3") {
    sc.kind = ScalingKind::llama3;
    sc.factor = num(need("factor"), "factor");
    sc.low_freq_factor = num(need("low_freq_factor"), "low_freq_factor");
    sc.high_freq_factor = num(need("high_freq_factor"), "high_freq_factor");
    sc.original_max_position_embeddings =
        integer(need("original_max_position_embeddings"), "original_max_position_embeddings");
  } else if (type == "longrope") {
    sc.kind = ScalingKind::longrope;
    sc.short_factor = numbers(need("short_factor"), "short_factor");
    sc.long_factor = numbers(need("long_factor"), "long_factor");
    // HF _compute_longrope_parameters: with original_max_position_embeddings (Phi-3), the
    // extended length is max_position_embeddings; without it, max_position_embeddings is the
    // original and the extended one is original * factor.
    const bool has_orig = r.contains("original_max_position_embeddings") ||
                          c.contains("original_max_position_embeddings");
    if (has_orig) {
      sc.original_max_position_embeddings = orig_from(true);
      if (max_pos == 0) fail("rope_type 'longrope' needs max_position_embeddings");
      sc.max_position_embeddings = max_pos;
    } else {
      if (max_pos == 0 || !r.contains("factor"))
        fail(
            "rope_type 'longrope' needs original_max_position_embeddings, or "
            "max_position_embeddings and factor");
      sc.original_max_position_embeddings = max_pos;
      const double mp = static_cast<double>(max_pos) * num(r["factor"], "factor");
      if (!(mp >= 0 && mp <= 9.0e15))  // converting a double beyond int64 is UB
        fail("max_position_embeddings x factor = " + std::to_string(mp) + " is out of range");
      sc.max_position_embeddings = static_cast<std::int64_t>(mp);
    }
    if (r.contains("attention_factor") && !r["attention_factor"].is_null())
      sc.attention_factor = num(r["attention_factor"], "attention_factor");
    sc.seq_len = opts.seq_len;
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
