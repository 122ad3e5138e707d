// Markdown, HTML (self-contained, inline SVG) and JUnit renderings of the report document. The
// tables are built once (build_tables) and printed by both the Markdown and HTML writers; every
// number comes from report.json (document.cpp) and is only formatted here.
#include "document.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/verify/verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace ropecheck::reports {

using nlohmann::json;

namespace {

// A table cell: numbers with `significant` digits (verify::fmt), integers exactly, null as n/a,
// booleans as yes/no, strings (including "nan"/"inf" numbers) as they are.
std::string cell(const json& v, int significant = 3) {
  if (v.is_null()) return "n/a";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return verify::fmt(v.get<double>(), significant);
  return v.dump();
}

// A share in [0, 1] with two decimals.
std::string share_cell(const json& v) {
  if (!v.is_number() || v.is_number_integer()) return cell(v);
  char b[64];
  std::snprintf(b, sizeof b, "%.2f", v.get<double>());
  return b;
}

double dbl(const json& v) {
  return detail::number(v).value_or(std::numeric_limits<double>::quiet_NaN());
}

struct Table {
  std::string title, note;
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  bool collapsed = false;  // HTML: inside <details> (long sections a reader opens on demand)
  std::string html_class;  // HTML: the table's class
};

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

// "3.58e+03 u (4e-13), angle 1.00": the max, relative, and the angle share with its bucket in the
// note.
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

std::string headline_text(const json& c) {
  std::string t = compact(c["max_pair_u"]) + " u (" + compact(c["relative"], 2) + ")";
  if (!c["angle_share"].is_null()) t += ", angle " + share_cell(c["angle_share"]);
  return t;
}

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

// A model atlas's rows (atlas.cpp): the engine and, when it ran the other layout than the
// config's, which; an engine that does not implement the spec, with its upstream file.
std::string atlas_engine_cell(const json& row) {
  std::string s = cell(row["engine"]) + (row["modelled"].get<bool>() ? " +" : "");
  if (row.contains("model_layout") && row["model_layout"] != row["layout"])
    s += " (ran " + cell(row["layout"]) + ", permuted)";
  return s;
}
std::vector<std::string> atlas_not_implemented_line(const json& row, std::size_t width) {
  std::vector<std::string> line{cell(row["dtype"]), cell(row["engine"]), cell(row["base_label"])};
  while (line.size() + 1 < width) line.push_back("not implemented");
  line.push_back("not implemented (" + cell(row["upstream"]) + ")");
  return line;
}

// The engine atlas (report.json "atlas"): per dtype x engine x base the headline figures and
// what limits each engine at the longest context.
Table atlas_table(const json& a) {
  Table t;
  t.title = "Engine atlas: max per-pair error of the engines' RoPE by context length";
  t.html_class = "headline";
  const std::string longest = cell(a["contexts"].back()["label"]);
  t.note =
      "Each engine kernel computes what that engine computes (its inv_freq, position cast, angle "
      "product, trig, table dtype and every rounding of the rotation; see each engine's upstream "
      "file and commit below), " +
      (a.contains("model_spec") ? "on the model's spec " + cell(a["model_spec"])
                                : "at head dim " + cell(a["head_dim"]) + ", in its own layout") +
      ". Cells: the max per-pair error over every sampled pair at positions < "
      "L, in u of the dtype and relative; '> k u': the shortest context where it first exceeds k x "
      "the storage rounding. limited by: storage (within 2 u), angle (the recipe's m*theta), "
      "table (cos/sin rounded into a narrow table), trig (the sin/cos evaluation), arithmetic (the "
      "rotation's roundings). + marks engines whose trig is modelled, not reproduced. Sampled "
      "maxima are lower bounds.";
  t.head = {"dtype", "engine", "base"};
  for (const auto& c : a["contexts"]) t.head.push_back("max at " + cell(c["label"]));
  for (const auto& f : a["factors"]) t.head.push_back("> " + cell(f) + " u from");
  t.head.push_back("limited by (at " + longest + ")");
  for (const auto& d : a["dtypes"])
    for (const auto& row : a["rows"]) {
      // An engine that does not run a dtype (ggml: no bf16 rope) has no row for it; one that
      // does not implement a model's spec has one saying so (atlas_model_line).
      if (row["dtype"] != d) continue;
      if (row.value("not_implemented", false))
        t.rows.push_back(atlas_not_implemented_line(row, t.head.size()));
      if (!row["supported"].get<bool>()) continue;
      std::vector<std::string> line{cell(d), atlas_engine_cell(row), cell(row["base_label"])};
      for (const auto& c : row["at"])
        line.push_back(c.value("past_cache", false) ? "past the engine's cache" : headline_text(c));
      for (const auto& e : row["exceeds"]) line.push_back(cell(e["label"]));
      line.push_back(cell(row["limited_by"]));
      t.rows.push_back(line);
    }
  return t;
}

// Per engine: its sentence (what limits it, what would fix it) and where its recipe comes from.
std::vector<std::string> atlas_engine_lines(const json& a) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < a["engines"].size(); ++i) {
    const json& e = a["engines"][i];
    std::string l = cell(a["sentences"][i]["text"]) + " Recipe: " + cell(e["engine"]) + ", " +
                    cell(e["upstream"]) + ". Emulation checked: " + cell(e["checked"]) + ".";
    if (!e["modelled"].get<std::string>().empty()) l += " + Modelled: " + cell(e["modelled"]) + ".";
    out.push_back(l);
  }
  return out;
}

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

Table angle_vs_rotation_table(const json& r) {
  Table t;
  t.title = "Angle-table error vs rotation error";
  t.note =
      "angle: the exact rotation by the kernel's own recipe-rounded angles, against the exact "
      "spec; rotation: the kernel against that recipe-faithful exact rotation (cos/sin table, "
      "arithmetic, storage rounding). Per-pair errors in u of the dtype. share = fraction of "
      "the summed squared error due to the angle.";
  t.head = {"kernel",      "dtype",          "bucket",         "recipe",      "angle max u",
            "angle RMS u", "rotation max u", "rotation RMS u", "total max u", "angle share"};
  for (const auto& res : r["results"])
    for (const auto& b : res["buckets"]) {
      const auto& a = b["angle_vs_rotation"];
      t.rows.push_back({cell(res["kernel"]), cell(res["dtype"]), bucket_cell(r, b),
                        cell(res["policy"]["recipe"]) + " (" + cell(res["policy"]["angle"]) + ")",
                        cell(a["angle_max_u"]), cell(a["angle_rms_u"]), cell(a["rotation_max_u"]),
                        cell(a["rotation_rms_u"]), cell(b["pair_error_u"]["max"]),
                        share_cell(a["angle_share"])});
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
    const double v = dbl(b[metric]["max"]);
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
      "Policy (the property suite's, properties/lib/impl.hpp): finite inputs at m = 0 come "
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

// report --fp8: per kernel x dtype x format x bucket, the FP8 cache bytes of the outputs.
std::string percent_cell(const json& share) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f%%", 100 * dbl(share));
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

std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|')
      o += "\\|";
    else if (c == '\n')
      o += ' ';
    else
      o += c;
  }
  return o;
}

// The exit status named is exit_code()'s, which also counts a failed validation block: a report
// never says "exit 0" for a run that exits 1.
std::string summary_line(const json& r) {
  int failed = 0;
  for (const auto& c : r["checks"]) failed += !c["passed"].get<bool>();
  const std::string exit = " (exit " + std::to_string(exit_code(r)) + ").";
  const std::string of = r.contains("validation") ? " precision checks" : " checks";
  std::string line = failed == 0 ? "All " + std::to_string(r["checks"].size()) + of + " hold"
                                 : std::to_string(failed) + " of " +
                                       std::to_string(r["checks"].size()) + of + " FAILED";
  if (r.contains("validation") && !r["validation"]["passed"].get<bool>())
    line += "; the validation FAILED";
  return line + exit;
}

// `validate --out`: the validation's verdict, shown before anything about precision.
struct ValidationLead {
  std::string verdict;                // "Validation: FAIL (wrong_results)."
  std::string first, reproduce;       // the first failure and its replay command
  std::vector<std::string> failures;  // "[f32 half] Differential: FAIL"
};
ValidationLead validation_lead(const json& v) {
  ValidationLead l;
  const bool passed = v["passed"].get<bool>();
  int n = 0, failed = 0;
  for (const auto& c : v["cases"]) {
    if (c["skipped"].get<bool>()) continue;
    ++n;
    if (c["passed"].get<bool>()) continue;
    ++failed;
    l.failures.push_back("[" + cell(c["configuration"]) + "] " + cell(c["check"]) + ": " +
                         cell(c["result"]));
  }
  l.verdict = std::string("Validation of plugin '") + cell(v["plugin"]) +
              "': " + (passed ? "PASS" : "FAIL") + " (classification " + cell(v["classification"]) +
              "; " + std::to_string(failed) + " of " + std::to_string(n) + " checks failed; exit " +
              std::to_string(v["exit_code"].get<int>()) + ").";
  l.first = v.value("first_failure", std::string());
  l.reproduce = v.value("reproduce", std::string());
  return l;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                         "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

// An SVG coordinate.
std::string coord(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// 2^k as a context length is quoted: 1, 16, 256, 4k, 64k, 1M.
std::string pow2_label(int k) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  return std::to_string(1LL << (k % 10)) + kPrefix[k / 10];
}

// A decade as an axis label: 0.01 ... 1000 written out, beyond that 1e4, 1e-3.
std::string decade_label(int e) {
  if (e < -2 || e > 3) return "1e" + std::to_string(e);
  char b[16];
  std::snprintf(b, sizeof b, "%.*f", e < 0 ? -e : 0, std::pow(10.0, e));
  return b;
}

// A chart's frame: a wide viewBox drawn at 100% width (the page's width decides the size), the
// plot area inside margins for the axis labels (left, bottom) and the legend (right).
struct Frame {
  static constexpr double W = 1000, H = 380, L = 70, R = 200, T = 26, B = 50;
  double x0, x1, y0, y1;  // data range: x in log2 or category index, y in log10
  double px(double x) const { return L + (x - x0) / (x1 - x0) * (W - L - R); }
  double py(double ly) const { return T + (y1 - std::clamp(ly, y0, y1)) / (y1 - y0) * (H - T - B); }
};

// Log10 range over the positive finite values: whole decades, at least one, plus a margin so that
// markers and lines at an extreme are drawn inside the plot area, not on its border.
std::pair<double, double> decades(const std::vector<double>& ys) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double y : ys)
    if (std::isfinite(y) && y > 0) lo = std::min(lo, y), hi = std::max(hi, y);
  if (!(hi > 0)) return {-2, 0};
  const double a = std::floor(std::log10(lo)), b = std::max(a + 1, std::ceil(std::log10(hi)));
  const double margin = 0.04 * (b - a);
  return {a - margin, b + margin};
}

void svg_open(std::ostream& o, const std::string& id, const std::string& title) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"" << esc(id)
    << "\" width=\"100%\" viewBox=\"0 0 " << Frame::W << " " << Frame::H
    << "\" role=\"img\" font-family=\"sans-serif\"><title>" << esc(title) << "</title>";
}

// Plot area, horizontal decade grid with labels, and the y axis title.
void svg_y_axis(std::ostream& o, const Frame& f, const std::string& title) {
  const double r = f.W - f.R;
  o << "<rect class=\"plot-area\" x=\"" << f.L << "\" y=\"" << f.T << "\" width=\"" << r - f.L
    << "\" height=\"" << f.H - f.T - f.B << "\" fill=\"none\" stroke=\"#666\"/>";
  const int e0 = static_cast<int>(std::ceil(f.y0)), e1 = static_cast<int>(std::floor(f.y1));
  const int every = e1 - e0 > 10 ? 2 : 1;  // beyond ten decades the labels would touch
  for (int e = e0; e <= e1; ++e) {
    const double y = f.py(e);
    o << "<line x1=\"" << f.L << "\" x2=\"" << r << "\" y1=\"" << coord(y) << "\" y2=\"" << coord(y)
      << "\" stroke=\"#e4e4e4\"/>";
    if ((e - e0) % every == 0)
      o << "<text x=\"" << f.L - 6 << "\" y=\"" << coord(y + 4)
        << "\" font-size=\"13\" text-anchor=\"end\">" << decade_label(e) << "</text>";
  }
  const double mid = (f.T + f.H - f.B) / 2;
  o << "<text x=\"18\" y=\"" << coord(mid) << "\" font-size=\"13\" text-anchor=\"middle\" "
    << "transform=\"rotate(-90 18 " << coord(mid) << ")\">" << esc(title) << "</text>";
}

// Dotted horizontal lines at the storage rounding (1 u) and the headline's multiples of it.
void svg_storage_lines(std::ostream& o, const Frame& f, const json& factors) {
  std::vector<std::pair<double, std::string>> lines{{1.0, "1 u storage rounding"}};
  for (const auto& k : factors) lines.push_back({k.get<double>(), cell(k) + "x"});
  for (const auto& [v, label] : lines) {
    const double ly = std::log10(v);
    if (ly < f.y0 || ly > f.y1) continue;
    o << "<line x1=\"" << f.L << "\" x2=\"" << f.W - f.R << "\" y1=\"" << coord(f.py(ly))
      << "\" y2=\"" << coord(f.py(ly)) << "\" stroke=\"#999\" stroke-dasharray=\"2 3\"/>";
    o << "<text x=\"" << f.W - f.R - 4 << "\" y=\"" << coord(f.py(ly) - 3)
      << "\" font-size=\"11\" fill=\"#777\" text-anchor=\"end\">" << esc(label) << "</text>";
  }
}

// Octave ticks (labelled every few octaves) and dotted lines at the headline's contexts.
void svg_position_axis(std::ostream& o, const Frame& f, const json& contexts) {
  const int step = std::max(1, static_cast<int>(std::ceil((f.x1 - f.x0) / 10)));
  for (int k = static_cast<int>(f.x0); k <= static_cast<int>(f.x1); k += step)
    o << "<text x=\"" << coord(f.px(k)) << "\" y=\"" << f.H - f.B + 18
      << "\" font-size=\"13\" text-anchor=\"middle\">" << pow2_label(k) << "</text>";
  for (const auto& c : contexts) {
    const double lx = std::log2(c["context"].get<double>());
    if (lx <= f.x0 || lx > f.x1) continue;
    o << "<line x1=\"" << coord(f.px(lx)) << "\" x2=\"" << coord(f.px(lx)) << "\" y1=\"" << f.T
      << "\" y2=\"" << f.H - f.B << "\" stroke=\"#bbb\" stroke-dasharray=\"4 4\"/><text x=\""
      << coord(f.px(lx)) << "\" y=\"" << f.T - 6 << "\" font-size=\"12\" text-anchor=\"middle\">"
      << esc(cell(c["label"])) << "</text>";
  }
  o << "<text x=\"" << (f.L + f.W - f.R) / 2 << "\" y=\"" << f.H - 8
    << "\" font-size=\"13\" text-anchor=\"middle\">position (log scale; each step spans one octave "
       "[2^k, 2^(k+1)))</text>";
}

// Legend in the right margin: one colored line per kernel, then the line styles.
void svg_legend(std::ostream& o, const Frame& f, const std::vector<std::string>& kernels,
                const std::vector<std::pair<std::string, std::string>>& styles) {
  double y = f.T + 12;
  const double x = f.W - f.R + 16;
  for (std::size_t i = 0; i < kernels.size(); ++i, y += 20)
    o << "<line x1=\"" << x << "\" x2=\"" << x + 24 << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"" << kColors[i % 8] << "\" stroke-width=\"3\"/><text x=\"" << x + 30
      << "\" y=\"" << y + 5 << "\" font-size=\"13\">" << esc(kernels[i]) << "</text>";
  y += 8;
  for (const auto& [dash, label] : styles) {
    o << "<line x1=\"" << x << "\" x2=\"" << x + 24 << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#333\" stroke-width=\"2\"" << dash << "/><text x=\"" << x + 30 << "\" y=\""
      << y + 5 << "\" font-size=\"12\">" << esc(label) << "</text>";
    y += 18;
  }
}

// The per-octave max and RMS pair errors of each kernel of one dtype (position 0 has no place on
// a log axis; it is in the tables).
struct OctaveSeries {
  std::string kernel;
  std::vector<std::array<double, 3>> pts;  // octave start, max u, RMS u
};
std::vector<OctaveSeries> octave_series(const json& r, const std::string& dtype) {
  std::vector<OctaveSeries> v;
  for (const auto& res : r["results"]) {
    if (res["dtype"] != dtype) continue;
    OctaveSeries s{res["kernel"].get<std::string>(), {}};
    for (const auto& o : res["octaves"])
      if (o["position_lo"].get<double>() >= 1)
        s.pts.push_back(
            {o["position_lo"].get<double>(), dbl(o["max_pair_u"]), dbl(o["rms_pair_u"])});
    v.push_back(s);
  }
  return v;
}

// A step line: value v over [2^k, 2^(k+1)) for each octave, broken where a value is 0 or not
// finite and where an octave holds no sample (a slope across it would invent data).
std::string step_path(const Frame& f, const std::vector<std::array<double, 3>>& pts, int which) {
  std::string d;
  bool open = false;
  double next_x = -1;
  for (const auto& p : pts) {
    const double v = p[which], x = std::log2(p[0]);
    if (x != next_x) open = false;
    next_x = x + 1;
    if (!(std::isfinite(v) && v > 0)) {
      open = false;
      continue;
    }
    const std::string y = coord(f.py(std::log10(v)));
    d += (open ? " L" : (d.empty() ? "M" : " M")) + coord(f.px(x)) + " " + y;
    d += " L" + coord(f.px(x + 1)) + " " + y;
    open = true;
  }
  return d;
}

// Max (solid) and RMS (dashed) per-pair error vs position for one dtype, kernels as series; empty
// when there is nothing to draw.
std::string svg_error_vs_position(const json& r, const std::string& dtype) {
  const auto series = octave_series(r, dtype);
  std::vector<double> ys;
  double xmax = 1;
  for (const auto& s : series)
    for (const auto& p : s.pts) ys.push_back(p[1]), ys.push_back(p[2]), xmax = std::max(xmax, p[0]);
  const auto [y0, y1] = decades(ys);
  const Frame f{0, std::log2(xmax) + 1, y0, y1};
  std::ostringstream paths;
  std::vector<std::string> kernels;
  for (std::size_t i = 0; i < series.size(); ++i) {
    kernels.push_back(series[i].kernel);
    paths << "<g class=\"series\" data-series=\"" << esc(series[i].kernel) << "\">";
    for (int which : {1, 2}) {
      const std::string d = step_path(f, series[i].pts, which);
      if (d.empty()) continue;
      paths << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << kColors[i % 8]
            << "\" stroke-width=\"2\"" << (which == 2 ? " stroke-dasharray=\"6 4\"" : "") << "/>";
    }
    paths << "</g>";
  }
  if (paths.str().find("<path") == std::string::npos) return "";
  std::ostringstream o;
  svg_open(o, "error-" + dtype, "max and RMS per-pair error vs position, " + dtype);
  svg_y_axis(o, f, "per-pair error (u of " + dtype + ")");
  const json h = r.value("headline", json::object());
  svg_position_axis(o, f, h.value("contexts", json::array()));
  svg_storage_lines(o, f, h.value("factors", json::array()));
  o << paths.str();
  svg_legend(o, f, kernels, {{"", "max"}, {" stroke-dasharray=\"6 4\"", "RMS"}});
  o << "</svg>";
  return o.str();
}

// The buckets that carry an angle/rotation split (position 0 has none: its angle is exact).
std::vector<std::string> split_buckets(const json& r) {
  std::vector<std::string> names;
  for (const auto& b : r["buckets"])
    if (b["sampled"].get<bool>() && b["lo"].get<std::int64_t>() > 0)
      names.push_back(b["name"].get<std::string>());
  return names;
}

// Angle (solid, dots) and rotation (dashed, squares) RMS per-pair error by position bucket for one
// dtype, kernels as series: where the error comes from, and how that changes with position.
std::string svg_angle_split(const json& r, const std::string& dtype) {
  const auto names = split_buckets(r);
  std::vector<std::pair<std::string, std::vector<std::array<double, 2>>>> series;
  std::vector<double> ys;
  for (const auto& res : r["results"]) {
    if (res["dtype"] != dtype) continue;
    std::vector<std::array<double, 2>> pts(names.size(), {NAN, NAN});
    for (const auto& b : res["buckets"])
      for (std::size_t i = 0; i < names.size(); ++i)
        if (b["bucket"] == names[i]) {
          const auto& a = b["angle_vs_rotation"];
          pts[i] = {dbl(a["angle_rms_u"]), dbl(a["rotation_rms_u"])};
          ys.push_back(pts[i][0]), ys.push_back(pts[i][1]);
        }
    series.push_back({res["kernel"].get<std::string>(), pts});
  }
  const auto [y0, y1] = decades(ys);
  const Frame f{-0.5, std::max(0.5, names.size() - 0.5), y0, y1};
  std::ostringstream marks;
  std::vector<std::string> kernels;
  for (std::size_t k = 0; k < series.size(); ++k) {
    kernels.push_back(series[k].first);
    marks << "<g class=\"series\" data-series=\"" << esc(series[k].first) << "\">";
    for (int which : {0, 1}) {
      std::string d;
      for (std::size_t i = 0; i < names.size(); ++i) {
        const double v = series[k].second[i][which];
        if (!(std::isfinite(v) && v > 0)) continue;
        const double x = f.px(static_cast<double>(i)) + (which ? 4.0 : -4.0),
                     y = f.py(std::log10(v));
        d += (d.empty() ? "M" : " L") + coord(x) + " " + coord(y);
        marks << (which ? "<rect x=\"" + coord(x - 4) + "\" y=\"" + coord(y - 4) +
                              "\" width=\"8\" height=\"8\""
                        : "<circle cx=\"" + coord(x) + "\" cy=\"" + coord(y) + "\" r=\"4.5\"")
              << " fill=\"" << kColors[k % 8] << "\"/>";
      }
      if (!d.empty())
        marks << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << kColors[k % 8]
              << "\" stroke-width=\"2\"" << (which ? " stroke-dasharray=\"6 4\"" : "") << "/>";
    }
    marks << "</g>";
  }
  if (marks.str().find("<path") == std::string::npos &&
      marks.str().find("<circle") == std::string::npos &&
      marks.str().find("<rect") == std::string::npos)
    return "";
  std::ostringstream o;
  svg_open(o, "split-" + dtype,
           "angle vs rotation RMS per-pair error by position bucket, " + dtype);
  svg_y_axis(o, f, "RMS per-pair error (u of " + dtype + ")");
  for (std::size_t i = 0; i < names.size(); ++i)
    o << "<text x=\"" << coord(f.px(static_cast<double>(i))) << "\" y=\"" << f.H - f.B + 18
      << "\" font-size=\"13\" text-anchor=\"middle\">" << esc(names[i]) << "</text>";
  o << "<text x=\"" << (f.L + f.W - f.R) / 2 << "\" y=\"" << f.H - 8
    << "\" font-size=\"13\" text-anchor=\"middle\">position bucket</text>";
  o << marks.str();
  svg_legend(o, f, kernels,
             {{"", "angle (dots)"}, {" stroke-dasharray=\"6 4\"", "rotation (squares)"}});
  o << "</svg>";
  return o.str();
}

// Grouped bars: fraction of elements per ULP bin, one bar per kernel.
std::string svg_ulp_histogram(const json& r, const std::string& dtype) {
  std::vector<std::pair<std::string, std::vector<double>>> ks;
  std::vector<std::string> labels;
  for (const auto& res : r["results"]) {
    if (res["dtype"] != dtype) continue;
    std::vector<double> f;
    double total = 0;
    for (const auto& h : res["ulp_histogram"]) total += h["count"].get<double>();
    labels.clear();
    for (const auto& h : res["ulp_histogram"]) {
      f.push_back(total > 0 ? h["count"].get<double>() / total : 0.0);
      labels.push_back(h["bin"].get<std::string>());
    }
    ks.push_back({res["kernel"].get<std::string>(), f});
  }
  // Keep bins up to the last non-empty one.
  std::size_t nb = 0;
  for (const auto& k : ks)
    for (std::size_t i = 0; i < k.second.size(); ++i)
      if (k.second[i] > 0) nb = std::max(nb, i + 1);
  nb = std::max<std::size_t>(nb, 3);
  const double W = 640, H = 300, L = 50, R = 150, T = 20, B = 90;
  const double gw = (W - L - R) / static_cast<double>(nb);
  const double bw = gw * 0.8 / static_cast<double>(std::max<std::size_t>(ks.size(), 1));
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"ulp-" << esc(dtype)
    << "\" width=\"100%\" viewBox=\"0 0 " << W << " " << H
    << "\" role=\"img\" font-family=\"sans-serif\">";
  o << "<title>ULP error histogram, " << esc(dtype) << "</title>";
  o << "<rect class=\"plot-area\" x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R
    << "\" height=\"" << H - T - B << "\" fill=\"none\" stroke=\"#888\"/>";
  for (int t = 0; t <= 4; ++t) {
    const double y = T + (H - T - B) * (1 - t / 4.0);
    o << "<text x=\"" << L - 5 << "\" y=\"" << coord(y + 4)
      << "\" font-size=\"11\" text-anchor=\"end\">" << t * 25 << "%</text>";
  }
  for (std::size_t i = 0; i < ks.size(); ++i) {
    o << "<g class=\"series\" data-series=\"" << esc(ks[i].first) << "\">";
    for (std::size_t b = 0; b < nb && b < ks[i].second.size(); ++b) {
      const double h = ks[i].second[b] * (H - T - B);
      o << "<rect x=\"" << coord(L + gw * b + gw * 0.1 + bw * i) << "\" y=\"" << coord(H - B - h)
        << "\" width=\"" << coord(bw) << "\" height=\"" << coord(h) << "\" fill=\""
        << kColors[i % 8] << "\"/>";
    }
    o << "</g>";
  }
  for (std::size_t b = 0; b < nb && b < labels.size(); ++b) {
    const double x = L + gw * (b + 0.5), y = H - B + 10;
    o << "<text x=\"" << coord(x) << "\" y=\"" << y << "\" font-size=\"10\" text-anchor=\"end\" "
      << "transform=\"rotate(-45 " << coord(x) << " " << y << ")\">" << esc(labels[b]) << "</text>";
  }
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const double ly = T + 14 + 18.0 * static_cast<double>(i);
    o << "<rect x=\"" << W - R + 10 << "\" y=\"" << ly - 8 << "\" width=\"12\" height=\"10\" "
      << "fill=\"" << kColors[i % 8] << "\"/>";
    o << "<text x=\"" << W - R + 28 << "\" y=\"" << ly + 1 << "\" font-size=\"11\">"
      << esc(ks[i].first) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

}  // namespace

namespace {

// The verdict, the checks line and one conclusion per dtype (report.json's "headline"): what a
// reader needs before any table.
struct Lead {
  std::string verdict;
  std::vector<std::string> conclusions;
};
Lead lead(const json& r) {
  Lead l{summary_line(r), {}};
  if (!r.contains("headline")) return l;
  l.verdict = r["headline"]["verdict"].get<std::string>() + " " + l.verdict;
  for (const auto& c : r["headline"]["conclusions"]) l.conclusions.push_back(cell(c["text"]));
  return l;
}

std::string run_line(const json& r) {
  return "Reference: MPFR at " + cell(r["options"]["reference_bits"]) + " bits. Seed " +
         cell(r["options"]["seed"]) + ", " + cell(r["options"]["samples"]) +
         " sampled vectors per kernel x dtype x spec x bucket, positions up to " +
         cell(r["options"]["max_position"]) + ".";
}

void md_table(std::ostream& o, const Table& t) {
  o << "## " << t.title << "\n\n";
  if (!t.note.empty()) o << t.note << "\n\n";
  if (t.rows.empty()) {
    o << "(none)\n\n";
    return;
  }
  o << "|";
  for (const auto& h : t.head) o << " " << md_cell(h) << " |";
  o << "\n|";
  for (std::size_t i = 0; i < t.head.size(); ++i) o << "---|";
  o << "\n";
  for (const auto& row : t.rows) {
    o << "|";
    for (const auto& c : row) o << " " << md_cell(c) << " |";
    o << "\n";
  }
  o << "\n";
}

// A table in a horizontally scrolling box (wide tables never widen the page); collapsed ones
// inside <details>, titled by their <summary>.
void html_table(std::ostream& o, const Table& t) {
  if (t.collapsed)
    o << "<details><summary>" << esc(t.title) << "</summary>\n";
  else
    o << "<h2>" << esc(t.title) << "</h2>\n";
  if (!t.note.empty()) o << "<p class=\"note\">" << esc(t.note) << "</p>\n";
  o << "<div class=\"scroll\"><table"
    << (t.html_class.empty() ? "" : " class=\"" + esc(t.html_class) + "\"") << "><thead><tr>";
  for (const auto& h : t.head) o << "<th>" << esc(h) << "</th>";
  o << "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    o << "<tr>";
    for (const auto& c : row)
      o << ((c == "FAIL" || c == "NO") ? "<td class=\"fail\">" : "<td>") << esc(c) << "</td>";
    o << "</tr>\n";
  }
  o << "</tbody></table></div>\n";
  if (t.collapsed) o << "</details>\n";
}

// One figure per dtype (full width), or a line saying why there is none.
void html_figures(std::ostream& o, const json& r, const char* what,
                  std::string (*chart)(const json&, const std::string&)) {
  for (const auto& d : r["options"]["dtypes"]) {
    const std::string svg = chart(r, d.get<std::string>());
    if (svg.empty())
      o << "<p class=\"note\">" << esc(d.get<std::string>()) << ": no data to plot.</p>\n";
    else
      o << "<figure>" << svg << "<figcaption>" << esc(d.get<std::string>()) << ": " << what
        << "</figcaption></figure>\n";
  }
}

// A plugin's report (`report --plugin`, `validate --out`): its declared domain, the sweep inside
// it, and what of the requested sweep was left out.
std::string domain_line(const json& r) {
  const json& d = r["domain"];
  std::string t = "declared: " + cell(d["declared"]) + ". Swept inside it: head dims ";
  for (std::size_t i = 0; i < r["options"]["head_dims"].size(); ++i)
    t += (i ? ", " : "") + cell(r["options"]["head_dims"][i]);
  t += ", positions up to " + cell(r["options"]["max_position"]) + ".";
  if (d["outside"].empty()) return t + " Nothing requested lay outside it.";
  t += " Left out:";
  for (const auto& n : d["outside"]) t += " " + cell(n) + ";";
  t.back() = '.';
  return t;
}

// The atlas first: the checks' status, the engines' table, one line per engine; then the heading
// of the rest of the report (ropecheck's own kernels, or the atlas run's details).
void md_atlas(std::ostream& o, const json& r) {
  const json& a = r["atlas"];
  o << "**Checks.** " << summary_line(r) << "\n\n";
  md_table(o, atlas_table(a));
  o << "What limits each engine, and what would fix it:\n\n";
  for (const auto& l : atlas_engine_lines(a)) o << "- " << l << "\n";
  o << "\n# " << (a["embedded"].get<bool>() ? "ropecheck's own kernels" : "The atlas run in detail")
    << "\n\n";
}

// The atlas's charts: per dtype and base, max/RMS per-pair error vs position with the engines as
// series (the report's own chart over a view of the atlas results).
void html_atlas_charts(std::ostream& o, const json& a) {
  for (const auto& d : a["dtypes"])
    for (const auto& b : a["bases"]) {
      std::string label;
      for (const auto& row : a["rows"])
        if (row["base"] == b) label = row["base_label"].get<std::string>();
      json view{{"headline", {{"contexts", a["contexts"]}, {"factors", a["factors"]}}},
                {"results", json::array()}};
      for (auto res : a["results"]) {
        const std::string k = res["kernel"].get<std::string>();
        const auto at = k.rfind('@');
        if (res["dtype"] != d || at == std::string::npos || k.substr(at + 1) != label) continue;
        res["kernel"] = k.substr(0, at);
        view["results"].push_back(res);
      }
      const std::string svg = svg_error_vs_position(view, d.get<std::string>());
      if (svg.empty()) continue;
      o << "<figure>" << svg << "<figcaption>" << esc(d.get<std::string>()) << ", base "
        << esc(label) << ": engines' max (solid) and RMS (dashed) per-pair error per octave of "
        << "positions</figcaption></figure>\n";
    }
}

void html_atlas(std::ostream& o, const json& r) {
  const json& a = r["atlas"];
  o << "<p class=\"verdict\"><b>Checks.</b> " << esc(summary_line(r)) << "</p>\n";
  html_table(o, atlas_table(a));
  o << "<p>What limits each engine, and what would fix it:</p>\n<ul>";
  for (const auto& l : atlas_engine_lines(a)) o << "<li>" << esc(l) << "</li>";
  o << "</ul>\n";
  html_atlas_charts(o, a);
  o << "<h1>" << (a["embedded"].get<bool>() ? "ropecheck's own kernels" : "The atlas run in detail")
    << "</h1>\n";
}

const char* kCss =
    "body{font-family:sans-serif;margin:20px auto;max-width:1400px;padding:0 16px;"
    "line-height:1.35}"
    ".scroll{overflow-x:auto;max-width:100%;margin-bottom:18px}"
    "table{border-collapse:collapse;font-size:12px}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}th{background:#f0f0f0}"
    ".fail{color:#b00;font-weight:bold}.verdict{font-size:17px}.note{color:#444;font-size:13px}"
    "figure{margin:0 0 22px 0}figcaption{font-size:13px;color:#444}"
    ".plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px}"
    "details{margin:8px 0}summary{cursor:pointer;font-weight:bold}"
    ".headline td{white-space:nowrap}";

}  // namespace

std::string render_markdown(const json& r) {
  std::ostringstream o;
  const Lead l = lead(r);
  o << "# ropecheck precision report\n\n";
  if (r.contains("validation")) {
    const ValidationLead v = validation_lead(r["validation"]);
    o << "**" << v.verdict << "**\n\n";
    for (const auto& f : v.failures) o << "- " << md_cell(f) << "\n";
    if (!v.failures.empty()) o << "\n";
    if (!v.first.empty()) o << "First counterexample: " << md_cell(v.first) << "\n\n";
    if (!v.reproduce.empty()) o << "Reproduce: `" << v.reproduce << "`\n\n";
  }
  if (r.contains("domain")) o << "**Kernel domain.** " << domain_line(r) << "\n\n";
  if (r.contains("atlas")) md_atlas(o, r);
  o << "**Verdict" << (r.contains("validation") ? " on precision" : "") << ".** " << l.verdict
    << "\n\n";
  if (!l.conclusions.empty()) {
    o << "What to conclude, per dtype:\n\n";
    for (const auto& c : l.conclusions) {
      const auto colon = c.find(": ");
      o << "- **" << c.substr(0, colon) << "**" << c.substr(colon) << "\n";
    }
    o << "\n";
  }
  o << run_line(r) << " Every maximum below is **sampled (lower bound)**.\n\n";
  for (const auto& t : build_tables(r)) md_table(o, t);
  o << "## Definitions\n\n";
  for (const auto& [k, v] : r["definitions"].items()) o << "- **" << k << "**: " << cell(v) << "\n";
  return o.str();
}

std::string render_html(const json& r) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>"
    << "<title>ropecheck precision report</title><style>" << kCss << "</style></head><body>\n";
  const Lead l = lead(r);
  o << "<h1>ropecheck precision report</h1>\n";
  if (r.contains("validation")) {
    const ValidationLead v = validation_lead(r["validation"]);
    o << "<p class=\"verdict" << (r["validation"]["passed"].get<bool>() ? "" : " fail") << "\"><b>"
      << esc(v.verdict) << "</b></p>\n";
    if (!v.failures.empty()) {
      o << "<ul>";
      for (const auto& f : v.failures) o << "<li>" << esc(f) << "</li>";
      o << "</ul>\n";
    }
    if (!v.first.empty()) o << "<p>First counterexample: " << esc(v.first) << "</p>\n";
    if (!v.reproduce.empty()) o << "<p>Reproduce: <code>" << esc(v.reproduce) << "</code></p>\n";
  }
  if (r.contains("domain")) o << "<p><b>Kernel domain.</b> " << esc(domain_line(r)) << "</p>\n";
  if (r.contains("atlas")) html_atlas(o, r);
  o << "<p class=\"verdict\"><b>Verdict" << (r.contains("validation") ? " on precision" : "")
    << ".</b> " << esc(l.verdict) << "</p>\n";
  if (!l.conclusions.empty()) {
    o << "<ul>";
    for (const auto& c : l.conclusions) {
      const auto colon = c.find(": ");  // "f32: ...": the dtype in bold
      o << "<li><b>" << esc(c.substr(0, colon)) << "</b>" << esc(c.substr(colon)) << "</li>";
    }
    o << "</ul>\n";
  }
  o << "<p class=\"note\">" << esc(run_line(r))
    << " Every maximum is <b>sampled (lower bound)</b>.</p>\n";
  std::vector<Table> tables = build_tables(r);
  std::size_t next = 0;
  if (r.contains("headline")) html_table(o, tables[next++]);
  o << "<h2>Error vs position</h2>\n";
  html_figures(o, r, "max (solid) and RMS (dashed) per-pair error per octave of positions",
               svg_error_vs_position);
  o << "<h2>Where the error comes from: angle vs rotation</h2>\n<p class=\"note\">angle: the "
       "exact rotation by the kernel's own angles against the exact spec; rotation: the kernel "
       "against that rotation (cos/sin table, arithmetic, storage). RMS per-pair error per "
       "position bucket.</p>\n";
  html_figures(o, r, "angle (dots, solid) and rotation (squares, dashed) RMS per-pair error",
               svg_angle_split);
  o << "<h2>ULP histograms</h2>\n<div class=\"plots\">";
  html_figures(o, r, "fraction of elements per ULP-error bin", svg_ulp_histogram);
  o << "</div>\n";
  for (; next < tables.size(); ++next) html_table(o, tables[next]);
  o << "<h2>Definitions</h2>\n<ul>";
  for (const auto& [k, v] : r["definitions"].items())
    o << "<li><b>" << esc(k) << "</b>: " << esc(cell(v)) << "</li>";
  o << "</ul>\n</body></html>\n";
  return o.str();
}

namespace {
// `validate --out`: one test case per configuration x check, in its own suite before the
// report's; checks not run or not applicable are skipped test cases with their reason.
void junit_validation(std::ostream& o, const json& v, int& tests, int& failures) {
  int n = 0, failed = 0, skipped = 0;
  for (const auto& c : v["cases"]) {
    ++n;
    skipped += c["skipped"].get<bool>();
    failed += !c["passed"].get<bool>() && !c["skipped"].get<bool>();
  }
  tests += n;
  failures += failed;
  o << "  <testsuite name=\"validate\" tests=\"" << n << "\" failures=\"" << failed
    << "\" errors=\"0\" skipped=\"" << skipped << "\">\n";
  for (const auto& c : v["cases"]) {
    std::string cfg = cell(c["configuration"]);
    std::replace(cfg.begin(), cfg.end(), ' ', '_');
    o << "    <testcase classname=\"" << esc("validate." + cell(v["plugin"]) + "_" + cfg)
      << "\" name=\"" << esc(cell(c["check"])) << "\" time=\"0\">";
    const std::string result = cell(c["result"]), detail = cell(c["message"]);
    std::string msg = detail.empty()                 ? result
                      : detail.rfind(result, 0) == 0 ? detail
                                                     : result + ": " + detail;
    if (c.contains("reproduce")) msg += "\nreplay: " + cell(c["reproduce"]);
    if (c["skipped"].get<bool>())
      o << "<skipped message=\"" << esc(msg) << "\"/>";
    else if (!c["passed"].get<bool>())
      o << "<failure message=\"" << esc(msg) << "\">" << esc(msg) << "</failure>";
    else
      o << "<system-out>" << esc(msg) << "</system-out>";
    o << "</testcase>\n";
  }
  o << "  </testsuite>\n";
}
}  // namespace

std::string render_junit(const json& r) {
  int failures = 0;
  for (const auto& c : r["checks"]) failures += !c["passed"].get<bool>();
  const int report_failures = failures;
  int tests = static_cast<int>(r["checks"].size());
  std::ostringstream suites;
  if (r.contains("validation")) junit_validation(suites, r["validation"], tests, failures);
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"ropecheck report\" tests=\"" << tests << "\" failures=\"" << failures
    << "\">\n"
    << suites.str();
  o << "  <testsuite name=\"report\" tests=\"" << r["checks"].size() << "\" failures=\""
    << report_failures << "\" errors=\"0\" skipped=\"0\">\n";
  for (const auto& c : r["checks"]) {
    const std::string cls =
        "report." + c["kernel"].get<std::string>() + "_" + c["dtype"].get<std::string>();
    o << "    <testcase classname=\"" << esc(cls) << "\" name=\"" << esc(cell(c["check"]))
      << "\" time=\"0\">";
    if (!c["passed"].get<bool>())
      o << "<failure message=\"" << esc(cell(c["message"])) << "\">" << esc(cell(c["message"]))
        << "</failure>";
    else
      o << "<system-out>" << esc(cell(c["message"])) << "</system-out>";
    o << "</testcase>\n";
  }
  o << "  </testsuite>\n</testsuites>\n";
  return o.str();
}

}  // namespace ropecheck::reports
