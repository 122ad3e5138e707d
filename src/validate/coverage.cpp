// Coverage of the directed differential (coverage.hpp): the partial-rotary and structural lines
// of the summary, and the gaps that fail a run.
#include "ropecheck/validate/coverage.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "ropecheck/regimes.hpp"
#include "ropecheck/validate/plan.hpp"
#include "ropecheck/verify/verify.hpp"

namespace ropecheck::validate {

// The structural variants at realistic sizes (>= 4 pairs: where an exponent, pair-index or scale
// bug of a variant's own path can show). Partial rotary has its own line (partial_coverage);
// in-place calls are one of the three call shapes of every spec.
namespace structural {

std::string list(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string r;
  for (const auto& x : v) r += (r.empty() ? "" : sep) + x;
  return r;
}

void once(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// s at 2 and 3 pairs (an odd head_dim stays odd): the first that supports() accepts.
std::optional<RopeSpec> small_probe(const Kernel& k, Dtype dt, const RopeSpec& s) {
  for (std::int64_t np : {2, 3}) {
    RopeSpec t = s;
    t.head_dim = 2 * np + (s.head_dim % 2);
    t.rotary_dim = 2 * np;
    try {
      t = t.normalized();
    } catch (const SpecError&) {
      continue;
    }
    if (k.supports(t, dt)) return t;
  }
  return std::nullopt;
}

std::string odd_head_dims(const Kernel& k, Dtype dt, Layout l, const std::vector<RopeSpec>& specs,
                          std::string& gap) {
  std::vector<std::string> odd;
  for (const RopeSpec& s : specs)
    if (s.head_dim % 2 && s.n_pairs() >= kRealisticPairs) once(odd, std::to_string(s.head_dim));
  if (!odd.empty()) return "odd head_dim " + list(odd);
  RopeSpec p;
  p.head_dim = 5;
  p.layout = l;
  if (const auto t = small_probe(k, dt, p); t && gap.empty())
    gap = "coverage gap: supports() accepts an odd head_dim (" + describe(*t) +
          ") but no odd head_dim with >= 4 pairs (65, 97, 33, 129, 255 or the declared ones), so a "
          "bug of the odd path (the pass-through tail, inv_freq over head_dim) cannot show; accept "
          "a realistic odd head_dim in supports(), or reject odd ones";
  return "odd head_dim: none accepted";
}

std::string scale(const Kernel& k, Dtype dt, Layout l, const std::vector<RopeSpec>& specs,
                  std::string& gap) {
  int n = 0;
  for (const RopeSpec& s : specs) n += s.scale != 1 && s.n_pairs() >= kRealisticPairs;
  if (n > 0)
    return "scale " + verify::fmt(kDirectedScale, 3) + " on " + std::to_string(n) + " spec(s)";
  if (!k.domain().magnitude_scale) return "scale 1 only (declared)";
  RopeSpec p;
  p.head_dim = 4;
  p.layout = l;
  p.scale = kDirectedScale;
  if (const auto t = small_probe(k, dt, p); t && gap.empty())
    gap = "coverage gap: supports() accepts scale != 1 (" + describe(*t) +
          ") but on no directed spec with >= 4 pairs, so a bug of the scaled path cannot show; "
          "accept scale != 1 at realistic sizes, or clear the magnitude-scale flag";
  return "scale != 1: declared, accepted on no directed spec";
}

// Each declared scaling kind (groups: one or more per kind) and the head dims it ran at.
std::string scalings(const Kernel& k, Dtype dt, Layout l, const std::vector<RopeSpec>& specs,
                     const std::vector<std::vector<RopeSpec>>& groups, std::string& gap) {
  if (l == Layout::axial) return "scaling: none (axial specs carry none)";
  std::map<int, std::vector<std::string>> kinds;  // kind -> head dims that ran
  for (const auto& g : groups) kinds[static_cast<int>(g.front().scaling.kind)];
  if (kinds.empty()) return "scaling: none declared";
  for (const RopeSpec& s : specs)
    if (s.scaling.kind != ScalingKind::none && s.n_pairs() >= kRealisticPairs)
      once(kinds[static_cast<int>(s.scaling.kind)], std::to_string(s.head_dim));
  std::vector<std::string> ran, none;
  const auto small = variant_groups(l, {4, 6, 5}, false);  // the probes below 4 pairs
  for (auto& [kind, hds] : kinds) {
    const std::string nm = name(static_cast<ScalingKind>(kind));
    if (!hds.empty()) {  // "yarn 64+128": the head dims it ran at
      ran.push_back(nm + " " + list(hds, "+"));
      continue;
    }
    none.push_back(nm);
    for (const auto& g : small)
      for (const RopeSpec& t : g)
        if (gap.empty() && t.scaling.kind == static_cast<ScalingKind>(kind) && k.supports(t, dt))
          gap = "coverage gap: supports() accepts scaling " + nm + " (" + describe(t) +
                ") but at no head_dim with >= 4 pairs, so a bug of the " + nm +
                " path cannot show; accept it at a realistic head_dim, or reject it";
  }
  return "scaling " + (ran.empty() ? std::string("-") : list(ran)) +
         (none.empty() ? "" : "; declared, accepted at no realistic head_dim: " + list(none));
}

}  // namespace structural

StructuralCoverage structural_coverage(const Kernel& k, Dtype dt, Layout l,
                                       const std::vector<RopeSpec>& specs,
                                       const std::vector<std::vector<RopeSpec>>& groups) {
  StructuralCoverage sc;
  std::vector<std::string> parts;
  if (!is_multi_axis(l) && l != Layout::proportional)
    parts.push_back(structural::odd_head_dims(k, dt, l, specs, sc.gap));
  parts.push_back(structural::scale(k, dt, l, specs, sc.gap));
  parts.push_back(k.domain().in_place ? "in place (every spec)" : "out of place only (declared)");
  parts.push_back(structural::scalings(k, dt, l, specs, groups, sc.gap));
  sc.ran = structural::list(parts, "; ");
  return sc;
}

PartialCoverage partial_coverage(const Kernel& k, Dtype dt, Layout l,
                                 const std::vector<RopeSpec>& specs) {
  PartialCoverage pc;
  bool big = false;
  std::vector<std::string> seen;  // "rd/hd" once each (specs differ in base too)
  for (const RopeSpec& s : specs)
    if (s.rotary_dim < s.head_dim - s.head_dim % 2) {
      const std::string rh = std::to_string(s.rotary_dim) + "/" + std::to_string(s.head_dim);
      if (std::find(seen.begin(), seen.end(), rh) == seen.end()) seen.push_back(rh);
      big = big || s.n_pairs() >= kRealisticPairs;
    }
  for (std::size_t i = 0; i < seen.size(); ++i) pc.ran += (i ? ", " : "") + seen[i];
  if (big || is_multi_axis(l)) return pc;
  const Domain d = k.domain();
  std::vector<std::int64_t> dims = d.head_dims;
  if (dims.empty()) dims = {4, 6, 8, 64, 128};
  for (std::int64_t hd : dims)
    for (std::int64_t rd = 2; rd < 2 * kRealisticPairs && rd < hd - hd % 2; rd += 2) {
      RopeSpec s;
      s.head_dim = hd;
      s.rotary_dim = rd;
      s.layout = l;
      try {
        s = s.normalized();
      } catch (const SpecError&) {
        continue;
      }
      if (k.supports(s, dt)) {
        pc.gap = "coverage gap: supports() accepts partial rotary (" + describe(s) +
                 ") but no partial spec with >= 4 pairs (no even rotary_dim of 8 or more at "
                 "head dims " +
                 (d.head_dims.empty() ? std::string("64, 80, 96, 128, 256") : "declared") +
                 "), so a bug of the partial path (inv_freq over head_dim, a pair index) cannot "
                 "show; accept a realistic partial spec in supports(), or reject partial rotary";
        return pc;
      }
    }
  return pc;
}

}  // namespace ropecheck::validate
