// The hint of a failing run (verify::advise): for each hint, a firing case whose advice, followed,
// makes every vector pass, and silent cases -- a correct kernel under its true declaration and
// the nearest neighbour of the hint's trigger (the same cause on all but one vector; the rule's
// threshold just missed; a cause just outside the candidates).
//
// The outputs come from kernels emulated here in float / bf16 / f16 arithmetic as engines compute
// them (HF's f32 inv_freq and f32(m) * inv_freq, a cos/sin table rounded into a narrower format,
// truncation into bf16, an angle computed wholly in bf16), or from a long-double rotation of
// another spec (another base, position, layout, rotary_dim, sin sign) rounded once into f32:
// none from the reference under test.
#include "ropecheck/verify/advise.hpp"

#include "emulated_rope.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

namespace ropecheck::verify {
namespace {

using namespace emulated;

RopeSpec make_spec(std::int64_t head_dim, std::int64_t rotary_dim, bool half, double base) {
  RopeSpec s;
  s.head_dim = head_dim;
  s.rotary_dim = rotary_dim;
  s.layout = half ? Layout::half : Layout::interleaved;
  s.base = base;
  return s.normalized();
}

Policy f32_policy() {
  Policy p;
  p.angle = p.table = p.arithmetic = Dtype::f32;
  p.recipe = AngleRecipe::hf_f32;
  return p;
}

const std::vector<std::int64_t> kPositions = {0, 1, 2, 7, 100, 1000, 4095, 4096, 30000, 100000};
constexpr std::int64_t kHeads = 2;

// A recorded run: the emulated kernel on every (position, head), inputs in the storage dtype.
struct Dump {
  RopeSpec spec;
  Dtype dtype = Dtype::f32;
  std::vector<std::int64_t> pos = kPositions;
  std::vector<double> x, y;
  std::int64_t n() const { return static_cast<std::int64_t>(x.size()) / spec.head_dim; }
};

Dump record(const RopeSpec& spec, Dtype d, const std::function<Emu(std::int64_t vector)>& kernel,
            std::vector<std::int64_t> positions = kPositions) {
  Dump r;
  r.spec = spec;
  r.dtype = d;
  r.pos = std::move(positions);
  const std::uint64_t seed = 1;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  const std::int64_t D = spec.head_dim;
  for (std::size_t t = 0; t < r.pos.size(); ++t)
    for (std::int64_t h = 0; h < kHeads; ++h) {
      const std::int64_t v = static_cast<std::int64_t>(t) * kHeads + h;
      std::vector<double> x(static_cast<std::size_t>(D));
      for (auto& e : x) {
        const float f = static_cast<float>(u(rng));
        e = d == Dtype::bf16 ? bf16_round(f) : f;
      }
      const auto y = emulate(kernel(v), x.data(), r.pos[t]);
      r.x.insert(r.x.end(), x.begin(), x.end());
      r.y.insert(r.y.end(), y.begin(), y.end());
    }
  return r;
}
Dump record(const RopeSpec& spec, Dtype d, const Emu& e,
            std::vector<std::int64_t> positions = kPositions) {
  return record(
      spec, d, [e](std::int64_t) { return e; }, std::move(positions));
}

// Every vector of the run passes under (policy, spec).
bool passes(const Dump& r, const Policy& p, const RopeSpec& s) {
  return failing_in_memory(PairChecker(p, s, r.dtype), r.n(), kHeads, r.pos.data(), 1, r.x.data(),
                           r.y.data(), 1)
      .empty();
}

Advice advise_run(const Dump& r, const Policy& p) {
  const auto failing = failing_in_memory(PairChecker(p, r.spec, r.dtype), r.n(), kHeads,
                                         r.pos.data(), 1, r.x.data(), r.y.data());
  return advise(p, {recorded_in_memory(r.spec, r.dtype, r.n(), kHeads, r.pos.data(), 1, r.x.data(),
                                       r.y.data(), failing)});
}

// The declaration / spec the advice's keys state, applied (what a user following it does).
void follow(const Advice& a, Policy& p, RopeSpec& s) {
  for (const auto& [k, v] : a.keys) {
    if (k == "table_precision")
      p.table = *parse_dtype(v);
    else if (k == "arithmetic_precision")
      p.arithmetic = *parse_dtype(v);
    else if (k == "angle_precision")
      p.angle = *parse_dtype(v);
    else if (k == "angle_recipe")
      p.recipe = *parse_angle_recipe(v);
    else if (k == "table_rounding")
      p.table_rounding = *parse_rounding(v);
    else if (k == "output_rounding")
      p.output_rounding = *parse_rounding(v);
    else if (k == "trig_argument")
      p.trig_argument = *parse_trig_argument(v);
    else if (k == "fused")
      p.fused = v == "true";
    else if (k == "base")
      s.base = std::stod(v);
    else if (k == "layout")
      s.layout = *parse_layout(v);
    else if (k == "rotary_dim")
      s.rotary_dim = std::stoll(v);
    else
      ADD_FAILURE() << "unknown key " << k;
  }
  s = s.normalized();
}

bool has_key(const Advice& a, const std::string& k, const std::string& v) {
  for (const auto& kv : a.keys)
    if (kv.first == k && kv.second == v) return true;
  return false;
}

// A declaration hint: the run fails as declared, the hint is a declaration, and followed (its
// keys applied to the declared policy) every vector passes.
Advice expect_declaration(const Dump& r, const Policy& declared) {
  EXPECT_FALSE(passes(r, declared, r.spec));
  const Advice a = advise_run(r, declared);
  EXPECT_EQ(a.kind, Advice::Kind::declaration) << a.text << a.skipped;
  Policy p = declared;
  RopeSpec s = r.spec;
  follow(a, p, s);
  EXPECT_EQ(s, r.spec);
  EXPECT_TRUE(passes(r, p, s)) << a.text;
  return a;
}

// A spec-mismatch hint naming `what`; the spec its keys describe (if any) passes.
Advice expect_mismatch(const Dump& r, const Policy& declared, const std::string& what) {
  EXPECT_FALSE(passes(r, declared, r.spec));
  const Advice a = advise_run(r, declared);
  EXPECT_EQ(a.kind, Advice::Kind::spec_mismatch) << a.text;
  EXPECT_NE(a.text.find("the output matches " + what), std::string::npos) << a.text;
  Policy p = declared;
  RopeSpec s = r.spec;
  follow(a, p, s);
  EXPECT_TRUE(p.table == declared.table && p.recipe == declared.recipe);
  if (!a.keys.empty()) EXPECT_TRUE(passes(r, p, s)) << a.text;
  return a;
}

const RopeSpec kSpec = make_spec(64, 64, true, 10000);

// ---- silent on a correct kernel under its true declaration
// ---------------------------------------

TEST(AdviseSilent, CorrectKernelsUnderTheirTrueDeclaration) {
  {  // HF f32
    const Dump r = record(kSpec, Dtype::f32, Emu{});
    ASSERT_TRUE(passes(r, f32_policy(), kSpec));
    EXPECT_EQ(advise_run(r, f32_policy()).kind, Advice::Kind::none);
  }
  {  // bf16 table declared so
    Emu e;
    e.table = Table::bf16;
    Policy p = f32_policy();
    p.table = Dtype::bf16;
    const Dump r = record(kSpec, Dtype::f32, e);
    ASSERT_TRUE(passes(r, p, kSpec));
    EXPECT_EQ(advise_run(r, p).kind, Advice::Kind::none);
  }
  {  // truncation into bf16 declared so
    Emu e;
    e.out = Out::bf16_toward_zero;
    Policy p = f32_policy();
    p.output_rounding = Rounding::toward_zero;
    const Dump r = record(kSpec, Dtype::bf16, e);
    ASSERT_TRUE(passes(r, p, kSpec));
    EXPECT_EQ(advise_run(r, p).kind, Advice::Kind::none);
  }
}

// ---- declarations
// ---------------------------------------------------------------------------------

TEST(AdviseFires, Bf16TableIsATableOnlyDeclaration) {
  Emu e;
  e.table = Table::bf16;
  const Advice a = expect_declaration(record(kSpec, Dtype::f32, e), f32_policy());
  EXPECT_TRUE(has_key(a, "table_precision", "bf16")) << a.text;
  EXPECT_FALSE(has_key(a, "arithmetic_precision", "bf16")) << a.text;  // not the arithmetic
}

TEST(AdviseFires, F16TableIsATableOnlyDeclaration) {
  Emu e;
  e.table = Table::f16;
  const Advice a = expect_declaration(record(kSpec, Dtype::f32, e), f32_policy());
  EXPECT_TRUE(has_key(a, "table_precision", "f16")) << a.text;
  EXPECT_EQ(a.keys.size(), 1u) << a.text;
}

TEST(AdviseFires, F32AngleDeclaredF64IsTheAngleRecipe) {
  Policy declared = f32_policy();
  declared.angle = Dtype::f64;
  declared.recipe = AngleRecipe::pow_product;
  const Advice a = expect_declaration(record(kSpec, Dtype::f32, Emu{}), declared);
  Policy p = declared;
  RopeSpec s = kSpec;
  follow(a, p, s);
  EXPECT_EQ(angle_precision(p), Dtype::f32) << a.text;
  EXPECT_EQ(p.table, Dtype::f32) << a.text;  // not a narrower table
}

TEST(AdviseFires, TruncationIntoBf16IsNamedWithItsLean) {
  Emu e;
  e.out = Out::bf16_toward_zero;
  const Advice a = expect_declaration(record(kSpec, Dtype::bf16, e), f32_policy());
  EXPECT_TRUE(has_key(a, "output_rounding", "toward_zero")) << a.text;
  EXPECT_NE(a.text.find("outputs lie below the exact magnitude"), std::string::npos) << a.text;
}

TEST(AdviseFires, Bf16TableAndArithmeticSaysWhatItMeans) {
  // The f32 angle, cos/sin cast to bf16, products and sum rounded to bf16, stored in f32 tensors:
  // beyond a bf16 table alone, within bf16 table and arithmetic.
  Emu e;
  e.table = Table::bf16;
  e.bf16_arithmetic = true;
  const Advice a = expect_declaration(record(kSpec, Dtype::f32, e), f32_policy());
  EXPECT_TRUE(has_key(a, "arithmetic_precision", "bf16")) << a.text;
  EXPECT_NE(a.text.find("an angle computed in bf16 is a bug it does not describe"),
            std::string::npos)
      << a.text;
}

// HF in bf16 (bf16 tensors): a bf16 table with f32 arithmetic already holds, the smaller change.
TEST(AdviseFires, HfBf16IsTheSmallestChangeThatHolds) {
  Emu e;
  e.table = Table::bf16;
  e.bf16_arithmetic = true;
  e.out = Out::bf16;
  const Advice a = expect_declaration(record(kSpec, Dtype::bf16, e), f32_policy());
  EXPECT_TRUE(has_key(a, "table_precision", "bf16")) << a.text;
}

// ---- spec mismatches, named as such -----------------------------------------------------------

TEST(AdviseFires, BaseOffByOne) {
  Emu e;
  e.angle = Angle::exact;
  e.base = 10001;
  const Advice a = expect_mismatch(record(kSpec, Dtype::f32, e), f32_policy(), "base 10001");
  EXPECT_TRUE(has_key(a, "base", "10001"));
}

TEST(AdviseFires, CommonBase) {
  Emu e;
  e.angle = Angle::exact;
  e.base = 500000;
  expect_mismatch(record(kSpec, Dtype::f32, e), f32_policy(), "base 500000");
}

TEST(AdviseFires, PositionOffByOne) {
  Emu e;
  e.angle = Angle::exact;
  e.offset = 1;
  expect_mismatch(record(kSpec, Dtype::f32, e), f32_policy(), "position m+1");
  e.offset = -1;
  expect_mismatch(record(kSpec, Dtype::f32, e), f32_policy(), "position m-1");
}

TEST(AdviseFires, OtherLayout) {
  Emu e;
  e.angle = Angle::exact;
  e.half = false;
  const Advice a =
      expect_mismatch(record(kSpec, Dtype::f32, e), f32_policy(), "the interleaved layout");
  EXPECT_TRUE(has_key(a, "layout", "interleaved"));
}

TEST(AdviseFires, SinNegated) {
  Emu e;
  e.angle = Angle::exact;
  e.negate_sin = true;
  expect_mismatch(record(kSpec, Dtype::f32, e), f32_policy(), "the rotation by -m");
}

TEST(AdviseFires, RotaryDim) {
  Emu e;
  e.angle = Angle::exact;
  e.rotary_dim = 32;
  const Advice a = expect_mismatch(record(kSpec, Dtype::f32, e), f32_policy(), "rotary_dim 32");
  EXPECT_TRUE(has_key(a, "rotary_dim", "32"));
}

TEST(AdviseFires, PassThroughChanged) {
  const RopeSpec s = make_spec(64, 32, true, 10000);
  Emu e;
  e.rotary_dim = 32;
  e.zero_passthrough = true;
  const Dump r = record(s, Dtype::f32, e);
  ASSERT_FALSE(passes(r, f32_policy(), s));
  const Advice a = advise_run(r, f32_policy());
  EXPECT_EQ(a.kind, Advice::Kind::passthrough) << a.text;
  EXPECT_NE(a.text.find("only pass-through dims changed (rotary_dim 32 < head_dim 64"),
            std::string::npos)
      << a.text;
}

// Pass-through dims changed and one pair wrong: not only the pass-through dims.
TEST(AdviseSilent, PassThroughAndOneWrongPairIsNoPassThroughHint) {
  const RopeSpec s = make_spec(64, 32, true, 10000);
  Emu e;
  e.rotary_dim = 32;
  e.zero_passthrough = true;
  const Dump r = record(s, Dtype::f32, [e](std::int64_t v) {
    Emu k = e;
    k.negate_sin = v == 5;
    return k;
  });
  const Advice a = advise_run(r, f32_policy());
  EXPECT_NE(a.kind, Advice::Kind::passthrough) << a.text;
}

// ---- silent on the nearest neighbour of each trigger ------------------------------------------

// The cause on every vector but the last: a hint from the first failing vector alone (the old
// rule) would name it; the whole run does not pass under it.
TEST(AdviseSilent, CauseOnAllButOneVectorIsNoHint) {
  const auto last_broken = [](Emu e) {
    return [e](std::int64_t v) {
      Emu k = e;
      if (v == static_cast<std::int64_t>(kPositions.size()) * kHeads - 1)
        k.negate_sin = !k.negate_sin;
      return k;
    };
  };
  std::vector<Emu> causes(7);
  causes[0].table = Table::bf16;
  causes[1].table = Table::f16;
  causes[2].angle = Angle::exact, causes[2].base = 10001;
  causes[3].angle = Angle::exact, causes[3].offset = 1;
  causes[4].angle = Angle::exact, causes[4].half = false;
  causes[5].angle = Angle::exact, causes[5].rotary_dim = 32;
  causes[6].out = Out::bf16_toward_zero;
  for (std::size_t i = 0; i < causes.size(); ++i) {
    const Dtype d = causes[i].out == Out::f32 ? Dtype::f32 : Dtype::bf16;
    const Dump r = record(kSpec, d, last_broken(causes[i]));
    const Advice a = advise_run(r, f32_policy());
    EXPECT_EQ(a.kind, Advice::Kind::none) << "cause " << i << ": " << a.text;
  }
  // Sin negated on every vector but the last.
  Emu e;
  e.angle = Angle::exact;
  e.negate_sin = true;
  const Dump r = record(kSpec, Dtype::f32, last_broken(e));
  EXPECT_EQ(advise_run(r, f32_policy()).kind, Advice::Kind::none);
}

// Just outside the candidates: base + 2, position + 2, rotary_dim 30, an angle wholly in bf16 at
// long positions (a bug no declaration should hide).
TEST(AdviseSilent, CausesJustOutsideTheCandidatesAreNoHint) {
  std::vector<Emu> causes(4);
  causes[0].angle = Angle::exact, causes[0].base = 10002;
  causes[1].angle = Angle::exact, causes[1].offset = 2;
  causes[2].angle = Angle::exact, causes[2].rotary_dim = 30;
  causes[3].angle = Angle::bf16, causes[3].table = Table::bf16, causes[3].out = Out::bf16;
  causes[3].bf16_arithmetic = true;
  for (std::size_t i = 0; i < causes.size(); ++i) {
    const Dtype d = causes[i].out == Out::f32 ? Dtype::f32 : Dtype::bf16;
    const Dump r = record(kSpec, d, causes[i]);
    ASSERT_FALSE(passes(r, f32_policy(), kSpec));
    const Advice a = advise_run(r, f32_policy());
    EXPECT_EQ(a.kind, Advice::Kind::none) << "cause " << i << ": " << a.text;
  }
}

// Toward zero: bf16 outputs that are each one of the two bf16 neighbours of the exact value (so
// within the toward-zero bound), the one below chosen for `below` of every 16 elements. At 16 of
// 16 the hint names truncation; at 8 and 13 of 16 (round-to-nearest's half, and just under the
// rule's 7/8 = 14/16) it must not.
Dump faithful_bf16(int below_of_16) {
  Emu e;
  e.angle = Angle::exact;
  // Not position 0: its outputs are the (bf16) inputs themselves, neither below nor above.
  Dump r = record(kSpec, Dtype::bf16, e, {1, 2, 7, 100, 1000, 4095, 4096, 30000, 100000});
  // The outputs from a long-double exact rotation: the bf16 neighbour below or above.
  for (std::size_t v = 0; v < r.y.size() / 64; ++v) {
    const std::int64_t m = r.pos[v / kHeads];
    std::vector<long double> exact(64);
    for (std::int64_t i = 0; i < 32; ++i) {
      const LD a = static_cast<LD>(m) * std::pow(10000.0L, -LD(2 * i) / 64);
      const LD xa = r.x[v * 64 + i], xb = r.x[v * 64 + i + 32];
      exact[i] = xa * std::cos(a) - xb * std::sin(a);
      exact[i + 32] = xb * std::cos(a) + xa * std::sin(a);
    }
    for (std::int64_t j = 0; j < 64; ++j) {
      const float lo = bf16_round(static_cast<float>(exact[j]), true);  // toward zero
      const float step = std::fabs(lo) == 0 ? 0 : std::ldexp(1.0f, std::ilogb(lo) - 7);
      const float hi = lo + std::copysign(step, lo);  // the neighbour away from zero
      const bool pick_below = static_cast<int>(j % 16) < below_of_16;
      r.y[v * 64 + j] = pick_below || LD(lo) == exact[j] ? lo : hi;
    }
  }
  return r;
}

TEST(AdviseSilent, TowardZeroNeedsTheLean) {
  for (int below : {8, 13}) {
    const Dump r = faithful_bf16(below);
    Policy tz = f32_policy();
    tz.output_rounding = Rounding::toward_zero;
    ASSERT_TRUE(passes(r, tz, kSpec)) << below;  // the fit alone holds
    const Advice a = advise_run(r, f32_policy());
    EXPECT_FALSE(has_key(a, "output_rounding", "toward_zero")) << below << ": " << a.text;
    EXPECT_EQ(a.text.find("toward zero"), std::string::npos) << below << ": " << a.text;
  }
  const Advice a = advise_run(faithful_bf16(16), f32_policy());
  EXPECT_TRUE(has_key(a, "output_rounding", "toward_zero")) << a.text;
}

// Beyond the re-check budget no hint is given (never an unconfirmed one), and the advice says why.
TEST(AdviseSilent, BeyondTheBudgetIsNoHintAndSaysSo) {
  Emu e;
  e.table = Table::bf16;
  const Dump r = record(kSpec, Dtype::f32, e);
  const auto failing = failing_in_memory(PairChecker(f32_policy(), r.spec, r.dtype), r.n(), kHeads,
                                         r.pos.data(), 1, r.x.data(), r.y.data());
  AdviseOptions o;
  o.max_vector_checks = 10;
  const Advice a = advise(f32_policy(),
                          {recorded_in_memory(r.spec, r.dtype, r.n(), kHeads, r.pos.data(), 1,
                                              r.x.data(), r.y.data(), failing)},
                          o);
  EXPECT_EQ(a.kind, Advice::Kind::none);
  EXPECT_EQ(a.text, "");
  EXPECT_NE(a.skipped.find("exceeds the budget"), std::string::npos) << a.skipped;
}

// The declared bound is the narrowest that fits: a bf16-table kernel is not told to declare bf16
// arithmetic too (wider), an f16 table not bf16.
TEST(AdviseSilent, WiderDeclarationsAreNotNamedWhenANarrowerOneFits) {
  Emu e;
  e.table = Table::f16;
  const Advice a = advise_run(record(kSpec, Dtype::f32, e), f32_policy());
  EXPECT_FALSE(has_key(a, "table_precision", "bf16")) << a.text;
  EXPECT_FALSE(has_key(a, "arithmetic_precision", "f16")) << a.text;
}

}  // namespace
}  // namespace ropecheck::verify
