// The headline (document.hpp add_headline): max per-pair error by context length, from the
// per-octave maxima and per-bucket angle shares of report.json's results; what limits each kernel
// x dtype, one conclusion per dtype and a verdict sentence.
#include "document.hpp"

#include "ropecheck/verify/verify.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ropecheck::reports::detail {

using nlohmann::json;

// ---- the headline: max per-pair error by context length, from the per-octave maxima -------------
namespace {

// The storage rounding (storage_rounding) and the headline's multiples of it.
constexpr double kStorageU = 1.0;
constexpr double kFactors[] = {2, 8, 64};

// 4k, 32k, 128k, 1M where the sweep reaches them, then the longest context swept (a power of two,
// positions < L all inside the sweep), so every column holds a figure whatever --max-position.
std::vector<std::int64_t> headline_contexts(std::int64_t max_position) {
  std::int64_t longest = 2;
  while (longest * 2 <= max_position + 1) longest *= 2;  // max_position <= 2^40: no overflow
  std::vector<std::int64_t> c;
  for (std::int64_t l : {std::int64_t{4096}, std::int64_t{32768}, std::int64_t{131072}, kTwo20})
    if (l < longest) c.push_back(l);
  c.push_back(longest);
  return c;
}

// 4096 -> "4k", 2^20 -> "1M": powers of two in binary prefixes, as context lengths are quoted.
std::string context_label(std::int64_t l) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (p < 4 && l >= 1024 && l % 1024 == 0) l /= 1024, ++p;
  return std::to_string(l) + kPrefix[p];
}

struct Octave {
  std::int64_t lo, n_pairs;
  double max_u;
};

std::vector<Octave> octaves_of(const json& res) {
  std::vector<Octave> v;
  for (const auto& o : res["octaves"])
    v.push_back({o["position_lo"].get<std::int64_t>(), o["n_pairs"].get<std::int64_t>(),
                 number(o["max_pair_u"]).value_or(std::numeric_limits<double>::quiet_NaN())});
  return v;
}

// NaN wins: a NaN anywhere is the headline figure.
double worse(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

// The angle share and the name of the bucket that holds `position`, or null when not swept.
std::pair<json, std::string> share_at(const json& res, std::int64_t position) {
  for (const auto& b : res["buckets"])
    for (const Bucket& k : kBuckets)
      if (b["bucket"] == k.name && k.lo <= position && position <= k.hi)
        return {b["angle_vs_rotation"]["angle_share"], k.name};
  return {nullptr, ""};
}

const char* limited_by(double max_u, const json& share) {
  if (!std::isfinite(max_u)) return "non-finite";
  if (max_u <= kFactors[0] * kStorageU) return "storage";
  return number(share).value_or(0.0) >= 0.5 ? "angle" : "rotation";
}

json headline_cell(const json& res, const std::vector<Octave>& oct, std::int64_t l, double u,
                   std::int64_t refused_min) {
  double m = 0;
  std::int64_t n = 0;
  for (const auto& o : oct)
    if (o.lo < l) m = worse(m, o.max_u), n += o.n_pairs;
  const auto [share, bucket] = share_at(res, l - 1);
  // The kernel refused sampled positions below L (its cache extent or position domain: vLLM's
  // cache of ceil(orig * factor) rows, say; `positions_refused`), or the whole bucket that holds
  // L - 1: the max over the positions it did run is not the error at L, so no figure is given (a
  // number here reads as a measurement).
  if (bucket.empty() || refused_min <= l - 1)
    return {{"context", l},
            {"label", context_label(l)},
            {"n_pairs", n},
            {"max_pair_u", nullptr},
            {"relative", nullptr},
            {"angle_share", nullptr},
            {"angle_share_bucket", ""},
            {"limited_by", "not run"}};
  return {{"context", l},
          {"label", context_label(l)},
          {"n_pairs", n},
          {"max_pair_u", num(m)},
          {"relative", num(m * u)},
          {"angle_share", share},
          {"angle_share_bucket", bucket},
          {"limited_by", limited_by(m, share)}};
}

// The shortest context whose max exceeds factor x storage rounding ("exceeds_storage"). Not
// exceeded in the octaves the kernel ran, which stop short of `longest` (it refused the positions
// above): says so instead of ">= longest".
json exceeds_cell(const std::vector<Octave>& oct, double factor, std::int64_t longest,
                  std::int64_t run_to) {
  json j{{"factor", factor}, {"threshold_u", factor * kStorageU}, {"context", nullptr}};
  for (const auto& o : oct) {
    if (o.lo >= longest) break;
    if (!(o.max_u <= factor * kStorageU)) {
      const std::int64_t l = o.lo == 0 ? 1 : 2 * o.lo;
      j["context"] = l;
      j["label"] = context_label(l);
      return j;
    }
  }
  j["label"] = run_to < longest ? "not below " + context_label(run_to) + " (not run past it)"
                                : ">= " + context_label(longest);
  return j;
}

json headline_row(const json& res, const std::vector<std::int64_t>& contexts) {
  json row{{"kernel", res["kernel"]},
           {"dtype", res["dtype"]},
           {"supported", res["specs_supported"].get<std::int64_t>() > 0},
           {"angle_precision",
            res["policy"]["recipe"].get<std::string>().find("f32") != std::string::npos
                ? json("f32")
                : res["policy"]["angle"]},
           {"table", res["policy"]["table"]},
           {"arithmetic", res["policy"]["arithmetic"]},
           {"at", json::array()},
           {"exceeds", json::array()}};
  if (!row["supported"].get<bool>()) return row;
  std::int64_t gt = 0;  // pairs above the derived bound: a failed check, not a precision limit
  for (const auto& b : res["buckets"])
    if (b.contains("counts")) gt += b["counts"].value("gt_bound", std::int64_t{0});
  row["bound_exceeded"] = gt > 0;
  const auto oct = octaves_of(res);
  const double u = res["unit_roundoff"].get<double>();
  const std::int64_t refused_min =
      res.contains("positions_refused")
          ? res["positions_refused"]["min_position"].get<std::int64_t>()
          : std::numeric_limits<std::int64_t>::max();
  for (auto l : contexts) row["at"].push_back(headline_cell(res, oct, l, u, refused_min));
  // Where the positions the kernel ran end: the first context whose bucket it refused.
  std::int64_t run_to = contexts.back();
  for (const auto& c : row["at"])
    if (c["limited_by"] == "not run") {
      run_to = std::min(run_to, c["context"].get<std::int64_t>());
      break;
    }
  for (double f : kFactors) row["exceeds"].push_back(exceeds_cell(oct, f, contexts.back(), run_to));
  return row;
}

std::string cell_label(const json& cell) { return cell["label"].get<std::string>(); }

std::string u_text(const json& cell) {
  return verify::fmt(dbl_of(cell["max_pair_u"]), 3) +
         " u = " + verify::fmt(dbl_of(cell["relative"]), 2) + " relative";
}

// What a reader should do about one kernel x dtype, given what limits it at the longest context.
std::string advice(const json& row, const json& last) {
  // Errors beyond the bound of the declared policy are not a precision limit to widen (a sign
  // error is "rotation-limited" too): the advice must not contradict the failed check.
  if (row.value("bound_exceeded", false))
    return "exceeds the bound derived from its declared policy (a failed check): a bug, or a "
           "policy narrower than declared, not a precision limit; see the checks and worst cases";
  const std::string by = last["limited_by"].get<std::string>();
  if (by == "not run") return "";
  const double m = dbl_of(last["max_pair_u"]);
  if (by == "angle" && row["angle_precision"] == "f32")
    return "compute the angle m*theta in f64 to fix";
  if (by == "angle")
    return "the " + row["angle_precision"].get<std::string>() +
           " angle m*theta is rounded relative to its size, so its error grows with m (still far "
           "below f32's u = 6e-08); reduce m*theta in wider precision if f64 accuracy matters";
  if (by == "rotation" && m <= kFactors[1] * kStorageU)
    return "the roundings of " + row["arithmetic"].get<std::string>() +
           " arithmetic, expected; nothing to fix";
  if (by == "rotation")
    return "widen the cos/sin table (" + row["table"].get<std::string>() + ") or the arithmetic (" +
           row["arithmetic"].get<std::string>() + ") to fix";
  return by == "non-finite" ? "non-finite outputs: see the worst cases" : "";
}

// What one kernel x dtype's conclusion says: "storage-limited to 1M (0.998 u = ...)", or
// "angle-limited at 1M (1.1e+06 u = 0.066 relative; above 2 u from context 2) - compute ...".
std::string conclusion_group(const json& row) {
  if (!row["supported"].get<bool>()) return "unsupported";
  const json& last = row["at"].back();
  const std::string by = last["limited_by"].get<std::string>(), at = cell_label(last);
  if (by == "storage") return "storage-limited to " + at + " (" + u_text(last) + ")";
  if (by == "not run")
    return "not run at " + at +
           " (the kernel refused positions there: its cache extent or position domain)";
  std::string g = by + "-limited at " + at + " (" + u_text(last) + "; above 2 u from context " +
                  row["exceeds"][0]["label"].get<std::string>() + ")";
  const std::string a = advice(row, last);
  return a.empty() ? g : g + " - " + a;
}

// One line per dtype: its kernels grouped by conclusion.
std::string dtype_conclusion(const std::string& dtype, const json& rows) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // text -> kernels
  for (const auto& row : rows) {
    if (row["dtype"] != dtype) continue;
    const std::string g = conclusion_group(row);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == g; });
    if (it == groups.end()) it = groups.insert(groups.end(), {g, {}});
    it->second.push_back(row["kernel"].get<std::string>());
  }
  std::string t = dtype + ": ";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::string ks;
    for (const auto& k : groups[i].second) ks += (ks.empty() ? "" : ", ") + k;
    t += (i ? "; " : "") + ks + " " + groups[i].first;
  }
  return t + ".";
}

// One sentence: how many results stay near storage rounding at the longest context, and the
// largest error in multiples of it (u), with what limits it. In u rather than relative: a bf16
// output's 0.4% is its storage, not a defect.
std::string verdict(const json& rows) {
  int n = 0, storage = 0;
  const json* worst = nullptr;
  const json* worst_row = nullptr;
  for (const auto& row : rows) {
    if (!row["supported"].get<bool>()) continue;
    const json& last = row["at"].back();
    if (last["limited_by"] == "not run") continue;  // no figure at that context
    ++n;
    storage += last["limited_by"] == "storage";
    if (!worst || !(dbl_of(last["max_pair_u"]) <= dbl_of((*worst)["max_pair_u"])))
      worst = &last, worst_row = &row;
  }
  if (!worst)
    return "No kernel supports the swept specs at the longest context: nothing to report.";
  const std::string at = (*worst)["label"].get<std::string>();
  return "At a " + at + " context, " + std::to_string(storage) + " of " + std::to_string(n) +
         " kernel x dtype results stay within 2x the storage rounding (2 u); the largest error "
         "is " +
         (*worst_row)["kernel"].get<std::string>() + " on " +
         (*worst_row)["dtype"].get<std::string>() + ", " + u_text(*worst) + ", " +
         (*worst)["limited_by"].get<std::string>() + "-limited.";
}

}  // namespace

void add_headline(json& doc) {
  if (doc.contains("shard")) {  // a shard's partial sweep: the merged report gets the headline
    doc.erase("headline");
    return;
  }
  const auto contexts = headline_contexts(doc["options"]["max_position"].get<std::int64_t>());
  json h{{"storage_rounding_u", kStorageU}, {"factors", kFactors}, {"contexts", json::array()}};
  for (auto l : contexts) h["contexts"].push_back({{"context", l}, {"label", context_label(l)}});
  h["rows"] = json::array();
  for (const auto& d : doc["options"]["dtypes"])  // dtype first: one block per dtype
    for (const auto& res : doc["results"])
      if (res["dtype"] == d) h["rows"].push_back(headline_row(res, contexts));
  h["conclusions"] = json::array();
  for (const auto& d : doc["options"]["dtypes"])
    h["conclusions"].push_back(
        {{"dtype", d}, {"text", dtype_conclusion(d.get<std::string>(), h["rows"])}});
  h["verdict"] = verdict(h["rows"]);
  doc["headline"] = h;
}
}  // namespace ropecheck::reports::detail
