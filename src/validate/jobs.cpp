// A check's result as plain data (run.hpp): its text form, which carries it from a runner process,
// and the assembly of a configuration's result from its checks' in check order.
#include <nlohmann/json.hpp>

#include <bit>

#include "ropecheck/validate/run.hpp"

namespace ropecheck::validate {

namespace props = ropecheck::properties;

namespace {

// Doubles by their bits: the maxima may be NaN (JSON has none) and must come back unchanged.
std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }
double from_bits(std::uint64_t b) { return std::bit_cast<double>(b); }

}  // namespace

std::string to_text(const CheckResult& r) {
  const Cell& c = r.cell;
  nlohmann::json j{{"text", c.text},
                   {"failed", c.failed},
                   {"detail", c.detail},
                   {"cases", c.cases},
                   {"budget", c.budget},
                   {"kind", c.kind},
                   {"calls", r.calls},
                   {"vectors", r.vectors},
                   {"max_error_u", bits(r.max_error_u)},
                   {"max_utilization", bits(r.max_utilization)},
                   {"nonfinite_output", r.nonfinite_output},
                   {"partial_specs", r.partial_specs},
                   {"structural", r.structural},
                   {"max_error_u_constrained", bits(r.max_error_u_constrained)},
                   {"max_utilization_constrained", bits(r.max_utilization_constrained)},
                   {"unconstrained_pairs", r.unconstrained_pairs},
                   {"min_unconstrained_position", r.min_unconstrained_position}};
  if (r.fault)
    j["fault"] = {{"kind", static_cast<int>(r.fault->kind)},
                  {"signal", r.fault->signal},
                  {"exit_status", r.fault->exit_status},
                  {"detail", r.fault->detail},
                  {"config", r.fault->config}};
  return j.dump();
}

CheckResult from_text(const std::string& s) {
  const auto j = nlohmann::json::parse(s);
  CheckResult r;
  r.cell = {j.at("text").get<std::string>(), j.at("failed").get<bool>(),
            j.at("detail").get<std::string>()};
  r.cell.cases = j.at("cases").get<int>();
  r.cell.budget = j.at("budget").get<int>();
  r.cell.kind = j.at("kind").get<std::string>();
  r.calls = j.at("calls").get<std::uint64_t>();
  r.vectors = j.at("vectors").get<std::int64_t>();
  r.max_error_u = from_bits(j.at("max_error_u").get<std::uint64_t>());
  r.max_utilization = from_bits(j.at("max_utilization").get<std::uint64_t>());
  r.nonfinite_output = j.at("nonfinite_output").get<bool>();
  r.partial_specs = j.at("partial_specs").get<std::string>();
  r.structural = j.at("structural").get<std::string>();
  r.max_error_u_constrained = from_bits(j.at("max_error_u_constrained").get<std::uint64_t>());
  r.max_utilization_constrained =
      from_bits(j.at("max_utilization_constrained").get<std::uint64_t>());
  r.unconstrained_pairs = j.at("unconstrained_pairs").get<std::int64_t>();
  r.min_unconstrained_position = j.at("min_unconstrained_position").get<std::int64_t>();
  if (j.contains("fault")) {
    const auto& f = j.at("fault");
    r.fault.emplace();
    r.fault->kind = static_cast<plugin::FaultKind>(f.at("kind").get<int>());
    r.fault->signal = f.at("signal").get<int>();
    r.fault->exit_status = f.at("exit_status").get<int>();
    r.fault->detail = f.at("detail").get<std::string>();
    r.fault->config = f.at("config").get<std::string>();
  }
  return r;
}

bool still_needed(const std::vector<const CheckResult*>& checks, int check) {
  for (int i = 0; i < check; ++i) {
    const CheckResult* r = checks[static_cast<std::size_t>(i)];
    if (r && r->fault && (i == 0 || fatal(*r->fault))) return false;
  }
  return true;
}

// The configuration's result from its checks' results (nullptr: not run), in check order, with
// the sequential rules of still_needed. Adds the plugin calls of the checks used to `calls`.
ConfigResult assemble(const Config& cfg, const std::vector<const CheckResult*>& checks,
                      const Options& o, std::uint64_t& calls) {
  ConfigResult cr{};
  cr.dtype = cfg.dtype;
  cr.layout = cfg.layout;
  std::optional<plugin::Fault> config_fault;
  if (!wanted(o, "Differential")) {
    cr.differential = {"not run", false, "not selected (--properties)"};
  } else {
    const CheckResult& r = *checks[0];
    cr.differential = r.cell;
    cr.diff.vectors = r.vectors;
    cr.diff.max_error_u = r.max_error_u;
    cr.diff.max_utilization = r.max_utilization;
    cr.nonfinite_output = r.nonfinite_output;
    cr.partial_specs = r.partial_specs;
    cr.structural = r.structural;
    cr.diff.max_error_u_constrained = r.max_error_u_constrained;
    cr.diff.max_utilization_constrained = r.max_utilization_constrained;
    cr.diff.unconstrained_pairs = r.unconstrained_pairs;
    cr.diff.min_unconstrained_position = r.min_unconstrained_position;
    calls += r.calls;
    if (r.fault) config_fault = cr.fault = r.fault;
  }
  const auto& all = props::all_properties();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const CheckResult* r = checks[i + 1];
    Cell c;
    if (!wanted(o, props::name(all[i]))) {
      c = {"not run", false, "not selected (--properties)"};
    } else if (config_fault) {
      c = {"not run", true, "configuration faulted: " + fault_short(*config_fault)};
    } else {
      c = r->cell;
      calls += r->calls;
      if (all[i] == props::Property::BackwardMatchesReferenceWithinBound) {
        cr.bwd.vectors = r->vectors;
        cr.bwd.max_error_u = r->max_error_u;
        cr.bwd.max_utilization = r->max_utilization;
        cr.bwd_partial_specs = r->partial_specs;
        cr.bwd_structural = r->structural;
      }
      if (r->fault) {
        if (!cr.fault) cr.fault = r->fault;
        if (fatal(*r->fault)) config_fault = r->fault;
      }
    }
    cr.properties.push_back({all[i], c});
  }
  return cr;
}

}  // namespace ropecheck::validate
