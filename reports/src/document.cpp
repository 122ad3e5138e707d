// The document: report.json from the executed units, in work-list order (document.hpp). Every
// number of the report is written here once; render.cpp only formats what this wrote.
#include "document.hpp"

#include "ropecheck/reference/reference.hpp"
#include "ropecheck/verify/verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ropecheck::reports {

namespace detail {

using nlohmann::json;

json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double dbl_of(const json& j) {
  return number(j).value_or(std::numeric_limits<double>::quiet_NaN());
}

std::optional<double> number(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

void ResultStats::merge(const ResultStats& later) {
  for (int bi = 0; bi < kNumBuckets; ++bi) buckets[bi].merge(later.buckets[bi]);
  for (int q = 0; q < kOctaves; ++q) octaves[q].merge(later.octaves[q]);
  for (int q = 0; q < kUlpBins; ++q) hist[q] += later.hist[q];
  specs_supported += later.specs_supported;
  if (fp8.empty())
    fp8 = later.fp8;
  else
    for (std::size_t f = 0; f < fp8.size() && f < later.fp8.size(); ++f)
      for (int bi = 0; bi < kNumBuckets; ++bi) fp8[f].buckets[bi].merge(later.fp8[f].buckets[bi]);
}

namespace {

std::string hex_bits(double v, Dtype d) {
  char buf[32];
  const int digits = traits(d).bytes * 2;
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits,
                static_cast<unsigned long long>(bits_of(v, d)));
  return buf;
}

std::string exact_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

json spec_json(const RopeSpec& s) {
  json j{{"head_dim", s.head_dim}, {"rotary_dim", s.rotary_dim},
         {"base", s.base},         {"layout", name(s.layout)},
         {"scale", s.scale},       {"scaling", name(s.scaling.kind)}};
  // Variants and multi-axis layouts: the sections and the full parameter list (describe()).
  if (!s.sections.empty()) j["sections"] = s.sections;
  if (s.scaling.kind != ScalingKind::none || !s.sections.empty()) j["detail"] = describe(s);
  return j;
}

// `ropecheck eval` reproduction: the pair's inputs, zeros elsewhere (a pair's output depends only
// on its own two inputs).
std::string reproduce_command(const WorstCase& w, const RopeSpec& spec, Dtype d) {
  std::string input;
  for (std::int64_t j = 0; j < spec.head_dim; ++j) {
    if (j) input += ",";
    input += j == w.pair_a ? exact_text(w.in_a) : j == w.pair_b ? exact_text(w.in_b) : "0";
  }
  std::ostringstream cmd;
  cmd << "ropecheck eval --head-dim " << spec.head_dim << " --rotary-dim " << spec.rotary_dim
      << " --base " << exact_text(spec.base) << " --layout " << name(spec.layout) << " --dtype "
      << name(d) << " --position " << w.position << " --input " << input;
  // eval takes the variants' parameters from a config (--hf-config); name them here.
  if (spec.scaling.kind != ScalingKind::none || !spec.sections.empty())
    cmd << "  # with the spec's variant parameters: " << describe(spec);
  return cmd.str();
}

json worst_json(const WorstCase& w, const Setup& S, Dtype d, bool pair_case) {
  if (w.value < 0) return nullptr;
  const RopeSpec& spec = S.specs[static_cast<std::size_t>(w.spec_index)];
  json j{{"value", num(w.value)},
         {"spec", spec_json(spec)},
         {"position", w.position},
         {"element", w.element},
         {"pair", {w.pair_a, w.pair_b}},
         {"input", {num(w.in_a), num(w.in_b)}},
         {"input_bits", {hex_bits(w.in_a, d), hex_bits(w.in_b, d)}},
         {"expected", w.expected},
         {"got", num(w.got)},
         {"got_bits", hex_bits(w.got, d)},
         {"reproduce", reproduce_command(w, spec, d)}};
  if (pair_case) {
    j["got"] = {num(w.got), num(w.got_b)};
    j["got_bits"] = {hex_bits(w.got, d), hex_bits(w.got_b, d)};
  } else {
    j["expected_rounded"] = num(w.expected_rounded);
  }
  return j;
}

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

// The state of a bucket's statistics that the rendered numbers cannot be merged from: exact sums
// (mean, RMS, NMSE, angle share), the sparse quantile-sketch bins (percentiles) and the spec index
// of each worst case (ties between shards go to the lower spec index, as in run()'s unit order).
json bucket_merge_state(const ErrorStats& st) {
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
          {"ulp_sketch", encode_sketch(st.ulps)}};
}

json bucket_json(const ErrorStats& st, int bi, const WorstJson& worst, bool merge_state) {
  const double n = static_cast<double>(st.n_elements);
  const double np = static_cast<double>(st.n_pairs);
  const double share =
      (st.sum_angle2 + st.sum_rot2) > 0 ? st.sum_angle2 / (st.sum_angle2 + st.sum_rot2) : 0.0;
  json j{{"bucket", kBuckets[bi].name},
         {"sampling", "sampled (lower bound)"},
         {"n_vectors", st.n_vectors},
         {"n_elements", st.n_elements},
         {"n_pairs", st.n_pairs},
         {"ulp",
          {{"max", num(st.worst_ulp.value)},
           {"mean", num(st.sum_ulp / n)},
           {"rms", num(std::sqrt(st.sum_ulp2 / n))},
           {"p50", num(st.ulps.percentile(0.5))},
           {"p99", num(st.ulps.percentile(0.99))},
           {"p999", num(st.ulps.percentile(0.999))},
           {"worst", worst(bi, st.worst_ulp, false)}}},
         {"max_abs_error", num(st.max_abs)},
         {"nmse", num(st.sum_exact2 > 0 ? st.sum_err2 / st.sum_exact2 : 0.0)},
         {"pair_error_u",
          {{"max", num(st.worst_pair.value)},
           {"rms", num(std::sqrt(st.sum_pair2 / np))},
           {"worst", worst(bi, st.worst_pair, true)}}},
         {"counts",
          {{"not_correctly_rounded", st.not_correctly_rounded},
           {"gt_1ulp", st.gt_1ulp},
           {"gt_bound", st.gt_bound}}},
         {"bound",
          {{"pairs_checked", st.bound_pairs},
           {"min_u", st.bound_pairs ? num(st.bound_min_u) : json(nullptr)},
           {"max_u", st.bound_pairs ? num(st.bound_max_u) : json(nullptr)},
           {"max_utilization", st.bound_pairs ? num(st.max_utilization) : json(nullptr)}}},
         {"angle_vs_rotation",
          {{"angle_max_u", num(st.max_angle_u)},
           {"rotation_max_u", num(st.max_rot_u)},
           {"angle_rms_u", num(std::sqrt(st.sum_angle2 / np))},
           {"rotation_rms_u", num(std::sqrt(st.sum_rot2 / np))},
           {"angle_share", num(share)}}}};
  if (merge_state) j["merge"] = bucket_merge_state(st);
  return j;
}

}  // namespace

json buckets_json(const std::array<ErrorStats, kNumBuckets>& buckets, const WorstJson& worst,
                  bool merge_state) {
  json a = json::array();
  for (int bi = 0; bi < kNumBuckets; ++bi)
    if (buckets[bi].n_vectors != 0) a.push_back(bucket_json(buckets[bi], bi, worst, merge_state));
  return a;
}

namespace {

// One format's FP8 cache-byte figures per non-empty bucket (counts: shards merge them exactly).
json fp8_json(const ResultStats::Fp8& f) {
  json j{{"format", name(f.format)}, {"buckets", json::array()}};
  for (int bi = 0; bi < kNumBuckets; ++bi) {
    const Fp8Stats& s = f.buckets[bi];
    if (!s.elements) continue;
    const auto share = [&s](std::int64_t n) { return num(static_cast<double>(n) / s.elements); };
    j["buckets"].push_back({{"bucket", kBuckets[bi].name},
                            {"elements", s.elements},
                            {"differ", s.differ},
                            {"differ_share", share(s.differ)},
                            {"max_ulps", s.max_ulps},
                            {"undetermined", s.undetermined},
                            {"undetermined_share", share(s.undetermined)},
                            {"outside", s.outside},
                            {"overflowed", s.overflowed}});
  }
  return j;
}

}  // namespace

void put_result_figures(json& r, const ResultStats& s, const WorstJson& worst, bool merge_state) {
  r["specs_supported"] = s.specs_supported;
  r["buckets"] = buckets_json(s.buckets, worst, merge_state);
  r["ulp_histogram"] = json::array();
  for (int q = 0; q < kUlpBins; ++q)
    r["ulp_histogram"].push_back({{"bin", ulp_bin_label(q)}, {"count", s.hist[q]}});
  r["octaves"] = json::array();
  for (int q = 0; q < kOctaves; ++q) {
    const auto& oc = s.octaves[q];
    if (!oc.n_pairs) continue;
    const std::int64_t lo = q == 0 ? 0 : std::int64_t{1} << (q - 1);
    r["octaves"].push_back({{"position_lo", lo},
                            {"n_pairs", oc.n_pairs},
                            {"max_pair_u", num(oc.max_pair_u)},
                            {"rms_pair_u", num(std::sqrt(oc.sum_pair2 / oc.n_pairs))},
                            {"sum_pair2", oc.sum_pair2.str()}});
  }
  if (!s.fp8.empty()) {
    r["fp8"] = json::array();
    for (const auto& f : s.fp8) r["fp8"].push_back(fp8_json(f));
  }
}

// ---- the sections of a run's document -----------------------------------------------------------
namespace {

json search_json(const SearchResult& r, std::int64_t max_pos, double budget) {
  json j{{"supported", r.supported},
         {"budget_u", budget},
         {"probes", r.probes},
         {"max_error_passing_u", num(r.max_error_passing_u)}};
  if (!r.supported) return j;
  j["safe_length"] = r.safe;
  if (r.first_failure < 0) {
    j["status"] = "within budget up to max_position (" + std::to_string(max_pos) + ")";
    j["first_failure"] = nullptr;
    j["failure_error_u"] = nullptr;
  } else {
    j["status"] = "exceeded";
    j["first_failure"] = r.first_failure;
    j["failure_error_u"] = num(r.failure_error_u);
  }
  return j;
}

json special_cases_json(const SpecialValues& sv, Dtype d) {
  json out = json::array();
  for (const auto& c : sv.cases)
    out.push_back({{"input", c.input},
                   {"position", c.position},
                   {"input_bits", {hex_bits(c.x_a, d), hex_bits(c.x_b, d)}},
                   {"got", {num(c.got_a), num(c.got_b)}},
                   {"got_bits", {hex_bits(c.got_a, d), hex_bits(c.got_b, d)}},
                   {"policy", c.policy},
                   {"other_pairs_unaffected", c.other_pairs_unaffected},
                   {"follows_policy", c.follows_policy}});
  return out;
}

json dynamic_composition_json(const DynamicComposition& dc) {
  json j{{"spec", spec_json(dc.spec)},
         {"threshold", dc.threshold},
         {"cached_position", dc.threshold - 1},
         {"note",
          "KV cache rotated with the table for seq_len = threshold; query rotated with the table "
          "for seq_len = L. max angle mismatch = max_i |(L0 - 1) (theta'_i(L) - theta'_i(L0))| "
          "rad at the last cached position; composes = the two tables are identical (exact)."}};
  j["rows"] = json::array();
  for (const auto& r : dc.rows)
    j["rows"].push_back({{"seq_len", r.seq_len},
                         {"base_f64", num(r.base_f64)},
                         {"max_angle_mismatch_rad", num(r.max_angle_mismatch_rad)},
                         {"composes", r.composes}});
  return j;
}

const char* kDefinitions[][2] = {
    {"headline_max",
     "headline: the max per-pair error (pair_error_u) over every sampled pair at positions < L, "
     "i.e. in a context of L tokens, over every spec of the sweep; relative = that max x u, the "
     "error relative to s ||x_pair||. Sampled: a lower bound on the true max"},
    {"storage_rounding",
     "headline: the largest per-pair error a correctly rounded output can have, 1 u (each "
     "component within u of itself, so the pair within u ||pair||); every dtype's figure, f64's "
     "included, since errors are counted in the dtype's own u"},
    {"exceeds_storage",
     "headline: the shortest context L = 2^k in which the max per-pair error exceeds k_factor x "
     "the storage rounding (2, 8, 64 u), read off the per-octave maxima (octave [2^(k-1), 2^k)); "
     "'>= L' when not up to the longest context swept. Sampled maxima: the true crossing may come "
     "earlier"},
    {"angle_share_at_context",
     "headline: angle_share of the position bucket that holds position L - 1 (the positions that "
     "set the max at L); the bucket is named beside each figure"},
    {"limited_by",
     "headline: what sets the error at a context: storage (max <= 2x storage rounding), angle "
     "(above that, angle_share >= 0.5: the recipe's m*theta), rotation (above that, "
     "angle_share < 0.5: cos/sin table and arithmetic), non-finite"},
    {"ulp",
     "|got - exact| / ulp(round(exact)), ulp(y) = 2^(max(e(y), emin) - p + 1): the exact value "
     "from the MP reference, divided by the ulp of its correctly rounded value (CORE-MATH "
     "convention)."},
    {"mean_ulp", "arithmetic mean of the per-element ULP errors"},
    {"rms_ulp", "sqrt(mean of squared per-element ULP errors)"},
    {"percentiles",
     "nearest-rank p50/p99/p99.9 of the per-element ULP errors, read from a log histogram with "
     "256 bins per binade: the value printed is the upper edge of the bin, at most 0.4% above "
     "the exact percentile and never below it"},
    {"pair_error_u",
     "||got_pair - exact_pair|| / (s ||x_pair||), in units of the storage dtype's unit roundoff "
     "u = 2^-p; the gated metric (per-element ULP explodes where a component cancels)"},
    {"nmse", "sum((got - exact)^2) / sum(exact^2) over the bucket (ggml test-backend-ops NMSE)"},
    {"sampling",
     "every maximum is over random samples: a lower bound on the true maximum, never exhaustive"},
    {"bound",
     "ropecheck::bounds::pair_error_bound for the kernel's declared Policy at the sampled "
     "position (angle + trig + arithmetic + one storage rounding); utilization = pair error / "
     "bound, exceeded when > 1"},
    {"angle_vs_rotation",
     "angle_u: exact rotation by the kernel's own (recipe-rounded) angles vs the exact spec; "
     "rotation_u: kernel vs that recipe-faithful exact rotation (table, arithmetic, storage); "
     "angle_share = sum(angle_u^2) / (sum(angle_u^2) + sum(rotation_u^2)) over the bucket's pairs"},
    {"safe_context",
     "largest position L such that every probe at positions <= L kept the max per-pair error "
     "<= safe_budget_u * u; probes at 0, then powers of two up to max_position, then bisection "
     "between the last passing and the first failing probe; a probe at m samples m and two "
     "random positions in (m/2, m] for every spec, 2 vectors each. Sampled: an estimate"},
    {"score_offset",
     "|<K(q,D), K(k,D+c)> - s^2 q^T R_c k| / (s^2 ||q|| ||k||) in u, c in [0, 64]; the budget "
     "2b + b^2 u (b = safe_budget_u) is what two vectors each within b u per pair can produce "
     "(Cauchy-Schwarz); breaks_at is the smallest shift D found beyond it"},
    {"baseline",
     "regression: max ULP or max pair error of a kernel x dtype x bucket > factor x max(baseline, "
     "1/2) (the floor keeps a change from 0 to a rounding-level error from counting)"},
};

// What results[].fp8 means (report --fp8): the chain and each figure.
json fp8_block(const Options& o) {
  std::ostringstream chain;
  chain << "each output element in its dtype -> f32 -> " << (o.fp8_divide ? "/" : "*") << " scale "
        << o.fp8_scale << " (per tensor, f32, one rounding) -> FP8 nearest-even, "
        << "overflow " << name(o.fp8_overflow);
  return {
      {"chain", chain.str()},
      {"definitions",
       {{"ideal",
         "the exact output times the exact scale, rounded once into the format (what a "
         "kernel with an exact rotation and an exact scale step would store)"},
        {"differ",
         "elements whose byte (the kernel's output through the chain) differs in value "
         "from the ideal; max_ulps: the largest distance, in fp8 ulps (finite values)"},
        {"undetermined",
         "elements whose accepted range (the chain's images of exact -+ P, P the kernel's derived "
         "pre-storage bound per pair) holds more than one byte: how far the kernel's declared "
         "policy leaves its FP8 cache bytes open"},
        {"outside",
         "elements whose byte lies outside the accepted range: the kernel broke its derived bound "
         "(Fp8BytesWithinBound fails)"},
        {"overflowed",
         "elements whose exact scaled value is past the format's largest finite "
         "value (the scale is too large for these outputs)"}}}};
}

json options_json(const Plan& p) {
  const Options& o = p.main.o;
  json opt;
  for (const Kernel* k : p.main.kernels) opt["kernels"].push_back(k->name());
  for (Dtype d : o.dtypes) opt["dtypes"].push_back(name(d));
  opt["head_dims"] = o.head_dims;
  opt["bases"] = o.bases;
  for (Layout l : o.layouts) opt["layouts"].push_back(name(l));
  opt["max_position"] = o.max_position;
  opt["samples"] = o.samples;
  opt["seed"] = o.seed;
  opt["reference_bits"] = reference::precision_bits();
  opt["safe_budget_u"] = o.safe_budget_u;
  opt["variants"] = !p.variants.empty();
  if (o.spec) opt["spec"] = describe(*o.spec);
  if (!o.fp8.empty()) {
    for (Fp8Format f : o.fp8) opt["fp8"]["formats"].push_back(name(f));
    opt["fp8"]["scale"] = o.fp8_scale;
    opt["fp8"]["convention"] = o.fp8_divide ? "divide" : "multiply";
    opt["fp8"]["overflow"] = name(o.fp8_overflow);
  }
  return opt;
}

// What identifies the sweep: schema, shard, definitions, options, specs and buckets.
void put_header(json& doc, const Plan& p, const Executed& ex) {
  const Options& o = p.main.o;
  doc["schema_version"] = kSchemaVersion;
  doc["tool"] = "ropecheck report";
  if (o.shard_count > 1)
    doc["shard"] = {{"index", o.shard_index},
                    {"total", o.shard_count},
                    {"units", ex.units.size()},
                    {"units_total", ex.units_total}};
  for (const auto& d : kDefinitions) doc["definitions"][d[0]] = d[1];
  doc["options"] = options_json(p);
  for (const auto& s : p.main.specs) doc["specs"].push_back(spec_json(s));
  for (int bi = 0; bi < kNumBuckets; ++bi) {
    const Bucket& b = kBuckets[bi];
    json bj{{"name", b.name}, {"lo", b.lo}, {"sampled", bi < p.n_buckets}};
    bj["hi"] = bi == kNumBuckets - 1 ? json("unbounded") : json(b.hi);
    // The range the sweep sampled: a bucket reaching past --max-position (or a plugin's declared
    // max_position) is sampled up to it, and its label says so ("4096-39000"), not its full span.
    const std::int64_t top = p.main.o.max_position;
    bj["label"] = bi < p.n_buckets && b.lo < top && b.hi > top
                      ? std::to_string(b.lo) + "-" + std::to_string(top)
                      : std::string(b.name);
    doc["buckets"].push_back(bj);
  }
}

// The sweep units folded in work-list order: per main kernel x dtype, and per variant x kernel x
// dtype the bucket statistics (and whether that kernel ran on the variant's spec).
struct Accumulated {
  std::vector<ResultStats> results;  // [k * n_dtypes + dtype]
  std::vector<std::array<ErrorStats, kNumBuckets>>
      variants;  // [(v * n_kernels + k) * n_dtypes + dtype]
  std::vector<char> variant_swept;
};

Accumulated accumulate(const Plan& p, const Executed& ex) {
  const std::size_t nd = p.main.o.dtypes.size(), nk = p.main.kernels.size();
  const std::size_t nvk = p.variants.empty() ? 0 : p.variants.front().kernels.size();
  Accumulated acc;
  acc.results.resize(nk * nd);
  for (auto& r : acc.results)
    for (Fp8Format f : p.main.o.fp8) r.fp8.push_back({f, {}});
  acc.variants.resize(p.variants.size() * nvk * nd);
  acc.variant_swept.assign(acc.variants.size(), 0);
  for (std::size_t i = 0; i < ex.units.size(); ++i) {
    const auto* sweep = std::get_if<SweepResult>(&ex.results[i]);
    if (const auto* w = std::get_if<SweepUnit>(&ex.units[i])) {
      for (std::size_t k = 0; k < nk; ++k) {
        if (!sweep->supported[k]) continue;
        ResultStats& r = acc.results[k * nd + static_cast<std::size_t>(w->dtype)];
        if (w->bucket == 0) ++r.specs_supported;
        r.buckets[w->bucket].merge(sweep->stats[k]);
        for (int q = 0; q < kOctaves; ++q) r.octaves[q].merge(sweep->oct[k][q]);
        for (int q = 0; q < kUlpBins; ++q) r.hist[q] += sweep->stats[k].hist[q];
        for (std::size_t f = 0; f < r.fp8.size(); ++f)
          r.fp8[f].buckets[w->bucket].merge(sweep->fp8[k][f]);
      }
    } else if (const auto* v = std::get_if<VariantSweepUnit>(&ex.units[i])) {
      for (std::size_t k = 0; k < nvk; ++k) {
        if (!sweep->supported[k]) continue;
        const std::size_t kd = (static_cast<std::size_t>(v->variant) * nvk + k) * nd +
                               static_cast<std::size_t>(v->dtype);
        acc.variant_swept[kd] = 1;
        acc.variants[kd][v->bucket].merge(sweep->stats[k]);
      }
    }
  }
  return acc;
}

WorstJson render_worst(const Setup& s, Dtype d) {
  return
      [&s, d](int, const WorstCase& w, bool pair_case) { return worst_json(w, s, d, pair_case); };
}

json results_json(const Plan& p, const Accumulated& acc) {
  const Options& o = p.main.o;
  const std::size_t nd = o.dtypes.size();
  json out = json::array();
  for (std::size_t k = 0; k < p.main.kernels.size(); ++k)
    for (std::size_t di = 0; di < nd; ++di) {
      const Dtype d = o.dtypes[di];
      json r{{"kernel", p.main.kernels[k]->name()},
             {"dtype", name(d)},
             {"unit_roundoff", unit_roundoff(d)},
             {"policy", policy_json(p.main.kernels[k]->policy(d))}};
      put_result_figures(r, acc.results[k * nd + di], render_worst(p.main, d), o.shard_count > 1);
      out.push_back(r);
    }
  return out;
}

json kernel_dtype_json(const Kernel& k, Dtype d) {
  return {{"kernel", k.name()}, {"dtype", name(d)}};
}

// One section per variant: the same bucket statistics and the safe-context search.
json variants_json(const Plan& p, const Executed& ex, const Accumulated& acc) {
  const Options& o = p.main.o;
  const std::size_t nd = o.dtypes.size();
  json out = json::array();
  for (std::size_t vi = 0; vi < p.variants.size(); ++vi) {
    const Setup& vs = p.variants[vi];
    const VariantCase& vc = variant_cases()[vi];
    json vj{{"name", vc.name}, {"model", vc.model}, {"spec", spec_json(vc.spec)}};
    vj["results"] = json::array();
    for (std::size_t k = 0; k < vs.kernels.size(); ++k)
      for (std::size_t di = 0; di < nd; ++di) {
        const std::size_t kd = (vi * vs.kernels.size() + k) * nd + di;
        if (!acc.variant_swept[kd]) continue;
        const Dtype d = o.dtypes[di];
        json r = kernel_dtype_json(*vs.kernels[k], d);
        r["policy"] = policy_json(vs.kernels[k]->policy(d));
        r["buckets"] = buckets_json(acc.variants[kd], render_worst(vs, d), o.shard_count > 1);
        vj["results"].push_back(r);
      }
    vj["safe_context"] = json::array();
    for (std::size_t i = 0; i < ex.units.size(); ++i) {
      const auto* w = std::get_if<VariantSafeContextUnit>(&ex.units[i]);
      if (!w || w->variant != static_cast<int>(vi)) continue;
      json sc = kernel_dtype_json(*vs.kernels[w->kernel], o.dtypes[w->dtype]);
      sc.update(
          search_json(std::get<SearchResult>(ex.results[i]), o.max_position, o.safe_budget_u));
      vj["safe_context"].push_back(sc);
    }
    out.push_back(vj);
  }
  return out;
}

// The main searches and the special values, in work-list order.
void put_searches(json& doc, const Plan& p, const Executed& ex) {
  const Options& o = p.main.o;
  doc["safe_context"] = json::array();
  doc["score_offset"] = json::array();
  doc["special_values"] = json::array();
  for (std::size_t i = 0; i < ex.units.size(); ++i) {
    const Unit& unit = ex.units[i];
    if (const auto* safe = std::get_if<SafeContextUnit>(&unit)) {
      json e = kernel_dtype_json(*p.main.kernels[safe->kernel], o.dtypes[safe->dtype]);
      e.update(search_json(std::get<SearchResult>(ex.results[i]), o.max_position, o.safe_budget_u));
      doc["safe_context"].push_back(e);
    } else if (const auto* score = std::get_if<ScoreOffsetUnit>(&unit)) {
      const Dtype d = o.dtypes[score->dtype];
      json e = kernel_dtype_json(*p.main.kernels[score->kernel], d);
      e.update(search_json(std::get<SearchResult>(ex.results[i]), o.max_position,
                           score_budget(o.safe_budget_u, d)));
      e["breaks_at"] = e["first_failure"];  // null (added if absent) when unsupported
      doc["score_offset"].push_back(e);
    } else if (const auto* special = std::get_if<SpecialValuesUnit>(&unit)) {
      const Dtype d = o.dtypes[special->dtype];
      const auto& sv = std::get<SpecialValues>(ex.results[i]);
      json e = kernel_dtype_json(*p.main.kernels[special->kernel], d);
      e["cases"] = special_cases_json(sv, d);
      e["violations"] = sv.violations;
      doc["special_values"].push_back(e);
    }
  }
}

}  // namespace

json document(const Plan& p, const Executed& ex) {
  const Options& o = p.main.o;
  json doc;
  put_header(doc, p, ex);
  const Accumulated acc = accumulate(p, ex);
  doc["results"] = results_json(p, acc);
  doc["variants"] = variants_json(p, ex, acc);
  if (!o.fp8.empty()) doc["fp8"] = fp8_block(o);
  if (!p.variants.empty())
    doc["dynamic_composition"] = dynamic_composition_json(dynamic_composition());
  put_searches(doc, p, ex);
  add_checks(doc);
  json env = environment(o);
  env["reference_bits"] = reference::precision_bits();
  env["seed"] = o.seed;
  env["threads"] = ex.threads;
  doc["environment"] = env;
  return doc;
}

// ---- the headline: max per-pair error by context length, from the per-octave maxima -------------
namespace {

// The storage rounding (storage_rounding) and the headline's multiples of it.
constexpr double kStorageU = 1.0;
constexpr double kFactors[] = {2, 8, 64};

// 4k, 32k, 128k, 1M where the sweep reaches them, then the longest context swept (a power of two,
// positions < L all inside the sweep), so every column holds a figure whatever --max-position.
std::vector<std::int64_t> headline_contexts(std::int64_t max_position) {
  std::int64_t longest = 2;
  while (longest * 2 <= max_position + 1) longest *= 2;  // max_position <= 2^40: no overflow
  std::vector<std::int64_t> c;
  for (std::int64_t l : {std::int64_t{4096}, std::int64_t{32768}, std::int64_t{131072}, kTwo20})
    if (l < longest) c.push_back(l);
  c.push_back(longest);
  return c;
}

// 4096 -> "4k", 2^20 -> "1M": powers of two in binary prefixes, as context lengths are quoted.
std::string context_label(std::int64_t l) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (p < 4 && l >= 1024 && l % 1024 == 0) l /= 1024, ++p;
  return std::to_string(l) + kPrefix[p];
}

struct Octave {
  std::int64_t lo, n_pairs;
  double max_u;
};

std::vector<Octave> octaves_of(const json& res) {
  std::vector<Octave> v;
  for (const auto& o : res["octaves"])
    v.push_back({o["position_lo"].get<std::int64_t>(), o["n_pairs"].get<std::int64_t>(),
                 number(o["max_pair_u"]).value_or(std::numeric_limits<double>::quiet_NaN())});
  return v;
}

// NaN wins: a NaN anywhere is the headline figure.
double worse(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

// The angle share and the name of the bucket that holds `position`, or null when not swept.
std::pair<json, std::string> share_at(const json& res, std::int64_t position) {
  for (const auto& b : res["buckets"])
    for (const Bucket& k : kBuckets)
      if (b["bucket"] == k.name && k.lo <= position && position <= k.hi)
        return {b["angle_vs_rotation"]["angle_share"], k.name};
  return {nullptr, ""};
}

const char* limited_by(double max_u, const json& share) {
  if (!std::isfinite(max_u)) return "non-finite";
  if (max_u <= kFactors[0] * kStorageU) return "storage";
  return number(share).value_or(0.0) >= 0.5 ? "angle" : "rotation";
}

json headline_cell(const json& res, const std::vector<Octave>& oct, std::int64_t l, double u) {
  double m = 0;
  std::int64_t n = 0;
  for (const auto& o : oct)
    if (o.lo < l) m = worse(m, o.max_u), n += o.n_pairs;
  const auto [share, bucket] = share_at(res, l - 1);
  return {{"context", l},
          {"label", context_label(l)},
          {"n_pairs", n},
          {"max_pair_u", num(m)},
          {"relative", num(m * u)},
          {"angle_share", share},
          {"angle_share_bucket", bucket},
          {"limited_by", limited_by(m, share)}};
}

// The shortest context whose max exceeds factor x storage rounding ("exceeds_storage").
json exceeds_cell(const std::vector<Octave>& oct, double factor, std::int64_t longest) {
  json j{{"factor", factor}, {"threshold_u", factor * kStorageU}, {"context", nullptr}};
  for (const auto& o : oct) {
    if (o.lo >= longest) break;
    if (!(o.max_u <= factor * kStorageU)) {
      const std::int64_t l = o.lo == 0 ? 1 : 2 * o.lo;
      j["context"] = l;
      j["label"] = context_label(l);
      return j;
    }
  }
  j["label"] = ">= " + context_label(longest);
  return j;
}

json headline_row(const json& res, const std::vector<std::int64_t>& contexts) {
  json row{{"kernel", res["kernel"]},
           {"dtype", res["dtype"]},
           {"supported", res["specs_supported"].get<std::int64_t>() > 0},
           {"angle_precision",
            res["policy"]["recipe"].get<std::string>().find("f32") != std::string::npos
                ? json("f32")
                : res["policy"]["angle"]},
           {"table", res["policy"]["table"]},
           {"arithmetic", res["policy"]["arithmetic"]},
           {"at", json::array()},
           {"exceeds", json::array()}};
  if (!row["supported"].get<bool>()) return row;
  std::int64_t gt = 0;  // pairs above the derived bound: a failed check, not a precision limit
  for (const auto& b : res["buckets"])
    if (b.contains("counts")) gt += b["counts"].value("gt_bound", std::int64_t{0});
  row["bound_exceeded"] = gt > 0;
  const auto oct = octaves_of(res);
  const double u = res["unit_roundoff"].get<double>();
  for (auto l : contexts) row["at"].push_back(headline_cell(res, oct, l, u));
  for (double f : kFactors) row["exceeds"].push_back(exceeds_cell(oct, f, contexts.back()));
  return row;
}

std::string cell_label(const json& cell) { return cell["label"].get<std::string>(); }

std::string u_text(const json& cell) {
  return verify::fmt(dbl_of(cell["max_pair_u"]), 3) +
         " u = " + verify::fmt(dbl_of(cell["relative"]), 2) + " relative";
}

// What a reader should do about one kernel x dtype, given what limits it at the longest context.
std::string advice(const json& row, const json& last) {
  // Errors beyond the bound of the declared policy are not a precision limit to widen (a sign
  // error is "rotation-limited" too): the advice must not contradict the failed check.
  if (row.value("bound_exceeded", false))
    return "exceeds the bound derived from its declared policy (a failed check): a bug, or a "
           "policy narrower than declared, not a precision limit; see the checks and worst cases";
  const std::string by = last["limited_by"].get<std::string>();
  const double m = dbl_of(last["max_pair_u"]);
  if (by == "angle" && row["angle_precision"] == "f32")
    return "compute the angle m*theta in f64 to fix";
  if (by == "angle")
    return "the " + row["angle_precision"].get<std::string>() +
           " angle m*theta is rounded relative to its size, so its error grows with m (still far "
           "below f32's u = 6e-08); reduce m*theta in wider precision if f64 accuracy matters";
  if (by == "rotation" && m <= kFactors[1] * kStorageU)
    return "the roundings of " + row["arithmetic"].get<std::string>() +
           " arithmetic, expected; nothing to fix";
  if (by == "rotation")
    return "widen the cos/sin table (" + row["table"].get<std::string>() + ") or the arithmetic (" +
           row["arithmetic"].get<std::string>() + ") to fix";
  return by == "non-finite" ? "non-finite outputs: see the worst cases" : "";
}

// What one kernel x dtype's conclusion says: "storage-limited to 1M (0.998 u = ...)", or
// "angle-limited at 1M (1.1e+06 u = 0.066 relative; above 2 u from context 2) - compute ...".
std::string conclusion_group(const json& row) {
  if (!row["supported"].get<bool>()) return "unsupported";
  const json& last = row["at"].back();
  const std::string by = last["limited_by"].get<std::string>(), at = cell_label(last);
  if (by == "storage") return "storage-limited to " + at + " (" + u_text(last) + ")";
  std::string g = by + "-limited at " + at + " (" + u_text(last) + "; above 2 u from context " +
                  row["exceeds"][0]["label"].get<std::string>() + ")";
  const std::string a = advice(row, last);
  return a.empty() ? g : g + " - " + a;
}

// One line per dtype: its kernels grouped by conclusion.
std::string dtype_conclusion(const std::string& dtype, const json& rows) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // text -> kernels
  for (const auto& row : rows) {
    if (row["dtype"] != dtype) continue;
    const std::string g = conclusion_group(row);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == g; });
    if (it == groups.end()) it = groups.insert(groups.end(), {g, {}});
    it->second.push_back(row["kernel"].get<std::string>());
  }
  std::string t = dtype + ": ";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::string ks;
    for (const auto& k : groups[i].second) ks += (ks.empty() ? "" : ", ") + k;
    t += (i ? "; " : "") + ks + " " + groups[i].first;
  }
  return t + ".";
}

// One sentence: how many results stay near storage rounding at the longest context, and the
// largest error in multiples of it (u), with what limits it. In u rather than relative: a bf16
// output's 0.4% is its storage, not a defect.
std::string verdict(const json& rows) {
  int n = 0, storage = 0;
  const json* worst = nullptr;
  const json* worst_row = nullptr;
  for (const auto& row : rows) {
    if (!row["supported"].get<bool>()) continue;
    const json& last = row["at"].back();
    ++n;
    storage += last["limited_by"] == "storage";
    if (!worst || !(dbl_of(last["max_pair_u"]) <= dbl_of((*worst)["max_pair_u"])))
      worst = &last, worst_row = &row;
  }
  if (!worst) return "No kernel supports the swept specs: nothing to report.";
  const std::string at = (*worst)["label"].get<std::string>();
  return "At a " + at + " context, " + std::to_string(storage) + " of " + std::to_string(n) +
         " kernel x dtype results stay within 2x the storage rounding (2 u); the largest error "
         "is " +
         (*worst_row)["kernel"].get<std::string>() + " on " +
         (*worst_row)["dtype"].get<std::string>() + ", " + u_text(*worst) + ", " +
         (*worst)["limited_by"].get<std::string>() + "-limited.";
}

}  // namespace

void add_headline(json& doc) {
  if (doc.contains("shard")) {  // a shard's partial sweep: the merged report gets the headline
    doc.erase("headline");
    return;
  }
  const auto contexts = headline_contexts(doc["options"]["max_position"].get<std::int64_t>());
  json h{{"storage_rounding_u", kStorageU}, {"factors", kFactors}, {"contexts", json::array()}};
  for (auto l : contexts) h["contexts"].push_back({{"context", l}, {"label", context_label(l)}});
  h["rows"] = json::array();
  for (const auto& d : doc["options"]["dtypes"])  // dtype first: one block per dtype
    for (const auto& res : doc["results"])
      if (res["dtype"] == d) h["rows"].push_back(headline_row(res, contexts));
  h["conclusions"] = json::array();
  for (const auto& d : doc["options"]["dtypes"])
    h["conclusions"].push_back(
        {{"dtype", d}, {"text", dtype_conclusion(d.get<std::string>(), h["rows"])}});
  h["verdict"] = verdict(h["rows"]);
  doc["headline"] = h;
}

// ---- checks (one JUnit test case each) and the summary ------------------------------------------
namespace {

// MatchesReferenceWithinBound per main kernel x dtype; returns how many failed.
int add_bound_checks(json& doc) {
  int exceeded = 0;
  for (const auto& r : doc["results"]) {
    std::int64_t gt = 0;
    double util = -1;
    for (const auto& b : r["buckets"]) {
      gt += b["counts"]["gt_bound"].get<std::int64_t>();
      const auto& mu = b["bound"]["max_utilization"];
      if (mu.is_number()) util = std::max(util, mu.get<double>());
      if (mu.is_string()) util = std::numeric_limits<double>::infinity();
    }
    exceeded += gt > 0;
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
  return exceeded;
}

// MatchesReferenceWithinBound[variant] per variant x kernel x dtype; returns how many failed.
int add_variant_bound_checks(json& doc) {
  int exceeded = 0;
  if (!doc.contains("variants")) return 0;
  for (const auto& v : doc["variants"])
    for (const auto& r : v["results"]) {
      std::int64_t gt = 0;
      for (const auto& b : r["buckets"]) gt += b["counts"]["gt_bound"].get<std::int64_t>();
      exceeded += gt > 0;
      doc["checks"].push_back(
          {{"kernel", r["kernel"]},
           {"dtype", r["dtype"]},
           {"check", "MatchesReferenceWithinBound[" + v["name"].get<std::string>() + "]"},
           {"passed", gt == 0},
           {"message", std::to_string(gt) + " pairs above the derived bound on " +
                           v["spec"].value("detail", std::string())}});
    }
  return exceeded;
}

// SpecialValuesFollowPolicy per kernel x dtype; returns the number of deviating cases.
int add_special_value_checks(json& doc) {
  int violations = 0;
  for (const auto& s : doc["special_values"]) {
    const int v = s["violations"].get<int>();
    violations += v;
    doc["checks"].push_back({{"kernel", s["kernel"]},
                             {"dtype", s["dtype"]},
                             {"check", "SpecialValuesFollowPolicy"},
                             {"passed", v == 0},
                             {"message", std::to_string(v) + " cases deviate from the policy"}});
  }
  return violations;
}

// Fp8BytesWithinBound[format] per main kernel x dtype x format (report --fp8): every FP8 byte of
// the kernel's output inside the chain's image of exact -+ its derived pre-storage bound; returns
// how many kernel x dtype x format failed.
int add_fp8_checks(json& doc) {
  int outside_any = 0;
  for (const auto& r : doc["results"]) {
    if (!r.contains("fp8")) continue;
    for (const auto& f : r["fp8"]) {
      std::int64_t n = 0, outside = 0, differ = 0, undetermined = 0, max_ulps = 0;
      for (const auto& b : f["buckets"]) {
        n += b["elements"].get<std::int64_t>();
        outside += b["outside"].get<std::int64_t>();
        differ += b["differ"].get<std::int64_t>();
        undetermined += b["undetermined"].get<std::int64_t>();
        max_ulps = std::max(max_ulps, b["max_ulps"].get<std::int64_t>());
      }
      outside_any += outside > 0;
      std::ostringstream msg;
      msg << outside << " of " << n << " bytes outside the chain image of the derived bound; "
          << differ << " differ from the correctly rounded byte (max " << max_ulps << " fp8 ulps), "
          << undetermined << " not determined by the bound";
      doc["checks"].push_back(
          {{"kernel", r["kernel"]},
           {"dtype", r["dtype"]},
           {"check", "Fp8BytesWithinBound[" + f["format"].get<std::string>() + "]"},
           {"passed", outside == 0},
           {"message", msg.str()}});
    }
  }
  return outside_any;
}

}  // namespace

void add_checks(json& doc) {
  doc["checks"] = json::array();
  int bound_exceeded = add_bound_checks(doc);  // the variants' checks come after the main ones
  bound_exceeded += add_variant_bound_checks(doc);
  const int violations = add_special_value_checks(doc);
  const bool fp8 = doc.contains("fp8");
  const int fp8_outside = fp8 ? add_fp8_checks(doc) : 0;
  doc["summary"] = {{"bound_exceeded_kernel_dtypes", bound_exceeded},
                    {"special_value_violations", violations}};
  if (fp8) doc["summary"]["fp8_outside_kernel_dtypes"] = fp8_outside;
  add_headline(doc);
}

}  // namespace detail

int exit_code(const nlohmann::json& report) {
  // `validate --out`: the validation's verdict decides too (its report's own checks describe the
  // precision sweep only and may all hold for a kernel that fails validation).
  if (report.contains("validation") && !report["validation"].at("passed").get<bool>()) return 1;
  for (const auto& c : report.at("checks"))
    if (!c.at("passed").get<bool>()) return 1;
  return 0;
}

}  // namespace ropecheck::reports
