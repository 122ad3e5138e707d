// The figures of the document (document.hpp): a bucket's statistics, a result's buckets,
// histogram, octaves and FP8 bytes, a worst case with its reproduction command, a spec. run()
// writes them from the executed units (document.cpp) and merge() from shard reports (merge.cpp),
// through the same functions.
#include "document.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ropecheck::reports::detail {

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
  refused += later.refused;
  refused_min = std::min(refused_min, later.refused_min);
  if (fp8.empty())
    fp8 = later.fp8;
  else
    for (std::size_t f = 0; f < fp8.size() && f < later.fp8.size(); ++f)
      for (int bi = 0; bi < kNumBuckets; ++bi) fp8[f].buckets[bi].merge(later.fp8[f].buckets[bi]);
}

namespace {

std::string exact_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
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

}  // namespace

std::string hex_bits(double v, Dtype d) {
  char buf[32];
  const int digits = traits(d).bytes * 2;
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits,
                static_cast<unsigned long long>(bits_of(v, d)));
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

namespace {

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
  if (st.split_by_bound) j["angle_vs_rotation"]["split"] = "bound";
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
  if (s.refused > 0)
    r["positions_refused"] = {{"count", s.refused}, {"min_position", s.refused_min}};
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

}  // namespace ropecheck::reports::detail
