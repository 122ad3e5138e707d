// `ropecheck check`: validates tensors recorded from any framework against the multiprecision
// reference, within the derived per-pair bound of ropecheck::bounds for the DECLARED policy of
// the kernel that produced them. Every failure is located (tensor, batch, token, head, pair,
// elements).
//
// Inputs:
//   --tensors dump.safetensors  tensors x -> y (and/or q -> q_out, k -> k_out), positions;
//                               spec from __metadata__ (string values) and/or --spec JSON
//   --input x.npy --output y.npy --positions p.npy --spec spec.json
//
// Spec keys (safetensors __metadata__ strings, or --spec JSON values; --spec wins). Or
// --hf-config config.json for the RoPE spec (layout ... sections below; if the keys also give a
// layout, the spec they describe must equal the config's, else exit 2):
//   layout           interleaved | half | proportional | mrope | imrope | axial   (required)
//   head_dim         default: the last dimension of x
//   rotary_dim       default: head_dim rounded down to even
//   base             default 10000
//   scale            magnitude scale s, default 1 (the variant's attention factor multiplies it)
//   sections         mrope/imrope: mrope_section "t,h,w" in pairs (e.g. "16,24,24");
//                    axial: pairs per axis. Comma-separated integers (a JSON array in --spec).
//   scaling          none (default) | linear | dynamic | yarn | llama3 | freq_factors | longrope
//   Scaling parameters (the spec.hpp Scaling fields, same names and defaults; each used only by
//   the kinds listed):
//     factor                              linear, dynamic, yarn, llama3        (default 1)
//     original_max_position_embeddings    yarn, llama3, longrope
//     max_position_embeddings             dynamic (L0), longrope
//     seq_len                             dynamic, longrope: the current sequence length
//     beta_fast, beta_slow                yarn (32, 1)
//     truncate                            yarn: true (default) | false
//     mscale, mscale_all_dim              yarn (DeepSeek), default 0 = not given
//     attention_factor                    yarn, longrope: explicit (default: derived)
//     low_freq_factor, high_freq_factor   llama3 (1, 4)
//     short_factor, long_factor           longrope: rotary_dim/2 comma-separated numbers each
//     freq_factors                        freq_factors (GGUF rope_freqs): rotary_dim/2 numbers
//   tensor_layout    td | thd | bhtd | bthd (b batch, h heads, t tokens, d head_dim);
//                    default by rank: 2 -> td, 3 -> thd, 4 -> bhtd (HF's [batch, heads, seq, dim])
//   angle_precision, table_precision, arithmetic_precision   f64|f32|f16|bf16, default f32
//   angle_recipe     hf_f32 (default: HF/vLLM inv_freq and f32(m) * inv_freq) | pow_product
//   fused            true | false (default false)
// The defaults describe the common production recipe (HF rotate_half in f32): declaring a
// tighter policy than the kernel really has makes honest results fail, a looser one hides bugs.
// positions: shape [tokens] or [batch, tokens], int64 or int32. Multi-axis layouts (mrope, imrope,
// axial) also take one position per axis, axis-major as HF's position_ids: [axes, tokens] or
// [axes, batch, tokens]; a 1-D positions tensor then drives every axis (t = h = w).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "cli.hpp"
#include "ropecheck/bounds.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/tensorio/tensorio.hpp"

namespace ropecheck::cli {

namespace ref = ropecheck::reference;
namespace tio = ropecheck::tensorio;

namespace {

struct CheckOptions {
  std::string tensors, spec, input, output, positions, out_dir;
  HfConfigArg hf;
  std::uint64_t max_bytes = std::uint64_t{4} << 30;
  int max_failures = 10;
};

using Keys = std::map<std::string, std::string>;

Keys read_spec_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError("--spec: cannot open '" + path + "'");
  std::ostringstream text;
  text << f.rdbuf();
  return parse_spec_json(text.str(), "--spec '" + path + "'");
}

Precision parse_precision(const Keys& k, const std::string& key) {
  auto it = k.find(key);
  if (it == k.end()) return Dtype::f32;
  auto d = parse_dtype(it->second);
  if (!d) throw UsageError(key + " must be f64, f32, f16 or bf16 (got '" + it->second + "')");
  return *d;
}

struct Resolved {
  RopeSpec spec;
  Policy policy;
  std::string tensor_layout;
};

Resolved resolve(const Keys& k, std::int64_t last_dim, std::size_t rank,
                 const std::optional<RopeSpec>& hf = std::nullopt) {
  static const std::set<std::string> known = {"layout",
                                              "head_dim",
                                              "rotary_dim",
                                              "base",
                                              "scale",
                                              "sections",
                                              "scaling",
                                              "factor",
                                              "original_max_position_embeddings",
                                              "max_position_embeddings",
                                              "seq_len",
                                              "beta_fast",
                                              "beta_slow",
                                              "truncate",
                                              "mscale",
                                              "mscale_all_dim",
                                              "attention_factor",
                                              "low_freq_factor",
                                              "high_freq_factor",
                                              "short_factor",
                                              "long_factor",
                                              "freq_factors",
                                              "tensor_layout",
                                              "angle_precision",
                                              "table_precision",
                                              "arithmetic_precision",
                                              "angle_recipe",
                                              "fused",
                                              "trig_error"};
  for (const auto& [key, v] : k)
    if (!known.count(key))
      std::cerr << "ropecheck check: note: ignoring unknown spec key '" << key << "'\n";
  Resolved r;
  auto get = [&](const std::string& key) -> const std::string* {
    auto it = k.find(key);
    return it == k.end() ? nullptr : &it->second;
  };
  auto get_int = [&](const std::string& key, std::int64_t def) {
    const std::string* s = get(key);
    if (!s) return def;
    long long v = 0;
    if (!parse_int64(*s, v)) throw UsageError(key + ": expected an integer, got '" + *s + "'");
    return static_cast<std::int64_t>(v);
  };
  auto get_double = [&](const std::string& key, double& out) {
    if (const auto* v = get(key)) out = parse_finite_double(*v, key);
  };
  auto get_list = [&](const std::string& key) {
    std::vector<double> v;
    if (const auto* t = get(key))
      for (const auto& f : split(*t, ',', key)) v.push_back(parse_finite_double(f, key));
    return v;
  };
  const std::string* lay = get("layout");
  if (!lay && !hf)
    throw UsageError(
        "spec key 'layout' missing (interleaved | half | proportional | mrope | imrope | axial): "
        "set it in __metadata__ or --spec, or give --hf-config");
  if (lay) {
    const auto l = parse_layout(*lay);
    if (!l)
      throw UsageError(
          "layout must be interleaved, half, proportional, mrope, imrope or axial (got '" + *lay +
          "')");
    RopeSpec s;
    s.layout = *l;
    s.head_dim = get_int("head_dim", last_dim);
    s.rotary_dim = get_int("rotary_dim", 0);
    get_double("base", s.base);
    get_double("scale", s.scale);
    if (const auto* t = get("sections"))
      for (const auto& f : split(*t, ',', "sections")) {
        long long v = 0;
        if (!parse_int64(f, v)) throw UsageError("sections: expected integers, got '" + f + "'");
        s.sections.push_back(v);
      }
    Scaling& sc = s.scaling;
    if (const auto* kind = get("scaling")) {
      const auto kk = parse_scaling_kind(*kind);
      if (!kk)
        throw UsageError(
            "scaling must be none, linear, dynamic, yarn, llama3, freq_factors or longrope (got '" +
            *kind + "')");
      sc.kind = *kk;
    }
    get_double("factor", sc.factor);
    sc.original_max_position_embeddings = get_int("original_max_position_embeddings", 0);
    sc.max_position_embeddings = get_int("max_position_embeddings", 0);
    sc.seq_len = get_int("seq_len", 0);
    get_double("beta_fast", sc.beta_fast);
    get_double("beta_slow", sc.beta_slow);
    if (const auto* t = get("truncate")) {
      if (*t != "true" && *t != "false") throw UsageError("truncate must be true or false");
      sc.truncate = *t == "true";
    }
    get_double("mscale", sc.mscale);
    get_double("mscale_all_dim", sc.mscale_all_dim);
    if (const auto* t = get("attention_factor"))
      sc.attention_factor = parse_finite_double(*t, "attention_factor");
    get_double("low_freq_factor", sc.low_freq_factor);
    get_double("high_freq_factor", sc.high_freq_factor);
    sc.short_factor = get_list("short_factor");
    sc.long_factor = get_list("long_factor");
    sc.freq_factors = get_list("freq_factors");
    r.spec = s.normalized();  // SpecError -> exit 2
    if (hf && !(r.spec == *hf))
      throw UsageError("the spec keys describe " + describe(r.spec) + " but --hf-config gives " +
                       describe(*hf));
  } else {
    r.spec = *hf;
  }
  if (r.spec.head_dim != last_dim)
    throw UsageError("head_dim " + std::to_string(r.spec.head_dim) +
                     " does not match the last dimension of the tensors (" +
                     std::to_string(last_dim) + ")");
  r.policy.angle = parse_precision(k, "angle_precision");
  r.policy.table = parse_precision(k, "table_precision");
  r.policy.arithmetic = parse_precision(k, "arithmetic_precision");
  r.policy.recipe = AngleRecipe::hf_f32;
  if (const auto* rc = get("angle_recipe")) {
    if (*rc == "hf_f32")
      r.policy.recipe = AngleRecipe::hf_f32;
    else if (*rc == "pow_product")
      r.policy.recipe = AngleRecipe::pow_product;
    else
      throw UsageError("angle_recipe must be hf_f32 or pow_product (got '" + *rc + "')");
  }
  if (const auto* fu = get("fused")) {
    if (*fu != "true" && *fu != "false") throw UsageError("fused must be true or false");
    r.policy.fused = *fu == "true";
  }
  get_double("trig_error", r.policy.trig_error);
  if (!(r.policy.trig_error >= 0))
    throw UsageError("trig_error must be >= 0 (units of the angle precision's unit roundoff)");
  const std::string* tl = get("tensor_layout");
  r.tensor_layout = tl ? *tl : rank == 2 ? "td" : rank == 3 ? "thd" : "bhtd";
  return r;
}

// One vector of a recorded tensor: where it is and which position it has.
struct Vec {
  std::int64_t b, t, h, offset;
};

struct Geometry {
  std::int64_t B = 1, T = 0, H = 1, D = 0;
  std::vector<Vec> vecs;
};

Geometry geometry(const tio::Tensor& x, const std::string& tl) {
  const auto& s = x.shape;
  Geometry g;
  auto need = [&](std::size_t r) {
    if (s.size() != r)
      throw UsageError("tensor '" + x.name + "' has rank " + std::to_string(s.size()) +
                       ", tensor_layout '" + tl + "' needs rank " + std::to_string(r));
  };
  if (tl == "td") {
    need(2), g.T = s[0], g.D = s[1];
  } else if (tl == "thd") {
    need(3), g.T = s[0], g.H = s[1], g.D = s[2];
  } else if (tl == "bhtd") {
    need(4), g.B = s[0], g.H = s[1], g.T = s[2], g.D = s[3];
  } else if (tl == "bthd") {
    need(4), g.B = s[0], g.T = s[1], g.H = s[2], g.D = s[3];
  } else {
    throw UsageError("tensor_layout must be td, thd, bhtd or bthd (got '" + tl + "')");
  }
  for (std::int64_t b = 0; b < g.B; ++b)
    for (std::int64_t t = 0; t < g.T; ++t)
      for (std::int64_t h = 0; h < g.H; ++h) {
        std::int64_t off = 0;
        if (tl == "td" || tl == "thd")
          off = (t * g.H + h) * g.D;
        else if (tl == "bhtd")
          off = ((b * g.H + h) * g.T + t) * g.D;
        else
          off = ((b * g.T + t) * g.H + h) * g.D;
        g.vecs.push_back({b, t, h, off});
      }
  return g;
}

std::optional<Dtype> dtype_of_elem(tio::ElemType e) {
  switch (e) {
    case tio::ElemType::f64:
      return Dtype::f64;
    case tio::ElemType::f32:
      return Dtype::f32;
    case tio::ElemType::f16:
      return Dtype::f16;
    case tio::ElemType::bf16:
      return Dtype::bf16;
    default:
      return std::nullopt;
  }
}

std::string fmt(double v, int prec = 4) {
  if (std::isnan(v)) return "nan";
  std::ostringstream o;
  o << std::setprecision(prec) << v;
  return o.str();
}

struct PairResult {
  std::string name;  // "x -> y"
  std::int64_t vectors = 0, checked = 0, skipped_nonfinite = 0, failures = 0;
  double max_err_u = 0, max_util = 0;
  std::string worst;
  std::vector<std::string> located;  // first failures
};

PairResult check_pair(const std::string& label, const tio::Tensor& x, const tio::Tensor& y,
                      const tio::Tensor& pos, const Resolved& r, int max_failures) {
  const auto d = dtype_of_elem(x.type);
  if (!d) throw UsageError("tensor '" + x.name + "' must be F64/F32/F16/BF16, is " + x.type_name);
  if (y.type != x.type || y.shape != x.shape)
    throw UsageError("tensor '" + y.name + "' must have the dtype and shape of '" + x.name + "'");
  const Geometry g = geometry(x, r.tensor_layout);
  if (pos.type != tio::ElemType::i64 && pos.type != tio::ElemType::i32)
    throw UsageError("positions must be int64 or int32, is " + pos.type_name);
  const RopeSpec& spec = r.spec;
  const std::int64_t A = spec.n_axes();
  // Axis-major multi-axis positions ([A, T] or [A, B, T]); with A == 1 these shapes are the 1-D
  // ones below, so they are only taken for multi-axis specs.
  const auto& ps = pos.shape;
  const bool axes_t = A > 1 && ps.size() == 2 && ps[0] == A && ps[1] == g.T;
  const bool axes_bt = A > 1 && ps.size() == 3 && ps[0] == A && ps[1] == g.B && ps[2] == g.T;
  const bool per_batch = !axes_t && ps.size() == 2 && ps[0] == g.B && ps[1] == g.T;
  if (!(ps.size() == 1 && ps[0] == g.T) && !per_batch && !axes_t && !axes_bt)
    throw UsageError("positions must have shape [" + std::to_string(g.T) + "] or [" +
                     std::to_string(g.B) + ", " + std::to_string(g.T) + "]" +
                     (A > 1 ? " (or, one per axis, [" + std::to_string(A) + ", " +
                                  std::to_string(g.T) + "] or [" + std::to_string(A) + ", " +
                                  std::to_string(g.B) + ", " + std::to_string(g.T) + "])"
                            : std::string()));
  const bool multi = axes_t || axes_bt;
  const double magnitude = magnitude_f64(spec);
  const double u = unit_roundoff(*d);
  PairResult res;
  res.name = label;
  for (const Vec& v : g.vecs) {
    ++res.vectors;
    // Position on axis a (every axis: the one 1-D position unless per-axis positions are given).
    auto pos_at = [&](std::int64_t a) {
      if (axes_t) return pos.get_int(a * g.T + v.t);
      if (axes_bt) return pos.get_int((a * g.B + v.b) * g.T + v.t);
      return pos.get_int(per_batch ? v.b * g.T + v.t : v.t);
    };
    const std::int64_t m = pos_at(0);
    ref::Positions mp;
    std::string pos_text = std::to_string(m);
    for (std::int64_t a = 0; a < (multi ? A : 1); ++a) mp.push_back(ref::Mp(pos_at(a)));
    if (multi) {
      pos_text = "(";
      for (std::int64_t a = 0; a < A; ++a) pos_text += (a ? "," : "") + std::to_string(pos_at(a));
      pos_text += ")";
    }
    std::vector<double> xv(spec.head_dim), yv(spec.head_dim);
    bool finite = true;
    for (std::int64_t j = 0; j < spec.head_dim; ++j) {
      xv[j] = x.get(v.offset + j);
      yv[j] = y.get(v.offset + j);
      finite = finite && std::isfinite(xv[j]);
    }
    if (!finite) {
      ++res.skipped_nonfinite;
      continue;
    }
    ++res.checked;
    std::ostringstream where;
    where << (g.B > 1 ? "batch " + std::to_string(v.b) + ", " : "") << "token " << v.t
          << " (position " << pos_text << "), head " << v.h;
    auto fail = [&](const std::string& what) {
      ++res.failures;
      if (static_cast<int>(res.located.size()) < max_failures)
        res.located.push_back("FAIL " + label + " " + where.str() + ", " + what);
    };
    for (std::int64_t j = spec.rotary_dim; j < spec.head_dim; ++j)
      if (bits_of(xv[j], *d) != bits_of(yv[j], *d))
        fail("pass-through element " + std::to_string(j) + " changed: got " + fmt(yv[j], 9) +
             ", input " + fmt(xv[j], 9));
    const auto exact =
        multi ? ref::apply_blocked(spec, mp, xv) : ref::apply_blocked(spec, mp[0], xv);
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const auto [a, b] = spec.pair(i);
      const double da = static_cast<double>(ref::exact(yv[a]) - exact[a]);
      const double db = static_cast<double>(ref::exact(yv[b]) - exact[b]);
      const double err = std::hypot(da, db);
      // The magnitude includes the variant's attention factor (yarn, longrope).
      const double scaled_norm = magnitude * std::hypot(xv[a], xv[b]);
      const auto pb = bounds::pair_error_bound(
          r.policy, spec, *d, i, static_cast<double>(pos_at(multi ? spec.pair_axis(i) : 0)));
      const double bound = pb.abs(scaled_norm);
      const double err_u = scaled_norm > 0 ? err / (scaled_norm * u) : (err > 0 ? INFINITY : 0);
      const double util = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
      if (!(util <= res.max_util) || res.worst.empty()) {
        if (!(util <= res.max_util)) res.max_util = util;
        res.worst = where.str() + ", pair " + std::to_string(i);
      }
      if (!(err_u <= res.max_err_u)) res.max_err_u = err_u;
      if (!(err <= bound)) {
        std::ostringstream o;
        o << "pair " << i << " (elements " << a << ", " << b << "): error " << fmt(err_u)
          << " u > bound " << fmt(scaled_norm > 0 ? bound / (scaled_norm * u) : bound)
          << " u; got (" << fmt(yv[a], 9) << ", " << fmt(yv[b], 9) << "), expected ("
          << fmt(static_cast<double>(exact[a]), 9) << ", " << fmt(static_cast<double>(exact[b]), 9)
          << ")";
        fail(o.str());
      }
    }
  }
  return res;
}

void run_check(const CheckOptions& o) {
  tio::Limits lim;
  lim.max_bytes = o.max_bytes;
  const bool st = !o.tensors.empty();
  const bool npy = !o.input.empty() || !o.output.empty() || !o.positions.empty();
  if (st == npy)
    throw UsageError(
        "give either --tensors FILE.safetensors or --input/--output/--positions .npy files");
  Keys keys;
  std::vector<std::pair<std::string, std::pair<tio::Tensor, tio::Tensor>>> pairs;
  tio::Tensor pos;
  std::string source;
  try {
    if (st) {
      source = o.tensors;
      auto f = tio::read_safetensors(o.tensors, lim);
      keys = f.metadata;
      const tio::Tensor* p = f.find("positions");
      if (!p) throw UsageError(o.tensors + ": no tensor named 'positions'");
      pos = *p;
      for (auto [in, out] :
           {std::pair<const char*, const char*>{"x", "y"}, {"q", "q_out"}, {"k", "k_out"}}) {
        const tio::Tensor* a = f.find(in);
        const tio::Tensor* b = f.find(out);
        if (a && !b)
          throw UsageError(o.tensors + ": tensor '" + in + "' without its output '" + out + "'");
        if (a && b) pairs.push_back({std::string(in) + " -> " + out, {*a, *b}});
      }
      if (pairs.empty())
        throw UsageError(o.tensors + ": no tensor pair x/y, q/q_out or k/k_out to check");
    } else {
      if (o.input.empty() || o.output.empty() || o.positions.empty())
        throw UsageError("the .npy form needs --input, --output and --positions");
      if (o.spec.empty() && o.hf.path.empty())
        throw UsageError("the .npy form needs --spec spec.json (or --hf-config config.json)");
      source = o.input;
      auto a = tio::read_npy(o.input, lim);
      auto b = tio::read_npy(o.output, lim);
      a.name = "input";
      b.name = "output";
      pos = tio::read_npy(o.positions, lim);
      pairs.push_back({"input -> output", {a, b}});
    }
  } catch (const tio::FormatError& e) {
    throw UsageError(e.what());
  }
  if (!o.spec.empty())
    for (const auto& [k, v] : read_spec_json(o.spec)) keys[k] = v;

  const auto& x0 = pairs.front().second.first;
  if (x0.shape.empty()) throw UsageError("tensor '" + x0.name + "' is a scalar");
  const std::optional<RopeSpec> hf = o.hf.read();
  if (hf) {
    if (hf->head_dim != x0.shape.back())
      throw UsageError("--hf-config: head_dim " + std::to_string(hf->head_dim) +
                       " does not match the last dimension of the tensors (" +
                       std::to_string(x0.shape.back()) + ")");
  }
  const Resolved r = resolve(keys, x0.shape.back(), x0.shape.size(), hf);
  const auto d = dtype_of_elem(x0.type);
  if (!d) throw UsageError("tensor '" + x0.name + "' must be F64/F32/F16/BF16, is " + x0.type_name);
  ref::set_precision_bits(ref::default_bits(*d));

  std::cout << "ropecheck check: " << source << "\n"
            << "spec: " << describe(r.spec) << ", dtype " << name(*d) << ", tensor_layout "
            << r.tensor_layout << "\n"
            << "declared policy: angle " << name(r.policy.angle) << ", table "
            << name(r.policy.table) << ", arithmetic " << name(r.policy.arithmetic) << ", recipe "
            << (r.policy.recipe == AngleRecipe::hf_f32 ? "hf_f32" : "pow_product")
            << (r.policy.fused ? ", fused" : "") << "\n\n";
  std::vector<PairResult> results;
  for (const auto& [label, xy] : pairs)
    results.push_back(check_pair(label, xy.first, xy.second, pos, r, o.max_failures));

  std::cout << std::left << std::setw(18) << "tensors" << std::setw(9) << "vectors" << std::setw(9)
            << "checked" << std::setw(8) << "result" << std::setw(14) << "max err [u]"
            << std::setw(14) << "max err/bound"
            << "worst at\n";
  bool any_fail = false;
  nlohmann::json jres = nlohmann::json::array();
  for (const auto& p : results) {
    any_fail = any_fail || p.failures > 0;
    std::cout << std::left << std::setw(18) << p.name << std::setw(9) << p.vectors << std::setw(9)
              << p.checked << std::setw(8) << (p.failures ? "FAIL" : "pass") << std::setw(14)
              << fmt(p.max_err_u) << std::setw(14) << fmt(p.max_util) << p.worst << "\n";
    jres.push_back({{"tensors", p.name},
                    {"vectors", p.vectors},
                    {"checked", p.checked},
                    {"skipped_nonfinite_input", p.skipped_nonfinite},
                    {"failures", p.failures},
                    {"max_pair_error_u", p.max_err_u},
                    {"max_bound_utilization", p.max_util},
                    {"worst", p.worst},
                    {"located", p.located}});
  }
  for (const auto& p : results) {
    if (p.skipped_nonfinite)
      std::cout << "note: " << p.name << ": " << p.skipped_nonfinite
                << " vector(s) with non-finite input not checked\n";
    for (const auto& l : p.located) std::cout << l << "\n";
    if (p.failures > static_cast<std::int64_t>(p.located.size()))
      std::cout << "... " << p.failures - static_cast<std::int64_t>(p.located.size())
                << " more failure(s) in " << p.name << "\n";
  }
  std::cout << (any_fail ? "\nFAIL" : "\nPASS")
            << ": bound = ropecheck::bounds per-pair bound for the declared policy\n";
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    nlohmann::json doc{{"command", "check"}, {"source", source}, {"spec", describe(r.spec)},
                       {"dtype", name(*d)},  {"results", jres},  {"passed", !any_fail}};
    reports::atomic_write(std::filesystem::path(o.out_dir) / "check.json", doc.dump(2) + "\n");
  }
  if (any_fail) {
    std::cout.flush();
    std::exit(1);  // as `report`: 1 = a check failed (bad usage is 2, thrown above)
  }
}

}  // namespace

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

RopeSpec resolve_check_spec(const Keys& keys, std::int64_t last_dim, std::size_t rank) {
  // (the fuzz target's entry: spec keys only, no --hf-config)
  return resolve(keys, last_dim, rank).spec;
}

void add_check(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  auto* cmd = app.add_subcommand(
      "check", "Check recorded RoPE tensors (safetensors or .npy) against the exact reference");
  cmd->add_option("--tensors", o->tensors,
                  "safetensors dump with x, y (or q/q_out, k/k_out), positions");
  cmd->add_option("--spec", o->spec,
                  "spec JSON (keys as the safetensors __metadata__; overrides it)");
  cmd->add_option("--input", o->input, ".npy input (f64/f32/f16)");
  cmd->add_option("--output", o->output, ".npy output recorded from the kernel");
  cmd->add_option("--positions", o->positions, ".npy positions (int64/int32)");
  cmd->add_option("--max-bytes", o->max_bytes,
                  "refuse input files larger than this (default 4 GiB)");
  cmd->add_option("--max-failures", o->max_failures,
                  "located failures printed per tensor (default 10)");
  cmd->add_option("--out", o->out_dir, "write check.json here");
  add_hf_config_options(
      cmd, o->hf, "RoPE spec from a Hugging Face config.json (spec keys, if any, must agree)");
  cmd->callback([o] { run_check(*o); });
}

}  // namespace ropecheck::cli
