// The property suite as a library: every property is defined once, over a run-time Kernel and a
// dtype, and evaluated programmatically (a Verdict), so the same definitions check the built-in
// kernels (GTest front end), the bug-zoo mutants (which must FAIL) and third-party plugins
// (`ropecheck validate`). The property table, the families and what a new property touches:
// properties/README.md.
#pragma once

#include "ropecheck/kernel.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
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
  // The backward (Kernel::apply_backward; not applicable to a kernel without one). Two relate
  // the backward B to the forward F on the same call:
  //   BackwardIsAdjoint      <F(x,m), g> = <x, B(g,m)> for random x and g, within the sum of the
  //                          two calls' pair bounds (exact dot products)
  //   BackwardUndoesForward  B(F(x,m),m) = s^2 x within the composition bound
  // The others are forward properties run on backward_view(k): B(g,m) as a rotation by -m, since
  // s R(m)^T g = s R(-m) g exactly (an angle m theta_i is odd in m for every variant and axis).
  // BackwardMatchesReferenceWithinBound is then the differential against the exact backward,
  // BackwardPassThroughIsExact says the pass-through gradient is copied, not written.
  BackwardMatchesReferenceWithinBound,
  BackwardIsAdjoint,
  BackwardUndoesForward,
  BackwardZeroPositionIsIdentity,
  BackwardComposesAdditively,
  BackwardPassThroughIsExact,
  BackwardInputUntouched,
  BackwardInPlaceEqualsOutOfPlace,
  BackwardTokensAreIndependent,
  BackwardComposesAdditivelyPerAxis,
};

const std::vector<Property>& all_properties();
// The three multi-axis properties above (they need a kernel that takes mrope / imrope / axial).
bool is_multi_axis_property(Property p);
const char* name(Property p);
// The backward properties (the last ten of the enum), and for those run on backward_view(k) the
// forward property they apply to it.
bool is_backward_property(Property p);
std::optional<Property> forward_counterpart(Property p);
// B(g, m) seen as a kernel of its own: apply(spec, args) calls k.apply_backward at the negated
// positions (real positions too), so every forward property checks it against s R(m)^T. Its
// Domain is k's with the position range negated; its policy is k's. Counterexamples name the
// negated positions (the message says so). k must outlive the view and have a backward.
std::unique_ptr<Kernel> backward_view(const Kernel& k);
std::optional<Property> parse_property(const std::string& s);

struct Options {
  // Unset: RapidCheck's configuration (RC_PARAMS: seed, max_success, reproduce, ...).
  std::optional<int> max_success;
  std::optional<std::uint64_t> seed;
  bool shrink = true;
  // Exact values from MPFR alone instead of the two-tier oracle (the same answers, bit for bit).
  bool oracle_mpfr = false;
  // Kernel calls the shrinking of one failure may make (0: no limit). Each shrink step re-runs the
  // property; through a plugin worker that is a few ms a call, and a failure over many elements
  // can take hundreds of thousands of steps. Counted in calls, not seconds, so a replay shrinks
  // to the same counterexample. Once spent, the counterexample is the smallest found so far.
  long max_shrink_calls = 0;
  // Wall-time budget of one failure's shrinking, in seconds (0: none), and an optional pool shared
  // by every check of a run (nanoseconds left; each check's shrinking takes its elapsed time out of
  // it). A failing kernel otherwise costs minutes where its first failing case already gave the
  // verdict: a check's budget is min(max_shrink_seconds, the pool's remainder), and a check that
  // finds the pool empty reports its first counterexample unshrunk. Unlike the call budget this
  // depends on the machine, so a replay may shrink further; the replay line still reproduces the
  // failure itself (the seed decides the failing case, not the clock).
  double max_shrink_seconds = 0;
  std::atomic<std::int64_t>* shrink_pool_ns = nullptr;
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
  // The kernel implements exactly this one (normalized) spec, as model code does (a fixed base,
  // head_dim, rotary_dim, layout and scaling): every case uses it and draws only positions,
  // inputs, tokens and heads; the probe grid is this spec alone, so properties that relate specs
  // it cannot take (other layouts, partial rotary) are not applicable.
  std::optional<RopeSpec> only_spec;
};

// The outcome of one property on one kernel x dtype.
//   passed          every case of the budget ran and held (cases == budget)
//   failed          a counterexample (message: the minimal one after shrinking)
//   not_applicable  the declared domain rules the property out (message: which declaration)
//   gave_up         coverage failure: too many generated cases could not be drawn inside the
//                   domain; counts as a failure of a gate, but is not a counterexample
//   mismatch        declaration mismatch: the kernel returned unsupported for a call inside its
//                   declared domain (supports() accepted the spec)
enum class Status { passed, failed, not_applicable, gave_up, mismatch };

// Message prefixes of the failures that get their own classification.
inline constexpr const char* kMismatchPrefix = "declaration mismatch: ";
inline constexpr const char* kNonFinitePrefix = "non-finite output: ";

// passed is the only status a gate accepts besides not_applicable.
inline bool is_failure(Status s) { return s != Status::passed && s != Status::not_applicable; }

struct Verdict {
  Status status = Status::passed;
  int cases = 0;   // cases that ran and held (passed: all of them; else before the failure)
  int budget = 0;  // cases asked for (0 when RC_PARAMS decides and the property did not run)
  // failed because a finite input gave a non-finite output (classified non_finite_output).
  bool non_finite = false;
  // The counterexample (failed, mismatch), the reason (not_applicable, gave_up). One paragraph
  // written by the property: spec, positions, inputs/outputs in hex floats, exact values, bound.
  std::string message;
  // RapidCheck's full report (the generated values of every draw), for --verbose.
  std::string details;
  bool shrink_budget_spent = false;  // the counterexample is the smallest found within the budget
  bool shrink_out_of_time = false;   // ... and the budget spent was the wall-time one
  double shrink_seconds = 0;         // wall time the shrinking took
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
