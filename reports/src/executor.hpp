// Internal: the executor — runs the plan's work units (this shard's share) on a pool of threads,
// polls Options::stop between units and reports progress. Results are stored per unit, so the
// document assembles them in work-list order whatever thread ran which unit.
#pragma once

#include "plan.hpp"

#include <variant>
#include <vector>

namespace ropecheck::reports::detail {

// SweepUnit, VariantSweepUnit -> SweepResult; the searches -> SearchResult; SpecialValuesUnit ->
// SpecialValues.
using UnitResult = std::variant<SweepResult, SearchResult, SpecialValues>;

struct Executed {
  std::vector<Unit> units;          // this shard's units, in work-list order
  std::vector<UnitResult> results;  // one per unit
  std::size_t units_total = 0;      // units of the whole sweep (every shard)
  unsigned threads = 0;             // threads used
};

// Runs the units of shard plan.main.o.shard_index (index mod shard_count) on
// plan.main.o.threads threads (0: hardware concurrency). Throws Interrupted when Options::stop
// asked to stop, and rethrows the first exception a unit threw.
Executed execute(const Plan& plan, const Progress& progress);

}  // namespace ropecheck::reports::detail
