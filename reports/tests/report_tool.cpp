// Checks used by the report ctest entries (no Python, no GTest):
//   report_tool validate-json SCHEMA FILE   JSON parses and validates against the schema
//   report_tool check-html FILE             well-formed, self-contained HTML with inline SVG
//   report_tool check-xml FILE              well-formed XML (JUnit)
//   report_tool check-md FILE               Markdown has the headline and the required sections
//   report_tool same-json A B               equal apart from the `environment` block
//   report_tool same-json-merged A B        same text apart from `environment` and `shard`
//   report_tool png-size FILE MIN_W MIN_H   a PNG at least MIN_W x MIN_H, non-trivial size
//   report_tool browser CHROMIUM HTML PNG    renders HTML headless to PNG, then png-size 1200 3000;
//                                            exit 77 (ctest skip) when CHROMIUM is absent
// Exit 0 when the check holds, 1 when it does not (with the reasons on stderr), 2 on bad usage.
#include "ropecheck/reports/report.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
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
      for (const char* s : {"# ropecheck precision report", "## Precision-safe context length",
                            "## Angle-table error vs rotation error", "## Special values",
                            "## Worst cases", "## Environment", "sampled (lower bound)"})
        if (m.find(s) == std::string::npos) errs.push_back(std::string("missing '") + s + "'");
      return report(errs, a[1]);
    }
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
    if (a.size() == 4 && a[0] == "browser") {
      namespace fs = std::filesystem;
      if (!fs::exists(a[1])) {
        std::cout << "skipped: " << a[1] << " not installed\n";
        return 77;
      }
      if (!fs::exists(a[2])) throw std::runtime_error(a[2] + " missing (run report_smoke first)");
      char tmpl[] = "/tmp/ropecheck-chromium-XXXXXX";
      if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
      fs::remove(a[3]);
      const std::string cmd =
          a[1] +
          " --headless --no-sandbox --disable-gpu --disable-background-networking"
          " --disable-component-update --disable-sync --no-first-run"
          " --user-data-dir=" +
          std::string(tmpl) + " --screenshot=" + a[3] + " --window-size=1200,3000 file://" +
          fs::absolute(a[2]).string() + " > /dev/null 2>&1";
      const int rc = std::system(cmd.c_str());
      fs::remove_all(tmpl);
      if (!fs::exists(a[3])) {
        std::cerr << "chromium wrote no screenshot (status " << rc << ")\n";
        return 1;
      }
      return png_size(a[3], 1200, 3000);
    }
  } catch (const std::exception& e) {
    std::cerr << "report_tool: " << e.what() << "\n";
    return 1;
  }
  std::cerr
      << "usage: report_tool validate-json|check-html|check-xml|check-md|same-json|png-size ...\n";
  return 2;
}
