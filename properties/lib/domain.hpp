// What a kernel declares and what that rules out: probe_domain() asks supports() about a grid of
// specs (the cases are then drawn inside what it accepted, gen.hpp DomainContext), and
// not_applicable() turns a property's needs (its row in table.hpp) into the declaration that rules
// it out. A new need: a value of Needs (row.hpp) and its case here.
#pragma once

#include "common.hpp"
#include "ropecheck/regimes.hpp"
#include "row.hpp"

#include <algorithm>
#include <optional>
#include <string>

namespace ropecheck::properties::detail {

// The probe: which specs of a grid (head dims of the declared list, or a grid of common and
// awkward dims; full and partial rotary; both basic layouts; the multi-axis layouts) the kernel
// accepts for dtype D. Unscaled, base 1e4, scale 1: the shapes, not the parameters, decide what
// applies. A few hundred supports() calls at most (each one IPC round trip for a plugin).
template <Dtype D>
g::DomainContext probe_domain(const Kernel& k, const std::optional<RopeSpec>& only_spec,
                              bool variants) {
  g::DomainContext c;
  c.declared = k.domain();
  if (only_spec) {  // the kernel implements this one spec: it alone is the domain
    const RopeSpec& f = *only_spec;
    if (!k.supports(f, D)) return c;
    if (is_multi_axis(f.layout))
      c.multi_axis.push_back(f);
    else if (f.rotary_dim < f.head_dim)
      c.partial.push_back(f);
    else
      c.full.push_back(f);
    return c;
  }
  static const std::vector<std::int64_t> grid = {
      2,  3,  4,  5,  6,  7,  8,  9,   12,  15,  16,  17,  24,  31,  32,  33,  40,
      48, 63, 64, 65, 72, 80, 96, 112, 120, 127, 128, 160, 192, 255, 256, 320, 512};
  const std::vector<std::int64_t>& dims =
      c.declared.head_dims.empty() ? grid : c.declared.head_dims;
  auto make = [](std::int64_t hd, std::int64_t rd, Layout l) {
    RopeSpec s;
    s.head_dim = hd;
    s.rotary_dim = rd;
    s.layout = l;
    return s.normalized();
  };
  for (std::int64_t hd : dims) {
    if (hd < 2 || hd > kMaxHeadDim) continue;
    const std::int64_t full = hd - hd % 2, np = full / 2;
    for (Layout l : {Layout::interleaved, Layout::half}) {
      const RopeSpec f = make(hd, full, l);
      if (k.supports(f, D)) c.full.push_back(f);
      // Partial rotary: a quarter, a half, one pair less (odd counts of pairs included), 1 pair,
      // and the ratios models ship (model_rotary_dims: 0.4, a 64-dim part).
      std::vector<std::int64_t> rds = {2 * std::max<std::int64_t>(1, np / 4),
                                       2 * std::max<std::int64_t>(1, np / 2), full - 2, 2};
      for (std::int64_t rd : model_rotary_dims(hd))
        if (std::find(rds.begin(), rds.end(), rd) == rds.end()) rds.push_back(rd);
      if (hd % 2) rds.push_back(full);  // odd head_dim: the last dim passes through
      for (std::int64_t rd : rds)
        if (rd >= 2 && rd < hd && k.supports(make(hd, rd, l), D))
          c.partial.push_back(make(hd, rd, l));
    }
    for (std::int64_t rd : {full, 2 * std::max<std::int64_t>(1, np / 2)})
      if (rd >= 2 && k.supports(make(hd, rd, Layout::interleaved), D) &&
          k.supports(make(hd, rd, Layout::half), D))
        c.both_layouts.push_back(make(hd, rd, Layout::interleaved));
    for (Layout l : {Layout::mrope, Layout::imrope, Layout::axial}) {
      if (np < 3) continue;
      RopeSpec m;
      m.head_dim = hd;
      m.rotary_dim = full;
      m.layout = l;
      m.sections = {np / 4 + 1, np / 4 + 1, np - 2 * (np / 4 + 1)};
      try {
        m = m.normalized();
      } catch (const SpecError&) {
        continue;
      }
      if (k.supports(m, D)) c.multi_axis.push_back(m);
    }
  }
  // Partial rotary at a ratio of no list above (3/4 of head_dim: 48 of 64, 96 of 128): when no
  // probed spec rotates fewer pairs than head_dim holds (an odd head_dim's one pass-through dim
  // does not count) with kRealisticPairs pairs or more, every even rotary_dim of the realistic
  // head dims (regimes.hpp), the largest accepted one per head dim and layout. Only then: a
  // kernel that takes a listed ratio pays nothing, one that takes no partial rotary a few hundred
  // supports() calls. Without it such a kernel's partial path was never drawn.
  const bool realistic_partial = std::any_of(c.partial.begin(), c.partial.end(), [](const auto& s) {
    return s.rotary_dim < s.head_dim - s.head_dim % 2 && s.n_pairs() >= kRealisticPairs;
  });
  if (!realistic_partial)
    for (std::int64_t hd : realistic_head_dims(c.declared))
      for (Layout l : {Layout::interleaved, Layout::half})
        for (std::int64_t rd = hd - hd % 2 - 2; rd >= 2 * kRealisticPairs; rd -= 2)
          if (k.supports(make(hd, rd, l), D)) {
            c.partial.push_back(make(hd, rd, l));
            break;
          }
  if (variants) {
    c.scaled.resize(7);
    for (int kind = 1; kind <= 6; ++kind)
      for (const RopeSpec& f : c.full) {
        RopeSpec v = f;
        v.scaling = example_scaling(static_cast<ScalingKind>(kind), f.n_pairs());
        try {
          v = v.normalized();
        } catch (const SpecError&) {
          continue;
        }
        if (k.supports(v, D)) c.scaled[static_cast<std::size_t>(kind)].push_back(v);
      }
  }
  return c;
}

// Why a property that needs `n` (its row's applicability, table.hpp) cannot be exercised on this
// kernel, from its declaration (Kernel::domain() and supports() on the probe grid), or nullopt.
// The reasons are the user's to read: they name the declaration that rules the property out.
inline std::optional<std::string> not_applicable(Needs n, const g::DomainContext& c) {
  const Domain& d = c.declared;
  switch (n) {
    case Needs::nothing:
    case Needs::backward:  // has_backward(): properties.cpp check(), before any probe
      return std::nullopt;
    case Needs::both_layouts:
      if (c.both_layouts.empty())
        return std::string("no spec is supported in both the interleaved and the half layout");
      return std::nullopt;
    case Needs::partial_rotary: {
      if (!c.partial.empty()) return std::nullopt;
      std::string dims;
      for (auto h : d.head_dims) dims += (dims.empty() ? "" : ",") + std::to_string(h);
      return "no partial rotary in the declared domain: supports() rejected every rotary_dim < "
             "head_dim for head_dim " +
             (d.head_dims.empty() ? std::string("a grid of 2..512") : "{" + dims + "}");
    }
    case Needs::in_place:
      if (!d.in_place) return std::string("declared out-of-place only (no in-place calls)");
      return std::nullopt;
    case Needs::opposite_positions:
      if (d.min_position >= 0 || d.max_position <= 0)
        return "declared positions [" + std::to_string(d.min_position) + ", " +
               std::to_string(d.max_position) + "] hold no pair m, -m with m != 0";
      return std::nullopt;
    case Needs::position_zero:
      if (d.min_position > 0 || d.max_position < 0)
        return std::string("position 0 is outside the declared positions");
      return std::nullopt;
    case Needs::multi_axis:
      if (c.multi_axis.empty()) return std::string("kernel does not support multi-axis layouts");
      return std::nullopt;
    case Needs::mrope_and_half: {
      if (std::all_of(c.multi_axis.begin(), c.multi_axis.end(),
                      [](const RopeSpec& m) { return m.layout == Layout::axial; }))
        return std::string("kernel supports neither mrope nor imrope");
      // The 1-D half spec of an mrope/imrope spec (same head_dim and rotary_dim) is what the
      // property compares with; a kernel declaring only the multi-axis layout has none.
      const auto has_half_twin = [&](const RopeSpec& m) {
        return m.layout != Layout::axial &&
               std::any_of(c.full.begin(), c.full.end(), [&](const RopeSpec& f) {
                 return f.layout == Layout::half && f.head_dim == m.head_dim &&
                        f.rotary_dim == m.rotary_dim;
               });
      };
      if (std::none_of(c.multi_axis.begin(), c.multi_axis.end(), has_half_twin))
        return std::string(
            "kernel supports no 1-D half spec with the head_dim and rotary_dim of "
            "its mrope/imrope specs (declared multi-axis only)");
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace ropecheck::properties::detail
