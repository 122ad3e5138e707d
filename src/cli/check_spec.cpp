// `check`'s spec keys -> spec, declared policy and fused chain (check_spec.hpp).
#include "check_spec.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include "cli.hpp"

namespace ropecheck::cli {

namespace tio = ropecheck::tensorio;

namespace {

void warn_unknown_keys(const Keys& k) {
  static const std::set<std::string> known = {
      "layout", "head_dim", "rotary_dim", "base", "scale", "sections", "scaling", "factor",
      "original_max_position_embeddings", "max_position_embeddings", "seq_len", "beta_fast",
      "beta_slow", "truncate", "mscale", "mscale_all_dim", "attention_factor", "low_freq_factor",
      "high_freq_factor", "short_factor", "long_factor", "freq_factors", "tensor_layout",
      "angle_precision", "table_precision", "arithmetic_precision", "angle_recipe", "fused",
      "trig_error", "table_rounding", "output_rounding", "trig_argument",
      // the fused RoPE + FP8 cache-write chain
      "fp8_format", "fp8_overflow", "scale_convention", "scale_granularity", "intermediate",
      "cache_layout", "cache_row_offset"};
  for (const auto& kv : k)
    if (!known.count(kv.first))
      std::cerr << "ropecheck check: note: ignoring unknown spec key '" << kv.first << "'\n";
}

// The spec keys, each parsed strictly (UsageError naming the key); absent keys keep the default.
class KeyReader {
 public:
  explicit KeyReader(const Keys& k) : k_(k) {}
  const std::string* get(const std::string& key) const {
    auto it = k_.find(key);
    return it == k_.end() ? nullptr : &it->second;
  }
  std::int64_t get_int(const std::string& key, std::int64_t def) const {
    const std::string* s = get(key);
    if (!s) return def;
    long long v = 0;
    if (!parse_int64(*s, v)) throw UsageError(key + ": expected an integer, got '" + *s + "'");
    return static_cast<std::int64_t>(v);
  }
  void get_double(const std::string& key, double& out) const {
    if (const auto* v = get(key)) out = parse_finite_double(*v, key);
  }
  void get_bool(const std::string& key, bool& out) const {
    if (const auto* t = get(key)) {
      if (*t != "true" && *t != "false") throw UsageError(key + " must be true or false");
      out = *t == "true";
    }
  }
  std::vector<double> get_list(const std::string& key) const {
    std::vector<double> v;
    if (const auto* t = get(key))
      for (const auto& f : split(*t, ',', key)) v.push_back(parse_finite_double(f, key));
    return v;
  }
  Precision get_precision(const std::string& key) const {
    const std::string* s = get(key);
    if (!s) return Dtype::f32;
    auto d = parse_dtype(*s);
    if (!d) throw UsageError(key + " must be f64, f32, f16 or bf16 (got '" + *s + "')");
    return *d;
  }

 private:
  const Keys& k_;
};

Scaling scaling_from_keys(const KeyReader& k) {
  Scaling sc;
  if (const auto* kind = k.get("scaling")) {
    const auto kk = parse_scaling_kind(*kind);
    if (!kk)
      throw UsageError(
          "scaling must be none, linear, dynamic, yarn, llama3, freq_factors or longrope (got '" +
          *kind + "')");
    sc.kind = *kk;
  }
  k.get_double("factor", sc.factor);
  sc.original_max_position_embeddings = k.get_int("original_max_position_embeddings", 0);
  sc.max_position_embeddings = k.get_int("max_position_embeddings", 0);
  sc.seq_len = k.get_int("seq_len", 0);
  k.get_double("beta_fast", sc.beta_fast);
  k.get_double("beta_slow", sc.beta_slow);
  k.get_bool("truncate", sc.truncate);
  k.get_double("mscale", sc.mscale);
  k.get_double("mscale_all_dim", sc.mscale_all_dim);
  if (const auto* t = k.get("attention_factor"))
    sc.attention_factor = parse_finite_double(*t, "attention_factor");
  k.get_double("low_freq_factor", sc.low_freq_factor);
  k.get_double("high_freq_factor", sc.high_freq_factor);
  sc.short_factor = k.get_list("short_factor");
  sc.long_factor = k.get_list("long_factor");
  sc.freq_factors = k.get_list("freq_factors");
  return sc;
}

// The spec the keys describe (they give a layout); head_dim defaults to the tensors' last dim.
RopeSpec spec_from_keys(const KeyReader& k, const std::string& layout, std::int64_t last_dim) {
  const auto l = parse_layout(layout);
  if (!l) throw UsageError("layout must be " + layout_choices() + " (got '" + layout + "')");
  RopeSpec s;
  s.layout = *l;
  s.head_dim = k.get_int("head_dim", last_dim);
  s.rotary_dim = k.get_int("rotary_dim", 0);
  k.get_double("base", s.base);
  k.get_double("scale", s.scale);
  if (const auto* t = k.get("sections"))
    for (const auto& f : split(*t, ',', "sections")) {
      long long v = 0;
      if (!parse_int64(f, v)) throw UsageError("sections: expected integers, got '" + f + "'");
      s.sections.push_back(v);
    }
  s.scaling = scaling_from_keys(k);
  return s.normalized();  // SpecError -> exit 2
}

Policy policy_from_keys(const KeyReader& k) {
  Policy p;
  p.angle = k.get_precision("angle_precision");
  p.table = k.get_precision("table_precision");
  p.arithmetic = k.get_precision("arithmetic_precision");
  p.recipe = AngleRecipe::hf_f32;
  if (const auto* rc = k.get("angle_recipe")) {
    const auto recipe = parse_angle_recipe(*rc);
    if (!recipe)
      throw UsageError("angle_recipe must be " + angle_recipe_names() + " (got '" + *rc + "')");
    p.recipe = *recipe;
  }
  k.get_bool("fused", p.fused);
  k.get_double("trig_error", p.trig_error);
  if (!(p.trig_error >= 0))
    throw UsageError("trig_error must be >= 0 (units of the angle precision's unit roundoff)");
  for (const auto& [key, field] : {std::pair{"table_rounding", &Policy::table_rounding},
                                   std::pair{"output_rounding", &Policy::output_rounding}})
    if (const auto* v = k.get(key)) {
      const auto r = parse_rounding(*v);
      if (!r)
        throw UsageError(std::string(key) + " must be nearest_even or toward_zero (got '" + *v +
                         "')");
      p.*field = *r;
    }
  if (const auto* v = k.get("trig_argument")) {
    const auto t = parse_trig_argument(*v);
    if (!t) throw UsageError("trig_argument must be exact or turns_f32 (got '" + *v + "')");
    p.trig_argument = *t;
  }
  return p;
}

// seq_len (dynamic, longrope) may come from the keys or --seq-len; given by one only, it is the
// spec's (also when the keys give no layout); given by both, it must agree. Keys that give a
// layout must describe the config's spec.
void merge_hf_config(Resolved& r, RopeSpec h, bool keys_give_layout, std::int64_t keys_seq_len,
                     const std::string& keys_seq_len_from) {
  if (h.scaling.seq_len != 0 && keys_seq_len == 0) r.seq_len_from = "--seq-len";
  if (h.scaling.seq_len == 0) h.scaling.seq_len = keys_seq_len;
  if (!keys_give_layout) {
    if (h.scaling.seq_len != keys_seq_len && keys_seq_len != 0)
      throw UsageError("seq_len " + std::to_string(keys_seq_len) + " from " + keys_seq_len_from +
                       " contradicts --seq-len " + std::to_string(h.scaling.seq_len));
    r.spec = h.normalized();  // a seq_len from the keys is validated too
    return;
  }
  if (r.spec.scaling.seq_len == 0) r.spec.scaling.seq_len = h.scaling.seq_len;
  if (!(r.spec == h))
    throw UsageError("the spec keys describe " + describe(r.spec) + " but --hf-config gives " +
                     describe(h));
}

}  // namespace

Resolved resolve(const Keys& keys, std::int64_t last_dim, std::size_t rank,
                 const std::optional<RopeSpec>& hf, const std::string& keys_seq_len_from) {
  warn_unknown_keys(keys);
  const KeyReader k(keys);
  Resolved r;
  const std::string* lay = k.get("layout");
  if (!lay && !hf)
    throw UsageError("spec key 'layout' missing (" + layout_choices() +
                     "): set it in __metadata__ or --spec, or give --hf-config");
  if (lay) r.spec = spec_from_keys(k, *lay, last_dim);
  const std::int64_t keys_seq_len = k.get_int("seq_len", 0);
  if (keys_seq_len != 0) r.seq_len_from = keys_seq_len_from;
  if (hf) merge_hf_config(r, *hf, lay != nullptr, keys_seq_len, keys_seq_len_from);
  if (r.spec.head_dim != last_dim)
    throw UsageError("head_dim " + std::to_string(r.spec.head_dim) +
                     " does not match the last dimension of the tensors (" +
                     std::to_string(last_dim) + ")");
  r.policy = policy_from_keys(k);
  const std::string* tl = k.get("tensor_layout");
  r.tensor_layout = tl ? *tl : rank == 2 ? "td" : rank == 3 ? "thd" : "bhtd";
  return r;
}

RopeSpec runtime_seq_len(const RopeSpec& spec, const tio::TensorRef& pos,
                         const std::string& seq_len_from) {
  if ((pos.type != tio::ElemType::i64 && pos.type != tio::ElemType::i32) || pos.numel() == 0)
    return spec;  // refused (type) or nothing to check (no tokens) further on
  const std::int64_t n = pos.numel(), eb = tio::elem_bytes(pos.type);
  const std::int64_t block = std::int64_t{1} << 16;
  std::vector<unsigned char> bytes(static_cast<std::size_t>(std::min(n, block) * eb));
  std::int64_t m = std::numeric_limits<std::int64_t>::min();
  for (std::int64_t i = 0; i < n; i += block) {
    const std::int64_t k = std::min(block, n - i);
    pos.read(i, k, bytes.data());
    for (std::int64_t j = 0; j < k; ++j) m = std::max(m, tio::decode_int(pos.type, &bytes[j * eb]));
  }
  return with_runtime_seq_len(spec, m, seq_len_from.empty() ? "--seq-len" : seq_len_from);
}

scan::FusedChain fused_chain(const Keys& k) {
  const auto get = [&](const char* key, const char* def) -> std::string {
    const auto it = k.find(key);
    if (it != k.end()) return it->second;
    if (def) return def;
    throw UsageError(std::string("a fused cache dump must declare '") + key + "'");
  };
  scan::FusedChain c;
  const auto fmt = parse_fp8_format(get("fp8_format", nullptr));
  if (!fmt) throw UsageError("fp8_format must be e4m3fn, e4m3fnuz or e5m2");
  c.format = *fmt;
  const auto ov = parse_fp8_overflow(get("fp8_overflow", "saturate"));
  if (!ov || (*ov == Fp8Overflow::inf && c.format != Fp8Format::e5m2))
    throw UsageError("fp8_overflow must be saturate or nan (inf: e5m2 only)");
  c.overflow = *ov;
  const std::string conv = get("scale_convention", nullptr);
  if (conv != "multiply" && conv != "divide")
    throw UsageError("scale_convention must be multiply or divide");
  c.divide = conv == "divide";
  const std::string g = get("scale_granularity", nullptr);
  if (g == "per_tensor")
    c.granularity = scan::ScaleGranularity::tensor;
  else if (g == "per_head")
    c.granularity = scan::ScaleGranularity::head;
  else if (g == "per_token_head")
    c.granularity = scan::ScaleGranularity::token_head;
  else
    throw UsageError("scale_granularity must be per_tensor, per_head or per_token_head");
  const std::string im = get("intermediate", "none");
  if (im != "none") {
    const auto d = parse_dtype(im);
    if (!d || *d == Dtype::f64) throw UsageError("intermediate must be none, f32, f16 or bf16");
    c.intermediate = *d;
  }
  const std::string lay = get("cache_layout", "shd");
  if (lay != "shd" && lay != "sd") throw UsageError("cache_layout must be shd or sd");
  c.one_head_rows = lay == "sd";
  try {
    c.row_offset = std::stoll(get("cache_row_offset", "0"));
  } catch (const std::exception&) {
    throw UsageError("cache_row_offset must be an integer");
  }
  return c;
}

Keys parse_spec_json(std::string_view text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for numbers beyond double (1e400).
    throw UsageError(what + ": malformed JSON: " + e.what());
  }
  if (!j.is_object()) throw UsageError(what + ": expected a JSON object");
  Keys k;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& v = it.value();
    if (v.is_string())
      k[it.key()] = v.get<std::string>();
    else if (v.is_boolean())
      k[it.key()] = v.get<bool>() ? "true" : "false";
    else if (v.is_number_unsigned())
      k[it.key()] = std::to_string(v.get<std::uint64_t>());
    else if (v.is_number_integer())
      k[it.key()] = std::to_string(v.get<std::int64_t>());
    else if (v.is_number())
      k[it.key()] = v.dump();  // shortest round-trip text of the double
    else if (v.is_array() && !v.empty() &&
             std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_number(); })) {
      // sections, short_factor, long_factor, freq_factors: the comma-separated string form.
      std::string t;
      for (const auto& e : v) t += (t.empty() ? "" : ",") + e.dump();
      k[it.key()] = t;
    } else
      throw UsageError(what + ": key '" + it.key() +
                       "' must be a string, number or array of numbers");
  }
  return k;
}

std::string spec_arg_name(const std::string& arg) {
  return !arg.empty() && arg.front() == '{' ? "--spec" : "--spec '" + arg + "'";
}

Keys read_spec_arg(const std::string& arg) {
  if (!arg.empty() && arg.front() == '{') return parse_spec_json(arg, spec_arg_name(arg));
  std::ifstream f(arg, std::ios::binary);
  if (!f) throw UsageError("--spec: cannot read '" + arg + "' (give a file or JSON text)");
  std::ostringstream text;
  text << f.rdbuf();
  return parse_spec_json(text.str(), spec_arg_name(arg));
}

RopeSpec resolve_check_spec(const Keys& keys, std::int64_t last_dim, std::size_t rank) {
  // (the fuzz target's entry: spec keys only, no --hf-config)
  return resolve(keys, last_dim, rank).spec;
}

}  // namespace ropecheck::cli
