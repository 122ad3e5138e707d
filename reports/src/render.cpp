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
  t.title = "Precision-safe context length (headline)";
  t.note = "Largest position up to which every sampled probe kept max per-pair error <= " +
           cell(r["options"]["safe_budget_u"]) +
           " u of the dtype (see definitions: sampled estimate, searched over powers of two "
           "then bisected).";
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
  t.title = "Precision-safe context length by scaling variant (headline, extended)";
  t.note =
      "Same search and budget as the headline, on one representative spec per variant "
      "(spec column; parameters in the variant sections below).";
  t.head = {"variant", "kernel"};
  for (const auto& d : dtype_names(r)) t.head.push_back(d);
  for (const auto& v : r["variants"]) add_safe_rows(t, r, v["safe_context"], {cell(v["name"])});
  return t;
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

Table dtype_errors_table(const json& r, const json& d) {
  Table t;
  t.title = "Errors in " + d.get<std::string>() + " (sampled: maxima are lower bounds)";
  t.head = {"kernel",    "bucket", "vectors", "max ULP",    "mean ULP",      "RMS ULP",
            "p50",       "p99",    "p99.9",   "max pair u", "RMS pair u",    "NMSE",
            "max |err|", "not CR", "> 1 ULP", "> bound",    "bound u (max)", "utilization"};
  for (const auto& res : r["results"]) {
    if (res["dtype"] != d) continue;
    for (const auto& b : res["buckets"])
      t.rows.push_back({cell(res["kernel"]), cell(b["bucket"]), cell(b["n_vectors"]),
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
      t.rows.push_back({cell(res["kernel"]), cell(res["dtype"]), cell(b["bucket"]),
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
  t.note = "Reproduce with the `reproduce` command stored in report.json (ropecheck eval).";
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

// The report's tables in reading order: headline, checks, per-dtype errors, variants, the two
// analyses, worst cases, special values, baseline, environment.
std::vector<Table> build_tables(const json& r) {
  std::vector<Table> out{safe_context_table(r)};
  const bool variants = r.contains("variants");
  if (variants && !r["variants"].empty()) out.push_back(variant_safe_context_table(r));
  out.push_back(checks_table(r));
  for (const auto& d : r["options"]["dtypes"]) out.push_back(dtype_errors_table(r, d));
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

std::string summary_line(const json& r) {
  int failed = 0;
  for (const auto& c : r["checks"]) failed += !c["passed"].get<bool>();
  return failed == 0 ? "All " + std::to_string(r["checks"].size()) + " checks hold (exit 0)."
                     : std::to_string(failed) + " of " + std::to_string(r["checks"].size()) +
                           " checks FAILED (exit 1).";
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

// The per-octave max and RMS pair errors of each kernel of one dtype, and their ranges.
struct ErrorSeries {
  std::string kernel;
  std::vector<std::pair<double, double>> max, rms;  // (position, error u)
};
struct ErrorPlot {
  std::vector<ErrorSeries> series;
  double xmin = 1, xmax = 2, ymin = std::numeric_limits<double>::infinity(), ymax = 0;
};
ErrorPlot error_plot(const json& r, const std::string& dtype) {
  ErrorPlot p;
  for (const auto& res : r["results"]) {
    if (res["dtype"] != dtype) continue;
    ErrorSeries s{res["kernel"].get<std::string>(), {}, {}};
    for (const auto& o : res["octaves"]) {
      const double x = o["position_lo"].get<double>();
      if (x < 1) continue;  // position 0 has no place on a log axis; it is in the tables
      const double a = dbl(o["max_pair_u"]), b = dbl(o["rms_pair_u"]);
      p.xmax = std::max(p.xmax, x);
      for (double y : {a, b})
        if (std::isfinite(y) && y > 0) p.ymin = std::min(p.ymin, y), p.ymax = std::max(p.ymax, y);
      s.max.push_back({x, a});
      s.rms.push_back({x, b});
    }
    p.series.push_back(s);
  }
  if (!(p.ymax > 0)) p.ymin = 0.01, p.ymax = 1;
  return p;
}

// Log2 positions x log10 errors, whole decades and octaves.
struct LogAxes {
  static constexpr double W = 640, H = 340, L = 60, R = 150, T = 20, B = 40;
  double ly0, ly1, lx0, lx1;
  explicit LogAxes(const ErrorPlot& p)
      : ly0(std::floor(std::log10(p.ymin))),
        ly1(std::max(ly0 + 1, std::ceil(std::log10(p.ymax)))),
        lx0(std::log2(p.xmin)),
        lx1(std::max(lx0 + 1, std::log2(p.xmax))) {}
  double px(double x) const { return L + (std::log2(x) - lx0) / (lx1 - lx0) * (W - L - R); }
  double py(double y) const {
    const double ly = std::clamp(std::log10(y), ly0, ly1);
    return T + (ly1 - ly) / (ly1 - ly0) * (H - T - B);
  }
};

void svg_log_grid(std::ostream& o, const LogAxes& a) {
  const double W = a.W, H = a.H, L = a.L, R = a.R, T = a.T, B = a.B;
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
    << H - T - B << "\" fill=\"none\" stroke=\"#888\"/>";
  for (double ly = a.ly0; ly <= a.ly1; ++ly) {
    const double y = T + (a.ly1 - ly) / (a.ly1 - a.ly0) * (H - T - B);
    o << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << coord(y) << "\" y2=\""
      << coord(y) << "\" stroke=\"#ddd\"/>";
    o << "<text x=\"" << L - 5 << "\" y=\"" << coord(y + 4)
      << "\" font-size=\"11\" text-anchor=\"end\">1e" << static_cast<int>(ly) << "</text>";
  }
  const int step = std::max(1, static_cast<int>((a.lx1 - a.lx0) / 8));
  for (int lx = static_cast<int>(a.lx0); lx <= static_cast<int>(a.lx1); lx += step) {
    const double x = a.px(std::ldexp(1.0, lx));
    o << "<line x1=\"" << coord(x) << "\" x2=\"" << coord(x) << "\" y1=\"" << T << "\" y2=\""
      << H - B << "\" stroke=\"#eee\"/>";
    o << "<text x=\"" << coord(x) << "\" y=\"" << H - B + 15
      << "\" font-size=\"11\" text-anchor=\"middle\">2^" << lx << "</text>";
  }
  o << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 5
    << "\" font-size=\"12\" text-anchor=\"middle\">position (octave start)</text>";
  o << "<text x=\"14\" y=\"" << (T + H - B) / 2 << "\" font-size=\"12\" text-anchor=\"middle\" "
    << "transform=\"rotate(-90 14 " << (T + H - B) / 2 << ")\">per-pair error (u)</text>";
}

// Series i: max solid, RMS dashed, and its legend entry.
void svg_error_series(std::ostream& o, const LogAxes& a, const ErrorSeries& s, std::size_t i) {
  const char* col = kColors[i % 8];
  for (int which = 0; which < 2; ++which) {
    const auto& pts = which == 0 ? s.max : s.rms;
    std::string d;
    for (const auto& [x, y] : pts) {
      if (!(std::isfinite(y) && y > 0)) continue;
      d += (d.empty() ? "M" : " L") + coord(a.px(x)) + " " + coord(a.py(y));
    }
    if (d.empty()) continue;
    o << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.8\""
      << (which ? " stroke-dasharray=\"5 3\"" : "") << "/>";
  }
  const double ly = a.T + 14 + 18.0 * static_cast<double>(i);
  o << "<line x1=\"" << a.W - a.R + 10 << "\" x2=\"" << a.W - a.R + 30 << "\" y1=\"" << ly
    << "\" y2=\"" << ly << "\" stroke=\"" << col << "\" stroke-width=\"2\"/>";
  o << "<text x=\"" << a.W - a.R + 35 << "\" y=\"" << ly + 4 << "\" font-size=\"11\">"
    << esc(s.kernel) << "</text>";
}

// Log-log plot of max (solid) and RMS (dashed) per-pair error vs position for one dtype.
std::string svg_error_vs_position(const json& r, const std::string& dtype) {
  const ErrorPlot p = error_plot(r, dtype);
  const LogAxes a(p);
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << a.W << "\" height=\"" << a.H
    << "\" viewBox=\"0 0 " << a.W << " " << a.H << "\" role=\"img\">";
  o << "<title>max and RMS per-pair error vs position, " << esc(dtype) << "</title>";
  svg_log_grid(o, a);
  for (std::size_t i = 0; i < p.series.size(); ++i) svg_error_series(o, a, p.series[i], i);
  const double ly = a.T + 14 + 18.0 * static_cast<double>(p.series.size()) + 6;
  o << "<text x=\"" << a.W - a.R + 10 << "\" y=\"" << ly << "\" font-size=\"10\">solid: max</text>";
  o << "<text x=\"" << a.W - a.R + 10 << "\" y=\"" << ly + 14
    << "\" font-size=\"10\">dashed: RMS</text>";
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
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" role=\"img\">";
  o << "<title>ULP error histogram, " << esc(dtype) << "</title>";
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
    << H - T - B << "\" fill=\"none\" stroke=\"#888\"/>";
  for (int t = 0; t <= 4; ++t) {
    const double y = T + (H - T - B) * (1 - t / 4.0);
    o << "<text x=\"" << L - 5 << "\" y=\"" << coord(y + 4)
      << "\" font-size=\"11\" text-anchor=\"end\">" << t * 25 << "%</text>";
  }
  for (std::size_t i = 0; i < ks.size(); ++i)
    for (std::size_t b = 0; b < nb && b < ks[i].second.size(); ++b) {
      const double h = ks[i].second[b] * (H - T - B);
      o << "<rect x=\"" << coord(L + gw * b + gw * 0.1 + bw * i) << "\" y=\"" << coord(H - B - h)
        << "\" width=\"" << coord(bw) << "\" height=\"" << coord(h) << "\" fill=\""
        << kColors[i % 8] << "\"/>";
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

std::string render_markdown(const json& r) {
  std::ostringstream o;
  o << "# ropecheck precision report\n\n" << summary_line(r) << "\n\n";
  o << "Reference: MPFR at " << cell(r["options"]["reference_bits"]) << " bits. Seed "
    << cell(r["options"]["seed"]) << ", " << cell(r["options"]["samples"])
    << " sampled vectors per kernel x dtype x spec x bucket, positions up to "
    << cell(r["options"]["max_position"])
    << ". Every maximum below is **sampled (lower bound)**.\n\n";
  for (const auto& t : build_tables(r)) {
    o << "## " << t.title << "\n\n";
    if (!t.note.empty()) o << t.note << "\n\n";
    if (t.rows.empty()) {
      o << "(none)\n\n";
      continue;
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
  o << "## Definitions\n\n";
  for (const auto& [k, v] : r["definitions"].items()) o << "- **" << k << "**: " << cell(v) << "\n";
  return o.str();
}

std::string render_html(const json& r) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"
    << "<title>ropecheck precision report</title><style>"
    << "body{font-family:sans-serif;margin:20px;max-width:1400px}"
    << "table{border-collapse:collapse;font-size:12px;margin-bottom:18px}"
    << "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    << "td:first-child,th:first-child{text-align:left}th{background:#f0f0f0}"
    << ".fail{color:#b00;font-weight:bold}.plots{display:flex;flex-wrap:wrap;gap:12px}"
    << "</style></head><body>\n";
  o << "<h1>ropecheck precision report</h1>\n<p>" << esc(summary_line(r)) << "</p>\n";
  o << "<p>Reference: MPFR at " << esc(cell(r["options"]["reference_bits"])) << " bits. Seed "
    << esc(cell(r["options"]["seed"])) << ". Every maximum is <b>sampled (lower bound)</b>.</p>\n";
  o << "<h2>Error vs position (per-pair error in u, log-log)</h2>\n<div class=\"plots\">";
  for (const auto& d : r["options"]["dtypes"])
    o << "<figure>" << svg_error_vs_position(r, d.get<std::string>()) << "<figcaption>"
      << esc(d.get<std::string>())
      << ": max (solid) and RMS (dashed) per octave</figcaption></figure>";
  o << "</div>\n<h2>ULP histograms</h2>\n<div class=\"plots\">";
  for (const auto& d : r["options"]["dtypes"])
    o << "<figure>" << svg_ulp_histogram(r, d.get<std::string>()) << "<figcaption>"
      << esc(d.get<std::string>())
      << ": fraction of elements per ULP-error bin</figcaption></figure>";
  o << "</div>\n";
  for (const auto& t : build_tables(r)) {
    o << "<h2>" << esc(t.title) << "</h2>\n";
    if (!t.note.empty()) o << "<p>" << esc(t.note) << "</p>\n";
    o << "<table><thead><tr>";
    for (const auto& h : t.head) o << "<th>" << esc(h) << "</th>";
    o << "</tr></thead><tbody>\n";
    for (const auto& row : t.rows) {
      o << "<tr>";
      for (const auto& c : row)
        o << ((c == "FAIL" || c == "NO") ? "<td class=\"fail\">" : "<td>") << esc(c) << "</td>";
      o << "</tr>\n";
    }
    o << "</tbody></table>\n";
  }
  o << "<h2>Definitions</h2>\n<ul>";
  for (const auto& [k, v] : r["definitions"].items())
    o << "<li><b>" << esc(k) << "</b>: " << esc(cell(v)) << "</li>";
  o << "</ul>\n</body></html>\n";
  return o.str();
}

std::string render_junit(const json& r) {
  int failures = 0;
  for (const auto& c : r["checks"]) failures += !c["passed"].get<bool>();
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"ropecheck report\" tests=\"" << r["checks"].size() << "\" failures=\""
    << failures << "\">\n";
  o << "  <testsuite name=\"report\" tests=\"" << r["checks"].size() << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"0\">\n";
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
