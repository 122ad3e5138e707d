// Markdown, HTML (self-contained, inline SVG) and JUnit renderings of the report document. The
// tables are built once (build_sections) and printed by both the Markdown and HTML writers.
#include "ropecheck/reports/report.hpp"

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

std::string fmt(const json& v, const char* f = "%.3g") {
  if (v.is_null()) return "n/a";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) {
    char b[64];
    std::snprintf(b, sizeof b, f, v.get<double>());
    return b;
  }
  return v.dump();
}

double dbl(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string() && v.get<std::string>() == "inf")
    return std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

struct Table {
  std::string title, note;
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

std::string safe_text(const json& s) {
  if (!s.value("supported", true)) return "unsupported";
  if (s["first_failure"].is_null()) return ">= " + fmt(s["safe_length"]) + " (search limit)";
  if (s["safe_length"].get<long long>() < 0) return "none (exceeded at 0)";
  return fmt(s["safe_length"]);
}

std::vector<Table> build_tables(const json& r) {
  std::vector<Table> out;
  // Headline.
  {
    Table t;
    t.title = "Precision-safe context length (headline)";
    t.note = "Largest position up to which every sampled probe kept max per-pair error <= " +
             fmt(r["options"]["safe_budget_u"]) +
             " u of the dtype (see definitions: sampled estimate, searched over powers of two "
             "then bisected).";
    t.head = {"kernel"};
    for (const auto& d : r["options"]["dtypes"]) t.head.push_back(d.get<std::string>());
    std::map<std::string, std::map<std::string, std::string>> cell;
    std::vector<std::string> kernels;
    for (const auto& k : r["options"]["kernels"]) kernels.push_back(k.get<std::string>());
    for (const auto& s : r["safe_context"])
      cell[s["kernel"].get<std::string>()][s["dtype"].get<std::string>()] = safe_text(s);
    for (const auto& k : kernels) {
      std::vector<std::string> row{k};
      for (const auto& d : r["options"]["dtypes"]) row.push_back(cell[k][d.get<std::string>()]);
      t.rows.push_back(row);
    }
    out.push_back(t);
  }
  // Headline by scaling variant (present when the variant sections ran).
  if (r.contains("variants") && !r["variants"].empty()) {
    Table t;
    t.title = "Precision-safe context length by scaling variant (headline, extended)";
    t.note = "Same search and budget as the headline, on one representative spec per variant "
             "(spec column; parameters in the variant sections below).";
    t.head = {"variant", "kernel"};
    for (const auto& d : r["options"]["dtypes"]) t.head.push_back(d.get<std::string>());
    for (const auto& v : r["variants"]) {
      std::map<std::string, std::map<std::string, std::string>> cell;
      std::vector<std::string> ks;
      for (const auto& s : v["safe_context"]) {
        const std::string k = s["kernel"].get<std::string>();
        if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
        cell[k][s["dtype"].get<std::string>()] = safe_text(s);
      }
      for (const auto& k : ks) {
        std::vector<std::string> row{fmt(v["name"]), k};
        for (const auto& d : r["options"]["dtypes"]) row.push_back(cell[k][d.get<std::string>()]);
        t.rows.push_back(row);
      }
    }
    out.push_back(t);
  }
  {
    Table t;
    t.title = "Checks";
    t.head = {"kernel", "dtype", "check", "result", "detail"};
    for (const auto& c : r["checks"])
      t.rows.push_back({fmt(c["kernel"]), fmt(c["dtype"]), fmt(c["check"]),
                        c["passed"].get<bool>() ? "pass" : "FAIL", fmt(c["message"])});
    out.push_back(t);
  }
  for (const auto& d : r["options"]["dtypes"]) {
    Table t;
    t.title = "Errors in " + d.get<std::string>() + " (sampled: maxima are lower bounds)";
    t.head = {"kernel",    "bucket", "vectors", "max ULP",    "mean ULP",      "RMS ULP",
              "p50",       "p99",    "p99.9",   "max pair u", "RMS pair u",    "NMSE",
              "max |err|", "not CR", "> 1 ULP", "> bound",    "bound u (max)", "utilization"};
    for (const auto& res : r["results"]) {
      if (res["dtype"] != d) continue;
      for (const auto& b : res["buckets"])
        t.rows.push_back({fmt(res["kernel"]), fmt(b["bucket"]), fmt(b["n_vectors"]),
                          fmt(b["ulp"]["max"]), fmt(b["ulp"]["mean"]), fmt(b["ulp"]["rms"]),
                          fmt(b["ulp"]["p50"]), fmt(b["ulp"]["p99"]), fmt(b["ulp"]["p999"]),
                          fmt(b["pair_error_u"]["max"]), fmt(b["pair_error_u"]["rms"]),
                          fmt(b["nmse"]), fmt(b["max_abs_error"]),
                          fmt(b["counts"]["not_correctly_rounded"]), fmt(b["counts"]["gt_1ulp"]),
                          fmt(b["counts"]["gt_bound"]), fmt(b["bound"]["max_u"]),
                          fmt(b["bound"]["max_utilization"])});
    }
    out.push_back(t);
  }
  // One section per scaling variant: the per-bucket statistics of the dtype tables.
  if (r.contains("variants"))
    for (const auto& v : r["variants"]) {
      Table t;
      t.title = "Variant " + fmt(v["name"]) + ": " + fmt(v["model"]);
      t.note = "spec: " + fmt(v["spec"].value("detail", json())) +
               ". Sampled (maxima are lower bounds); pair errors relative to s ||x_pair|| with s "
               "the magnitude including the attention factor.";
      t.head = {"kernel",  "dtype",      "bucket",     "vectors", "max ULP",
                "RMS ULP", "p99",        "max pair u", "RMS pair u", "NMSE",
                "not CR",  "> bound",    "utilization", "angle share"};
      for (const auto& res : v["results"])
        for (const auto& b : res["buckets"])
          t.rows.push_back({fmt(res["kernel"]), fmt(res["dtype"]), fmt(b["bucket"]),
                            fmt(b["n_vectors"]), fmt(b["ulp"]["max"]), fmt(b["ulp"]["rms"]),
                            fmt(b["ulp"]["p99"]), fmt(b["pair_error_u"]["max"]),
                            fmt(b["pair_error_u"]["rms"]), fmt(b["nmse"]),
                            fmt(b["counts"]["not_correctly_rounded"]),
                            fmt(b["counts"]["gt_bound"]), fmt(b["bound"]["max_utilization"]),
                            fmt(b["angle_vs_rotation"]["angle_share"], "%.2f")});
      out.push_back(t);
    }
  if (r.contains("dynamic_composition")) {
    const auto& dc = r["dynamic_composition"];
    Table t;
    t.title = "Dynamic NTK: where composition breaks across the length threshold";
    t.note = fmt(dc["note"]) + " spec: " + fmt(dc["spec"].value("detail", json())) +
             "; threshold L0 = " + fmt(dc["threshold"]) + ".";
    t.head = {"seq_len L", "base' (f64)", "max angle mismatch (rad)", "composes"};
    for (const auto& row : dc["rows"])
      t.rows.push_back({fmt(row["seq_len"]), fmt(row["base_f64"], "%.9g"),
                        fmt(row["max_angle_mismatch_rad"]), fmt(row["composes"])});
    out.push_back(t);
  }
  {
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
        t.rows.push_back({fmt(res["kernel"]), fmt(res["dtype"]), fmt(b["bucket"]),
                          fmt(res["policy"]["recipe"]) + " (" + fmt(res["policy"]["angle"]) + ")",
                          fmt(a["angle_max_u"]), fmt(a["angle_rms_u"]), fmt(a["rotation_max_u"]),
                          fmt(a["rotation_rms_u"]), fmt(b["pair_error_u"]["max"]),
                          fmt(a["angle_share"], "%.2f")});
      }
    out.push_back(t);
  }
  {
    Table t;
    t.title = "ScoresDependOnlyOnOffset: where relative scores break";
    t.note =
        "Score error of <K(q,D),K(k,D+c)> against the exact s^2 q^T R_c k, in u times "
        "s^2||q|| ||k||; 'holds up to' is the largest shift D whose probes stayed within "
        "the budget.";
    t.head = {"kernel", "dtype", "budget u", "holds up to shift", "breaks at", "error there (u)"};
    for (const auto& s : r["score_offset"])
      t.rows.push_back({fmt(s["kernel"]), fmt(s["dtype"]), fmt(s["budget_u"]), safe_text(s),
                        fmt(s.value("breaks_at", json())),
                        fmt(s.value("failure_error_u", json()))});
    out.push_back(t);
  }
  {
    Table t;
    t.title = "Worst cases (per kernel x dtype, over all buckets)";
    t.note = "Reproduce with the `reproduce` command stored in report.json (ropecheck eval).";
    t.head = {"kernel",  "dtype",      "metric",           "value", "spec", "position",
              "element", "input bits", "expected (exact)", "got"};
    for (const auto& res : r["results"]) {
      for (const char* metric : {"ulp", "pair_error_u"}) {
        const json* best = nullptr;
        double bv = -1;
        for (const auto& b : res["buckets"]) {
          const double v = dbl(b[metric]["max"]);
          if (!b[metric]["worst"].is_null() && (v > bv || (std::isnan(v) && !std::isnan(bv)))) {
            bv = v;
            best = &b[metric]["worst"];
          }
        }
        if (!best) continue;
        const json& w = *best;
        const json& sp = w["spec"];
        std::string bits = fmt(w["input_bits"][0]) + " " + fmt(w["input_bits"][1]);
        std::string got = w["got"].is_array()
                              ? fmt(w["got"][0], "%.9g") + ", " + fmt(w["got"][1], "%.9g")
                              : fmt(w["got"], "%.9g");
        t.rows.push_back(
            {fmt(res["kernel"]), fmt(res["dtype"]),
             std::string(metric) == "ulp" ? "max ULP" : "max pair u", fmt(w["value"]),
             "d=" + fmt(sp["head_dim"]) + " base=" + fmt(sp["base"]) + " " + fmt(sp["layout"]),
             fmt(w["position"]), fmt(w["element"]), bits, fmt(w["expected"]), got});
      }
    }
    out.push_back(t);
  }
  {
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
        t.rows.push_back({fmt(s["kernel"]), fmt(s["dtype"]), fmt(c["input"]), fmt(c["position"]),
                          fmt(c["got"][0], "%.6g") + ", " + fmt(c["got"][1], "%.6g") + " (" +
                              fmt(c["got_bits"][0]) + " " + fmt(c["got_bits"][1]) + ")",
                          fmt(c["policy"]), c["follows_policy"].get<bool>() ? "yes" : "NO"});
    out.push_back(t);
  }
  if (r.contains("baseline")) {
    Table t;
    const auto& b = r["baseline"];
    t.title = "Baseline comparison";
    t.note = "Regression: a max grew beyond " + fmt(b["factor"]) + " x max(baseline, " +
             fmt(b["floor"]) + "). Compared buckets: " + fmt(b["compared_buckets"]) +
             "; same options as the baseline: " + fmt(b["same_options"]) + ".";
    t.head = {"kernel", "dtype", "bucket", "metric", "baseline", "now"};
    for (const auto& g : b["regressions"])
      t.rows.push_back({fmt(g["kernel"]), fmt(g["dtype"]), fmt(g["bucket"]), fmt(g["metric"]),
                        fmt(g["baseline"]), fmt(g["now"])});
    out.push_back(t);
  }
  {
    Table t;
    t.title = "Environment";
    t.head = {"key", "value"};
    for (const auto& [k, v] : r["environment"].items()) t.rows.push_back({k, fmt(v)});
    out.push_back(t);
  }
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

std::string num_s(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// Log-log plot of max (solid) and RMS (dashed) per-pair error vs position for one dtype.
std::string svg_error_vs_position(const json& r, const std::string& dtype) {
  struct Series {
    std::string kernel;
    std::vector<std::pair<double, double>> max, rms;
  };
  std::vector<Series> ss;
  double xmin = 1, xmax = 2, ymin = std::numeric_limits<double>::infinity(), ymax = 0;
  for (const auto& res : r["results"]) {
    if (res["dtype"] != dtype) continue;
    Series s{res["kernel"].get<std::string>(), {}, {}};
    for (const auto& o : res["octaves"]) {
      const double x = o["position_lo"].get<double>();
      if (x < 1) continue;  // position 0 has no place on a log axis; it is in the tables
      const double a = dbl(o["max_pair_u"]), b = dbl(o["rms_pair_u"]);
      xmax = std::max(xmax, x);
      for (double y : {a, b})
        if (std::isfinite(y) && y > 0) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
      s.max.push_back({x, a});
      s.rms.push_back({x, b});
    }
    ss.push_back(s);
  }
  if (!(ymax > 0)) ymin = 0.01, ymax = 1;
  const double ly0 = std::floor(std::log10(ymin)),
               ly1 = std::max(ly0 + 1, std::ceil(std::log10(ymax)));
  const double lx0 = std::log2(xmin), lx1 = std::max(lx0 + 1, std::log2(xmax));
  const double W = 640, H = 340, L = 60, R = 150, T = 20, B = 40;
  auto px = [&](double x) { return L + (std::log2(x) - lx0) / (lx1 - lx0) * (W - L - R); };
  auto py = [&](double y) {
    const double ly = std::clamp(std::log10(y), ly0, ly1);
    return T + (ly1 - ly) / (ly1 - ly0) * (H - T - B);
  };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" role=\"img\">";
  o << "<title>max and RMS per-pair error vs position, " << esc(dtype) << "</title>";
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
    << H - T - B << "\" fill=\"none\" stroke=\"#888\"/>";
  for (double ly = ly0; ly <= ly1; ++ly) {
    const double y = T + (ly1 - ly) / (ly1 - ly0) * (H - T - B);
    o << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << num_s(y) << "\" y2=\""
      << num_s(y) << "\" stroke=\"#ddd\"/>";
    o << "<text x=\"" << L - 5 << "\" y=\"" << num_s(y + 4)
      << "\" font-size=\"11\" text-anchor=\"end\">1e" << static_cast<int>(ly) << "</text>";
  }
  const int step = std::max(1, static_cast<int>((lx1 - lx0) / 8));
  for (int lx = static_cast<int>(lx0); lx <= static_cast<int>(lx1); lx += step) {
    const double x = px(std::ldexp(1.0, lx));
    o << "<line x1=\"" << num_s(x) << "\" x2=\"" << num_s(x) << "\" y1=\"" << T << "\" y2=\""
      << H - B << "\" stroke=\"#eee\"/>";
    o << "<text x=\"" << num_s(x) << "\" y=\"" << H - B + 15
      << "\" font-size=\"11\" text-anchor=\"middle\">2^" << lx << "</text>";
  }
  o << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 5
    << "\" font-size=\"12\" text-anchor=\"middle\">position (octave start)</text>";
  o << "<text x=\"14\" y=\"" << (T + H - B) / 2 << "\" font-size=\"12\" text-anchor=\"middle\" "
    << "transform=\"rotate(-90 14 " << (T + H - B) / 2 << ")\">per-pair error (u)</text>";
  for (std::size_t i = 0; i < ss.size(); ++i) {
    const char* col = kColors[i % 8];
    for (int which = 0; which < 2; ++which) {
      const auto& pts = which == 0 ? ss[i].max : ss[i].rms;
      std::string d;
      for (const auto& [x, y] : pts) {
        if (!(std::isfinite(y) && y > 0)) continue;
        d += (d.empty() ? "M" : " L") + num_s(px(x)) + " " + num_s(py(y));
      }
      if (d.empty()) continue;
      o << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.8\""
        << (which ? " stroke-dasharray=\"5 3\"" : "") << "/>";
    }
    const double ly = T + 14 + 18.0 * static_cast<double>(i);
    o << "<line x1=\"" << W - R + 10 << "\" x2=\"" << W - R + 30 << "\" y1=\"" << ly << "\" y2=\""
      << ly << "\" stroke=\"" << col << "\" stroke-width=\"2\"/>";
    o << "<text x=\"" << W - R + 35 << "\" y=\"" << ly + 4 << "\" font-size=\"11\">"
      << esc(ss[i].kernel) << "</text>";
  }
  const double ly = T + 14 + 18.0 * static_cast<double>(ss.size()) + 6;
  o << "<text x=\"" << W - R + 10 << "\" y=\"" << ly << "\" font-size=\"10\">solid: max</text>";
  o << "<text x=\"" << W - R + 10 << "\" y=\"" << ly + 14
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
    o << "<text x=\"" << L - 5 << "\" y=\"" << num_s(y + 4)
      << "\" font-size=\"11\" text-anchor=\"end\">" << t * 25 << "%</text>";
  }
  for (std::size_t i = 0; i < ks.size(); ++i)
    for (std::size_t b = 0; b < nb && b < ks[i].second.size(); ++b) {
      const double h = ks[i].second[b] * (H - T - B);
      o << "<rect x=\"" << num_s(L + gw * b + gw * 0.1 + bw * i) << "\" y=\"" << num_s(H - B - h)
        << "\" width=\"" << num_s(bw) << "\" height=\"" << num_s(h) << "\" fill=\""
        << kColors[i % 8] << "\"/>";
    }
  for (std::size_t b = 0; b < nb && b < labels.size(); ++b) {
    const double x = L + gw * (b + 0.5), y = H - B + 10;
    o << "<text x=\"" << num_s(x) << "\" y=\"" << y << "\" font-size=\"10\" text-anchor=\"end\" "
      << "transform=\"rotate(-45 " << num_s(x) << " " << y << ")\">" << esc(labels[b]) << "</text>";
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
  o << "Reference: MPFR at " << fmt(r["options"]["reference_bits"]) << " bits. Seed "
    << fmt(r["options"]["seed"]) << ", " << fmt(r["options"]["samples"])
    << " sampled vectors per kernel x dtype x spec x bucket, positions up to "
    << fmt(r["options"]["max_position"])
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
  for (const auto& [k, v] : r["definitions"].items()) o << "- **" << k << "**: " << fmt(v) << "\n";
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
  o << "<p>Reference: MPFR at " << esc(fmt(r["options"]["reference_bits"])) << " bits. Seed "
    << esc(fmt(r["options"]["seed"])) << ". Every maximum is <b>sampled (lower bound)</b>.</p>\n";
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
    o << "<li><b>" << esc(k) << "</b>: " << esc(fmt(v)) << "</li>";
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
    o << "    <testcase classname=\"" << esc(cls) << "\" name=\"" << esc(fmt(c["check"]))
      << "\" time=\"0\">";
    if (!c["passed"].get<bool>())
      o << "<failure message=\"" << esc(fmt(c["message"])) << "\">" << esc(fmt(c["message"]))
        << "</failure>";
    else
      o << "<system-out>" << esc(fmt(c["message"])) << "</system-out>";
    o << "</testcase>\n";
  }
  o << "  </testsuite>\n</testsuites>\n";
  return o.str();
}

}  // namespace ropecheck::reports
