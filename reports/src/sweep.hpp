// Internal: the numerics of the report's work units (sweep.cpp). Each function computes one work
// unit of the plan (plan.hpp) and returns plain figures; the document (document.cpp) turns them
// into JSON. Nothing here knows about threads, shards or JSON.
#pragma once

#include "ropecheck/kernel.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/reports/stats.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck::reports::detail {

// Position buckets: the rows of every per-bucket table.
inline constexpr std::int64_t kTwo20 = std::int64_t{1} << 20;
struct Bucket {
  const char* name;
  std::int64_t lo, hi;  // inclusive
};
inline constexpr Bucket kBuckets[] = {{"0", 0, 0},
                                      {"1-255", 1, 255},
                                      {"256-4095", 256, 4095},
                                      {"4096-65535", 4096, 65535},
                                      {"65536-2^20", 65536, kTwo20},
                                      {"beyond", kTwo20 + 1, INT64_MAX}};
inline constexpr int kNumBuckets = 6;
// The buckets a sweep up to max_position samples: a prefix of kBuckets.
int sampled_buckets(std::int64_t max_position);

// Octave series of the error-vs-position plots: octave_of(position) in [0, 64].
inline constexpr int kOctaves = 65;

// One sweep's configuration: the main sweep, or one variant section (its spec only).
struct Setup {
  Options o;
  std::vector<const Kernel*> kernels;
  std::vector<RopeSpec> specs;  // normalized
};

// How often the exact references answered, and how often they needed MPFR (the report's
// environment block; not part of the results).
struct OracleCounts {
  std::int64_t vectors = 0, fallbacks = 0;              // reference::Oracle
  std::int64_t recipe_pairs = 0, recipe_fallbacks = 0;  // RecipeReference questions (per pair)
};

// ---- sweep: one dtype x spec x bucket, every kernel of the setup on the same inputs ------------
struct SweepResult {
  std::vector<ErrorStats> stats;                       // per kernel
  std::vector<std::array<OctaveStats, kOctaves>> oct;  // per kernel
  std::vector<char> supported;                         // per kernel
  // Per kernel: sampled positions it refused although it supports the spec (past its cache; the
  // others ran one per call), and the smallest of them (INT64_MAX: none).
  std::vector<std::int64_t> refused, refused_min;
  std::vector<std::vector<Fp8Stats>> fp8;  // per kernel, per Options::fp8 format
  OracleCounts counts;
};
SweepResult sweep_unit(const Setup& s, int dtype, int spec, int bucket);

// ---- searches over position (safe context length, score offset) --------------------------------
// Powers of two up to max_position, then bisection between the last passing and the first failing
// probe. A kernel that supports none of the setup's specs would pass vacuously (no probe fails)
// and read as "safe up to the search limit"; it is reported as unsupported instead.
struct SearchResult {
  bool supported = true;
  std::int64_t safe = -1;           // largest position whose probe passed (-1: none)
  std::int64_t first_failure = -1;  // smallest failing probe position (-1: none up to max)
  double failure_error_u = 0;       // the error seen at first_failure
  double max_error_passing_u = 0;   // largest error among passing probes (<= budget)
  int probes = 0;
  OracleCounts counts;
};
// Budget: max per-pair error <= o.safe_budget_u * u over every spec.
SearchResult safe_context_search(const Setup& s, std::size_t kernel, int dtype);
// Budget: score_budget(); the relative score of two rotated vectors at shift D.
SearchResult score_offset_search(const Setup& s, std::size_t kernel, int dtype);
// Two vectors each within b u per pair: |<q^,k^> - <q,k>| <= (2b u + b^2 u^2) ||q|| ||k||.
double score_budget(double safe_budget_u, Dtype d);

// ---- special values: +-0, +-inf, NaN and subnormal inputs against the documented policy --------
struct SpecialCase {
  const char* input;  // e.g. "+inf, 1"
  std::int64_t position;
  double x_a, x_b;      // the pair's inputs (in the dtype)
  double got_a, got_b;  // the kernel's outputs
  std::string policy;   // what the policy expects
  bool other_pairs_unaffected, follows_policy;
};
struct SpecialValues {
  std::vector<SpecialCase> cases;  // empty when the kernel does not support the probe spec
  int violations = 0;
};
SpecialValues special_values(const Setup& s, std::size_t kernel, int dtype);

// ---- dynamic NTK composition across the length threshold (exact, no kernel) --------------------
struct DynamicRow {
  std::int64_t seq_len;
  double base_f64;
  double max_angle_mismatch_rad;
  bool composes;
};
struct DynamicComposition {
  RopeSpec spec;  // the dynamic variant's spec with seq_len = threshold
  std::int64_t threshold;
  std::vector<DynamicRow> rows;
};
DynamicComposition dynamic_composition();

}  // namespace ropecheck::reports::detail
