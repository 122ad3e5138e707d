// Internal: the plan of a report run — the deterministic list of work units. The list depends
// only on the options and the kernels (never on threads or shards): the sharding protocol keeps
// the units whose index is shard_index mod shard_count, and merge() relies on every shard
// computing the same list. Unit seeds derive from the unit's fields, not from its index.
#pragma once

#include "sweep.hpp"

#include <string>
#include <variant>
#include <vector>

namespace ropecheck::reports::detail {

// Indices into Options::dtypes, Plan::main.specs / kernels, variant_cases() and kBuckets.
struct SafeContextUnit {
  int kernel, dtype;
};
struct ScoreOffsetUnit {
  int kernel, dtype;
};
struct SpecialValuesUnit {
  int kernel, dtype;
};
struct SweepUnit {
  int dtype, spec, bucket;
};
struct VariantSafeContextUnit {  // kernel: index into Plan::variants[variant].kernels
  int variant, kernel, dtype;
};
struct VariantSweepUnit {
  int variant, dtype, bucket;
};
using Unit = std::variant<SafeContextUnit, ScoreOffsetUnit, SpecialValuesUnit, SweepUnit,
                          VariantSafeContextUnit, VariantSweepUnit>;

struct Plan {
  Setup main;
  // One setup per variant section (its spec only, the `scalar` and `simd` kernels, a quarter of
  // the samples); empty when the variant sections do not run.
  std::vector<Setup> variants;
  int n_buckets = 0;        // buckets sampled: a prefix of kBuckets
  std::vector<Unit> units;  // the whole sweep, before any shard filter
};

// Throws OptionsError for bad options or no kernels.
Plan make_plan(const Options& o, const std::vector<const Kernel*>& kernels);

// "sweep f32 <spec> bucket 256-4095", "safe-context search simd bf16", ...: for the message of
// an interrupted run.
std::string unit_name(const Plan& plan, const Unit& unit);

}  // namespace ropecheck::reports::detail
