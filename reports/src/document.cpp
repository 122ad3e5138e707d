// The document: report.json from the executed units, in work-list order (document.hpp). Every
// number of the report is written once, here and in the files beside it (document_figures.cpp,
// document_headline.cpp, document_checks.cpp); render*.cpp only formats what they wrote.
#include "document.hpp"

#include "ropecheck/reference/reference.hpp"
#include "ropecheck/verify/verify.hpp"

#include <sstream>

namespace ropecheck::reports::detail {

using nlohmann::json;

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
     "angle_share = sum(angle_u^2) / (sum(angle_u^2) + sum(rotation_u^2)) over the bucket's "
     "pairs; split \"bound\" (a kernel whose scaled angle steps the report does not reproduce: "
     "ggml's YaRN / llama3 ladder, the CUDA models' scaled fast-math recipes): each pair's "
     "measured error divided in the proportion of its derived bound's angle term and the rest"},
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
        r.refused += sweep->refused[k];
        r.refused_min = std::min(r.refused_min, sweep->refused_min[k]);
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
}  // namespace ropecheck::reports::detail
