// What the property generators draw, as shares over a fixed seed (#40): a generator that stops
// drawing a case class (negative positions, a partial ratio, a scaling regime) or a fallback that
// stops steering draws into a kernel's domain (a probed partial spec for a kernel of one partial
// ratio) changes no verdict of a correct kernel and fails no other test, so these tests pin the
// shares. Each threshold sits well below the share the generator's own probabilities give
// (written beside it) and well above what the case class gets without its rule; the draw count
// (cases x draws per case) makes a share's standard deviation under 1.5 %.
#include "../lib/check.hpp"
#include "mutants.hpp"
#include "ropecheck/regimes.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <string>

namespace {

namespace g = ropecheck::properties::gen;
namespace detail = ropecheck::properties::detail;
using ropecheck::Dtype;
using ropecheck::Kernel;
using ropecheck::KernelStatus;
using ropecheck::Layout;
using ropecheck::RopeSpec;
using ropecheck::ScalingKind;

class Silent final : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

// Runs draw() `per_case` times in each of `cases` RapidCheck cases of a fixed seed (the
// generators draw through RapidCheck, so only inside a case).
void sample(int cases, int per_case, const std::function<void()>& draw) {
  rc::detail::TestParams params;
  params.maxSuccess = cases;
  params.seed = 1729;
  params.disableShrinking = true;
  rc::detail::TestMetadata md;
  md.id = md.description = "generator distribution";
  Silent silent;
  const auto r = rc::detail::checkProperty(rc::detail::toProperty([&] {
                                             for (int i = 0; i < per_case; ++i) draw();
                                           }),
                                           md, params, silent, {});
  rc::detail::SuccessResult ok;
  ASSERT_TRUE(r.match(ok)) << "a draw failed or was discarded";
}

struct Tally {
  std::map<std::string, int> n;
  int total = 0;
  void add(const std::string& k) { ++n[k], ++total; }
  double share(const std::string& k) const {
    const auto it = n.find(k);
    return it == n.end() ? 0.0 : static_cast<double>(it->second) / total;
  }
  // The shares, printed by every test (the figures CI logs show beside the thresholds).
  std::string text() const {
    std::string s;
    for (const auto& [k, v] : n) s += "  " + k + ": " + std::to_string(v) + "\n";
    return s + "  of " + std::to_string(total);
  }
};

TEST(GeneratorDistribution, PositionsIncludeNegatives) {
  g::Context c;  // any int64 position declared
  const auto& directed = g::directed_positions();
  Tally t;
  sample(100, 40, [&] {
    const std::int64_t m = g::position(c, std::int64_t{1} << 31);
    const bool listed = std::find(directed.begin(), directed.end(), m) != directed.end();
    t.add(m < 0 ? (listed ? "negative directed" : "negative drawn") : "non-negative");
  });
  std::cout << t.text() << "\n";
  // 40 % directed (19 of 39 negative): 0.19; 60 % log-uniform with a 25 % negative sign: 0.15.
  EXPECT_GT(t.share("negative directed"), 0.12) << t.text();
  EXPECT_GT(t.share("negative drawn"), 0.09) << t.text();
  // A declared range without negatives draws none.
  g::Context nonneg;
  nonneg.domain.declared.min_position = 0;
  sample(20, 40, [&] { RC_ASSERT(g::position(nonneg, std::int64_t{1} << 31) >= 0); });
}

TEST(GeneratorDistribution, PartialRatios) {
  for (std::int64_t hd : {64, 128}) {
    const auto model = ropecheck::model_rotary_dims(hd);
    Tally t;
    sample(100, 40, [&] {
      const std::int64_t rd = g::draw_rotary_dim(hd, g::SpecOptions{});
      if (rd == 0 || rd == hd)
        t.add("full");
      else if (std::find(model.begin(), model.end(), rd) != model.end())
        t.add("model " + std::to_string(rd));
      else
        t.add("other partial");
    });
    // 65 % full; 35 % partial, half of it a model ratio (1/2, 1/4, 0.4: 5.8 % each), half any
    // even rotary_dim (17.5 %).
    std::cout << "head_dim " << hd << ":\n" << t.text() << "\n";
    EXPECT_GT(t.share("full"), 0.55) << t.text();
    EXPECT_GT(t.share("other partial"), 0.10) << t.text();
    for (std::int64_t rd : model)
      EXPECT_GT(t.share("model " + std::to_string(rd)), 0.03) << t.text();
  }
}

// The zoo baseline through supports() = full rotary or rotary_dim = 3/4 head_dim: a ratio of no
// model list, nor of the probe grid's own ratios (a quarter, a half, one pair less).
class ThreeQuarters final : public Kernel {
 public:
  std::string name() const override { return "three_quarters"; }
  std::string description() const override { return "zoo baseline, 3/4 partial only"; }
  ropecheck::Policy policy(Dtype d) const override { return b().policy(d); }
  ropecheck::Domain domain() const override { return b().domain(); }
  bool supports(const RopeSpec& s, Dtype d) const override {
    const std::int64_t full = s.head_dim - s.head_dim % 2;
    return (s.rotary_dim == full || 4 * s.rotary_dim == 3 * s.head_dim) && b().supports(s, d);
  }
  KernelStatus apply(const RopeSpec& s, const ropecheck::TensorArgs& a) const override {
    return supports(s, a.dtype) ? b().apply(s, a) : KernelStatus::unsupported;
  }

 private:
  static const Kernel& b() { return ropecheck::zoo::baseline(); }
};

TEST(GeneratorDistribution, OnePartialRatioKernelGetsItsPartialShare) {
  const ThreeQuarters k;
  g::Context c;
  c.domain = detail::probe_domain<Dtype::f32>(k, std::nullopt, false);
  const auto has = [&](std::int64_t hd, std::int64_t rd) {
    return std::any_of(c.domain.partial.begin(), c.domain.partial.end(),
                       [&](const RopeSpec& s) { return s.head_dim == hd && s.rotary_dim == rd; });
  };
  EXPECT_TRUE(has(64, 48) && has(128, 96)) << "the probe of every even rotary_dim at the "
                                              "realistic head dims";
  EXPECT_FALSE(detail::not_applicable<Dtype::f32>(
      ropecheck::properties::Property::PassThroughIsExact, c.domain));
  Tally t;
  sample(100, 20, [&] {
    const RopeSpec s = detail::usable<Dtype::f32>(k, c);
    t.add(s.rotary_dim < s.head_dim - s.head_dim % 2 ? "partial" : "full");
  });
  std::cout << t.text() << "\n";
  // A first draw that asks for partial rotary (35 %, minus the few that come out full) falls back
  // to a probed partial spec; without the fallback only a drawn 3/4 is partial (~1 %).
  EXPECT_GT(t.share("partial"), 0.2) << t.text();
}

// Regime shares of add_scaling per kind (regimes.hpp names the regimes).
Tally regimes(ScalingKind kind, const std::function<std::string(const std::string&)>& key) {
  Tally t;
  sample(100, 20, [&] {
    RopeSpec s;
    s.head_dim = g::coin(50) ? 64 : 128;
    s.base = g::draw_base();
    s = s.normalized();
    g::add_scaling(s, kind);
    try {
      s = s.normalized();
    } catch (const ropecheck::SpecError&) {
      t.add("invalid");
      return;
    }
    t.add(key(ropecheck::scaling_regime(s)));
  });
  std::cout << ropecheck::name(kind) << ":\n" << t.text() << "\n";
  return t;
}

std::string same(const std::string& r) { return r; }

TEST(GeneratorDistribution, ScalingRegimes) {
  {
    const Tally t = regimes(ScalingKind::linear, same);
    // 50 % integers 2..8 (2, 4, 8 powers of two), 50 % log-uniform reals.
    EXPECT_GT(t.share("linear factor a power of two"), 0.12) << t.text();
    EXPECT_GT(t.share("linear factor not a power of two"), 0.5) << t.text();
  }
  {
    const Tally t = regimes(ScalingKind::dynamic, same);
    // A quarter below, a quarter at (seq_len 0 or L0), half above.
    EXPECT_GT(t.share("dynamic below trained length"), 0.18) << t.text();
    EXPECT_GT(t.share("dynamic at trained length"), 0.18) << t.text();
    EXPECT_GT(t.share("dynamic above trained length"), 0.4) << t.text();
  }
  {
    const Tally trunc = regimes(
        ScalingKind::yarn, [](const std::string& r) { return r.substr(0, r.find(" factor=")); });
    EXPECT_GT(trunc.share("yarn truncate=on"), 0.6) << trunc.text();   // 70 %
    EXPECT_GT(trunc.share("yarn truncate=off"), 0.2) << trunc.text();  // 30 %
    const Tally af = regimes(ScalingKind::yarn,
                             [](const std::string& r) { return r.substr(r.find("factor=")); });
    EXPECT_GT(af.share("factor=explicit"), 0.14) << af.text();    // 20 %
    EXPECT_GT(af.share("factor=mscale pair"), 0.2) << af.text();  // 35 % x 80 %
    EXPECT_GT(af.share("factor=derived"), 0.4) << af.text();      // 65 % x 80 %
  }
  {
    const Tally t = regimes(ScalingKind::llama3,
                            [](const std::string& r) { return r.substr(0, r.find(" (")); });
    EXPECT_GT(t.share("llama3 bands 3"), 0.5) << t.text();
  }
  {
    const Tally t = regimes(ScalingKind::longrope, same);
    // seq_len 0 or the original: short; original + 1: long; any up to max_pos: mostly long.
    EXPECT_GT(t.share("longrope short side"), 0.4) << t.text();
    EXPECT_GT(t.share("longrope long side"), 0.3) << t.text();
  }
}

}  // namespace
