// The two pages, Markdown and HTML (self-contained, inline SVG): the lead (the validation's
// verdict, a plugin's domain, the engine atlas, the verdict and one conclusion per dtype), then
// the tables of build_tables() (HTML: the charts after the headline). Map of the render stage:
// render.hpp.
#include "render.hpp"
#include "ropecheck/reports/report.hpp"

#include <sstream>

namespace ropecheck::reports {

namespace detail {

using nlohmann::json;

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

}  // namespace detail

using detail::build_tables;
using detail::cell;
using detail::esc;
using detail::html_atlas;
using detail::html_table;
using detail::md_atlas;
using detail::md_cell;
using detail::md_table;
using detail::summary_line;
using detail::svg_angle_split;
using detail::svg_error_vs_position;
using detail::svg_ulp_histogram;
using detail::Table;
using nlohmann::json;

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

}  // namespace ropecheck::reports
