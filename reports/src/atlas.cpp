// The engine atlas (report.hpp, run_atlas): the precision of the RoPE recipes production engines
// run, compared. Not a second report engine: a plan over the engine kernels, each restricted to
// one base and its own layout (AtlasCell), swept by run() like any kernel; the block below is
// read off that run's headline rows and results. The figures are the headline's (max per-pair
// error by context, first crossing of 2x/8x/64x the storage rounding); what the atlas adds is
// which part of the recipe limits each engine and one sentence per engine on what would fix it.
#include "document.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/verify/verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <set>

namespace ropecheck::reports {

namespace {

using json = nlohmann::json;
using detail::dbl_of;

// "1e4", "5e5", "500000.5": bases as model configs quote them.
std::string base_label(double b) {
  for (int e = 0; e <= 15; ++e) {
    const double c = b / std::pow(10.0, e);
    if (c >= 1 && c < 10 && c == std::floor(c) && c * std::pow(10.0, e) == b)
      return std::to_string(static_cast<int>(c)) + "e" + std::to_string(e);
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", b);
  return buf;
}

// One engine at one base, in its own layout: the sweep runs every (spec, kernel) pair and skips
// the specs a kernel does not support, so restricting supports() is what makes a row of the atlas
// an (engine, base) pair without a second sweep. A model's spec (--hf-config) is swept in the
// config's layout; an engine that runs only the other 1-D layout (half <-> interleaved) gets the
// same vectors permuted into its layout and its result permuted back: a layout is a storage
// permutation of the pairs, exact, so the errors are the engine's own (the row says which layout
// it ran). Positions past the engine's domain().max_position (a cache of that many rows) are not
// run: the call reports unsupported and the atlas labels those contexts.
class AtlasCell final : public Kernel {
 public:
  AtlasCell(const Kernel& k, double base, Layout layout, Layout run_layout)
      : k_(k),
        base_(base),
        layout_(layout),
        run_(run_layout),
        name_(k.name() + "@" + base_label(base)) {}
  std::string name() const override { return name_; }
  std::string description() const override { return k_.description(); }
  Policy policy(Dtype d) const override { return k_.policy(d); }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    return spec.base == base_ && spec.layout == layout_ && k_.supports(as_run(spec), d);
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (!supports(spec, a.dtype)) return KernelStatus::unsupported;
    const std::int64_t cache = k_.domain().max_position;
    for (std::int64_t i = 0; i < a.n_tokens * a.n_axes; ++i)
      if (a.positions[i] > cache) return KernelStatus::unsupported;
    return run_ == layout_ ? k_.apply(spec, a) : apply_permuted(spec, a);
  }
  Domain domain() const override { return k_.domain(); }
  Layout run_layout() const { return run_; }

 private:
  RopeSpec as_run(RopeSpec s) const {
    s.layout = run_;
    return s;
  }
  KernelStatus apply_permuted(const RopeSpec& spec, const TensorArgs& a) const {
    const RopeSpec rs = as_run(spec);
    const std::int64_t hd = spec.head_dim, nv = a.n_tokens * a.n_heads;
    const std::vector<std::int64_t> to = detail::layout_index_map(spec, run_);
    const auto bytes = static_cast<std::size_t>(traits(a.dtype).bytes);
    std::vector<unsigned char> tin(static_cast<std::size_t>(nv * hd) * bytes), tout(tin.size());
    const auto* in = static_cast<const unsigned char*>(a.in);
    auto* out = static_cast<unsigned char*>(a.out);
    const auto at = [&](std::int64_t t, std::int64_t h, std::int64_t j) {
      return static_cast<std::size_t>(t * a.token_stride + h * a.head_stride + j) * bytes;
    };
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      for (std::int64_t h = 0; h < a.n_heads; ++h)
        for (std::int64_t j = 0; j < hd; ++j)
          std::memcpy(&tin[static_cast<std::size_t>((t * a.n_heads + h) * hd + to[j]) * bytes],
                      in + at(t, h, j), bytes);
    TensorArgs b = a;
    b.in = tin.data(), b.out = tout.data(), b.token_stride = a.n_heads * hd, b.head_stride = hd;
    const KernelStatus st = k_.apply(rs, b);
    if (st != KernelStatus::ok) return st;
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      for (std::int64_t h = 0; h < a.n_heads; ++h)
        for (std::int64_t j = 0; j < hd; ++j)
          std::memcpy(out + at(t, h, j),
                      &tout[static_cast<std::size_t>((t * a.n_heads + h) * hd + to[j]) * bytes],
                      bytes);
    return KernelStatus::ok;
  }

  const Kernel& k_;
  double base_;
  Layout layout_, run_;
  std::string name_;
};

// A model's spec: the config's layout first, then the other 1-D layout; nullopt when the engine
// implements neither for any dtype (its atlas row says "not implemented").
std::optional<Layout> model_run_layout(const Kernel& k, const RopeSpec& spec,
                                       const std::vector<Dtype>& dtypes) {
  std::vector<Layout> tries{spec.layout};
  if (spec.layout == Layout::half) tries.push_back(Layout::interleaved);
  if (spec.layout == Layout::interleaved) tries.push_back(Layout::half);
  for (Layout l : tries) {
    RopeSpec s = spec;
    s.layout = l;
    for (Dtype d : dtypes)
      if (k.supports(s, d)) return l;
  }
  return std::nullopt;
}

// The engine's own layout: half (NeoX / rotate_half, what HF, vLLM and FlashInfer default to)
// when it runs it, else interleaved.
std::optional<Layout> native_layout(const Kernel& k, std::int64_t head_dim, double base,
                                    const std::vector<Dtype>& dtypes) {
  for (Layout l : {Layout::half, Layout::interleaved}) {
    RopeSpec s;
    s.head_dim = head_dim;
    s.base = base;
    s.layout = l;
    s = s.normalized();
    for (Dtype d : dtypes)
      if (k.supports(s, d)) return l;
  }
  return std::nullopt;
}

// Which part of the rotation dominates its derived error (bounds.cpp, sections 2 and 3): the trig
// (trig_error u of the angle precision), the table (cos/sin rounded into a narrower table, or into
// narrower arithmetic), or the arithmetic (two products and an add, 2 u of its precision).
const char* rotation_part(const Policy& p) {
  const double ua = unit_roundoff(angle_precision(p)), ut = unit_roundoff(p.table),
               ur = unit_roundoff(p.arithmetic);
  const double trig = p.trig_error * ua;
  const double table = (ut > ua ? (p.table_rounding == Rounding::toward_zero ? 2 : 1) * ut : 0) +
                       (ur > std::max(ut, ua) ? ur : 0);
  const double arith = 2 * ur;
  if (arith >= table && arith >= trig) return "arithmetic";
  return table >= trig ? "table" : "trig";
}

std::string limit_of(const json& cell, const Policy& p) {
  const std::string by = cell["limited_by"].get<std::string>();
  return by == "rotation" ? rotation_part(p) : by;
}

// What would fix a limit, in the engine's own terms (its precisions).
std::string fix_for(const std::string& limit, const Policy& p, const std::string& dtype) {
  const std::string a = name(angle_precision(p));
  if (limit == "not run")
    return "not measured: the engine refused these positions (its cache extent or position "
           "domain); serve them, or read the contexts it runs";
  if (limit == "storage" && p.output_rounding == Rounding::toward_zero)
    return "round the result to nearest-even instead of truncating it (half the storage error)";
  if (limit == "storage") return "nothing to fix: within 2x the " + dtype + " storage rounding";
  if (limit == "angle" && p.trig_argument == TrigArgument::turns_f32)
    return "reduce m*theta in f64 (to [-pi, pi], or into turns for sincospif) before the fast "
           "__sincosf, or call accurate sincosf: the f32 angle and its f32 scaling into turns "
           "lose ~3|m theta| 2^-24 rad";
  if (limit == "angle" && a == "f32")
    return "form the angle m*theta in f64 (f32 positions times an f32 inv_freq lose ~|m| 2^-24 "
           "rad) and round cos/sin once";
  if (limit == "angle")
    return "reduce m*theta in wider precision (the " + a + " angle errs by ~|m| u_" + a + " rad)";
  if (limit == "table")
    return std::string("keep cos/sin in f32 (the table is ") + name(p.table) +
           (p.table_rounding == Rounding::toward_zero ? ", truncated" : "") + ")";
  if (limit == "trig")
    return "use an accurately range-reduced sin/cos (declared trig error " +
           verify::fmt(p.trig_error, 3) + " u of " + a + ")";
  if (limit == "arithmetic")
    return std::string("rotate in f32 and round into ") + dtype +
           " once (each operation of the rotation rounds into " + name(p.arithmetic) + ")";
  return "non-finite outputs: see the worst cases";
}

struct CellInfo {
  std::size_t engine;
  double base;
  Layout layout;            // the layout the engine ran
  Layout model;             // the layout of the swept spec (the config's, for a model)
  bool implemented = true;  // false: supports() rejects the model's spec in either layout
};

json atlas_row(const json& hrow, const CellInfo& ci, const AtlasEngine& e) {
  json row{{"engine", e.kernel->name()},        {"base", ci.base},
           {"base_label", base_label(ci.base)}, {"layout", name(ci.layout)},
           {"model_layout", name(ci.model)},    {"dtype", hrow["dtype"]},
           {"supported", hrow["supported"]},    {"modelled", !e.modelled.empty()}};
  if (!hrow["supported"].get<bool>()) {
    if (!ci.implemented) row["not_implemented"] = true, row["upstream"] = e.upstream;
    return row;
  }
  const Policy p = e.kernel->policy(*parse_dtype(hrow["dtype"].get<std::string>()));
  row["at"] = hrow["at"];
  // A context L samples positions < L: past a cache of max_position + 1 rows it was not run.
  const std::int64_t cache = e.kernel->domain().max_position;
  if (cache < std::numeric_limits<std::int64_t>::max()) row["cache_max_position"] = cache;
  for (auto& c : row["at"])
    if (c["context"].get<std::int64_t>() - 1 > cache) c["past_cache"] = true;
  row["exceeds"] = hrow["exceeds"];
  for (auto& c : row["at"]) c["limited_by"] = limit_of(c, p);
  row["limited_by"] = row["at"].back()["limited_by"];
  row["fix"] = fix_for(row["limited_by"].get<std::string>(), p, hrow["dtype"].get<std::string>());
  return row;
}

// One sentence per engine: at the longest context, which dtypes are limited by what, and the fix
// of each limit (the same limit in several dtypes and bases is said once).
std::string engine_sentence(const AtlasEngine& e, const json& rows, const std::string& longest,
                            const std::string& model_spec) {
  std::vector<std::pair<std::string, std::set<std::string>>> by_fix;  // "limit: fix" -> dtypes
  for (const auto& r : rows) {
    if (r["engine"] != e.kernel->name() || !r["supported"].get<bool>()) continue;
    const std::string by = r["limited_by"].get<std::string>();
    const std::string key =
        (by == "not run" ? by : by + "-limited") + ": " + r["fix"].get<std::string>();
    auto it = std::find_if(by_fix.begin(), by_fix.end(), [&](auto& x) { return x.first == key; });
    if (it == by_fix.end()) it = by_fix.insert(by_fix.end(), {key, {}});
    it->second.insert(r["dtype"].get<std::string>());
  }
  if (by_fix.empty() && !model_spec.empty())
    return e.kernel->name() + ": not implemented for this model's spec (" + model_spec +
           "): its supports() rejects it in either layout; upstream: " + e.upstream + ".";
  if (by_fix.empty()) return e.kernel->name() + ": runs none of the atlas specs.";
  std::string s = e.kernel->name() + " at " + longest + ": ";
  for (std::size_t i = 0; i < by_fix.size(); ++i) {
    std::string ds;
    for (const auto& d : by_fix[i].second) ds += (ds.empty() ? "" : "/") + d;
    s += (i ? "; " : "") + ds + " " + by_fix[i].first;
  }
  return s + ".";
}

json engines_json(const std::vector<AtlasEngine>& engines) {
  json j = json::array();
  for (const auto& e : engines)
    j.push_back({{"name", e.kernel->name()},
                 {"description", e.kernel->description()},
                 {"engine", e.engine},
                 {"upstream", e.upstream},
                 {"checked", e.checked},
                 {"modelled", e.modelled}});
  return j;
}

json atlas_block(const json& doc, const std::vector<AtlasEngine>& engines,
                 const std::vector<std::unique_ptr<AtlasCell>>& cells,
                 const std::vector<CellInfo>& info, const std::string& model_spec) {
  json rows = json::array();
  for (const auto& hrow : doc["headline"]["rows"])
    for (std::size_t c = 0; c < cells.size(); ++c)
      if (hrow["kernel"] == cells[c]->name())
        rows.push_back(atlas_row(hrow, info[c], engines[info[c].engine]));
  const std::string longest = doc["headline"]["contexts"].back()["label"].get<std::string>();
  json sentences = json::array();
  for (const auto& e : engines)
    sentences.push_back(
        {{"engine", e.kernel->name()}, {"text", engine_sentence(e, rows, longest, model_spec)}});
  return {{"engines", engines_json(engines)},
          {"head_dim", doc["options"]["head_dims"][0]},
          {"bases", doc["options"]["bases"]},
          {"dtypes", doc["options"]["dtypes"]},
          {"contexts", doc["headline"]["contexts"]},
          {"factors", doc["headline"]["factors"]},
          {"rows", rows},
          {"sentences", sentences},
          {"results", doc["results"]}};
}

}  // namespace

json run_atlas(const Options& o, const std::vector<AtlasEngine>& engines,
               const Progress& progress) {
  if (engines.empty()) throw OptionsError("--engines: no engine kernel to run");
  Options ao = o;
  if (o.spec) ao.head_dims = {o.spec->head_dim}, ao.bases = {o.spec->base};
  if (ao.head_dims.size() != 1) throw OptionsError("the atlas runs one head dim");
  std::vector<std::unique_ptr<AtlasCell>> cells;
  std::vector<CellInfo> info;
  for (std::size_t e = 0; e < engines.size(); ++e)
    for (double b : ao.bases)
      if (o.spec) {
        // A model's spec (--hf-config): every engine gets a row; one that implements the spec in
        // neither layout runs nothing ("not implemented", with its upstream file).
        const auto l = model_run_layout(*engines[e].kernel, *o.spec, ao.dtypes);
        cells.push_back(std::make_unique<AtlasCell>(*engines[e].kernel, b, o.spec->layout,
                                                    l.value_or(o.spec->layout)));
        info.push_back({e, b, l.value_or(o.spec->layout), o.spec->layout, l.has_value()});
      } else if (auto l = native_layout(*engines[e].kernel, ao.head_dims[0], b, ao.dtypes)) {
        cells.push_back(std::make_unique<AtlasCell>(*engines[e].kernel, b, *l, *l));
        info.push_back({e, b, *l, *l, true});
      }
  const auto runs = [&](const AtlasCell& c) {
    for (Dtype d : ao.dtypes)
      if (ao.spec ? c.supports(*ao.spec, d) : true) return true;
    return false;
  };
  // A model no engine implements still gets its atlas: every row says "not implemented".
  if (!ao.spec && (cells.empty() ||
                   std::none_of(cells.begin(), cells.end(), [&](auto& c) { return runs(*c); })))
    throw OptionsError("--engines: no engine runs " +
                       (ao.spec ? "this model's spec (" + describe(*ao.spec) + ")"
                                : std::string("the atlas's specs and dtypes")));
  ao.layouts = {Layout::half, Layout::interleaved};
  ao.variants = false;
  std::vector<const Kernel*> ks;
  for (const auto& c : cells) ks.push_back(c.get());
  json doc = run(ao, ks, progress);
  doc["atlas"] = atlas_block(doc, engines, cells, info, ao.spec ? describe(*ao.spec) : "");
  doc["atlas"]["embedded"] = false;
  if (ao.spec) doc["atlas"]["model_spec"] = describe(*ao.spec);
  return doc;
}

void embed_atlas(json& doc, const json& atlas_doc) {
  json checks = atlas_doc.at("checks");
  for (const auto& c : doc.at("checks")) checks.push_back(c);
  doc["checks"] = checks;
  doc["atlas"] = atlas_doc.at("atlas");
  doc["atlas"]["embedded"] = true;
}

namespace detail {

std::vector<std::int64_t> layout_index_map(const RopeSpec& spec, Layout run) {
  RopeSpec rs = spec;
  rs.layout = run;
  std::vector<std::int64_t> to(static_cast<std::size_t>(spec.head_dim));
  for (std::int64_t j = 0; j < spec.head_dim; ++j) to[static_cast<std::size_t>(j)] = j;
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [p, q] = spec.pair(i);
    const auto [pr, qr] = rs.pair(i);
    to[static_cast<std::size_t>(p)] = pr, to[static_cast<std::size_t>(q)] = qr;
  }
  return to;
}

}  // namespace detail

}  // namespace ropecheck::reports
