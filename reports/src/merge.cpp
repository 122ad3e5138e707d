// `ropecheck report --merge`: shard reports -> the report of the whole sweep. Shards hold disjoint
// work units (unit index mod shard count). Each shard bucket's statistics are read back into an
// ErrorStats from the mergeable state it carries (counts, exact sums, sketch bins, maxima, worst
// spec index), folded with ErrorStats::merge and written by the document's own functions
// (document.cpp), so every number is computed as run() computes it; the worst cases are copied
// from the shard that swept their spec. The report_shard test checks the merged JSON equals the
// unsharded one.
#include "document.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace ropecheck::reports {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& m) { throw OptionsError("--merge: " + m); }

double val(const json& j) {
  if (const auto v = detail::number(j)) return *v;
  fail("malformed number " + j.dump());
}
ExactSum exact(const json& j) {
  try {
    return ExactSum::parse(j.get<std::string>());
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

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

int bucket_index(const json& b) {
  const auto n = b.at("bucket").get<std::string>();
  for (int bi = 0; bi < detail::kNumBuckets; ++bi)
    if (n == detail::kBuckets[bi].name) return bi;
  fail("a result holds a bucket the report does not list");
}

// A shard bucket's statistics, as far as the document prints them (the per-bucket ULP histogram
// is not kept: the result's histogram is read whole).
ErrorStats bucket_stats(const json& x) {
  ErrorStats st;
  st.n_vectors = x.at("n_vectors").get<std::int64_t>();
  st.n_elements = x.at("n_elements").get<std::int64_t>();
  st.n_pairs = x.at("n_pairs").get<std::int64_t>();
  const json& c = x.at("counts");
  st.not_correctly_rounded = c.at("not_correctly_rounded").get<std::int64_t>();
  st.gt_1ulp = c.at("gt_1ulp").get<std::int64_t>();
  st.gt_bound = c.at("gt_bound").get<std::int64_t>();
  const json& m = x.at("merge");
  const json& s = m.at("sums");
  st.sum_ulp = exact(s.at("ulp"));
  st.sum_ulp2 = exact(s.at("ulp2"));
  st.sum_err2 = exact(s.at("err2"));
  st.sum_exact2 = exact(s.at("exact2"));
  st.sum_pair2 = exact(s.at("pair2"));
  st.sum_angle2 = exact(s.at("angle2"));
  st.sum_rot2 = exact(s.at("rot2"));
  decode_sketch(m.at("ulp_sketch").get<std::string>(), st.ulps);
  st.worst_ulp.value = val(x.at("ulp").at("max"));
  st.worst_ulp.spec_index = m.at("worst_ulp_spec").get<std::int64_t>();
  st.worst_pair.value = val(x.at("pair_error_u").at("max"));
  st.worst_pair.spec_index = m.at("worst_pair_spec").get<std::int64_t>();
  st.max_abs = val(x.at("max_abs_error"));
  const json& bd = x.at("bound");
  st.bound_pairs = bd.at("pairs_checked").get<std::int64_t>();
  if (st.bound_pairs > 0) {
    st.bound_min_u = val(bd.at("min_u"));
    st.bound_max_u = val(bd.at("max_u"));
    st.max_utilization = val(bd.at("max_utilization"));
  }
  const json& av = x.at("angle_vs_rotation");
  st.max_angle_u = val(av.at("angle_max_u"));
  st.max_rot_u = val(av.at("rotation_max_u"));
  st.split_by_bound = av.value("split", std::string("recipe")) == "bound";
  return st;
}

// The worst cases of one kernel x dtype as the shards wrote them, by (bucket, pair case, spec):
// a spec's bucket is one work unit, swept by exactly one shard.
class ShardWorst {
 public:
  void add(int bi, const json& bucket) {
    const json& m = bucket.at("merge");
    by_key_.emplace(Key{bi, false, m.at("worst_ulp_spec").get<std::int64_t>()},
                    &bucket.at("ulp").at("worst"));
    by_key_.emplace(Key{bi, true, m.at("worst_pair_spec").get<std::int64_t>()},
                    &bucket.at("pair_error_u").at("worst"));
  }
  detail::WorstJson renderer() const {
    return [this](int bi, const WorstCase& w, bool pair_case) -> json {
      const auto it = by_key_.find(Key{bi, pair_case, w.spec_index});
      return it == by_key_.end() ? json(nullptr) : *it->second;
    };
  }

 private:
  using Key = std::tuple<int, bool, std::int64_t>;
  std::map<Key, const json*> by_key_;
};

// Folds the buckets of one shard's result (main or variant) into `into`.
void fold_buckets(const json& r, std::array<ErrorStats, detail::kNumBuckets>& into,
                  ShardWorst& worst) {
  for (const auto& b : r.at("buckets")) {
    const int bi = bucket_index(b);
    into[bi].merge(bucket_stats(b));
    worst.add(bi, b);
  }
}

// One shard's main result (kernel x dtype) read back into the run's accumulator.
detail::ResultStats result_stats(const json& x, ShardWorst& worst) {
  detail::ResultStats s;
  s.specs_supported = x.at("specs_supported").get<std::int64_t>();
  if (x.contains("positions_refused")) {
    s.refused = x["positions_refused"].at("count").get<std::int64_t>();
    s.refused_min = x["positions_refused"].at("min_position").get<std::int64_t>();
  }
  const auto& h = x.at("ulp_histogram");
  if (h.size() != s.hist.size()) fail("ULP histograms of different shapes");
  for (std::size_t i = 0; i < h.size(); ++i) s.hist[i] = h[i].at("count").get<std::int64_t>();
  for (const auto& o : x.at("octaves")) {
    OctaveStats oc;
    oc.n_pairs = o.at("n_pairs").get<std::int64_t>();
    oc.max_pair_u = val(o.at("max_pair_u"));
    oc.sum_pair2 = exact(o.at("sum_pair2"));
    s.octaves[static_cast<std::size_t>(octave_of(o.at("position_lo").get<std::int64_t>()))].merge(
        oc);
  }
  fold_buckets(x, s.buckets, worst);
  if (x.contains("fp8"))
    for (const auto& f : x.at("fp8")) {
      const auto fmt = parse_fp8_format(f.at("format").get<std::string>());
      if (!fmt) fail("a result holds an unknown FP8 format");
      detail::ResultStats::Fp8 r{*fmt, {}};
      for (const auto& b : f.at("buckets")) {
        Fp8Stats& st = r.buckets[static_cast<std::size_t>(bucket_index(b))];
        st.elements = b.at("elements").get<std::int64_t>();
        st.differ = b.at("differ").get<std::int64_t>();
        st.max_ulps = b.at("max_ulps").get<std::int64_t>();
        st.undetermined = b.at("undetermined").get<std::int64_t>();
        st.outside = b.at("outside").get<std::int64_t>();
        st.overflowed = b.at("overflowed").get<std::int64_t>();
      }
      s.fp8.push_back(r);
    }
  return s;
}

json merge_result(const std::vector<const json*>& rs) {
  json r = *rs.front();
  detail::ResultStats all;
  ShardWorst worst;
  for (const json* p : rs) {
    for (const char* k : {"kernel", "dtype", "unit_roundoff", "policy"})
      if (p->at(k) != r.at(k)) fail(std::string("results differ in '") + k + "'");
    all.merge(result_stats(*p, worst));
  }
  detail::put_result_figures(r, all, worst.renderer(), false);
  return r;
}

json merge_variant_result(const std::vector<const json*>& rs) {
  json r = *rs.front();
  std::array<ErrorStats, detail::kNumBuckets> buckets;
  ShardWorst worst;
  for (const json* p : rs) fold_buckets(*p, buckets, worst);
  r["buckets"] = detail::buckets_json(buckets, worst.renderer(), false);
  return r;
}

// ---- the shards of one sweep --------------------------------------------------------------------

void check_reports(const std::vector<json>& docs) {
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
}

// Exactly the shards 0..n-1 of one split, each once; returns n.
std::int64_t check_shards(const std::vector<json>& docs) {
  const json& d0 = docs.front();
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
  return total;
}

// Sections this merge does not know must be identical in every shard; they are copied.
void copy_unknown_sections(const std::vector<json>& docs, json& out) {
  static const std::set<std::string> known{
      "schema_version", "tool",         "definitions",  "options",        "specs",  "buckets",
      "results",        "safe_context", "score_offset", "special_values", "checks", "summary",
      "environment",    "shard",        "baseline",     "variants"};
  for (const auto& [k, v] : docs.front().items()) {
    if (known.count(k)) continue;
    for (const auto& d : docs)
      if (d.value(k, json()) != v)
        fail("cannot merge section '" + k + "' (differs between shards)");
    out[k] = v;
  }
}

// Per-unit entries are ordered as run()'s units: kernel (options order), then dtype.
struct UnitOrder {
  const json& opt;
  std::int64_t operator()(const json& e) const {
    return index_of(opt.at("kernels"), e.at("kernel")) *
               static_cast<std::int64_t>(opt.at("dtypes").size()) +
           index_of(opt.at("dtypes"), e.at("dtype"));
  }
  static std::int64_t index_of(const json& list, const json& v) {
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i] == v) return static_cast<std::int64_t>(i);
    fail("entry for unknown kernel/dtype " + v.dump());
  }
};

json merge_results(const std::vector<json>& docs) {
  const auto& res0 = docs.front().at("results");
  json out = json::array();
  for (std::size_t i = 0; i < res0.size(); ++i) {
    std::vector<const json*> rs;
    for (const auto& d : docs) {
      if (d.at("results").size() != res0.size()) fail("shards list different results");
      rs.push_back(&d.at("results")[i]);
    }
    out.push_back(merge_result(rs));
  }
  return out;
}

// Variant sections: per variant, results (kernel x dtype, present where a shard swept it) and
// safe-context entries, both in unit order.
json merge_variant(const std::vector<json>& docs, std::size_t vi, const UnitOrder& key) {
  const json& v0 = docs.front().at("variants").at(vi);
  json vj = v0;
  std::map<std::int64_t, std::vector<const json*>> res;
  std::map<std::int64_t, json> safe;
  for (const auto& d : docs) {
    const json& v = d.at("variants").at(vi);
    for (const char* k : {"name", "model", "spec"})
      if (v.at(k) != v0.at(k)) fail("variant sections differ between shards");
    for (const auto& r : v.at("results")) res[key(r)].push_back(&r);
    for (const auto& e : v.at("safe_context"))
      if (!safe.emplace(key(e), e).second)
        fail("variant safe_context: an entry appears in two shards");
  }
  vj["results"] = json::array();
  for (const auto& [k, rs] : res) vj["results"].push_back(merge_variant_result(rs));
  vj["safe_context"] = json::array();
  for (auto& [k, e] : safe) vj["safe_context"].push_back(e);
  return vj;
}

// safe_context, score_offset, special_values: each entry from the one shard that ran its unit.
json merge_unit_section(const std::vector<json>& docs, const char* sec, const UnitOrder& key) {
  std::vector<std::pair<std::int64_t, json>> all;
  std::set<std::int64_t> keys;
  for (const auto& d : docs)
    for (const auto& e : d.at(sec)) {
      const std::int64_t k = key(e);
      if (!keys.insert(k).second) fail(std::string(sec) + ": an entry appears in two shards");
      all.emplace_back(k, e);
    }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  json out = json::array();
  for (auto& [k, e] : all) out.push_back(std::move(e));
  return out;
}

}  // namespace

json merge(const std::vector<json>& docs) {
  if (docs.empty()) fail("no reports given");
  check_reports(docs);
  const std::int64_t total = check_shards(docs);
  const json& d0 = docs.front();
  json out;
  copy_unknown_sections(docs, out);
  for (const char* k : {"schema_version", "tool", "definitions", "options", "specs", "buckets"})
    out[k] = d0.at(k);
  out["results"] = merge_results(docs);
  const UnitOrder key{d0.at("options")};
  if (d0.contains("variants")) {
    out["variants"] = json::array();
    for (std::size_t vi = 0; vi < d0.at("variants").size(); ++vi)
      out["variants"].push_back(merge_variant(docs, vi, key));
  }
  for (const char* sec : {"safe_context", "score_offset", "special_values"})
    out[sec] = merge_unit_section(docs, sec, key);
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
