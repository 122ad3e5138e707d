// Properties draw their cases inside a kernel's declared domain (Kernel::domain() and supports()),
// and a PASS means each ran its budget. Production kernels take a short list of head dims,
// int32 or non-negative positions, no magnitude scale, one layout: the same property suite must
// pass their correct versions (no "gave up" on a head_dim they never declared) and flag their
// broken ones (no silent skip), as it does for unrestricted kernels.
//
// Each test here failed on the engine before domains existed: a kernel restricted to {64, 128}
// had every property skipped (the applicability probes used head_dim 8), {8, 64, 128} gave up in
// 8 properties, PassThroughIsExact was skipped for kernels rejecting odd head dims, and
// LayoutsArePermutations demanded bit equality of any two layouts.
#include "mutants.hpp"
#include "ropecheck/properties.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

namespace {

namespace P = ropecheck::properties;
using ropecheck::Domain;
using ropecheck::Dtype;
using ropecheck::Kernel;
using ropecheck::KernelStatus;
using ropecheck::Layout;
using ropecheck::RopeSpec;
using ropecheck::TensorArgs;

// A kernel seen through a production-style declaration. Calls outside the declaration are a
// contract violation of the engine: they return error (a failure), never a silent skip.
class Restricted final : public Kernel {
 public:
  Restricted(const Kernel& k, Domain d, std::optional<Layout> only = {})
      : k_(k), d_(std::move(d)), only_(only) {
    d_.layouts_bitwise_symmetric = k.domain().layouts_bitwise_symmetric;
  }
  std::string name() const override { return k_.name(); }
  std::string description() const override { return k_.description() + " (restricted)"; }
  ropecheck::Policy policy(Dtype t) const override { return k_.policy(t); }
  Domain domain() const override { return d_; }
  bool supports(const RopeSpec& s, Dtype t) const override {
    if (!d_.head_dims.empty() &&
        std::find(d_.head_dims.begin(), d_.head_dims.end(), s.head_dim) == d_.head_dims.end())
      return false;
    if (only_ && s.layout != *only_) return false;
    return k_.supports(s, t);
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    const KernelStatus st = admitted(s, a);
    return st == KernelStatus::ok ? k_.apply(s, a) : st;
  }
  // The backward under the same declaration (the backward view negates its domain's positions).
  bool has_backward() const override { return k_.has_backward(); }
  KernelStatus apply_backward(const RopeSpec& s, const TensorArgs& a) const override {
    const KernelStatus st = admitted(s, a);
    return st == KernelStatus::ok ? k_.apply_backward(s, a) : st;
  }

 private:
  KernelStatus admitted(const RopeSpec& s, const TensorArgs& a) const {
    if (!supports(s, a.dtype)) return KernelStatus::unsupported;
    if (s.scale != 1 && !d_.magnitude_scale) return KernelStatus::error;
    if (a.in == a.out && !d_.in_place) return KernelStatus::error;
    for (std::int64_t i = 0; a.positions && i < a.n_tokens * a.n_axes; ++i)
      if (a.positions[i] < d_.min_position || a.positions[i] > d_.max_position)
        return KernelStatus::error;
    return KernelStatus::ok;
  }

  const Kernel& k_;
  Domain d_;
  std::optional<Layout> only_;
};

struct NamedDomain {
  std::string name;
  Domain domain;
  std::optional<Layout> only;
};

std::vector<NamedDomain> production_domains() {
  Domain a;
  a.head_dims = {64, 128};
  Domain b;
  b.head_dims = {80, 112, 256};
  b.min_position = std::numeric_limits<std::int32_t>::min();
  b.max_position = std::numeric_limits<std::int32_t>::max();
  Domain c;
  c.min_position = 0;
  c.magnitude_scale = false;
  c.head_dims = {128};
  Domain d;
  d.head_dims = {8, 64, 128};
  d.in_place = false;
  return {{"head_dims{64,128}", a, {}},
          {"head_dims{80,112,256},int32", b, {}},
          {"head_dims{128},positions>=0,no_scale,half_only", c, Layout::half},
          {"head_dims{8,64,128},out_of_place", d, {}}};
}

P::Options options(int cases) {
  P::Options o;
  o.seed = 20240611;
  o.max_success = cases;
  o.shrink = false;
  if (const char* e = std::getenv("ROPECHECK_ZOO_CASES")) o.max_success = std::atoi(e);
  return o;
}

// What a domain rules out, by the declaration: the property must say not applicable, with the
// declaration in its reason; everything else must run its whole budget and pass.
bool ruled_out(P::Property p, const NamedDomain& nd) {
  const Domain& d = nd.domain;
  if (P::is_multi_axis_property(p)) return true;  // the zoo baseline has no multi-axis layouts
  if (p == P::Property::InverseUndoes) return d.min_position >= 0;
  if (p == P::Property::InPlaceEqualsOutOfPlace ||
      p == P::Property::BackwardInPlaceEqualsOutOfPlace)
    return !d.in_place;
  if (p == P::Property::LayoutsArePermutations) return nd.only.has_value();
  return false;
}

TEST(Domains, CorrectKernelPassesEveryApplicablePropertyWithFullCoverage) {
  for (const auto& nd : production_domains()) {
    const Restricted k(ropecheck::zoo::baseline(), nd.domain, nd.only);
    for (auto p : P::all_properties()) {
      const P::Options o = options(100);  // ROPECHECK_ZOO_CASES overrides (.ci/sanitize: 30)
      const auto v = P::check(p, k, Dtype::f32, o);
      if (ruled_out(p, nd)) {
        EXPECT_EQ(v.status, P::Status::not_applicable) << nd.name << " " << P::name(p);
        EXPECT_FALSE(v.message.empty());
        continue;
      }
      EXPECT_EQ(v.status, P::Status::passed) << nd.name << " " << P::name(p) << ": " << v.message;
      EXPECT_EQ(v.cases, *o.max_success) << nd.name << " " << P::name(p);  // full coverage
    }
  }
}

// Item 3: a kernel that rejects odd head dims (and odd rotary widths) but takes partial rotary,
// e.g. 80/32: PassThroughIsExact runs its budget.
TEST(Domains, PassThroughRunsForKernelsRejectingOddHeadDims) {
  Domain d;
  d.head_dims = {80};
  const Restricted k(ropecheck::zoo::baseline(), d);
  const P::Options o = options(100);
  const auto v = P::check(P::Property::PassThroughIsExact, k, Dtype::f32, o);
  EXPECT_EQ(v.status, P::Status::passed) << v.message;
  EXPECT_EQ(v.cases, *o.max_success);
}

// Coverage: a kernel whose supports() rejects everything of a dtype it claims cannot PASS.
class RejectsEverything final : public Kernel {
 public:
  std::string name() const override { return "rejects_everything"; }
  std::string description() const override { return name(); }
  ropecheck::Policy policy(Dtype t) const override { return ropecheck::zoo::baseline().policy(t); }
  bool supports(const RopeSpec&, Dtype) const override { return false; }
  KernelStatus apply(const RopeSpec&, const TensorArgs&) const override {
    return KernelStatus::unsupported;
  }
};

TEST(Domains, NothingSupportedIsACoverageFailureNotAPass) {
  RejectsEverything k;
  for (auto p : P::all_properties()) {
    const auto v = P::check(p, k, Dtype::f32, options(20));
    if (P::is_backward_property(p)) {  // it declares no backward: nothing to draw for
      EXPECT_EQ(v.status, P::Status::not_applicable) << P::name(p) << ": " << v.message;
      continue;
    }
    EXPECT_EQ(v.status, P::Status::gave_up) << P::name(p) << ": " << v.message;
    EXPECT_NE(v.message.find("coverage"), std::string::npos);
  }
}

// Declarations are contracts: UNSUPPORTED for a spec supports() accepted is a mismatch. The lie
// sits in apply() or, with `in_backward`, in apply_backward() alone.
class LiesAboutHeadDims final : public Kernel {
 public:
  explicit LiesAboutHeadDims(bool in_backward = false) : in_backward_(in_backward) {}
  std::string name() const override { return in_backward_ ? "backward_lies" : "lies"; }
  std::string description() const override { return name(); }
  ropecheck::Policy policy(Dtype t) const override { return ropecheck::zoo::baseline().policy(t); }
  bool supports(const RopeSpec& s, Dtype t) const override {
    return ropecheck::zoo::baseline().supports(s, t);
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    if (!in_backward_ && s.head_dim > 96) return KernelStatus::unsupported;  // "any head_dim"
    return ropecheck::zoo::baseline().apply(s, a);
  }
  bool has_backward() const override { return true; }
  KernelStatus apply_backward(const RopeSpec& s, const TensorArgs& a) const override {
    if (in_backward_ && s.head_dim > 96) return KernelStatus::unsupported;
    return ropecheck::zoo::baseline().apply_backward(s, a);
  }

 private:
  bool in_backward_;
};

TEST(Domains, UnsupportedInsideTheDeclaredDomainIsADeclarationMismatch) {
  LiesAboutHeadDims k;
  const auto v = P::check(P::Property::MatchesReferenceWithinBound, k, Dtype::f32, options(200));
  EXPECT_EQ(v.status, P::Status::mismatch) << v.message;
  EXPECT_EQ(v.message.rfind(P::kMismatchPrefix, 0), 0u) << v.message;
}

// The same lie in a backward: the mismatch names apply_backward and keeps its prefix.
TEST(Domains, UnsupportedInsideTheDeclaredDomainOfABackwardIsADeclarationMismatch) {
  const LiesAboutHeadDims k(/*in_backward=*/true);
  const auto v =
      P::check(P::Property::BackwardMatchesReferenceWithinBound, k, Dtype::f32, options(200));
  EXPECT_EQ(v.status, P::Status::mismatch) << v.message;
  EXPECT_EQ(v.message.rfind(P::kMismatchPrefix, 0), 0u) << v.message;
  EXPECT_NE(v.message.find("in apply_backward"), std::string::npos) << v.message;
  const auto f = P::check(P::Property::MatchesReferenceWithinBound, k, Dtype::f32, options(200));
  EXPECT_EQ(f.status, P::Status::passed) << f.message;  // the forward tells no lie
}

// Item 5: two compiled code paths of one kernel may round differently (FMA contraction). Without
// the bitwise declaration LayoutsArePermutations compares within the bound; with it, bit for bit.
class HalfPathRoundsDifferently final : public Kernel {
 public:
  explicit HalfPathRoundsDifferently(bool bitwise) : bitwise_(bitwise) {}
  std::string name() const override { return "half_path_one_ulp"; }
  std::string description() const override { return name(); }
  ropecheck::Policy policy(Dtype t) const override { return ropecheck::zoo::baseline().policy(t); }
  bool supports(const RopeSpec& s, Dtype t) const override {
    return ropecheck::zoo::baseline().supports(s, t);
  }
  Domain domain() const override {
    Domain d;
    d.layouts_bitwise_symmetric = bitwise_;
    return d;
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    const KernelStatus st = ropecheck::zoo::baseline().apply(s, a);
    if (st != KernelStatus::ok || s.layout != Layout::half || a.dtype != Dtype::f32) return st;
    // One ulp on the first element of pair 0 of every vector: a different rounding, well inside
    // the pair bound.
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        float* y = static_cast<float*>(a.out) + t * a.token_stride + h * a.head_stride;
        if (s.n_pairs() > 0 && y[0] != 0 && std::isfinite(y[0]))
          y[0] = std::nextafter(y[0], 2 * y[0]);
      }
    return st;
  }

 private:
  bool bitwise_;
};

TEST(Domains, LayoutsComparedWithinTheBoundUnlessDeclaredBitwise) {
  const auto within = P::check(P::Property::LayoutsArePermutations,
                               HalfPathRoundsDifferently(false), Dtype::f32, options(100));
  EXPECT_EQ(within.status, P::Status::passed) << within.message;
  const auto bitwise = P::check(P::Property::LayoutsArePermutations,
                                HalfPathRoundsDifferently(true), Dtype::f32, options(100));
  EXPECT_EQ(bitwise.status, P::Status::failed) << bitwise.message;
}

// A mutant needs something a domain excludes: the bug cannot exist there (the half pairing bug of
// an interleaved kernel in a half-only kernel, a multi-axis bug in a 1-D domain, a scale applied
// twice where the scale is 1, in-place aliasing in an out-of-place kernel).
bool expressible(const ropecheck::zoo::Mutant& m, const NamedDomain& nd) {
  const bool scale_bug = m.name == "scale_applied_twice" || m.name == "bwd_scale_twice" ||
                         m.name == "bwd_scale_dropped";
  if (scale_bug && !nd.domain.magnitude_scale) return false;  // s = 1
  if (m.name == "in_place_aliasing" && !nd.domain.in_place) return false;
  if (!nd.only) return true;
  if (m.name == "half_pairing_in_interleaved") return *nd.only == Layout::interleaved;
  return !(m.focus_layout && *m.focus_layout != *nd.only);
}

// Every zoo mutant, seen through each production domain, is flagged by some property (the same
// verdict as its unrestricted twin in zoo_test). Prints the mutation table per domain.
TEST(Domains, EveryZooMutantIsFlaggedInsideRestrictedDomains) {
  std::ostringstream table;
  table << "\nMutation table through restricted domains (f32; first property that failed)\n";
  for (const auto& nd : production_domains()) {
    int caught = 0, total = 0;
    table << "domain " << nd.name << "\n";
    for (const auto& m : ropecheck::zoo::mutants()) {
      if (!expressible(m, nd)) {
        table << "  " << std::left << std::setw(36) << m.name << "not expressible in this domain\n";
        continue;
      }
      ++total;
      const Restricted k(*m.kernel, nd.domain, nd.only);
      std::string by;
      // The properties the unrestricted zoo names first, then the rest: stop at the first failure.
      std::vector<P::Property> order = m.expected;
      for (auto p : P::all_properties())
        if (std::find(order.begin(), order.end(), p) == order.end()) order.push_back(p);
      for (auto p : order) {
        auto o = options(60);
        if (m.focus_scaling || m.focus_layout) {
          o.variants = true;
          o.focus_scaling = m.focus_scaling;
          o.focus_layout = m.focus_layout;
        }
        const auto v = P::check(p, k, Dtype::f32, o);
        if (v.status == P::Status::failed || v.status == P::Status::mismatch) {
          by = P::name(p);
          break;
        }
      }
      if (!by.empty()) ++caught;
      EXPECT_FALSE(by.empty()) << m.name << " passes every property inside " << nd.name;
      table << "  " << std::left << std::setw(36) << m.name << (by.empty() ? "NOT CAUGHT" : by)
            << "\n";
    }
    table << "  score " << caught << "/" << total << "\n";
  }
  std::cout << table.str();
}

}  // namespace
