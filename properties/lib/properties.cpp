// The property list, names and kinds (read from the table, row.hpp / table.hpp), dtype dispatch,
// backward_view, and the RapidCheck driver that turns a property's generator into a Verdict (so
// that mutants and plugins can be judged programmatically).
#include "ropecheck/properties.hpp"

#include "gen.hpp"
#include "row.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <sstream>

namespace ropecheck::properties {

namespace {
// The dtype-free columns of the table (row.hpp): the same in every dtype's instance.
const detail::Table& rows() { return detail::table<Dtype::f64>(); }
const detail::Row* row(Property p) {
  const auto i = detail::index(p);
  return i < rows().size() ? &rows()[i] : nullptr;
}
}  // namespace

const std::vector<Property>& all_properties() {
  static const std::vector<Property> v = [] {
    std::vector<Property> r;
    for (const detail::Row& x : rows()) r.push_back(x.id);
    return r;
  }();
  return v;
}

bool is_backward_property(Property p) {
  const detail::Row* r = row(p);
  return r && r->family == detail::Family::backward;
}

std::optional<Property> forward_counterpart(Property p) {
  const detail::Row* r = row(p);
  return r ? r->forward : std::nullopt;
}

namespace {

// B(g, m) = s R(m)^T g = s R(-m) g: the backward as a forward kernel at the negated positions.
class BackwardView final : public Kernel {
 public:
  explicit BackwardView(const Kernel& k) : k_(k) {}
  std::string name() const override { return k_.name() + ".backward"; }
  std::string description() const override {
    return "the backward of " + k_.name() + " at the negated positions";
  }
  Policy policy(Dtype d) const override { return k_.policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override { return k_.supports(s, d); }
  Domain domain() const override {
    Domain d = k_.domain();
    const std::int64_t lo = d.min_position, hi = d.max_position;
    // [lo, hi] -> [-hi, -lo]; -hi >= INT64_MIN + 1, so every position of the view negates.
    d.min_position = -hi;
    d.max_position = lo == std::numeric_limits<std::int64_t>::min()
                         ? std::numeric_limits<std::int64_t>::max()
                         : -lo;
    return d;
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    const NegatedCall n = negate_positions(a);
    return n.ok ? k_.apply_backward(s, n.args) : KernelStatus::error;
  }

 private:
  const Kernel& k_;
};

}  // namespace

std::unique_ptr<Kernel> backward_view(const Kernel& k) { return std::make_unique<BackwardView>(k); }

bool is_multi_axis_property(Property p) {
  const detail::Row* r = row(p);
  if (!r) return false;
  if (r->forward) return is_multi_axis_property(*r->forward);  // its forward's needs, on the view
  return r->needs == detail::Needs::multi_axis || r->needs == detail::Needs::mrope_and_half;
}

const char* name(Property p) {
  const detail::Row* r = row(p);
  return r ? r->name : "?";
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
  if (is_backward_property(p)) {
    if (!k.has_backward()) {
      Verdict v;
      v.status = Status::not_applicable;
      v.message = "no backward (the kernel has no apply_backward)";
      return v;
    }
    if (const auto f = forward_counterpart(p)) {
      const auto view = backward_view(k);
      Options vo = o;
      if (vo.id.empty()) vo.id = test_id("Properties", k.name(), d, p);
      Verdict v = check(*f, *view, d, vo);
      // The counterexample is the view's: say how to read it. A mismatch keeps its prefix (the
      // classification) and names apply_backward, which the view's apply() called.
      const std::string note =
          "backward checked as the rotation by -m (s R(m)^T g = s R(-m) g): the positions below "
          "are negated, the backward was called at their negation; the input is the upstream "
          "gradient g\n";
      const std::string prefix = kMismatchPrefix;
      if (v.message.rfind(prefix, 0) == 0)
        v.message = prefix + "in apply_backward (" + note.substr(0, note.size() - 1) +
                    "): " + v.message.substr(prefix.size());
      else if (v.status == Status::failed || v.status == Status::mismatch)
        v.message = note + v.message;
      return v;
    }
  }
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
  // The first failing case starts the shrinking: arm the budgets of kernel calls and of time.
  void onTestCaseFinished(const rc::detail::CaseDescription& d) override {
    if (d.result.type == rc::detail::CaseResult::Type::Success) ++successes_;
    if (d.result.type != rc::detail::CaseResult::Type::Failure) return;
    shrink_.shrinking = true;
    shrink_.started = std::chrono::steady_clock::now();
    shrink_.deadline = shrink_.started + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::duration<double>(shrink_.seconds));
    smallest_failure_ = d.result.description;
  }
  // Once a budget is spent, leave RapidCheck's shrink walk at once: it would otherwise go on
  // through every remaining candidate of the current node, discarding each, and building each
  // candidate copies the case's whole recipe (every pick): quadratic in the case's size, seen
  // taking 20 s after a 1 s budget on a 63-wide head of four tokens. run_check catches it.
  void onShrinkTried(const rc::detail::CaseDescription& d, bool accepted) override {
    if (accepted) smallest_failure_ = d.result.description;
    if (shrink_.spent) throw ShrinkStopped{};
  }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
  const std::string& smallest_failure() const { return smallest_failure_; }
  int successes() const { return successes_; }
  struct ShrinkStopped {};

 private:
  gen::ShrinkBudget& shrink_;
  std::string smallest_failure_;
  int successes_ = 0;
};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// This check's wall-time budget for shrinking: Options::max_shrink_seconds, capped by what is left
// of the run's pool. An empty pool gives a budget of zero length (not "no budget"): the first
// counterexample stands unshrunk. No limit at all when neither is set.
double shrink_seconds_for(const Options& o) {
  if (!o.shrink_pool_ns) return o.max_shrink_seconds;
  const double left = std::max<double>(0, o.shrink_pool_ns->load()) * 1e-9;
  const double s = o.max_shrink_seconds > 0 ? std::min(o.max_shrink_seconds, left) : left;
  return s > 0 ? s : 1e-9;
}

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
    shrink = {};
    shrink.limit = o.max_shrink_calls;
    shrink.seconds = shrink_seconds_for(o);
    // Once the budget is spent RapidCheck still walks every remaining shrink candidate, and each
    // would regenerate its whole case (thousands of picks) before its first kernel call is
    // refused: refuse it on entry instead. The clock is read here too, so a candidate the deadline
    // has passed draws nothing.
    const auto guarded = [&f, &shrink] {
      if (!shrink.spent && shrink.past_deadline()) shrink.spent = shrink.out_of_time = true;
      if (shrink.spent) throw CaseResult(CaseResult::Type::Discard, "shrink budget spent");
      f();
    };
    try {
      return checkProperty(toProperty(guarded), md, params, quiet, {});
    } catch (const Quiet::ShrinkStopped&) {
      // The failure as RapidCheck would have reported it, with the smallest case found.
      FailureResult fr;
      fr.numSuccess = quiet.successes();
      fr.description = quiet.smallest_failure();
      return TestResult(fr);
    }
  }();
  double shrink_s = 0;
  if (shrink.shrinking) {
    const auto took = std::chrono::steady_clock::now() - shrink.started;
    shrink_s = std::chrono::duration<double>(took).count();
    if (o.shrink_pool_ns)
      o.shrink_pool_ns->fetch_sub(
          std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
  }
  shrink.shrinking = false;
  Verdict v = to_verdict(r, explicit_params ? params.maxSuccess : 0, params.maxSuccess,
                         shrink.spent, quiet.smallest_failure());
  v.shrink_out_of_time = shrink.spent && shrink.out_of_time;
  v.shrink_seconds = shrink_s;
  return v;
}

}  // namespace detail
}  // namespace ropecheck::properties
