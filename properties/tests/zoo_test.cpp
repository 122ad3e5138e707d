// The bug zoo: every mutant must be caught by each property it names (mutation score 100%), the
// unmutated zoo baseline must pass every property (control), and the full mutation table
// (mutant -> properties that caught it) is printed. Uses the same property definitions as the
// kernel gates, on f32 storage, with a fixed seed and shrinking off (only the verdict matters).
#include "mutants.hpp"
#include "ropecheck/properties.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

namespace {

namespace P = ropecheck::properties;
using ropecheck::Dtype;

P::Options zoo_options() {
  P::Options o;
  // Fixed, independent of RC_PARAMS so that the table is reproducible; ROPECHECK_ZOO_CASES
  // raises the case count (the deep variant).
  o.seed = 20240611;
  o.max_success = 60;
  if (const char* e = std::getenv("ROPECHECK_ZOO_CASES")) o.max_success = std::atoi(e);
  o.shrink = false;
  return o;
}

TEST(BugZoo, BaselinePassesEveryProperty) {
  for (auto p : P::all_properties()) {
    auto o = zoo_options();
    o.id = "Zoo/zoo_baseline_f32." + std::string(P::name(p));
    const auto v = P::check(p, ropecheck::zoo::baseline(), Dtype::f32, o);
    // The plain baseline has no multi-axis layouts: those properties are skipped here and
    // controlled by the scaled baseline below.
    if (P::is_multi_axis_property(p)) {
      EXPECT_EQ(v.status, P::Status::not_applicable) << P::name(p) << ": " << v.message;
      continue;
    }
    EXPECT_EQ(v.status, P::Status::passed) << P::name(p) << ": " << v.message;
  }
}

TEST(BugZoo, ScaledBaselinePassesEveryPropertyOnEveryVariant) {
  const std::vector<std::optional<ropecheck::ScalingKind>> kinds = {
      std::nullopt, ropecheck::ScalingKind::yarn, ropecheck::ScalingKind::longrope};
  for (auto p : P::all_properties())
    for (const auto& fk : kinds) {
      auto o = zoo_options();
      o.variants = true;
      o.focus_scaling = fk;
      o.id = "Zoo/zoo_scaled_baseline_f32." + std::string(P::name(p));
      const auto v = P::check(p, ropecheck::zoo::scaled_baseline(), Dtype::f32, o);
      EXPECT_EQ(v.status, P::Status::passed) << P::name(p) << ": " << v.message;
    }
}

// TokensAreIndependent's two strengths on one correct kernel whose batched calls round
// differently (FMA) from its single-token calls: bit for bit unless declared batch-variant, then
// within twice the bound. f64 storage, where the f64 arithmetic's last bit reaches the output.
TEST(BugZoo, BatchDependentKernelPassesOnlyWhenDeclaredBatchVariant) {
  auto o = zoo_options();
  o.id = "Zoo/zoo_fma_when_batched_f64.TokensAreIndependent";
  const auto undeclared = P::check(P::Property::TokensAreIndependent,
                                   ropecheck::zoo::batch_dependent(false), Dtype::f64, o);
  EXPECT_EQ(undeclared.status, P::Status::failed) << undeclared.message;
  EXPECT_NE(undeclared.message.find("!= batched"), std::string::npos) << undeclared.message;
  for (auto p : {P::Property::TokensAreIndependent, P::Property::MatchesReferenceWithinBound}) {
    o.id = "Zoo/zoo_fma_when_batched_declared_f64." + std::string(P::name(p));
    const auto v = P::check(p, ropecheck::zoo::batch_dependent(true), Dtype::f64, o);
    EXPECT_EQ(v.status, P::Status::passed) << P::name(p) << ": " << v.message;
  }
}

// The mutant both shrink-budget tests run: it fails TokensAreIndependent on many-token cases, so
// shrinking has work to do.
const ropecheck::zoo::Mutant* first_position_broadcast() {
  for (const auto& z : ropecheck::zoo::mutants())
    if (z.name == "first_position_broadcast") return &z;
  return nullptr;
}

// A shrink budget spent mid-way still reports the smallest counterexample found, not the
// budget's own discard ("shrink budget spent"): RapidCheck re-evaluates the shrunk case for its
// description, which the spent budget refuses.
TEST(BugZoo, SpentShrinkBudgetKeepsTheCounterexample) {
  const auto* m = first_position_broadcast();
  ASSERT_NE(m, nullptr);
  auto o = zoo_options();
  o.shrink = true;
  o.max_shrink_calls = 3;
  o.id = "Zoo/first_position_broadcast_f32.TokensAreIndependent";
  const auto v = P::check(P::Property::TokensAreIndependent, *m->kernel, Dtype::f32, o);
  EXPECT_EQ(v.status, P::Status::failed) << v.message;
  EXPECT_TRUE(v.shrink_budget_spent);
  EXPECT_NE(v.message.find("!= batched"), std::string::npos) << v.message;
}

// The wall-time budget: a deadline already past when shrinking starts still keeps the first
// counterexample (not the budget's discard), says the clock stopped it, and an empty run pool
// does the same for a check that finds nothing left (Options::shrink_pool_ns).
TEST(BugZoo, SpentShrinkTimeKeepsTheCounterexample) {
  const auto* m = first_position_broadcast();
  ASSERT_NE(m, nullptr);
  auto o = zoo_options();
  o.shrink = true;
  o.max_shrink_seconds = 1e-9;
  o.id = "Zoo/first_position_broadcast_f32.TokensAreIndependent";
  const auto v = P::check(P::Property::TokensAreIndependent, *m->kernel, Dtype::f32, o);
  EXPECT_EQ(v.status, P::Status::failed) << v.message;
  EXPECT_TRUE(v.shrink_budget_spent);
  EXPECT_TRUE(v.shrink_out_of_time);
  EXPECT_NE(v.message.find("!= batched"), std::string::npos) << v.message;

  std::atomic<std::int64_t> pool{0};
  o.max_shrink_seconds = 60;
  o.shrink_pool_ns = &pool;
  const auto e = P::check(P::Property::TokensAreIndependent, *m->kernel, Dtype::f32, o);
  EXPECT_EQ(e.status, P::Status::failed) << e.message;
  EXPECT_TRUE(e.shrink_out_of_time);
  EXPECT_LT(e.shrink_seconds, 1.0);
  EXPECT_NE(e.message.find("!= batched"), std::string::npos) << e.message;

  // With time left the pool pays for the shrinking it got, and the call budget still applies.
  pool = std::int64_t{60} * 1000000000;
  o.max_shrink_calls = 3;
  const auto f = P::check(P::Property::TokensAreIndependent, *m->kernel, Dtype::f32, o);
  EXPECT_TRUE(f.shrink_budget_spent);
  EXPECT_FALSE(f.shrink_out_of_time);
  EXPECT_LT(pool.load(), std::int64_t{60} * 1000000000);
}

// A kernel declaring one multi-axis layout only (the scaled baseline restricted to it) is
// checked by the 1-D properties on its own specs, called with t = h = w, and passes them: they
// are not skipped. Not applicable: the two-layout, partial-rotary properties (the probe grid
// has no partial multi-axis spec) and EqualAxes without a 1-D half twin.
class OnlyLayout final : public ropecheck::Kernel {
 public:
  OnlyLayout(const ropecheck::Kernel& k, ropecheck::Layout l) : k_(k), l_(l) {}
  std::string name() const override { return k_.name() + "_only"; }
  std::string description() const override { return k_.description(); }
  ropecheck::Policy policy(Dtype d) const override { return k_.policy(d); }
  ropecheck::Domain domain() const override { return k_.domain(); }
  bool supports(const ropecheck::RopeSpec& s, Dtype d) const override {
    return s.layout == l_ && k_.supports(s, d);
  }
  ropecheck::KernelStatus apply(const ropecheck::RopeSpec& s,
                                const ropecheck::TensorArgs& a) const override {
    return supports(s, a.dtype) ? k_.apply(s, a) : ropecheck::KernelStatus::unsupported;
  }
  bool has_backward() const override { return k_.has_backward(); }
  ropecheck::KernelStatus apply_backward(const ropecheck::RopeSpec& s,
                                         const ropecheck::TensorArgs& a) const override {
    return supports(s, a.dtype) ? k_.apply_backward(s, a) : ropecheck::KernelStatus::unsupported;
  }

 private:
  const ropecheck::Kernel& k_;
  ropecheck::Layout l_;
};

TEST(BugZoo, MultiAxisOnlyKernelsGetTheOneDimensionalProperties) {
  using ropecheck::Layout;
  for (Layout l : {Layout::mrope, Layout::imrope, Layout::axial}) {
    const OnlyLayout k(ropecheck::zoo::scaled_baseline(), l);
    int ran = 0;
    for (auto p : P::all_properties()) {
      auto o = zoo_options();
      o.id = "Zoo/" + k.name() + "_f32." + std::string(P::name(p));
      const auto v = P::check(p, k, Dtype::f32, o);
      if (v.status == P::Status::not_applicable) {
        const bool expected = p == P::Property::LayoutsArePermutations ||
                              p == P::Property::PassThroughIsExact ||
                              p == P::Property::BackwardPassThroughIsExact ||
                              p == P::Property::EqualAxesReduceToOneDimensional;
        EXPECT_TRUE(expected) << P::name(p) << " n/a: " << v.message;
        continue;
      }
      EXPECT_EQ(v.status, P::Status::passed) << P::name(p) << ": " << v.message;
      ++ran;
    }
    EXPECT_GE(ran, 20) << static_cast<int>(l);
  }
}

TEST(BugZoo, EveryMutantIsCaughtByItsNamedProperties) {
  const auto& zoo = ropecheck::zoo::mutants();
  ASSERT_GE(zoo.size(), 12u);
  std::ostringstream table;
  table << "\nMutation table (f32 storage; X = property failed on the mutant, * = expected)\n";
  table << std::left << std::setw(34) << "mutant";
  for (auto p : P::all_properties()) {
    std::string n = P::name(p);
    if (P::is_backward_property(p)) n = "B" + n.substr(8);  // BMatch, BAdjoi, BUndoe, ...
    table << " " << n.substr(0, 6);
  }
  table << "\n";
  int caught = 0;
  for (const auto& m : zoo) {
    table << std::left << std::setw(34) << m.name;
    bool all_expected = true, any = false;
    std::string caught_by;
    // A mutant breaks the forward or the backward, never both: the other half's properties are
    // not run on it (blank in the table), which keeps the zoo's time (and its ASan run's) in check.
    const bool backward_mutant =
        std::all_of(m.expected.begin(), m.expected.end(),
                    [](P::Property e) { return P::is_backward_property(e); });
    for (auto p : P::all_properties()) {
      if (P::is_backward_property(p) != backward_mutant) {
        table << " " << std::setw(6) << "";
        continue;
      }
      auto o = zoo_options();
      o.id = "Zoo/" + m.name + "_f32." + std::string(P::name(p));
      if (m.focus_scaling || m.focus_layout) {
        o.variants = true;
        o.focus_scaling = m.focus_scaling;
        o.focus_layout = m.focus_layout;
      }
      const auto v = P::check(p, *m.kernel, Dtype::f32, o);
      const bool failed = v.status == P::Status::failed || v.status == P::Status::mismatch;
      const bool expected = std::find(m.expected.begin(), m.expected.end(), p) != m.expected.end();
      if (expected && !failed) {
        all_expected = false;
        ADD_FAILURE() << m.name << " not caught by " << P::name(p) << " (status "
                      << static_cast<int>(v.status) << ")";
      }
      if (failed) {
        any = true;
        caught_by += std::string(caught_by.empty() ? "" : ", ") + P::name(p);
      }
      table << " " << std::setw(6) << (std::string(failed ? "X" : ".") + (expected ? "*" : ""));
    }
    table << "\n";
    if (all_expected && any) ++caught;
    std::cout << "[mutant] " << m.name << " (" << m.modelled_on
              << ") caught by: " << (caught_by.empty() ? "NOTHING" : caught_by) << "\n";
  }
  table << "mutation score: " << caught << "/" << zoo.size() << "\n";
  std::cout << table.str();
  EXPECT_EQ(caught, static_cast<int>(zoo.size()));
}

}  // namespace
