#include "shard.hpp"

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "cli.hpp"
#include "ropecheck/reports/report.hpp"

namespace ropecheck::cli {

namespace {

Shard parse_pair(const std::string& idx, const std::string& tot, const std::string& what) {
  long long i = 0, n = 0;
  if (!parse_int64(idx, i) || !parse_int64(tot, n))
    throw UsageError(what + ": '" + idx + "/" + tot + "' is not two integers");
  if (n < 1 || n > 1000000) throw UsageError(what + ": shard count must be in [1, 10^6]");
  if (i < 0 || i >= n)
    throw UsageError(what + ": shard index " + idx + " is outside [0, " + std::to_string(n - 1) +
                     "]");
  return {static_cast<int>(i), static_cast<int>(n)};
}

nlohmann::json load(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw UsageError(what + ": cannot read '" + path + "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw UsageError(what + ": '" + path + "' is not JSON: " + e.what());
  }
}

}  // namespace

Shard resolve_shard(const std::string& flag) {
  if (!flag.empty()) {
    const auto slash = flag.find('/');
    if (slash == std::string::npos) throw UsageError("--shard: expected i/n, got '" + flag + "'");
    return parse_pair(flag.substr(0, slash), flag.substr(slash + 1), "--shard");
  }
  const char* tot = std::getenv("GTEST_TOTAL_SHARDS");
  const char* idx = std::getenv("GTEST_SHARD_INDEX");
  if (!tot && !idx) return {};
  if (!tot || !idx)
    throw UsageError("GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX must be set together");
  return parse_pair(idx, tot, "GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS");
}

void touch_shard_status_file() {
  const char* f = std::getenv("GTEST_SHARD_STATUS_FILE");
  if (!f || !*f) return;
  std::ofstream out(f, std::ios::app);
  if (!out) throw UsageError(std::string("GTEST_SHARD_STATUS_FILE: cannot create '") + f + "'");
}

int merge_reports(const std::vector<std::string>& files, const std::string& out,
                  const std::string& baseline, double baseline_factor) {
  std::vector<nlohmann::json> docs;
  for (const auto& f : files) docs.push_back(load(f, "--merge"));
  nlohmann::json report;
  try {
    report = reports::merge(docs);
    if (!baseline.empty()) {
      if (!(baseline_factor >= 1.0)) throw UsageError("--baseline-factor must be >= 1");
      reports::apply_baseline(report, load(baseline, "--baseline"), baseline_factor);
    }
  } catch (const reports::OptionsError& e) {
    throw UsageError(e.what());
  }
  reports::write_all(report, out);
  std::cout << "merged " << files.size() << " shard reports into " << out
            << "/report.json, report.md, report.html, junit.xml\n";
  return report_verdict(report);
}

int report_verdict(const nlohmann::json& report) {
  const int code = reports::exit_code(report);
  for (const auto& c : report["checks"])
    if (!c["passed"].get<bool>())
      std::cout << "FAIL " << c["kernel"].get<std::string>() << " " << c["dtype"].get<std::string>()
                << " " << c["check"].get<std::string>() << ": " << c["message"].get<std::string>()
                << "\n";
  std::cout << (code == 0 ? "all checks hold\n" : "some checks failed\n");
  std::cout.flush();
  return code;
}

}  // namespace ropecheck::cli
