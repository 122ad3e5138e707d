// The property suite as a library: every property is defined once, over a run-time Kernel and a
// dtype, and evaluated programmatically (a Verdict), so the same definitions check the built-in
// kernels (GTest front end), the bug-zoo mutants (which must FAIL) and third-party plugins
// (`ropecheck validate`, later).
#pragma once

#include "ropecheck/kernel.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ropecheck::properties {

enum class Property : int {
  PreservesNorm,
  ZeroPositionIsIdentity,
  ComposesAdditively,
  LayoutsArePermutations,
  ScoresDependOnlyOnOffset,
  MatchesReferenceWithinBound,
  PassThroughIsExact,
  InputUntouched,
  InPlaceEqualsOutOfPlace,
  TokensAreIndependent,
  InverseUndoes,
  // Multi-axis layouts with distinct per-axis positions (skipped for kernels without them).
  ComposesAdditivelyPerAxis,
  ScoresDependOnlyOnAxisOffsets,
  EqualAxesReduceToOneDimensional,
};

const std::vector<Property>& all_properties();
// The three multi-axis properties above (they need a kernel that takes mrope / imrope / axial).
bool is_multi_axis_property(Property p);
const char* name(Property p);
std::optional<Property> parse_property(const std::string& s);

struct Options {
  // Unset: RapidCheck's configuration (RC_PARAMS: seed, max_success, reproduce, ...).
  std::optional<int> max_success;
  std::optional<std::uint64_t> seed;
  bool shrink = true;
  // RapidCheck test id, used to key `reproduce=` in RC_PARAMS. Default
  // "<suite>/<kernel>_<dtype>.<Property>" with suite "Properties".
  std::string id;
  // Spec generator: also produce frequency-scaling variants and the proportional / mrope / imrope
  // / axial layouts (multi-axis specs are called with one position per token, i.e. t = h = w).
  // Off by default: a plugin on ABI v1 cannot receive the variants' parameters.
  bool variants = false;
  // With variants: draw every spec with this scaling kind / layout when it is valid for the spec
  // (the zoo focuses each scaling mutant on its variant).
  std::optional<ScalingKind> focus_scaling;
  std::optional<Layout> focus_layout;
};

// gave_up: too many generated cases were discarded (kernel rejects most specs); counts as a
// failure for a gate, but is not a counterexample.
enum class Status { passed, failed, skipped, gave_up };

struct Verdict {
  Status status = Status::passed;
  int cases = 0;        // successful cases run (passed) or before the failure (failed)
  std::string message;  // RapidCheck's failure report incl. the counterexample and reproduce
                        // string; the skip reason when skipped
};

// Test id as in the test names: "<suite>/<kernel>_<dtype>.<Property>".
std::string test_id(const std::string& suite, const std::string& kernel, Dtype d, Property p);

// Evaluates property p on kernel k with storage dtype d. Sets the reference precision for d
// (process-wide). Never throws for a misbehaving kernel: exceptions become failed verdicts.
Verdict check(Property p, const Kernel& k, Dtype d, const Options& opts = {});

// One entry per dtype (the per-dtype translation units).
Verdict check_f64(Property p, const Kernel& k, const Options& opts);
Verdict check_f32(Property p, const Kernel& k, const Options& opts);
Verdict check_f16(Property p, const Kernel& k, const Options& opts);
Verdict check_bf16(Property p, const Kernel& k, const Options& opts);

}  // namespace ropecheck::properties
