// junit.xml: one test case per check of the report (and, for `validate --out`, per
// configuration x check of the validation, in its own suite first).
#include "render.hpp"
#include "ropecheck/reports/report.hpp"

#include <algorithm>
#include <sstream>

namespace ropecheck::reports {

using detail::cell;
using detail::esc;
using nlohmann::json;

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
