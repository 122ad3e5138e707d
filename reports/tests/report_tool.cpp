// Checks used by the report ctest entries (no Python, no GTest):
//   report_tool validate-json SCHEMA FILE   JSON parses and validates against the schema
//   report_tool check-html FILE             well-formed, self-contained HTML with inline SVG
//   report_tool check-xml FILE              well-formed XML (JUnit)
//   report_tool check-md FILE               Markdown has the headline and the required sections
//   report_tool check-headline FILE         report.json's headline: a row per kernel x dtype, every
//                                            supported cell a number or an explicit ">= L", a
//                                            conclusion per dtype, a verdict
//   report_tool check-atlas JSON MD         the engine atlas: every engine has rows with figures,
//                                            a limit and a fix, a sentence with its upstream, its
//                                            checks in the report's; report.md leads with it
//   report_tool same-json A B               equal apart from the `environment` block
//   report_tool same-json-merged A B        same text apart from `environment` and `shard`
//   report_tool png-size FILE MIN_W MIN_H   a PNG at least MIN_W x MIN_H, non-trivial size
//   report_tool browser CHROMIUM HTML PNG    renders HTML in headless Chromium: every chart has
//   drawn
//                                            content inside its plot area and nothing outside it,
//                                            the page has no horizontal overflow (layout measured
//                                            by the browser, see geometry()); then a screenshot,
//                                            png-size 1200 3000. Exit 77 (ctest skip) when CHROMIUM
//                                            is absent
//   report_tool browser-must-fail CHROMIUM HTML   the same check on two doctored copies of HTML
//                                            (a chart emptied, a too-wide block added) must fail
//                                            for that reason: shows the check can fail
// Exit 0 when the check holds, 1 when it does not (with the reasons on stderr), 2 on bad usage.
#include "ropecheck/reports/report.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The engine atlas block (atlas.cpp) as a reader relies on it.
std::vector<std::string> atlas_problems(const nlohmann::json& r, const std::string& md) {
  std::vector<std::string> errs;
  if (!r.contains("atlas")) return {"no atlas block"};
  const auto& at = r["atlas"];
  const std::size_t n_ctx = at["contexts"].size();
  std::set<std::string> check_kernels;
  for (const auto& c : r["checks"])
    if (c["check"] == "MatchesReferenceWithinBound")
      check_kernels.insert(c["kernel"].get<std::string>() + " " + c["dtype"].get<std::string>());
  for (std::size_t i = 0; i < at["engines"].size(); ++i) {
    const std::string e = at["engines"][i]["name"];
    int rows = 0;
    for (const auto& row : at["rows"]) {
      if (row["engine"] != e || !row["supported"].get<bool>()) continue;
      ++rows;
      if (row["at"].size() != n_ctx || row["fix"].get<std::string>().empty())
        errs.push_back(e + ": a row without its figures or fix");
      const std::string k = e + "@" + row["base_label"].get<std::string>();
      if (!check_kernels.count(k + " " + row["dtype"].get<std::string>()))
        errs.push_back(k + " " + row["dtype"].get<std::string>() +
                       ": no bound check in the report's checks");
    }
    if (rows == 0) errs.push_back(e + ": no supported row");
    const std::string text = at["sentences"][i]["text"];
    if (text.rfind(e, 0) != 0) errs.push_back(e + ": sentence '" + text + "' is not its own");
    if (at["engines"][i]["upstream"].get<std::string>().find('@') == std::string::npos)
      errs.push_back(e + ": upstream without a commit");
  }
  const auto atlas_at = md.find("## Engine atlas"), verdict_at = md.find("**Verdict.**");
  if (atlas_at == std::string::npos || md.find("\n## ") != atlas_at - 1 || atlas_at > verdict_at)
    errs.push_back("report.md does not lead with the engine atlas");
  return errs;
}

int png_size(const std::string& file, unsigned min_w, unsigned min_h);

int report(const std::vector<std::string>& errs, const std::string& what) {
  for (const auto& e : errs) std::cerr << what << ": " << e << "\n";
  if (errs.empty()) std::cout << what << ": ok\n";
  return errs.empty() ? 0 : 1;
}

int png_size(const std::string& file, unsigned min_w, unsigned min_h) {
  const std::string p = slurp(file);
  std::vector<std::string> errs;
  const std::string sig = "\x89PNG\r\n\x1a\n";
  if (p.size() < 24 || p.compare(0, 8, sig) != 0 || p.compare(12, 4, "IHDR") != 0) {
    errs.push_back("not a PNG");
  } else {
    auto be32 = [&](std::size_t o) {
      return (static_cast<unsigned>(static_cast<unsigned char>(p[o])) << 24) |
             (static_cast<unsigned>(static_cast<unsigned char>(p[o + 1])) << 16) |
             (static_cast<unsigned>(static_cast<unsigned char>(p[o + 2])) << 8) |
             static_cast<unsigned>(static_cast<unsigned char>(p[o + 3]));
    };
    const unsigned w = be32(16), h = be32(20);
    if (w < min_w || h < min_h)
      errs.push_back("PNG is " + std::to_string(w) + "x" + std::to_string(h));
    // A blank page compresses to a few KB; a rendered report with tables and plots does not.
    if (p.size() < 20000) errs.push_back("PNG only " + std::to_string(p.size()) + " bytes");
  }
  return report(errs, file);
}

std::vector<std::string> headline_problems(const std::string& text) {
  const auto doc = nlohmann::json::parse(text);
  std::vector<std::string> errs;
  if (!doc.contains("headline")) return {"no headline"};
  const auto& h = doc["headline"];
  const auto& o = doc["options"];
  if (h["rows"].size() != o["kernels"].size() * o["dtypes"].size())
    errs.push_back("rows: " + std::to_string(h["rows"].size()) + ", not one per kernel x dtype");
  if (h["conclusions"].size() != o["dtypes"].size()) errs.push_back("not one conclusion per dtype");
  if (h["verdict"].get<std::string>().empty()) errs.push_back("empty verdict");
  for (const auto& row : h["rows"]) {
    const std::string who =
        row["kernel"].get<std::string>() + " " + row["dtype"].get<std::string>();
    if (!row["supported"].get<bool>()) continue;
    if (row["at"].size() != h["contexts"].size()) errs.push_back(who + ": a context missing");
    for (const auto& c : row["at"])
      if (!c["max_pair_u"].is_number() && !c["max_pair_u"].is_string())
        errs.push_back(who + ": no figure at " + c["label"].get<std::string>());
    for (const auto& e : row["exceeds"])
      if (e["context"].is_null() && e["label"].get<std::string>().rfind(">= ", 0) != 0)
        errs.push_back(who + ": crossing neither a context nor '>= L'");
  }
  return errs;
}

// What the browser measures, injected into a temporary copy of the report (the report itself has
// no script): per svg.chart, the marks of its .series groups against its .plot-area rectangle
// (getBBox, in the chart's own units), and the document's scroll width against the viewport's.
// The verdict lands in <body data-geometry="..."> for --dump-dom.
const char* kGeometryScript = R"(<script>
window.addEventListener('load', () => {
  const out = [];
  const de = document.documentElement;
  if (de.scrollWidth > de.clientWidth + 1)
    out.push('horizontal overflow: page is ' + de.scrollWidth + 'px wide, viewport ' + de.clientWidth + 'px');
  const svgs = document.querySelectorAll('svg');
  const charts = document.querySelectorAll('svg.chart');
  if (charts.length === 0) out.push('no charts');
  if (svgs.length !== charts.length) out.push((svgs.length - charts.length) + ' svg without class chart');
  charts.forEach((svg) => {
    const name = svg.getAttribute('data-chart') || '?';
    const area = svg.querySelector('.plot-area');
    if (!area) { out.push('chart ' + name + ': no plot area'); return; }
    const a = area.getBBox(), eps = 0.6;
    let inside = 0, outside = 0;
    svg.querySelectorAll('.series path, .series rect, .series circle, .series line').forEach((m) => {
      const b = m.getBBox();
      if (b.width <= 0 && b.height <= 0) return;
      if (b.x >= a.x - eps && b.y >= a.y - eps && b.x + b.width <= a.x + a.width + eps &&
          b.y + b.height <= a.y + a.height + eps) ++inside; else ++outside;
    });
    if (inside === 0) out.push('chart ' + name + ': no drawn content within its axes');
    if (outside > 0) out.push('chart ' + name + ': ' + outside + ' marks outside its axes');
    const r = svg.getBoundingClientRect();
    if (r.width < 300 || r.height < 120) out.push('chart ' + name + ': drawn ' + Math.round(r.width) + 'x' + Math.round(r.height) + 'px');
  });
  document.body.setAttribute('data-geometry', out.length ? out.join('; ') : 'ok ' + charts.length + ' charts');
});
</script>)";

std::string chromium_command(const std::string& chromium, const std::string& profile) {
  return chromium +
         " --headless --no-sandbox --disable-gpu --disable-background-networking"
         " --disable-component-update --disable-sync --no-first-run --hide-scrollbars"
         " --user-data-dir=" +
         profile;
}

// Runs the geometry script over a copy of `html` in a 1200 px wide window; returns the problems.
std::vector<std::string> geometry(const std::string& chromium, const std::string& html) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/ropecheck-chromium-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;
  std::string page = html;
  const auto at = page.rfind("</body>");
  if (at == std::string::npos) throw std::runtime_error("no </body> in the report");
  page.insert(at, kGeometryScript);
  std::ofstream(dir + "/page.html") << page;
  const std::string cmd = chromium_command(chromium, dir + "/profile") +
                          " --window-size=1200,900 --virtual-time-budget=3000 --dump-dom file://" +
                          dir + "/page.html > " + dir + "/dom.html 2> /dev/null";
  const int rc = std::system(cmd.c_str());
  const std::string dom = fs::exists(dir + "/dom.html") ? slurp(dir + "/dom.html") : "";
  fs::remove_all(dir);
  std::smatch m;
  if (!std::regex_search(dom, m, std::regex("data-geometry=\"([^\"]*)\"")))
    return {"chromium measured nothing (status " + std::to_string(rc) + ", " +
            std::to_string(dom.size()) + " bytes of DOM)"};
  if (m[1].str().rfind("ok ", 0) == 0) {
    std::cout << "geometry: " << m[1].str() << ", no horizontal overflow\n";
    return {};
  }
  std::vector<std::string> errs;
  std::string all = m[1].str();
  for (std::size_t p = 0; p != std::string::npos;) {
    const auto q = all.find("; ", p);
    errs.push_back(all.substr(p, q == std::string::npos ? q : q - p));
    p = q == std::string::npos ? q : q + 2;
  }
  return errs;
}

int screenshot(const std::string& chromium, const std::string& html, const std::string& png) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/ropecheck-chromium-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  fs::remove(png);
  const std::string cmd = chromium_command(chromium, tmpl) + " --screenshot=" + png +
                          " --window-size=1200,3000 file://" + fs::absolute(html).string() +
                          " > /dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  fs::remove_all(tmpl);
  if (!fs::exists(png)) {
    std::cerr << "chromium wrote no screenshot (status " << rc << ")\n";
    return 1;
  }
  return png_size(png, 1200, 3000);
}

// Doctored copies of a good report that the browser check must reject, each for its reason.
std::vector<std::pair<std::string, std::string>> doctored(const std::string& html) {
  std::vector<std::pair<std::string, std::string>> out;
  // The first chart's series emptied: axes, grid and legend still drawn, no data.
  const auto svg = html.find("<svg");
  const auto end = html.find("</svg>", svg);
  if (svg == std::string::npos || end == std::string::npos) throw std::runtime_error("no chart");
  std::string chart = html.substr(svg, end - svg);
  chart = std::regex_replace(chart, std::regex("<g class=\"series\"([^>]*)>.*?</g>"),
                             "<g class=\"series\"$1></g>");
  out.push_back(
      {html.substr(0, svg) + chart + html.substr(end), "no drawn content within its axes"});
  // A block wider than the window: the page scrolls sideways.
  std::string wide = html;
  wide.insert(wide.find("</h1>") + 5, "<div style=\"width:2600px\">wide</div>");
  out.push_back({wide, "horizontal overflow"});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ropecheck::reports;
  const std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 3 && a[0] == "validate-json") {
      const auto schema = nlohmann::json::parse(slurp(a[1]));
      const auto doc = nlohmann::json::parse(slurp(a[2]));
      return report(validate_schema(schema, doc), a[2]);
    }
    if (a.size() == 2 && a[0] == "check-html") {
      const std::string h = slurp(a[1]);
      auto errs = check_html(h);
      if (h.find("<svg") == std::string::npos) errs.push_back("no inline <svg> plot");
      if (h.find("<script") != std::string::npos) errs.push_back("contains a <script>");
      return report(errs, a[1]);
    }
    if (a.size() == 2 && a[0] == "check-xml") return report(check_xml(slurp(a[1])), a[1]);
    if (a.size() == 2 && a[0] == "check-md") {
      const std::string m = slurp(a[1]);
      std::vector<std::string> errs;
      for (const char* s :
           {"# ropecheck precision report", "**Verdict.**",
            "## Headline: max per-pair error by context length", "## Precision-safe context length",
            "## Angle-table error vs rotation error", "## Special values", "## Worst cases",
            "## Environment", "sampled (lower bound)"})
        if (m.find(s) == std::string::npos) errs.push_back(std::string("missing '") + s + "'");
      return report(errs, a[1]);
    }
    if (a.size() == 2 && a[0] == "check-headline")
      return report(headline_problems(slurp(a[1])), a[1]);
    if (a.size() == 3 && a[0] == "check-atlas")
      return report(atlas_problems(nlohmann::json::parse(slurp(a[1])), slurp(a[2])), a[1]);
    if (a.size() == 3 && a[0] == "same-json") {
      auto x = nlohmann::json::parse(slurp(a[1]));
      auto y = nlohmann::json::parse(slurp(a[2]));
      x.erase("environment");
      y.erase("environment");
      if (x == y) return report({}, a[1] + " == " + a[2]);
      const auto patch = nlohmann::json::diff(x, y);
      return report({"differ (first differences): " + patch.dump().substr(0, 2000)}, "same-json");
    }
    if (a.size() == 3 && a[0] == "same-json-merged") {
      // A merged sharded report vs the unsharded one: byte-identical JSON text apart from the
      // environment block and the shard metadata (dump() also tells 1 from 1.0).
      auto x = nlohmann::json::parse(slurp(a[1]));
      auto y = nlohmann::json::parse(slurp(a[2]));
      for (auto* j : {&x, &y}) {
        j->erase("environment");
        j->erase("shard");
      }
      if (x.dump() == y.dump()) return report({}, a[1] + " == " + a[2]);
      const auto patch = nlohmann::json::diff(x, y);
      return report({"differ (first differences): " + patch.dump().substr(0, 2000)},
                    "same-json-merged");
    }
    if (a.size() == 4 && a[0] == "png-size")
      return png_size(a[1], static_cast<unsigned>(std::stoul(a[2])),
                      static_cast<unsigned>(std::stoul(a[3])));
    if ((a.size() == 4 && a[0] == "browser") || (a.size() == 3 && a[0] == "browser-must-fail")) {
      namespace fs = std::filesystem;
      if (!fs::exists(a[1])) {
        // CI installs chromium (.ci/install-deps --tests) and sets this: there, a skip is a
        // failure.
        if (std::getenv("ROPECHECK_REQUIRE_BROWSER")) {
          std::cerr << a[1] << " not installed and ROPECHECK_REQUIRE_BROWSER is set\n";
          return 1;
        }
        std::cout << "skipped: " << a[1] << " not installed\n";
        return 77;
      }
      if (!fs::exists(a[2])) throw std::runtime_error(a[2] + " missing (run report_smoke first)");
      const std::string html = slurp(a[2]);
      if (a[0] == "browser-must-fail") {
        std::vector<std::string> errs;
        for (const auto& [page, reason] : doctored(html)) {
          const auto found = geometry(a[1], page);
          bool named = false;
          for (const auto& e : found) named = named || e.find(reason) != std::string::npos;
          std::cout << "doctored (" << reason << "): " << found.size() << " problem(s) found\n";
          if (!named) errs.push_back("a report with " + reason + " passed the browser check");
        }
        return report(errs, "browser-must-fail");
      }
      const int rc = report(geometry(a[1], html), a[2]);
      return rc ? rc : screenshot(a[1], a[2], a[3]);
    }
  } catch (const std::exception& e) {
    std::cerr << "report_tool: " << e.what() << "\n";
    return 1;
  }
  std::cerr
      << "usage: report_tool validate-json|check-html|check-xml|check-md|same-json|png-size ...\n";
  return 2;
}
