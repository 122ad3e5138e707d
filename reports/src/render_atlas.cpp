// The engine atlas block of the pages (report.json "atlas", atlas.cpp): its table, one line per
// engine (what limits it, what would fix it, where its recipe comes from) and, in HTML, its
// charts; rendered before the rest of the report.
#include "render.hpp"

#include <string>
#include <vector>

namespace ropecheck::reports::detail {

using nlohmann::json;

namespace {

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
      "rotation's roundings); not run: the engine refused positions there (its cache extent or "
      "position domain), so no figure. + marks engines whose trig is modelled, not reproduced. "
      "Sampled "
      "maxima are lower bounds.";
  t.head = {"dtype", "engine", "base"};
  for (const auto& c : a["contexts"]) t.head.push_back("max at " + cell(c["label"]));
  for (const auto& f : a["factors"]) t.head.push_back("> " + cell(f) + " u from");
  t.head.push_back("limited by (at " + longest + ")");
  for (const auto& d : a["dtypes"])
    for (const auto& row : a["rows"]) {
      // An engine that does not run a dtype (ggml: no bf16 rope) has no row for it; one that
      // does not implement a model's spec has one saying so.
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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace ropecheck::reports::detail
