// The driver of one check for storage dtype D: probe the declared domain (domain.hpp), rule the
// property out by its row's needs (table.hpp), else hand its generator to RapidCheck
// (properties.cpp run_check). Included only by props_<dtype>.cpp, which instantiates it and the
// table for its dtype (one translation unit per dtype: the RapidCheck + Boost.Multiprecision +
// Eigen compile cost of all families stays in four units).
#pragma once

#include "domain.hpp"
#include "table.hpp"

#include <functional>
#include <optional>
#include <string>

namespace ropecheck::properties::detail {

// Why p cannot be exercised on this kernel (its row's needs against the domain), or nullopt.
template <Dtype D>
std::optional<std::string> not_applicable(Property p, const g::DomainContext& c) {
  return not_applicable(table<D>()[index(p)].needs, c);
}

// The property as RapidCheck runs it: each call draws one case. k and c outlive the check. Empty
// for a backward property run on backward_view (properties.cpp check() runs its forward row).
template <Dtype D>
std::function<void()> body(Property p, const Kernel& k, g::Context& c) {
  const Generator generator = table<D>()[index(p)].generator;
  if (!generator) return {};
  return [generator, &k, &c] { generator(k, c); };
}

// RapidCheck's run of f (properties.cpp): the verdict; arms `shrink` when shrinking starts.
Verdict run_check(const std::function<void()>& f, const std::string& id, const Options& o,
                  g::ShrinkBudget& shrink);

template <Dtype D>
Verdict check_dtype(Property p, const Kernel& k, const Options& o) {
  reference::set_precision_bits(reference::default_bits(D));
  g::Context ctx;
  ctx.variants = {o.variants, o.focus_scaling, o.focus_layout};
  ctx.oracle = o.oracle_mpfr ? reference::OracleMode::mpfr : reference::OracleMode::fast;
  ctx.domain = probe_domain<D>(k, o.only_spec, o.variants);
  ctx.only_spec = o.only_spec;
  const g::DomainContext& c = ctx.domain;
  if (c.full.empty() && c.partial.empty() && c.multi_axis.empty()) {
    // Nothing of the probe grid is accepted: no case can be drawn. Not a property of the
    // declaration (it names the dtype), so a coverage failure, never a silent pass.
    Verdict v;
    v.status = Status::gave_up;
    v.budget = o.max_success.value_or(0);
    v.message = std::string("coverage: supports() rejected every probed spec of dtype ") + name(D) +
                " (head dims of the declared list or a grid of 2..512, full and partial rotary, "
                "both layouts, mrope/imrope/axial): no case can be drawn";
    return v;
  }
  if (auto why = not_applicable<D>(p, c)) {
    Verdict v;
    v.status = Status::not_applicable;
    v.message = *why;
    return v;
  }
  const std::string id = o.id.empty() ? test_id("Properties", k.name(), D, p) : o.id;
  return run_check(body<D>(p, k, ctx), id, o, ctx.shrink);
}

}  // namespace ropecheck::properties::detail
