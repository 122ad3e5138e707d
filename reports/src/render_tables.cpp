// The report's section tables, one function each, and build_tables(): the reading order both
// pages print them in (render.hpp). A new section: its Table function here and its place in
// build_tables().
#include "render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace ropecheck::reports::detail {

using nlohmann::json;

namespace {

// ---- headline -----------------------------------------------------------------------------------

// 3 significant digits, exponents without '+' and leading zeros (3.58e3): the headline's cells
// stay on one line.
std::string compact(const json& v, int significant = 3) {
  std::string t = cell(v, significant);
  const auto e = t.find('e');
  if (e == std::string::npos) return t;
  std::string exp = t.substr(e + 1);
  const bool neg = !exp.empty() && exp[0] == '-';
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) exp.erase(0, 1);
  exp.erase(0, std::min(exp.find_first_not_of('0'), exp.size() - 1));
  return t.substr(0, e) + "e" + (neg ? "-" : "") + exp;
}

}  // namespace

// "3.58e3 u (4e-13), angle 1.00": the max, relative, and the angle share (its bucket is in the
// table's note).
std::string headline_text(const json& c) {
  if (c["limited_by"] == "not run") return "not run (positions refused)";
  std::string t = compact(c["max_pair_u"]) + " u (" + compact(c["relative"], 2) + ")";
  if (!c["angle_share"].is_null()) t += ", angle " + share_cell(c["angle_share"]);
  return t;
}

namespace {

Table headline_table(const json& r) {
  const json& h = r["headline"];
  Table t;
  t.title = "Headline: max per-pair error by context length";
  t.html_class = "headline";
  std::string n_pairs;
  for (const auto& row : h["rows"])
    if (row["supported"].get<bool>() && n_pairs.empty())
      n_pairs = cell(row["at"].back()["n_pairs"]);
  const std::string longest = cell(h["contexts"].back()["label"]);
  t.note =
      "Each cell: the max per-pair error over every sampled pair at positions < L (a context of L "
      "tokens; " +
      n_pairs + " sampled pairs per kernel x dtype at L = " + longest + ", all " +
      std::to_string(r["specs"].size()) +
      " specs), in u of the dtype and relative (x u); angle = share of the squared error due to "
      "the angle, in the position bucket that holds L - 1. '> k u': the shortest context L = 2^j "
      "in which the error exceeds k x the storage rounding (" +
      cell(h["storage_rounding_u"]) +
      " u: the largest per-pair error of a correctly rounded output); '>= " + longest +
      "': not within the sweep. Sampled maxima are lower bounds, so true crossings may come "
      "earlier.";
  t.head = {"dtype", "kernel"};
  for (const auto& c : h["contexts"]) t.head.push_back("max at " + cell(c["label"]));
  for (const auto& f : h["factors"]) t.head.push_back("> " + cell(f) + " u from");
  t.head.push_back("limited by (at " + longest + ")");
  for (const auto& row : h["rows"]) {
    std::vector<std::string> line{cell(row["dtype"]), cell(row["kernel"])};
    if (!row["supported"].get<bool>()) {
      line.resize(t.head.size(), "unsupported");
    } else {
      for (const auto& c : row["at"]) line.push_back(headline_text(c));
      for (const auto& e : row["exceeds"]) line.push_back(cell(e["label"]));
      line.push_back(cell(row["at"].back()["limited_by"]));
    }
    t.rows.push_back(line);
  }
  return t;
}

// ---- results: checks, per-dtype errors, searches, worst cases, special values -------------------

Table checks_table(const json& r) {
  Table t;
  t.title = "Checks";
  t.head = {"kernel", "dtype", "check", "result", "detail"};
  for (const auto& c : r["checks"])
    t.rows.push_back({cell(c["kernel"]), cell(c["dtype"]), cell(c["check"]),
                      c["passed"].get<bool>() ? "pass" : "FAIL", cell(c["message"])});
  return t;
}

// A bucket as the tables print it: its label in the document's bucket list (clipped to the
// positions the sweep reached, "4096-39000"), else its name.
std::string bucket_cell(const json& doc, const json& b) {
  if (doc.contains("buckets"))
    for (const auto& d : doc["buckets"])
      if (d["name"] == b["bucket"] && d.contains("label")) return d["label"].get<std::string>();
  return cell(b["bucket"]);
}

Table dtype_errors_table(const json& r, const json& d) {
  Table t;
  t.title = "Errors in " + d.get<std::string>() + " (sampled: maxima are lower bounds)";
  t.head = {"kernel",    "bucket", "vectors", "max ULP",    "mean ULP",      "RMS ULP",
            "p50",       "p99",    "p99.9",   "max pair u", "RMS pair u",    "NMSE",
            "max |err|", "not CR", "> 1 ULP", "> bound",    "bound u (max)", "utilization"};
  for (const auto& res : r["results"]) {
    if (res["dtype"] != d) continue;
    for (const auto& b : res["buckets"])
      t.rows.push_back({cell(res["kernel"]), bucket_cell(r, b), cell(b["n_vectors"]),
                        cell(b["ulp"]["max"]), cell(b["ulp"]["mean"]), cell(b["ulp"]["rms"]),
                        cell(b["ulp"]["p50"]), cell(b["ulp"]["p99"]), cell(b["ulp"]["p999"]),
                        cell(b["pair_error_u"]["max"]), cell(b["pair_error_u"]["rms"]),
                        cell(b["nmse"]), cell(b["max_abs_error"]),
                        cell(b["counts"]["not_correctly_rounded"]), cell(b["counts"]["gt_1ulp"]),
                        cell(b["counts"]["gt_bound"]), cell(b["bound"]["max_u"]),
                        cell(b["bound"]["max_utilization"])});
  }
  return t;
}

std::string safe_text(const json& s) {
  if (!s.value("supported", true)) return "unsupported";
  if (s["first_failure"].is_null()) return ">= " + cell(s["safe_length"]) + " (search limit)";
  if (s["safe_length"].get<long long>() < 0) return "none (exceeded at 0)";
  return cell(s["safe_length"]);
}

std::vector<std::string> dtype_names(const json& r) {
  std::vector<std::string> v;
  for (const auto& d : r["options"]["dtypes"]) v.push_back(d.get<std::string>());
  return v;
}

// One row per kernel (in order of first appearance), one column per dtype: the safe-context text
// of each entry, after the `lead` cells.
void add_safe_rows(Table& t, const json& r, const json& entries,
                   const std::vector<std::string>& lead) {
  std::map<std::string, std::map<std::string, std::string>> by_kernel;
  std::vector<std::string> kernels;
  for (const auto& s : entries) {
    const std::string k = s["kernel"].get<std::string>();
    if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    by_kernel[k][s["dtype"].get<std::string>()] = safe_text(s);
  }
  for (const auto& k : kernels) {
    std::vector<std::string> row = lead;
    row.push_back(k);
    for (const auto& d : dtype_names(r)) row.push_back(by_kernel[k][d]);
    t.rows.push_back(row);
  }
}

Table safe_context_table(const json& r) {
  Table t;
  t.title = "Precision-safe context length (" + cell(r["options"]["safe_budget_u"]) +
            " u budget, searched)";
  t.note = "Largest position up to which every sampled probe kept max per-pair error <= " +
           cell(r["options"]["safe_budget_u"]) +
           " u of the dtype (see definitions: sampled estimate, searched over powers of two "
           "then bisected). A kernel whose arithmetic is no wider than its storage spends a few u "
           "from position 1 on, so its figure is small by construction; the headline's "
           "multiples of the storage rounding say more.";
  t.head = {"kernel"};
  for (const auto& d : dtype_names(r)) t.head.push_back(d);
  // Every kernel of the options gets a row, in options order (empty cells if it has no entry).
  std::map<std::string, std::map<std::string, std::string>> by_kernel;
  for (const auto& s : r["safe_context"])
    by_kernel[s["kernel"].get<std::string>()][s["dtype"].get<std::string>()] = safe_text(s);
  for (const auto& k : r["options"]["kernels"]) {
    std::vector<std::string> row{k.get<std::string>()};
    for (const auto& d : dtype_names(r)) row.push_back(by_kernel[row[0]][d]);
    t.rows.push_back(row);
  }
  return t;
}

Table angle_vs_rotation_table(const json& r) {
  Table t;
  t.title = "Angle-table error vs rotation error";
  t.note =
      "angle: the exact rotation by the kernel's own recipe-rounded angles, against the exact "
      "spec; rotation: the kernel against that recipe-faithful exact rotation (cos/sin table, "
      "arithmetic, storage rounding). Per-pair errors in u of the dtype. share = fraction of "
      "the summed squared error due to the angle; \"(bound)\": the report does not reproduce "
      "this kernel's scaled angle steps, so each pair's error is divided as its derived bound's "
      "angle and rotation terms are.";
  t.head = {"kernel",      "dtype",          "bucket",         "recipe",      "angle max u",
            "angle RMS u", "rotation max u", "rotation RMS u", "total max u", "angle share"};
  for (const auto& res : r["results"])
    for (const auto& b : res["buckets"]) {
      const auto& a = b["angle_vs_rotation"];
      t.rows.push_back({cell(res["kernel"]), cell(res["dtype"]), bucket_cell(r, b),
                        cell(res["policy"]["recipe"]) + " (" + cell(res["policy"]["angle"]) + ")",
                        cell(a["angle_max_u"]), cell(a["angle_rms_u"]), cell(a["rotation_max_u"]),
                        cell(a["rotation_rms_u"]), cell(b["pair_error_u"]["max"]),
                        share_cell(a["angle_share"]) +
                            (a.value("split", std::string()) == "bound" ? " (bound)" : "")});
    }
  return t;
}

Table score_offset_table(const json& r) {
  Table t;
  t.title = "ScoresDependOnlyOnOffset: where relative scores break";
  t.note =
      "Score error of <K(q,D),K(k,D+c)> against the exact s^2 q^T R_c k, in u times "
      "s^2||q|| ||k||; 'holds up to' is the largest shift D whose probes stayed within "
      "the budget.";
  t.head = {"kernel", "dtype", "budget u", "holds up to shift", "breaks at", "error there (u)"};
  for (const auto& s : r["score_offset"])
    t.rows.push_back({cell(s["kernel"]), cell(s["dtype"]), cell(s["budget_u"]), safe_text(s),
                      cell(s.value("breaks_at", json())),
                      cell(s.value("failure_error_u", json()))});
  return t;
}

// The worst case of a metric over a result's buckets (the first of equal maxima; NaN largest).
const json* worst_over_buckets(const json& res, const char* metric) {
  const json* best = nullptr;
  double bv = -1;
  for (const auto& b : res["buckets"]) {
    const double v = dbl_of(b[metric]["max"]);
    if (!b[metric]["worst"].is_null() && (v > bv || (std::isnan(v) && !std::isnan(bv)))) {
      bv = v;
      best = &b[metric]["worst"];
    }
  }
  return best;
}

Table worst_cases_table(const json& r) {
  Table t;
  t.title = "Worst cases (per kernel x dtype, over all buckets)";
  t.note =
      "Reproduce with the `reproduce` command stored in report.json (`ropecheck eval` for a "
      "built-in kernel; for a plugin, the `ropecheck validate` line of its configuration).";
  t.head = {"kernel",  "dtype",      "metric",           "value", "spec", "position",
            "element", "input bits", "expected (exact)", "got"};
  for (const auto& res : r["results"])
    for (const char* metric : {"ulp", "pair_error_u"}) {
      const json* best = worst_over_buckets(res, metric);
      if (!best) continue;
      const json& w = *best;
      const json& sp = w["spec"];
      std::string bits = cell(w["input_bits"][0]) + " " + cell(w["input_bits"][1]);
      std::string got = w["got"].is_array() ? cell(w["got"][0], 9) + ", " + cell(w["got"][1], 9)
                                            : cell(w["got"], 9);
      t.rows.push_back(
          {cell(res["kernel"]), cell(res["dtype"]),
           std::string(metric) == "ulp" ? "max ULP" : "max pair u", cell(w["value"]),
           "d=" + cell(sp["head_dim"]) + " base=" + cell(sp["base"]) + " " + cell(sp["layout"]),
           cell(w["position"]), cell(w["element"]), bits, cell(w["expected"]), got});
    }
  return t;
}

Table special_values_table(const json& r) {
  Table t;
  t.title = "Special values (+-0, +-inf, NaN, subnormal inputs)";
  t.note =
      "Policy (the property suite's, properties/lib/algebraic.hpp): finite inputs at m = 0 come "
      "back bit for bit (a zero's sign is not part of the contract); finite inputs (incl. "
      "+-0, subnormals) stay finite and within the derived bound; a NaN or inf in a pair "
      "at m = 0 gives its own input or NaN per output, at m != 0 NaN (NaN input) or "
      "non-finite (inf input); other pairs are unaffected.";
  t.head = {"kernel", "dtype", "input pair", "position", "got", "policy", "follows"};
  for (const auto& s : r["special_values"])
    for (const auto& c : s["cases"])
      t.rows.push_back({cell(s["kernel"]), cell(s["dtype"]), cell(c["input"]), cell(c["position"]),
                        cell(c["got"][0], 6) + ", " + cell(c["got"][1], 6) + " (" +
                            cell(c["got_bits"][0]) + " " + cell(c["got_bits"][1]) + ")",
                        cell(c["policy"]), c["follows_policy"].get<bool>() ? "yes" : "NO"});
  return t;
}

// ---- FP8 cache bytes (--fp8) --------------------------------------------------------------------

// report --fp8: per kernel x dtype x format x bucket, the FP8 cache bytes of the outputs.
std::string percent_cell(const json& share) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f%%", 100 * dbl_of(share));
  return b;
}

Table fp8_table(const json& r) {
  Table t;
  t.title = "FP8 cache bytes (sampled)";
  t.note = "Chain: " + cell(r["fp8"]["chain"]) +
           ". differ: the byte is not the exact value's one correct rounding into the format "
           "(max: its distance in fp8 ulps); undetermined: the kernel's derived bound admits more "
           "than one byte; outside: a byte outside the chain image of that bound (a broken "
           "bound); overflowed: the exact scaled value is past the format's max.";
  t.head = {"kernel", "dtype",       "format",       "bucket",  "elements",
            "differ", "max fp8 ulp", "undetermined", "outside", "overflowed"};
  // The engines first when the atlas is embedded in a report of ropecheck's own kernels (an
  // atlas-only report has them as its results already).
  std::vector<const json*> sets;
  if (r.contains("atlas") && r["atlas"].value("embedded", false))
    sets.push_back(&r["atlas"]["results"]);
  sets.push_back(&r["results"]);
  for (const json* results : sets)
    for (const auto& res : *results) {
      if (!res.contains("fp8")) continue;
      for (const auto& f : res["fp8"])
        for (const auto& b : f["buckets"])
          t.rows.push_back({cell(res["kernel"]), cell(res["dtype"]), cell(f["format"]),
                            bucket_cell(r, b), cell(b["elements"]), percent_cell(b["differ_share"]),
                            cell(b["max_ulps"]), percent_cell(b["undetermined_share"]),
                            cell(b["outside"]), cell(b["overflowed"])});
    }
  return t;
}

// ---- variants: scaling variants, multi-axis layouts, dynamic NTK --------------------------------

Table variant_safe_context_table(const json& r) {
  Table t;
  t.title = "Precision-safe context length by scaling variant";
  t.note =
      "Same search and budget as the headline, on one representative spec per variant "
      "(spec column; parameters in the variant sections below).";
  t.head = {"variant", "kernel"};
  for (const auto& d : dtype_names(r)) t.head.push_back(d);
  for (const auto& v : r["variants"]) add_safe_rows(t, r, v["safe_context"], {cell(v["name"])});
  return t;
}

// One section per scaling variant: the per-bucket statistics of the dtype tables.
Table variant_table(const json& v) {
  Table t;
  t.title = "Variant " + cell(v["name"]) + ": " + cell(v["model"]);
  t.collapsed = true;
  t.note = "spec: " + cell(v["spec"].value("detail", json())) +
           ". Sampled (maxima are lower bounds); pair errors relative to s ||x_pair|| with s "
           "the magnitude including the attention factor.";
  t.head = {"kernel",  "dtype",   "bucket",      "vectors",    "max ULP",
            "RMS ULP", "p99",     "max pair u",  "RMS pair u", "NMSE",
            "not CR",  "> bound", "utilization", "angle share"};
  for (const auto& res : v["results"])
    for (const auto& b : res["buckets"])
      t.rows.push_back(
          {cell(res["kernel"]), cell(res["dtype"]), cell(b["bucket"]), cell(b["n_vectors"]),
           cell(b["ulp"]["max"]), cell(b["ulp"]["rms"]), cell(b["ulp"]["p99"]),
           cell(b["pair_error_u"]["max"]), cell(b["pair_error_u"]["rms"]), cell(b["nmse"]),
           cell(b["counts"]["not_correctly_rounded"]), cell(b["counts"]["gt_bound"]),
           cell(b["bound"]["max_utilization"]), share_cell(b["angle_vs_rotation"]["angle_share"])});
  return t;
}

Table dynamic_composition_table(const json& dc) {
  Table t;
  t.title = "Dynamic NTK: where composition breaks across the length threshold";
  t.note = cell(dc["note"]) + " spec: " + cell(dc["spec"].value("detail", json())) +
           "; threshold L0 = " + cell(dc["threshold"]) + ".";
  t.head = {"seq_len L", "base' (f64)", "max angle mismatch (rad)", "composes"};
  for (const auto& row : dc["rows"])
    t.rows.push_back({cell(row["seq_len"]), cell(row["base_f64"], 9),
                      cell(row["max_angle_mismatch_rad"]), cell(row["composes"])});
  return t;
}

// ---- around: baseline, environment --------------------------------------------------------------

Table baseline_table(const json& b) {
  Table t;
  t.title = "Baseline comparison";
  t.note = "Regression: a max grew beyond " + cell(b["factor"]) + " x max(baseline, " +
           cell(b["floor"]) + "). Compared buckets: " + cell(b["compared_buckets"]) +
           "; same options as the baseline: " + cell(b["same_options"]) + ".";
  t.head = {"kernel", "dtype", "bucket", "metric", "baseline", "now"};
  for (const auto& g : b["regressions"])
    t.rows.push_back({cell(g["kernel"]), cell(g["dtype"]), cell(g["bucket"]), cell(g["metric"]),
                      cell(g["baseline"]), cell(g["now"])});
  return t;
}

Table environment_table(const json& r) {
  Table t;
  t.title = "Environment";
  t.head = {"key", "value"};
  for (const auto& [k, v] : r["environment"].items()) t.rows.push_back({k, cell(v)});
  return t;
}

}  // namespace

// The report's tables in reading order: headline, checks, per-dtype errors, the searched
// safe-context lengths, FP8 cache bytes (--fp8), variants, the two analyses, worst cases, special
// values, baseline, environment.
std::vector<Table> build_tables(const json& r) {
  std::vector<Table> out;
  if (r.contains("headline")) out.push_back(headline_table(r));
  out.push_back(checks_table(r));
  for (const auto& d : r["options"]["dtypes"]) out.push_back(dtype_errors_table(r, d));
  out.push_back(safe_context_table(r));
  if (r.contains("fp8")) out.push_back(fp8_table(r));
  const bool variants = r.contains("variants");
  if (variants && !r["variants"].empty()) out.push_back(variant_safe_context_table(r));
  if (variants)
    for (const auto& v : r["variants"]) out.push_back(variant_table(v));
  if (r.contains("dynamic_composition"))
    out.push_back(dynamic_composition_table(r["dynamic_composition"]));
  out.push_back(angle_vs_rotation_table(r));
  out.push_back(score_offset_table(r));
  out.push_back(worst_cases_table(r));
  out.push_back(special_values_table(r));
  if (r.contains("baseline")) out.push_back(baseline_table(r["baseline"]));
  out.push_back(environment_table(r));
  return out;
}

}  // namespace ropecheck::reports::detail
