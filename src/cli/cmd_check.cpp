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
//     seq_len                             dynamic, longrope: the current sequence length;
//                                         default max(position) + 1 (transformers' run-time
//                                         length), a smaller one exits 2; also taken with
//                                         --hf-config when --seq-len is not given
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
//   angle_recipe     hf_f32 (default: HF/vLLM inv_freq and f32(m) * inv_freq) | pow_product |
//                    ladder_f32 (ggml/llama.cpp CPU: f32 theta *= powf(base, -2/dim) per pair)
//   fused            true | false (default false)
// The defaults describe the common production recipe (HF rotate_half in f32): declaring a
// tighter policy than the kernel really has makes honest results fail, a looser one hides bugs.
// positions: shape [tokens] or [batch, tokens], int64 or int32. Multi-axis layouts (mrope, imrope,
// axial) also take one position per axis, axis-major as HF's position_ids: [axes, tokens] or
// [axes, batch, tokens]; a 1-D positions tensor then drives every axis (t = h = w).
#include <algorithm>
#include <cmath>
#include <cstdlib>
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
  std::string seq_len_from;  // where an explicit seq_len came from; empty: none given
};

// keys_seq_len_from: how messages name the keys' seq_len (its file).
Resolved resolve(const Keys& k, std::int64_t last_dim, std::size_t rank,
                 const std::optional<RopeSpec>& hf = std::nullopt,
                 const std::string& keys_seq_len_from = "the spec keys") {
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
  }
  // seq_len (dynamic, longrope) may come from the keys or --seq-len; given by one only, it is the
  // spec's (also when the keys give no layout); given by both, it must agree.
  const std::int64_t keys_seq_len = get_int("seq_len", 0);
  if (keys_seq_len != 0) r.seq_len_from = keys_seq_len_from;
  if (hf) {
    RopeSpec h = *hf;
    if (h.scaling.seq_len != 0 && keys_seq_len == 0) r.seq_len_from = "--seq-len";
    if (h.scaling.seq_len == 0) h.scaling.seq_len = keys_seq_len;
    if (!lay) {
      if (h.scaling.seq_len != keys_seq_len && keys_seq_len != 0)
        throw UsageError("seq_len " + std::to_string(keys_seq_len) + " from " + keys_seq_len_from +
                         " contradicts --seq-len " + std::to_string(h.scaling.seq_len));
      r.spec = h.normalized();  // a seq_len from the keys is validated too
    } else {
      if (r.spec.scaling.seq_len == 0) r.spec.scaling.seq_len = h.scaling.seq_len;
      if (!(r.spec == h))
        throw UsageError("the spec keys describe " + describe(r.spec) + " but --hf-config gives " +
                         describe(h));
    }
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
    const auto recipe = parse_angle_recipe(*rc);
    if (!recipe)
      throw UsageError("angle_recipe must be hf_f32, pow_product or ladder_f32 (got '" + *rc +
                       "')");
    r.policy.recipe = *recipe;
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

// a and b with the fewest significant digits (at least `prec`) that tell them apart when they
// differ: 17 digits tell any two doubles apart.
std::pair<std::string, std::string> fmt_apart(double a, double b, int prec = 4) {
  for (;; ++prec) {
    std::string sa = fmt(a, prec), sb = fmt(b, prec);
    if (sa != sb || prec >= 17 || a == b || (std::isnan(a) && std::isnan(b))) return {sa, sb};
  }
}

// A recorded output and the exact value it is compared with, apart as above; beyond 17 digits
// (the exact value is not a double) both are written from their exact values.
std::pair<std::string, std::string> fmt_got_expected(double got, const ref::Mp& expected) {
  auto s = fmt_apart(got, static_cast<double>(expected), 9);
  if (s.first != s.second || !std::isfinite(got) || ref::exact(got) == expected) return s;
  for (int prec = 18;; ++prec) {
    s = {ref::to_decimal(ref::exact(got), prec), ref::to_decimal(expected, prec)};
    if (s.first != s.second || prec >= 60) return s;
  }
}

// Why a pair failed: "error E u > bound B u" with digits enough to tell E from B, in absolute
// terms when the pair's scale (unit = |s| |x_pair| u) is 0 or the division makes E and B equal;
// NaN and infinite errors said as such.
std::string exceeded(double err, double bound, double unit, bool got_nan, bool got_inf) {
  if (std::isnan(err)) return got_nan ? "error is NaN (got a NaN output)" : "error is NaN";
  if (std::isinf(err))
    return got_inf ? "error is infinite (got an infinite output)" : "error is infinite";
  if (std::isnan(bound)) return "bound is NaN (error " + fmt(err, 17) + ")";
  if (unit > 0) {
    const auto [e, b] = fmt_apart(err / unit, bound / unit);
    if (e != b) return "error " + e + " u > bound " + b + " u";
  }
  const auto [e, b] = fmt_apart(err, bound);
  return "error " + e + " > bound " + b + " (absolute" +
         (unit > 0 ? ", both " + fmt(err / unit, 17) + " u" : ", the input pair is zero") + ")";
}

// v replaces the running maximum cur: larger, or NaN (the first NaN stays).
bool worse(double v, double cur) { return !std::isnan(cur) && (std::isnan(v) || v > cur); }

struct PairResult {
  std::string name;  // "x -> y"
  std::int64_t vectors = 0, checked = 0, skipped_nonfinite = 0, failures = 0;
  // Each maximum with its own location (vector and pair); empty when nothing was checked.
  double max_err_u = 0, max_util = 0;
  std::string max_err_at, max_util_at;
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
    for (std::int64_t j = spec.rotary_dim; j < spec.head_dim; ++j) {
      const std::uint64_t gb = bits_of(yv[j], *d), ib = bits_of(xv[j], *d);
      if (gb == ib) continue;
      auto [gs, is] = fmt_apart(yv[j], xv[j], 9);
      if (gs == is) {  // NaN payloads: the bits tell them apart
        std::ostringstream h;
        h << std::hex << " (bits 0x" << gb << ")";
        gs += h.str();
        h.str("");
        h << std::hex << " (bits 0x" << ib << ")";
        is += h.str();
      }
      fail("pass-through element " + std::to_string(j) + " changed: got " + gs + ", input " + is);
    }
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
      const std::string at = where.str() + ", pair " + std::to_string(i);
      if (worse(util, res.max_util) || res.max_util_at.empty()) {
        res.max_util = util;
        res.max_util_at = at;
      }
      if (worse(err_u, res.max_err_u) || res.max_err_at.empty()) {
        res.max_err_u = err_u;
        res.max_err_at = at;
      }
      if (!(err <= bound)) {
        const auto ga = fmt_got_expected(yv[a], exact[a]);
        const auto gb = fmt_got_expected(yv[b], exact[b]);
        fail("pair " + std::to_string(i) + " (elements " + std::to_string(a) + ", " +
             std::to_string(b) + "): " +
             exceeded(err, bound, scaled_norm * u, std::isnan(yv[a]) || std::isnan(yv[b]),
                      std::isinf(yv[a]) || std::isinf(yv[b])) +
             "; got (" + ga.first + ", " + gb.first + "), expected (" + ga.second + ", " +
             gb.second + ")");
      }
    }
  }
  return res;
}

// Dynamic NTK and LongRoPE: seq_len = max(position) + 1 over every element of the positions
// tensor (all tokens, batch rows and axes) unless one is given, which must not be smaller.
RopeSpec runtime_seq_len(const RopeSpec& spec, const tio::Tensor& pos,
                         const std::string& seq_len_from) {
  if ((pos.type != tio::ElemType::i64 && pos.type != tio::ElemType::i32) || pos.numel() == 0)
    return spec;  // refused (type) or nothing to check (no tokens) further on
  std::int64_t m = pos.get_int(0);
  for (std::int64_t i = 1; i < pos.numel(); ++i) m = std::max(m, pos.get_int(i));
  return with_runtime_seq_len(spec, m, seq_len_from.empty() ? "--seq-len" : seq_len_from);
}

int run_check(const CheckOptions& o) {
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
  const Keys spec_keys = o.spec.empty() ? Keys{} : read_spec_json(o.spec);
  for (const auto& [k, v] : spec_keys) keys[k] = v;
  const std::string keys_seq_len_from =
      spec_keys.count("seq_len") ? "--spec '" + o.spec + "'" : "__metadata__ of '" + source + "'";

  const auto& x0 = pairs.front().second.first;
  if (x0.shape.empty()) throw UsageError("tensor '" + x0.name + "' is a scalar");
  const std::optional<RopeSpec> hf = o.hf.read();
  if (hf) {
    if (hf->head_dim != x0.shape.back())
      throw UsageError("--hf-config: head_dim " + std::to_string(hf->head_dim) +
                       " does not match the last dimension of the tensors (" +
                       std::to_string(x0.shape.back()) + ")");
  }
  Resolved r = resolve(keys, x0.shape.back(), x0.shape.size(), hf, keys_seq_len_from);
  const std::int64_t given_seq_len = r.spec.scaling.seq_len;
  r.spec = runtime_seq_len(r.spec, pos, r.seq_len_from);
  const auto d = dtype_of_elem(x0.type);
  if (!d) throw UsageError("tensor '" + x0.name + "' must be F64/F32/F16/BF16, is " + x0.type_name);
  ref::set_precision_bits(ref::default_bits(*d));

  std::cout << "ropecheck check: " << source << "\n"
            << "spec: " << describe(r.spec) << ", dtype " << name(*d) << ", tensor_layout "
            << r.tensor_layout << "\n";
  if (given_seq_len == 0 && r.spec.scaling.seq_len != 0)
    std::cout << "seq_len " << r.spec.scaling.seq_len
              << " = max(position) + 1, the length transformers computes at run time (none "
                 "given)\n";
  std::cout << "declared policy: " << describe(r.policy) << "\n\n";
  std::vector<PairResult> results;
  for (const auto& [label, xy] : pairs)
    results.push_back(check_pair(label, xy.first, xy.second, pos, r, o.max_failures));

  std::cout << std::left << std::setw(18) << "tensors" << std::setw(9) << "vectors" << std::setw(9)
            << "checked" << std::setw(8) << "result" << std::setw(14) << "max err [u]"
            << "max err/bound\n";
  bool any_fail = false;
  nlohmann::json jres = nlohmann::json::array();
  for (const auto& p : results) {
    any_fail = any_fail || p.failures > 0;
    std::cout << std::left << std::setw(18) << p.name << std::setw(9) << p.vectors << std::setw(9)
              << p.checked << std::setw(8) << (p.failures ? "FAIL" : "pass") << std::setw(14)
              << fmt(p.max_err_u) << fmt_apart(p.max_util, 1.0).first << "\n";
    // Each figure with its own location: the largest error and the largest share of the bound
    // are often different pairs (the bound grows with the position).
    if (!p.max_err_at.empty())
      std::cout << "  max err [u]   " << fmt(p.max_err_u) << " at " << p.max_err_at << "\n"
                << "  max err/bound " << fmt_apart(p.max_util, 1.0).first << " at " << p.max_util_at
                << "\n";
    jres.push_back({{"tensors", p.name},
                    {"vectors", p.vectors},
                    {"checked", p.checked},
                    {"skipped_nonfinite_input", p.skipped_nonfinite},
                    {"failures", p.failures},
                    {"max_pair_error_u", p.max_err_u},
                    {"max_bound_utilization", p.max_util},
                    {"max_pair_error_at", p.max_err_at},
                    {"max_bound_utilization_at", p.max_util_at},
                    {"worst", p.max_util_at},  // the older name of max_bound_utilization_at, kept
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
  std::cout.flush();
  return any_fail ? 1 : 0;  // as `report`: 1 = a check failed (bad usage is 2, thrown above)
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

void add_check(CLI::App& app, int& status) {
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
  cmd->callback([o, &status] { status = run_check(*o); });
}

}  // namespace ropecheck::cli
