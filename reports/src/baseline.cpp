// Baseline comparison: `--baseline old.json` flags a kernel x dtype x bucket whose max ULP or max
// per-pair error grew beyond `factor` times the baseline value.
//
// Why factor 2 by default: with the same options and seed the numbers are reproduced exactly, so
// any growth is a real change; one extra rounding step in a kernel (the smallest real
// regression) adds about 1u to a per-pair error of 1-2u, i.e. a factor 1.5-2, while a changed seed
// or sample count moves a sampled maximum of hundreds of samples by far less than 2x for these
// smooth error distributions. The floor max(baseline, 1/2) keeps a change from 0 (exact) to a
// half-ulp rounding from counting as an infinite ratio.
#include "document.hpp"
#include "ropecheck/reports/report.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace ropecheck::reports {

using nlohmann::json;

namespace {

constexpr double kFloor = 0.5;

double value_of(const json& v) {
  return detail::number(v).value_or(std::numeric_limits<double>::quiet_NaN());
}

std::string kernel_dtype(const json& r) {
  return r["kernel"].get<std::string>() + "/" + r["dtype"].get<std::string>();
}

// kernel/dtype/bucket -> (max ULP, max pair error) of the baseline report.
std::map<std::string, std::pair<double, double>> baseline_maxima(const json& old) {
  std::map<std::string, std::pair<double, double>> base;
  for (const auto& r : old["results"])
    for (const auto& b : r["buckets"])
      base[kernel_dtype(r) + "/" + b["bucket"].get<std::string>()] = {
          value_of(b["ulp"]["max"]), value_of(b["pair_error_u"]["max"])};
  return base;
}

struct Comparison {
  json regressions = json::array();
  std::map<std::string, int> per_kd;  // kernel/dtype -> regressions
  int compared = 0, missing = 0;
};

// Compares the buckets of one result of the new report with the baseline's.
void compare_result(const json& r, const std::map<std::string, std::pair<double, double>>& base,
                    double factor, Comparison& c) {
  const std::string kd = kernel_dtype(r);
  c.per_kd[kd] += 0;
  for (const auto& b : r["buckets"]) {
    const auto it = base.find(kd + "/" + b["bucket"].get<std::string>());
    if (it == base.end()) {
      ++c.missing;
      continue;
    }
    ++c.compared;
    const std::pair<const char*, std::pair<double, double>> metrics[] = {
        {"max_ulp", {value_of(b["ulp"]["max"]), it->second.first}},
        {"max_pair_error_u", {value_of(b["pair_error_u"]["max"]), it->second.second}}};
    for (const auto& [metric, vals] : metrics) {
      const auto [n, o] = vals;
      // NaN now (a kernel produced NaN) regresses unless the baseline had NaN too.
      const bool regressed =
          std::isnan(n) ? !std::isnan(o) : (n > factor * std::fmax(o, kFloor) && !std::isnan(o));
      if (!regressed) continue;
      ++c.per_kd[kd];
      c.regressions.push_back({{"kernel", r["kernel"]},
                               {"dtype", r["dtype"]},
                               {"bucket", b["bucket"]},
                               {"metric", metric},
                               {"baseline", detail::num(o)},
                               {"now", detail::num(n)}});
    }
  }
}

}  // namespace

int apply_baseline(json& now, const json& old, double factor) {
  if (!old.is_object() || !old.contains("schema_version") || !old.contains("results"))
    throw OptionsError("--baseline: not a ropecheck report (no schema_version/results)");
  if (old["schema_version"] != kSchemaVersion)
    throw OptionsError("--baseline: schema_version " + old["schema_version"].dump() +
                       " differs from this tool's " + std::to_string(kSchemaVersion));
  if (!(factor >= 1.0) || !std::isfinite(factor))
    throw OptionsError("--baseline-factor must be finite and >= 1");
  const auto base = baseline_maxima(old);
  Comparison c;
  for (const auto& r : now["results"]) compare_result(r, base, factor, c);
  const bool same_options =
      old.contains("options") && now.contains("options") && old["options"] == now["options"];
  const int n_regressions = static_cast<int>(c.regressions.size());
  now["baseline"] = {{"factor", factor},
                     {"floor", kFloor},
                     {"compared_buckets", c.compared},
                     {"missing_in_baseline", c.missing},
                     {"same_options", same_options},
                     {"regressions", std::move(c.regressions)}};
  for (const auto& [kd, n] : c.per_kd) {
    const auto slash = kd.find('/');
    now["checks"].push_back({{"kernel", kd.substr(0, slash)},
                             {"dtype", kd.substr(slash + 1)},
                             {"check", "NoRegressionVsBaseline"},
                             {"passed", n == 0},
                             {"message", std::to_string(n) + " metrics grew beyond " +
                                             json(factor).dump() + "x the baseline"}});
  }
  return n_regressions;
}

}  // namespace ropecheck::reports
