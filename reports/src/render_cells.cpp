// Cell formatting and escaping shared by the render stage (render.hpp).
#include "render.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/verify/verify.hpp"

#include <cstdio>

namespace ropecheck::reports::detail {

using nlohmann::json;

std::string cell(const json& v, int significant) {
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

}  // namespace ropecheck::reports::detail
