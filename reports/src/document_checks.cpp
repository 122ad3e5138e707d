// The checks (one JUnit test case each) and the summary, derived from report.json's sections
// (document.hpp add_checks), and the exit status they give.
#include "document.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace ropecheck::reports {

namespace detail {

using nlohmann::json;

namespace {

// MatchesReferenceWithinBound per main kernel x dtype; returns how many failed.
int add_bound_checks(json& doc) {
  int exceeded = 0;
  for (const auto& r : doc["results"]) {
    std::int64_t gt = 0;
    double util = -1;
    for (const auto& b : r["buckets"]) {
      gt += b["counts"]["gt_bound"].get<std::int64_t>();
      const auto& mu = b["bound"]["max_utilization"];
      if (mu.is_number()) util = std::max(util, mu.get<double>());
      if (mu.is_string()) util = std::numeric_limits<double>::infinity();
    }
    exceeded += gt > 0;
    std::ostringstream msg;
    msg << gt << " pairs above the derived bound; max utilization "
        << (util < 0 ? std::string("n/a")
                     : (std::isinf(util) ? json("inf").dump() : json(util).dump()));
    doc["checks"].push_back({{"kernel", r["kernel"]},
                             {"dtype", r["dtype"]},
                             {"check", "MatchesReferenceWithinBound"},
                             {"passed", gt == 0},
                             {"message", msg.str()}});
  }
  return exceeded;
}

// MatchesReferenceWithinBound[variant] per variant x kernel x dtype; returns how many failed.
int add_variant_bound_checks(json& doc) {
  int exceeded = 0;
  if (!doc.contains("variants")) return 0;
  for (const auto& v : doc["variants"])
    for (const auto& r : v["results"]) {
      std::int64_t gt = 0;
      for (const auto& b : r["buckets"]) gt += b["counts"]["gt_bound"].get<std::int64_t>();
      exceeded += gt > 0;
      doc["checks"].push_back(
          {{"kernel", r["kernel"]},
           {"dtype", r["dtype"]},
           {"check", "MatchesReferenceWithinBound[" + v["name"].get<std::string>() + "]"},
           {"passed", gt == 0},
           {"message", std::to_string(gt) + " pairs above the derived bound on " +
                           v["spec"].value("detail", std::string())}});
    }
  return exceeded;
}

// SpecialValuesFollowPolicy per kernel x dtype; returns the number of deviating cases.
int add_special_value_checks(json& doc) {
  int violations = 0;
  for (const auto& s : doc["special_values"]) {
    const int v = s["violations"].get<int>();
    violations += v;
    doc["checks"].push_back({{"kernel", s["kernel"]},
                             {"dtype", s["dtype"]},
                             {"check", "SpecialValuesFollowPolicy"},
                             {"passed", v == 0},
                             {"message", std::to_string(v) + " cases deviate from the policy"}});
  }
  return violations;
}

// Fp8BytesWithinBound[format] per main kernel x dtype x format (report --fp8): every FP8 byte of
// the kernel's output inside the chain's image of exact -+ its derived pre-storage bound; returns
// how many kernel x dtype x format failed.
int add_fp8_checks(json& doc) {
  int outside_any = 0;
  for (const auto& r : doc["results"]) {
    if (!r.contains("fp8")) continue;
    for (const auto& f : r["fp8"]) {
      std::int64_t n = 0, outside = 0, differ = 0, undetermined = 0, max_ulps = 0;
      for (const auto& b : f["buckets"]) {
        n += b["elements"].get<std::int64_t>();
        outside += b["outside"].get<std::int64_t>();
        differ += b["differ"].get<std::int64_t>();
        undetermined += b["undetermined"].get<std::int64_t>();
        max_ulps = std::max(max_ulps, b["max_ulps"].get<std::int64_t>());
      }
      outside_any += outside > 0;
      std::ostringstream msg;
      msg << outside << " of " << n << " bytes outside the chain image of the derived bound; "
          << differ << " differ from the correctly rounded byte (max " << max_ulps << " fp8 ulps), "
          << undetermined << " not determined by the bound";
      doc["checks"].push_back(
          {{"kernel", r["kernel"]},
           {"dtype", r["dtype"]},
           {"check", "Fp8BytesWithinBound[" + f["format"].get<std::string>() + "]"},
           {"passed", outside == 0},
           {"message", msg.str()}});
    }
  }
  return outside_any;
}

}  // namespace

void add_checks(json& doc) {
  doc["checks"] = json::array();
  int bound_exceeded = add_bound_checks(doc);  // the variants' checks come after the main ones
  bound_exceeded += add_variant_bound_checks(doc);
  const int violations = add_special_value_checks(doc);
  const bool fp8 = doc.contains("fp8");
  const int fp8_outside = fp8 ? add_fp8_checks(doc) : 0;
  doc["summary"] = {{"bound_exceeded_kernel_dtypes", bound_exceeded},
                    {"special_value_violations", violations}};
  if (fp8) doc["summary"]["fp8_outside_kernel_dtypes"] = fp8_outside;
  add_headline(doc);
}

}  // namespace detail

int exit_code(const nlohmann::json& report) {
  // `validate --out`: the validation's verdict decides too (its report's own checks describe the
  // precision sweep only and may all hold for a kernel that fails validation).
  if (report.contains("validation") && !report["validation"].at("passed").get<bool>()) return 1;
  for (const auto& c : report.at("checks"))
    if (!c.at("passed").get<bool>()) return 1;
  return 0;
}

}  // namespace ropecheck::reports
