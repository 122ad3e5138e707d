// Internal: the render stage — report.json (the document) as Markdown, HTML and JUnit. Every
// number comes from the document and is only formatted here. The tables are built once
// (build_tables, in reading order) and printed by both the Markdown and the HTML writer.
//   render.cpp          the two pages: lead (validation, domain, atlas, verdict), tables, charts
//   render_tables.cpp   one function per section table, and build_tables(): their order
//   render_atlas.cpp    the engine atlas block (table, one line per engine, its charts)
//   render_charts.cpp   the inline SVG charts
//   render_cells.cpp    cell formatting and escaping shared by all of them
//   render_junit.cpp    junit.xml
// A new section computed into the document: a Table function in render_tables.cpp and its place
// in build_tables(); both pages print it. A new output format: a render_<format>.cpp over the
// document (or over build_tables()), declared in report.hpp.
#pragma once

#include "document.hpp"

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace ropecheck::reports::detail {

// ---- cells (render_cells.cpp) -------------------------------------------------------------------
// A table cell: numbers with `significant` digits (verify::fmt), integers exactly, null as n/a,
// booleans as yes/no, strings (including "nan"/"inf" numbers) as they are.
std::string cell(const nlohmann::json& v, int significant = 3);
// A share in [0, 1] with two decimals.
std::string share_cell(const nlohmann::json& v);
// Markdown cell text: '|' escaped, newlines as spaces.
std::string md_cell(const std::string& s);
// HTML/XML text and attribute escaping.
std::string esc(const std::string& s);
// "All 24 checks hold (exit 0)." / "2 of 24 checks FAILED (exit 1).".
std::string summary_line(const nlohmann::json& r);

// ---- tables (render_tables.cpp) -----------------------------------------------------------------
struct Table {
  std::string title, note;
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  bool collapsed = false;  // HTML: inside <details> (long sections a reader opens on demand)
  std::string html_class;  // HTML: the table's class
};
// A headline cell: "3.58e3 u (4e-13), angle 1.00" (the atlas prints the same cells).
std::string headline_text(const nlohmann::json& c);
// The report's tables in reading order; the headline, when present, first (the HTML page puts the
// charts after it).
std::vector<Table> build_tables(const nlohmann::json& r);

// ---- the two pages' table writers (render.cpp) --------------------------------------------------
void md_table(std::ostream& o, const Table& t);
void html_table(std::ostream& o, const Table& t);

// ---- the engine atlas (render_atlas.cpp) --------------------------------------------------------
// The atlas first: the checks' status, the engines' table, one line per engine (HTML: the
// engines' charts); then the heading of the rest of the report.
void md_atlas(std::ostream& o, const nlohmann::json& r);
void html_atlas(std::ostream& o, const nlohmann::json& r);

// ---- charts (render_charts.cpp): inline SVG, "" when there is nothing to draw -------------------
// Max (solid) and RMS (dashed) per-pair error per octave of positions, kernels as series.
std::string svg_error_vs_position(const nlohmann::json& r, const std::string& dtype);
// Angle vs rotation RMS per-pair error by position bucket.
std::string svg_angle_split(const nlohmann::json& r, const std::string& dtype);
// Fraction of elements per ULP-error bin.
std::string svg_ulp_histogram(const nlohmann::json& r, const std::string& dtype);

}  // namespace ropecheck::reports::detail
