// Property registry, dtype dispatch and the RapidCheck driver that turns a property body into a
// Verdict (so that mutants and plugins can be judged programmatically).
#include "ropecheck/properties.hpp"

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
  return {Status::failed, 0, "unknown dtype"};
}

namespace detail {

Verdict run_check(const std::function<void()>& f, const std::string& id, const Options& o) {
  using namespace rc::detail;
  TestMetadata md;
  md.id = id;
  md.description = id;
  const TestResult r = [&]() -> TestResult {
    if (!o.max_success && !o.seed && o.shrink)
      return checkTestable(f, md);  // RC_PARAMS decides (seed, max_success, reproduce=...)
    TestParams params = configuration().testParams;
    if (o.max_success) params.maxSuccess = *o.max_success;
    if (o.seed) params.seed = *o.seed;
    params.disableShrinking = !o.shrink;
    return checkProperty(toProperty(f), md, params);
  }();
  Verdict v;
  std::ostringstream msg;
  if (r.template is<SuccessResult>()) {
    v.status = Status::passed;
    v.cases = r.template get<SuccessResult>().numSuccess;
    return v;
  }
  printResultMessage(r, msg);
  v.status = Status::failed;
  if (r.template is<FailureResult>()) v.cases = r.template get<FailureResult>().numSuccess;
  if (r.template is<GaveUpResult>()) {
    v.status = Status::gave_up;
    v.cases = r.template get<GaveUpResult>().numSuccess;
  }
  v.message = msg.str();
  return v;
}

}  // namespace detail
}  // namespace ropecheck::properties
