// The run of a validation plan: every check (the directed differential, each property) of every
// configuration as one job, on --threads processes, with its case budget and the run's shared
// shrink-time pool; the jobs' results assembled into each configuration's result in check order,
// so the output is the same for every --threads.
#pragma once

#include "ropecheck/plugin/host.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/validate/options.hpp"
#include "ropecheck/validate/plan.hpp"
#include "ropecheck/validate/result.hpp"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ropecheck::validate {

// ---- budgets ----------------------------------------------------------------------------------

// Cases per property and configuration of a budget (UsageError on an unknown one).
int max_success_for(const std::string& budget);
// Shrinking through the isolated worker costs a few ms a call; 4000 calls keep a failing
// property's shrinking to seconds while still reaching small counterexamples.
inline constexpr long kShrinkCalls = 4000;
// The wall-time budget of one property's shrinking (--shrink-seconds, else by budget); every
// property's shrinking draws from one pool of kShrinkPoolFactor times that (budget.cpp says why).
double shrink_seconds_for(const Options& o);
inline constexpr double kShrinkPoolFactor = 5;

// The run's pool in anonymous shared memory mapped before the runners are forked, so one atomic
// counter is seen by every runner process (a lock-free 64-bit atomic works across processes).
class SharedPool {
 public:
  explicit SharedPool(double seconds);
  ~SharedPool();
  SharedPool(const SharedPool&) = delete;
  SharedPool& operator=(const SharedPool&) = delete;
  std::atomic<std::int64_t>* get() const { return pool_; }

 private:
  std::atomic<std::int64_t>* pool_ = nullptr;
};

// The note under a failing property's counterexample when its shrinking stopped early.
std::string shrink_note(const properties::Verdict& v, const Options& o);

// ---- the directed differential ------------------------------------------------------------------

// Differential check of one configuration (cr.dtype, cr.layout) on directed specs and positions,
// through the isolated worker pk (kernel: pk, restricted to the layout). A poisoned plugin stops
// it with the figures so far and no cell (the caller's fault cell is the verdict). backward: the
// same check of apply_backward, on properties::backward_view, with every structural variant and
// coverage rule of the forward's.
void differential(const plugin::PluginKernel& pk, const Kernel& kernel, ConfigResult& cr,
                  std::uint64_t seed, const std::vector<RopeSpec>& extra_specs,
                  const std::vector<std::vector<RopeSpec>>& variant_groups,
                  reference::OracleMode mode, bool backward = false);

// ---- checks as jobs -----------------------------------------------------------------------------

// What one check of one configuration found, as plain data (it travels from a runner process as
// JSON). check 0: Differential; check 1 + i: properties::all_properties()[i].
struct CheckResult {
  Cell cell;
  std::optional<plugin::Fault> fault;  // the check poisoned the plugin: its first fault
  std::uint64_t calls = 0;             // plugin apply() calls the check made
  // Differential only: the maxima the table and validation.json print, and a non-finite output.
  std::int64_t vectors = 0;
  double max_error_u = 0, max_utilization = 0;
  // Over the pairs whose bound constrains the rotation, and the smallest |m| where it stops
  // (verify::Summary's *_constrained, min_unconstrained_position).
  double max_error_u_constrained = 0, max_utilization_constrained = 0;
  std::int64_t unconstrained_pairs = 0, min_unconstrained_position = -1;
  bool nonfinite_output = false;
  std::string partial_specs;  // Differential only: ConfigResult::partial_specs
  std::string structural;     // Differential only: ConfigResult::structural
};
// The result as text and back, doubles by their bits (NaN maxima come back unchanged).
std::string to_text(const CheckResult& r);
CheckResult from_text(const std::string& s);

// Whether a configuration's check still decides a cell, given the results so far (checks[i] of
// the configuration, nullptr: not known yet): not after a fault of the differential check, nor
// after a crash or hang of a property (it would repeat in every property after it).
bool still_needed(const std::vector<const CheckResult*>& checks, int check);

// The configuration's result from its checks' results (nullptr: not run), in check order, with
// the sequential rules of still_needed. Adds the plugin calls of the checks used to `calls`.
ConfigResult assemble(const Config& cfg, const std::vector<const CheckResult*>& checks,
                      const Options& o, std::uint64_t& calls);

// One check of one configuration on plugin pk. A fault is the verdict of the check that met it.
CheckResult run_check(plugin::PluginKernel& pk, const Config& cfg, int check, const Options& o,
                      const Plan& plan);

// Every check of every configuration on o.threads processes; the results in configuration order.
// pk serves the checks when they run in this process (threads 1); otherwise each runner loads
// its own plugin worker. Adds the plugin calls of the checks used to `calls`.
std::vector<ConfigResult> run_configs(plugin::PluginKernel& pk, const std::vector<Config>& cfgs,
                                      const Options& o, const Plan& plan, std::uint64_t& calls);

}  // namespace ropecheck::validate
