// `ropecheck report --merge`: shard reports -> the report of the whole sweep. Shards hold disjoint
// work units (unit index mod shard count); every per-bucket number is rebuilt from mergeable state
// carried in the JSON: counts add, maxima are exact (worst-case ties go to the lower spec index,
// i.e. to the unit run()'s in-order merge would have kept), sums are exact (ExactSum) and
// percentiles come from the merged sketch bins. The formulas below mirror bucket_json in
// sweep.cpp; the report_shard test checks the merged JSON equals the unsharded one.
#include "ropecheck/reports/exact_sum.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/reports/stats.hpp"
#include "shard.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace ropecheck::reports {

using nlohmann::json;

namespace detail {

// Sparse sketch bins as text, one line however many bins (tens of thousands for wide-ranging
// f64/f16 ULP errors): runs of consecutive keys "key:count,count,... key:count,...".
std::string encode_sketch(const QuantileSketch& q) {
  std::string t;
  std::int64_t prev = -2;
  for (const auto& [k, c] : q.bins()) {
    if (k == prev + 1)
      t += ",";
    else
      t += (t.empty() ? "" : " ") + std::to_string(k) + ":";
    t += std::to_string(c);
    prev = k;
  }
  return t;
}

json bucket_merge_state(const ErrorStats& st) {
  const std::string sk = encode_sketch(st.ulps);
  return {{"sums",
           {{"ulp", st.sum_ulp.str()},
            {"ulp2", st.sum_ulp2.str()},
            {"err2", st.sum_err2.str()},
            {"exact2", st.sum_exact2.str()},
            {"pair2", st.sum_pair2.str()},
            {"angle2", st.sum_angle2.str()},
            {"rot2", st.sum_rot2.str()}}},
          {"worst_ulp_spec", st.worst_ulp.spec_index},
          {"worst_pair_spec", st.worst_pair.spec_index},
          {"ulp_sketch", sk}};
}

void add_checks(json& doc) {
  int bound_exceeded = 0, violations = 0;
  doc["checks"] = json::array();
  for (const auto& r : doc["results"]) {
    std::int64_t gt = 0;
    double util = -1;
    for (const auto& b : r["buckets"]) {
      gt += b["counts"]["gt_bound"].get<std::int64_t>();
      const auto& mu_ = b["bound"]["max_utilization"];
      if (mu_.is_number()) util = std::max(util, mu_.get<double>());
      if (mu_.is_string()) util = std::numeric_limits<double>::infinity();
    }
    bound_exceeded += gt > 0;
    std::ostringstream msg;
    msg << gt << " pairs above the derived bound; max utilization "
        << (util < 0 ? std::string("n/a")
                     : (std::isinf(util) ? json("inf").dump() : json(util).dump()));
    doc["checks"].push_back({{"kernel", r["kernel"]},
                             {"dtype", r["dtype"]},
                             {"check", "MatchesReferenceWithinBound"},
                             {"passed", gt == 0},
                             {"message", msg.str()}});
  }
  // The variant sections' checks, as run() emits them (after the main results').
  int variant_bound_exceeded = 0;
  if (doc.contains("variants"))
    for (const auto& v : doc["variants"])
      for (const auto& r : v["results"]) {
        std::int64_t gt = 0;
        for (const auto& b : r["buckets"]) gt += b["counts"]["gt_bound"].get<std::int64_t>();
        variant_bound_exceeded += gt > 0;
        doc["checks"].push_back(
            {{"kernel", r["kernel"]},
             {"dtype", r["dtype"]},
             {"check", "MatchesReferenceWithinBound[" + v["name"].get<std::string>() + "]"},
             {"passed", gt == 0},
             {"message", std::to_string(gt) + " pairs above the derived bound on " +
                             v["spec"].value("detail", std::string())}});
      }
  bound_exceeded += variant_bound_exceeded;
  for (const auto& s : doc["special_values"]) {
    const int v = s["violations"].get<int>();
    violations += v;
    doc["checks"].push_back({{"kernel", s["kernel"]},
                             {"dtype", s["dtype"]},
                             {"check", "SpecialValuesFollowPolicy"},
                             {"passed", v == 0},
                             {"message", std::to_string(v) + " cases deviate from the policy"}});
  }
  doc["summary"] = {{"bound_exceeded_kernel_dtypes", bound_exceeded},
                    {"special_value_violations", violations}};
}

}  // namespace detail

namespace {

[[noreturn]] void fail(const std::string& m) { throw OptionsError("--merge: " + m); }

json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
double val(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  fail("malformed number " + j.dump());
}
// run()'s maxima: a NaN sticks, otherwise the larger value.
void sticky_max(double& a, double b) {
  if (b > a || std::isnan(b)) a = b;
}
ExactSum exact(const json& j) {
  try {
    return ExactSum::parse(j.get<std::string>());
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

// The worst case kept: the largest value (NaN largest), ties to the lower spec index.
struct Worst {
  const json* stats = nullptr;  // the "ulp" or "pair_error_u" object it comes from
  double value = -1;
  std::int64_t spec = -1;
  void offer(const json& s, std::int64_t sp) {
    const double v = val(s.at("max"));
    if (v < 0 && !std::isnan(v)) return;  // none in that shard
    bool better;
    if (!stats)
      better = true;
    else if (std::isnan(v))
      better = !std::isnan(value) || sp < spec;
    else if (std::isnan(value))
      better = false;
    else
      better = v > value || (v == value && sp < spec);
    if (better) stats = &s, value = v, spec = sp;
  }
};

void decode_sketch(const std::string& t, QuantileSketch& q) {
  std::size_t i = 0;
  auto number = [&] {
    std::size_t j = i;
    while (j < t.size() && t[j] >= '0' && t[j] <= '9') ++j;
    if (j == i || j - i > 12) fail("malformed ulp_sketch near offset " + std::to_string(i));
    const long long v = std::stoll(t.substr(i, j - i));
    i = j;
    return v;
  };
  while (i < t.size()) {
    long long k = number();
    if (i >= t.size() || t[i] != ':') fail("malformed ulp_sketch (expected ':')");
    ++i;
    for (;;) {
      if (k > std::numeric_limits<std::int32_t>::max()) fail("ulp_sketch key out of range");
      q.add_bin(static_cast<std::int32_t>(k++), number());
      if (i < t.size() && t[i] == ',') {
        ++i;
        continue;
      }
      break;
    }
    if (i < t.size()) {
      if (t[i] != ' ') fail("malformed ulp_sketch (expected ' ')");
      ++i;
    }
  }
}

json merge_buckets(const std::vector<const json*>& g) {
  json b = *g.front();
  std::int64_t nv = 0, ne = 0, np = 0, ncr = 0, g1 = 0, gb = 0, bp = 0;
  ExactSum s_ulp, s_ulp2, s_err2, s_exact2, s_pair2, s_angle2, s_rot2;
  QuantileSketch q;
  Worst wu, wp;
  double max_abs = 0, bmin = std::numeric_limits<double>::infinity(), bmax = -1, util = -1;
  double angle_max = 0, rot_max = 0;
  for (const json* p : g) {
    const json& x = *p;
    nv += x.at("n_vectors").get<std::int64_t>();
    ne += x.at("n_elements").get<std::int64_t>();
    np += x.at("n_pairs").get<std::int64_t>();
    const json& c = x.at("counts");
    ncr += c.at("not_correctly_rounded").get<std::int64_t>();
    g1 += c.at("gt_1ulp").get<std::int64_t>();
    gb += c.at("gt_bound").get<std::int64_t>();
    const json& m = x.at("merge");
    const json& s = m.at("sums");
    s_ulp += exact(s.at("ulp"));
    s_ulp2 += exact(s.at("ulp2"));
    s_err2 += exact(s.at("err2"));
    s_exact2 += exact(s.at("exact2"));
    s_pair2 += exact(s.at("pair2"));
    s_angle2 += exact(s.at("angle2"));
    s_rot2 += exact(s.at("rot2"));
    decode_sketch(m.at("ulp_sketch").get<std::string>(), q);
    wu.offer(x.at("ulp"), m.at("worst_ulp_spec").get<std::int64_t>());
    wp.offer(x.at("pair_error_u"), m.at("worst_pair_spec").get<std::int64_t>());
    sticky_max(max_abs, val(x.at("max_abs_error")));
    const json& bd = x.at("bound");
    const auto pc = bd.at("pairs_checked").get<std::int64_t>();
    bp += pc;
    if (pc > 0) {
      bmin = std::fmin(bmin, val(bd.at("min_u")));
      bmax = std::fmax(bmax, val(bd.at("max_u")));
      sticky_max(util, val(bd.at("max_utilization")));
    }
    const json& av = x.at("angle_vs_rotation");
    angle_max = std::fmax(angle_max, val(av.at("angle_max_u")));
    sticky_max(rot_max, val(av.at("rotation_max_u")));
  }
  const double n = static_cast<double>(ne), npd = static_cast<double>(np);
  b["n_vectors"] = nv;
  b["n_elements"] = ne;
  b["n_pairs"] = np;
  auto& u = b["ulp"];
  if (wu.stats) {
    u["max"] = (*wu.stats)["max"];
    u["worst"] = (*wu.stats)["worst"];
  }
  u["mean"] = num(s_ulp / n);
  u["rms"] = num(std::sqrt(s_ulp2 / n));
  u["p50"] = num(q.percentile(0.5));
  u["p99"] = num(q.percentile(0.99));
  u["p999"] = num(q.percentile(0.999));
  b["max_abs_error"] = num(max_abs);
  b["nmse"] = num(s_exact2 > 0 ? s_err2 / s_exact2 : 0.0);
  auto& pe = b["pair_error_u"];
  if (wp.stats) {
    pe["max"] = (*wp.stats)["max"];
    pe["worst"] = (*wp.stats)["worst"];
  }
  pe["rms"] = num(std::sqrt(s_pair2 / npd));
  b["counts"] = {{"not_correctly_rounded", ncr}, {"gt_1ulp", g1}, {"gt_bound", gb}};
  b["bound"] = {{"pairs_checked", bp},
                {"min_u", bp ? num(bmin) : json(nullptr)},
                {"max_u", bp ? num(bmax) : json(nullptr)},
                {"max_utilization", bp ? num(util) : json(nullptr)}};
  const double a2 = s_angle2, r2 = s_rot2;
  b["angle_vs_rotation"] = {{"angle_max_u", num(angle_max)},
                            {"rotation_max_u", num(rot_max)},
                            {"angle_rms_u", num(std::sqrt(a2 / npd))},
                            {"rotation_rms_u", num(std::sqrt(r2 / npd))},
                            {"angle_share", num((a2 + r2) > 0 ? a2 / (a2 + r2) : 0.0)}};
  // The merged report is a whole report: like an unsharded one, it carries no merge state.
  b.erase("merge");
  return b;
}

json merge_result(const std::vector<const json*>& rs, const json& bucket_order) {
  json r = *rs.front();
  std::int64_t supported = 0;
  std::vector<std::int64_t> hist(r.at("ulp_histogram").size(), 0);
  struct Oct {
    std::int64_t n = 0;
    double max = 0;
    ExactSum sum;
  };
  std::map<std::int64_t, Oct> oct;
  std::map<std::string, std::vector<const json*>> buckets;
  for (const json* p : rs) {
    const json& x = *p;
    for (const char* k : {"kernel", "dtype", "unit_roundoff", "policy"})
      if (x.at(k) != r.at(k)) fail(std::string("results differ in '") + k + "'");
    supported += x.at("specs_supported").get<std::int64_t>();
    const auto& h = x.at("ulp_histogram");
    if (h.size() != hist.size()) fail("ULP histograms of different shapes");
    for (std::size_t i = 0; i < h.size(); ++i) hist[i] += h[i].at("count").get<std::int64_t>();
    for (const auto& o : x.at("octaves")) {
      auto& t = oct[o.at("position_lo").get<std::int64_t>()];
      t.n += o.at("n_pairs").get<std::int64_t>();
      sticky_max(t.max, val(o.at("max_pair_u")));
      t.sum += exact(o.at("sum_pair2"));
    }
    for (const auto& b : x.at("buckets")) buckets[b.at("bucket").get<std::string>()].push_back(&b);
  }
  r["specs_supported"] = supported;
  for (std::size_t i = 0; i < hist.size(); ++i) r["ulp_histogram"][i]["count"] = hist[i];
  r["octaves"] = json::array();
  for (const auto& [lo, t] : oct)
    r["octaves"].push_back({{"position_lo", lo},
                            {"n_pairs", t.n},
                            {"max_pair_u", num(t.max)},
                            {"rms_pair_u", num(std::sqrt(t.sum / t.n))},
                            {"sum_pair2", t.sum.str()}});
  r["buckets"] = json::array();
  std::size_t used = 0;
  for (const auto& bo : bucket_order) {
    const auto it = buckets.find(bo.at("name").get<std::string>());
    if (it == buckets.end()) continue;
    r["buckets"].push_back(merge_buckets(it->second));
    ++used;
  }
  if (used != buckets.size()) fail("a result holds a bucket the report does not list");
  return r;
}

}  // namespace

json merge(const std::vector<json>& docs) {
  if (docs.empty()) fail("no reports given");
  const json& d0 = docs.front();
  for (const auto& d : docs) {
    if (!d.is_object() || d.value("tool", "") != "ropecheck report")
      fail("not a ropecheck report document");
    if (d.value("schema_version", -1) != kSchemaVersion)
      fail("schema_version " + d.value("schema_version", json(nullptr)).dump() +
           " differs from this tool's " + std::to_string(kSchemaVersion) +
           " (re-run the shards with this build)");
  }
  // The same sweep: identical options (seed, samples, kernels, ...), specs and buckets.
  for (const char* k : {"options", "specs", "buckets", "definitions"})
    for (std::size_t i = 1; i < docs.size(); ++i)
      if (docs[i].value(k, json()) != d0.value(k, json()))
        fail(std::string("report ") + std::to_string(i + 1) + " has different '" + k +
             "' than report 1 (" +
             (std::string(k) == "options" ? "seed, samples, kernels, ..." : "") +
             "); only shards of one sweep merge");
  // Exactly the shards 0..n-1 of one split, each once.
  const std::int64_t total = d0.contains("shard") ? d0["shard"].value("total", 0) : 0;
  if (total < 1 || static_cast<std::size_t>(total) != docs.size())
    fail("got " + std::to_string(docs.size()) + " report(s) but report 1 is shard of " +
         std::to_string(total) + "; give every shard of the split, each once");
  std::set<std::int64_t> seen;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const json& s = docs[i].value("shard", json());
    if (!s.is_object() || s.value("total", 0) != total || s.value("merged_from", 0) != 0)
      fail("report " + std::to_string(i + 1) + " is not a shard of the same " +
           std::to_string(total) + "-way split");
    const std::int64_t idx = s.value("index", -1);
    if (idx < 0 || idx >= total || !seen.insert(idx).second)
      fail("shard index " + std::to_string(idx) + " given twice or out of range");
  }
  // Sections this merge knows; anything else must be identical in every shard.
  static const std::set<std::string> known{
      "schema_version", "tool",         "definitions",  "options",        "specs",  "buckets",
      "results",        "safe_context", "score_offset", "special_values", "checks", "summary",
      "environment",    "shard",        "baseline",     "variants"};
  json out;
  for (const auto& [k, v] : d0.items()) {
    if (known.count(k)) continue;
    for (const auto& d : docs)
      if (d.value(k, json()) != v)
        fail("cannot merge section '" + k + "' (differs between shards)");
    out[k] = v;
  }
  for (const char* k : {"schema_version", "tool", "definitions", "options", "specs", "buckets"})
    out[k] = d0.at(k);

  // Per-unit sections, in run()'s unit order: kernel (options order), then dtype.
  const auto& opt = d0.at("options");
  const auto& res0 = d0.at("results");
  out["results"] = json::array();
  for (std::size_t i = 0; i < res0.size(); ++i) {
    std::vector<const json*> rs;
    for (const auto& d : docs) {
      if (d.at("results").size() != res0.size()) fail("shards list different results");
      rs.push_back(&d.at("results")[i]);
    }
    out["results"].push_back(merge_result(rs, d0.at("buckets")));
  }

  auto index_of = [](const json& list, const json& v) {
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i] == v) return static_cast<std::int64_t>(i);
    fail("entry for unknown kernel/dtype " + v.dump());
  };
  auto unit_key = [&](const json& e) {
    return index_of(opt.at("kernels"), e.at("kernel")) *
               static_cast<std::int64_t>(opt.at("dtypes").size()) +
           index_of(opt.at("dtypes"), e.at("dtype"));
  };
  // Variant sections: per variant, results (kernel x dtype, present where a shard swept it) and
  // safe-context entries, both in unit order (kernel, then dtype).
  if (d0.contains("variants")) {
    out["variants"] = json::array();
    const auto& v0 = d0.at("variants");
    for (std::size_t vi = 0; vi < v0.size(); ++vi) {
      json vj = v0[vi];
      std::map<std::int64_t, std::vector<const json*>> res;
      std::map<std::int64_t, json> safe;
      for (const auto& d : docs) {
        const json& v = d.at("variants").at(vi);
        for (const char* k : {"name", "model", "spec"})
          if (v.at(k) != v0[vi].at(k)) fail("variant sections differ between shards");
        for (const auto& r : v.at("results")) res[unit_key(r)].push_back(&r);
        for (const auto& e : v.at("safe_context"))
          if (!safe.emplace(unit_key(e), e).second)
            fail("variant safe_context: an entry appears in two shards");
      }
      vj["results"] = json::array();
      for (const auto& [key, rs] : res) {
        json r = *rs.front();
        std::map<std::string, std::vector<const json*>> buckets;
        for (const json* p : rs)
          for (const auto& b : p->at("buckets"))
            buckets[b.at("bucket").get<std::string>()].push_back(&b);
        r["buckets"] = json::array();
        for (const auto& bo : d0.at("buckets")) {
          const auto it = buckets.find(bo.at("name").get<std::string>());
          if (it != buckets.end()) r["buckets"].push_back(merge_buckets(it->second));
        }
        vj["results"].push_back(r);
      }
      vj["safe_context"] = json::array();
      for (auto& [key, e] : safe) vj["safe_context"].push_back(e);
      out["variants"].push_back(vj);
    }
  }
  for (const char* sec : {"safe_context", "score_offset", "special_values"}) {
    std::vector<std::pair<std::int64_t, json>> all;
    std::set<std::int64_t> keys;
    for (const auto& d : docs)
      for (const auto& e : d.at(sec)) {
        const std::int64_t key = unit_key(e);
        if (!keys.insert(key).second) fail(std::string(sec) + ": an entry appears in two shards");
        all.emplace_back(key, e);
      }
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    out[sec] = json::array();
    for (auto& [k, e] : all) out[sec].push_back(std::move(e));
  }
  detail::add_checks(out);
  json env = d0.at("environment");
  double wall = 0;
  for (const auto& d : docs) wall += d.at("environment").value("wall_seconds", 0.0);
  env["wall_seconds"] = wall;  // summed over shards (the machine time of the whole sweep)
  out["environment"] = env;
  out["shard"] = {{"merged_from", total}};
  return out;
}

}  // namespace ropecheck::reports
