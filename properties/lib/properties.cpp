// Property registry, dtype dispatch and the RapidCheck driver that turns a property body into a
// Verdict (so that mutants and plugins can be judged programmatically).
#include "ropecheck/properties.hpp"

#include "gen.hpp"

#include <rapidcheck.h>

#include <functional>
#include <sstream>

namespace ropecheck::properties {

const std::vector<Property>& all_properties() {
  static const std::vector<Property> v = {Property::PreservesNorm,
                                          Property::ZeroPositionIsIdentity,
                                          Property::ComposesAdditively,
                                          Property::LayoutsArePermutations,
                                          Property::ScoresDependOnlyOnOffset,
                                          Property::MatchesReferenceWithinBound,
                                          Property::PassThroughIsExact,
                                          Property::InputUntouched,
                                          Property::InPlaceEqualsOutOfPlace,
                                          Property::TokensAreIndependent,
                                          Property::InverseUndoes,
                                          Property::ComposesAdditivelyPerAxis,
                                          Property::ScoresDependOnlyOnAxisOffsets,
                                          Property::EqualAxesReduceToOneDimensional};
  return v;
}

bool is_multi_axis_property(Property p) {
  return p == Property::ComposesAdditivelyPerAxis || p == Property::ScoresDependOnlyOnAxisOffsets ||
         p == Property::EqualAxesReduceToOneDimensional;
}

const char* name(Property p) {
  switch (p) {
    case Property::PreservesNorm:
      return "PreservesNorm";
    case Property::ZeroPositionIsIdentity:
      return "ZeroPositionIsIdentity";
    case Property::ComposesAdditively:
      return "ComposesAdditively";
    case Property::LayoutsArePermutations:
      return "LayoutsArePermutations";
    case Property::ScoresDependOnlyOnOffset:
      return "ScoresDependOnlyOnOffset";
    case Property::MatchesReferenceWithinBound:
      return "MatchesReferenceWithinBound";
    case Property::PassThroughIsExact:
      return "PassThroughIsExact";
    case Property::InputUntouched:
      return "InputUntouched";
    case Property::InPlaceEqualsOutOfPlace:
      return "InPlaceEqualsOutOfPlace";
    case Property::TokensAreIndependent:
      return "TokensAreIndependent";
    case Property::InverseUndoes:
      return "InverseUndoes";
    case Property::ComposesAdditivelyPerAxis:
      return "ComposesAdditivelyPerAxis";
    case Property::ScoresDependOnlyOnAxisOffsets:
      return "ScoresDependOnlyOnAxisOffsets";
    case Property::EqualAxesReduceToOneDimensional:
      return "EqualAxesReduceToOneDimensional";
  }
  return "?";
}

std::optional<Property> parse_property(const std::string& s) {
  for (Property p : all_properties())
    if (s == name(p)) return p;
  return std::nullopt;
}

std::string test_id(const std::string& suite, const std::string& kernel, Dtype d, Property p) {
  return suite + "/" + kernel + "_" + ropecheck::name(d) + "." + name(p);
}

Verdict check(Property p, const Kernel& k, Dtype d, const Options& o) {
  switch (d) {
    case Dtype::f64:
      return check_f64(p, k, o);
    case Dtype::f32:
      return check_f32(p, k, o);
    case Dtype::f16:
      return check_f16(p, k, o);
    case Dtype::bf16:
      return check_bf16(p, k, o);
  }
  Verdict v;
  v.status = Status::failed;
  v.message = "unknown dtype";
  return v;
}

namespace detail {

namespace {
// Prints nothing: with an explicit seed a check prints nothing itself (no "Using configuration"
// line, no reproduce map) and the caller decides what to show. It keeps the message of the
// smallest failure seen: RapidCheck takes the final description by evaluating the shrunk case
// once more, and once the shrink budget is spent that evaluation is discarded before it calls
// the kernel, which would leave "shrink budget spent" where the counterexample belongs.
class Quiet final : public rc::detail::TestListener {
 public:
  explicit Quiet(gen::ShrinkBudget& shrink) : shrink_(shrink) {}
  // The first failing case starts the shrinking: arm the budget of kernel calls.
  void onTestCaseFinished(const rc::detail::CaseDescription& d) override {
    if (d.result.type != rc::detail::CaseResult::Type::Failure) return;
    shrink_.shrinking = true;
    smallest_failure_ = d.result.description;
  }
  void onShrinkTried(const rc::detail::CaseDescription& d, bool accepted) override {
    if (accepted) smallest_failure_ = d.result.description;
  }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
  const std::string& smallest_failure() const { return smallest_failure_; }

 private:
  gen::ShrinkBudget& shrink_;
  std::string smallest_failure_;
};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// RapidCheck's result as a Verdict. budget: the cases asked for (0: RC_PARAMS decided);
// max_success: RapidCheck's parameter as this driver set it.
Verdict to_verdict(const rc::detail::TestResult& r, int budget, int max_success, bool shrink_spent,
                   const std::string& smallest_failure) {
  using namespace rc::detail;
  Verdict v;
  v.budget = budget;
  if (r.template is<SuccessResult>()) {
    v.status = Status::passed;
    v.cases = r.template get<SuccessResult>().numSuccess;
    if (budget == 0) v.budget = v.cases;
    return v;
  }
  std::ostringstream full;
  printResultMessage(r, full);
  v.details = full.str();
  if (r.template is<FailureResult>()) {
    const auto& fr = r.template get<FailureResult>();
    v.cases = fr.numSuccess;
    v.message = shrink_spent && !smallest_failure.empty() ? smallest_failure : fr.description;
    v.shrink_budget_spent = shrink_spent;
    v.status = Status::failed;
    if (starts_with(v.message, kMismatchPrefix)) v.status = Status::mismatch;
    if (starts_with(v.message, kNonFinitePrefix)) v.non_finite = true;
    return v;
  }
  if (r.template is<GaveUpResult>()) {
    const auto& gr = r.template get<GaveUpResult>();
    v.status = Status::gave_up;
    v.cases = gr.numSuccess;
    v.message = "coverage: only " + std::to_string(gr.numSuccess) + " of " +
                std::to_string(v.budget ? v.budget : max_success) +
                " cases could be drawn inside the declared domain (too many discarded; last "
                "reason: " +
                gr.description + ")";
    return v;
  }
  v.status = Status::failed;  // an error of the engine itself
  v.message = full.str();
  return v;
}
}  // namespace

Verdict run_check(const std::function<void()>& f, const std::string& id, const Options& o,
                  gen::ShrinkBudget& shrink) {
  using namespace rc::detail;
  TestMetadata md;
  md.id = id;
  md.description = id;
  TestParams params;  // RapidCheck's defaults, without reading the global configuration
  const bool explicit_params = o.max_success || o.seed || !o.shrink;
  Quiet quiet(shrink);
  const TestResult r = [&]() -> TestResult {
    if (!explicit_params)
      return checkTestable(f, md);  // RC_PARAMS decides (seed, max_success, reproduce=...)
    if (o.max_success) params.maxSuccess = *o.max_success;
    if (o.seed) params.seed = *o.seed;
    params.disableShrinking = !o.shrink;
    shrink = {false, o.max_shrink_calls, 0, false};
    // Once the budget is spent RapidCheck still walks every remaining shrink candidate, and each
    // would regenerate its whole case (thousands of picks) before its first kernel call is
    // refused: refuse it on entry instead.
    const auto guarded = [&f, &shrink] {
      if (shrink.spent) throw CaseResult(CaseResult::Type::Discard, "shrink budget spent");
      f();
    };
    auto result = checkProperty(toProperty(guarded), md, params, quiet, {});
    shrink.shrinking = false;
    return result;
  }();
  return to_verdict(r, explicit_params ? params.maxSuccess : 0, params.maxSuccess, shrink.spent,
                    quiet.smallest_failure());
}

}  // namespace detail
}  // namespace ropecheck::properties
