// Hugging Face config.json -> RopeSpec. One reader per field group, in the order the errors are
// checked: the rope dictionary and its type (rope_type_of, check_fields), the base, the head and
// rotary dims, the M-RoPE sections, then one reader per scaling rope_type (read_linear ...
// read_longrope). A new HF rope_type: its allowed fields in check_fields, a read_<type> below,
// and a branch in read_scaling.
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
// HF reads optional fields with dict.get(k): a JSON null is the same as an absent key.
bool given(const json& j, const char* k) { return j.contains(k) && !j[k].is_null(); }

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

// head_dim, or hidden_size / num_attention_heads (exactly divisible). DeepSeek (MLA) rotates
// only the qk_rope_head_dim part of each head: that is the RoPE head.
std::int64_t read_head_dim(const json& c) {
  if (given(c, "qk_rope_head_dim")) return integer(c["qk_rope_head_dim"], "qk_rope_head_dim");
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

void read_linear(const ScalingFields& f, Scaling& sc) {
  sc.kind = ScalingKind::linear;
  sc.factor = f.factor();
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

RopeSpec spec_from_hf_config(const json& c, const HfConfigOptions& opts) {
  if (!c.is_object()) fail("the config must be a JSON object");
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
