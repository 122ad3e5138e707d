// check_fused on small hand-built dumps, for what the random-dump property (fused_test) does not
// draw: per-token-head scales, a RoPE slice at an offset inside a wider cache row with several
// heads, an odd head_dim's pass-through element, an element whose range accepts a finite byte and
// NaN (overflow at a tie), the distance in fp8 ulps above a range, and the refused slots and
// positions. The correct kernel here stores the chain of the exact value (verify::chain_trace of
// ExactVector::value): inside chain_range(v - P, v + P) because the chain is monotone in v.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ropecheck/fp8.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/scan/fused.hpp"
#include "ropecheck/tensorio/tensorio.hpp"
#include "ropecheck/verify/verify.hpp"

namespace {

namespace tio = ropecheck::tensorio;
using ropecheck::Dtype;
using ropecheck::Fp8Format;
using ropecheck::Fp8Overflow;
using ropecheck::scan::FusedChain;
using ropecheck::scan::ScaleGranularity;

struct Dump {
  std::int64_t T = 3, H = 2, D = 8, W = 8, slots = 6;
  std::vector<double> x;  // [T, H, D], bf16 values
  std::vector<std::int64_t> pos, slot;
  std::vector<float> scale;
  std::vector<unsigned char> before, after;  // [slots, H, W]
};

ropecheck::RopeSpec spec_of(std::int64_t D) {
  ropecheck::RopeSpec s;
  s.head_dim = D;
  s.layout = ropecheck::Layout::half;
  return s.normalized();  // full rotary: an odd D leaves its last element passing through
}

float scale_of(const Dump& d, const FusedChain& c, std::int64_t t, std::int64_t h) {
  if (c.granularity == ScaleGranularity::tensor) return d.scale[0];
  if (c.granularity == ScaleGranularity::head) return d.scale[static_cast<std::size_t>(h)];
  return d.scale[static_cast<std::size_t>(t * d.H + h)];
}

// Writes each token's chain bytes into its slot's row at c.row_offset.
void run_kernel(Dump& d, const FusedChain& c) {
  const ropecheck::RopeSpec spec = spec_of(d.D);
  const ropecheck::reference::Oracle oracle(spec);
  d.after = d.before;
  for (std::int64_t t = 0; t < d.T; ++t) {
    if (d.slot[static_cast<std::size_t>(t)] < 0) continue;
    const auto rot = oracle.at({d.pos[static_cast<std::size_t>(t)]});
    for (std::int64_t h = 0; h < d.H; ++h) {
      const double* x = &d.x[static_cast<std::size_t>((t * d.H + h) * d.D)];
      const auto e = rot.apply(x);
      for (std::int64_t j = 0; j < d.D; ++j) {
        const double v = spec.is_passthrough(j) ? x[j] : e.value(j);
        const double q = ropecheck::verify::chain_trace(c, v, scale_of(d, c, t, h)).c;
        d.after[static_cast<std::size_t>((d.slot[static_cast<std::size_t>(t)] * d.H + h) * d.W +
                                         c.row_offset + j)] = ropecheck::fp8_encode(c.format, q);
      }
    }
  }
}

// policy: the declared precision of angle, table and arithmetic (f64: P ~ 1e-16 |v|, below half
// an f32 ulp, so the chain's f32 step makes most ranges one value; f32: P spans f32 ulps).
ropecheck::scan::FusedResult check(const Dump& d, const FusedChain& c, Dtype policy = Dtype::f64) {
  const ropecheck::RopeSpec spec = spec_of(d.D);
  auto x = std::make_shared<tio::Tensor>(
      tio::make_tensor("x", tio::ElemType::bf16, {d.T, d.H, d.D}, d.x));
  ropecheck::scan::FusedTensors t;
  t.x = tio::memory_tensor("x", tio::ElemType::bf16, {d.T, d.H, d.D}, x->data.data(), x);
  t.positions = tio::memory_tensor("positions", tio::ElemType::i64, {d.T}, d.pos.data());
  t.slot_mapping = tio::memory_tensor("slot_mapping", tio::ElemType::i64, {d.T}, d.slot.data());
  t.cache_before =
      tio::memory_tensor("cache_before", tio::ElemType::u8, {d.slots, d.H, d.W}, d.before.data());
  t.cache_after =
      tio::memory_tensor("cache_after", tio::ElemType::u8, {d.slots, d.H, d.W}, d.after.data());
  const std::vector<std::int64_t> sshape =
      c.granularity == ScaleGranularity::token_head ? std::vector<std::int64_t>{d.T, d.H}
      : c.granularity == ScaleGranularity::head     ? std::vector<std::int64_t>{d.H}
                                                    : std::vector<std::int64_t>{1};
  t.scale = tio::memory_tensor("scale", tio::ElemType::f32, sshape, d.scale.data());
  const ropecheck::Policy pol{policy, policy, policy, ropecheck::AngleRecipe::pow_product,
                              false,  "test"};
  const ropecheck::reference::Oracle oracle(spec);
  const ropecheck::verify::PairChecker pc(pol, spec, Dtype::bf16);
  return ropecheck::scan::check_fused(t, c, pc, oracle, 5);
}

Dump random_dump(std::int64_t D, std::int64_t W, std::uint64_t seed) {
  Dump d;
  d.D = D, d.W = W;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (std::int64_t k = 0; k < d.T * d.H * d.D; ++k)
    d.x.push_back(
        ropecheck::round_to_dtype((u(rng) - 0.5) * std::exp2(6 * u(rng) - 2), Dtype::bf16));
  d.pos = {7, 300, 41};
  d.slot = {4, 1, 2};
  d.before.resize(static_cast<std::size_t>(d.slots * d.H * d.W));
  for (auto& b : d.before) b = static_cast<unsigned char>(rng() & 0x7f);
  d.scale = {1.0f};
  return d;
}

// Each (token, head) its own scale, token-major as [T, H] holds them: the correct kernel passes,
// and the scales read head-major (a transposed index) are wrong wherever they differ.
TEST(FusedCases, PerTokenHeadScalesAreTokenMajor) {
  FusedChain c;
  c.format = Fp8Format::e4m3fn;
  c.granularity = ScaleGranularity::token_head;
  Dump d = random_dump(8, 8, 1);
  d.scale.clear();
  for (int k = 0; k < 6; ++k) d.scale.push_back(std::exp2(static_cast<float>(k - 2)));
  run_kernel(d, c);
  const auto ok = check(d, c);
  EXPECT_TRUE(ok.passed()) << (ok.findings.empty() ? "" : ok.findings[0]);
  EXPECT_EQ(ok.elements, d.T * d.H * d.D);
  Dump transposed = d;
  for (std::int64_t t = 0; t < d.T; ++t)
    for (std::int64_t h = 0; h < d.H; ++h)
      transposed.scale[static_cast<std::size_t>(t * d.H + h)] =
          d.scale[static_cast<std::size_t>(h * d.T + t)];
  run_kernel(transposed, c);  // bytes of a kernel that indexed the scales head-major
  transposed.scale = d.scale;
  EXPECT_FALSE(check(transposed, c).passed());
}

// The RoPE slice at element 4 of a 14-element row, two heads per row: the correct kernel passes,
// the bytes of each addressed row outside the slice are counted (H * (W - D) per written token),
// and a kernel that wrote the slice at element 0 fails.
TEST(FusedCases, SliceAtAnOffsetInAWiderRow) {
  FusedChain c;
  c.format = Fp8Format::e5m2;
  c.row_offset = 4;
  Dump d = random_dump(8, 14, 2);
  d.slot = {4, -1, 2};
  run_kernel(d, c);
  const auto ok = check(d, c);
  EXPECT_TRUE(ok.passed()) << (ok.findings.empty() ? "" : ok.findings[0]);
  EXPECT_EQ(ok.written_tokens, 2);
  EXPECT_EQ(ok.elements, 2 * d.H * d.D);
  EXPECT_EQ(ok.unchecked_bytes, 2 * d.H * (d.W - d.D));
  FusedChain at0 = c;
  at0.row_offset = 0;
  Dump wrong = d;
  run_kernel(wrong, at0);
  EXPECT_FALSE(check(wrong, c).passed());
}

// head_dim 9 at full rotary: element 8 passes through, its byte is the chain of x itself; a
// kernel that rotated it with a neighbour or zeroed it is caught.
TEST(FusedCases, OddHeadDimPassThroughElementIsChecked) {
  FusedChain c;
  c.format = Fp8Format::e4m3fn;
  Dump d = random_dump(9, 9, 3);
  for (std::int64_t t = 0; t < d.T; ++t)
    for (std::int64_t h = 0; h < d.H; ++h)
      d.x[static_cast<std::size_t>((t * d.H + h) * 9 + 8)] = 3.5;
  run_kernel(d, c);
  const auto ok = check(d, c);
  EXPECT_TRUE(ok.passed()) << (ok.findings.empty() ? "" : ok.findings[0]);
  EXPECT_EQ(ok.elements, d.T * d.H * 9);
  Dump wrong = d;
  wrong.after[static_cast<std::size_t>((2 * d.H + 1) * d.W + 8)] = 0;  // token 2 -> slot 2, head 1
  const auto bad = check(wrong, c);
  EXPECT_EQ(bad.wrong, 1);
  ASSERT_FALSE(bad.findings.empty());
  EXPECT_NE(bad.findings[0].find("element 8 (pass-through)"), std::string::npos) << bad.findings[0];
}

// One element on e4m3fn's overflow tie, 464 = (448 + 480) / 2, at position 0 (the exact value is
// x): below it rounds to 448 (even), just above it overflows, and under an f32 policy the
// element's range [464 - P, 464 + P] (P above an f32 ulp) holds both: 448 and NaN are accepted, the
// element is counted as a tie (and, its chain image q = 464 being past 448, as overflowed); 416 is
// wrong by one ulp below.
TEST(FusedCases, OverflowTieAcceptsMaxAndNaN) {
  FusedChain c;
  c.format = Fp8Format::e4m3fn;
  c.overflow = Fp8Overflow::nan;
  Dump d;
  d.T = 1, d.H = 1, d.D = 8, d.W = 8, d.slots = 1;
  d.x.assign(8, 0.0);
  d.x[0] = 464;
  d.pos = {0};
  d.slot = {0};
  d.before.assign(8, 0);
  d.scale = {1.0f};
  run_kernel(d, c);
  ASSERT_EQ(ropecheck::fp8_decode(c.format, d.after[0]), 448.0);
  const auto ok = check(d, c, Dtype::f32);
  EXPECT_TRUE(ok.passed()) << (ok.findings.empty() ? "" : ok.findings[0]);
  EXPECT_EQ(ok.ties, 1);
  EXPECT_EQ(ok.overflowed, 1);
  Dump nan = d;
  nan.after[0] = ropecheck::fp8_encode(c.format, std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(check(nan, c, Dtype::f32).passed());
  Dump low = d;
  low.after[0] = ropecheck::fp8_encode(c.format, 416.0);
  const auto bad = check(low, c, Dtype::f32);
  EXPECT_EQ(bad.wrong, 1);
  EXPECT_EQ(bad.max_ulps, 1);
}

// A byte above a two-value range: 1.0625 is the midpoint of 1 and 1.125 on e4m3fn's grid, so its
// range [1.0625 - P, 1.0625 + P] under an f32 policy accepts both; a stored 1.375 is two codes
// above the top (1.25, 1.375), and the distance is counted from the top of the range, not from its
// bottom (3).
TEST(FusedCases, UlpsAboveARangeCountFromItsTop) {
  FusedChain c;
  c.format = Fp8Format::e4m3fn;
  Dump d;
  d.T = 1, d.H = 1, d.D = 8, d.W = 8, d.slots = 1;
  d.x.assign(8, 0.0);
  d.x[1] = 1.0625;
  d.pos = {0};
  d.slot = {0};
  d.before.assign(8, 0);
  d.scale = {1.0f};
  run_kernel(d, c);
  EXPECT_TRUE(check(d, c, Dtype::f32).passed());
  EXPECT_EQ(check(d, c, Dtype::f32).ties, 1);
  d.after[1] = ropecheck::fp8_encode(c.format, 1.375);
  const auto bad = check(d, c, Dtype::f32);
  EXPECT_EQ(bad.wrong, 1);
  EXPECT_EQ(bad.max_ulps, 2);
  ASSERT_FALSE(bad.findings.empty());
  EXPECT_NE(bad.findings[0].find("off by 2 fp8 ulp(s)"), std::string::npos) << bad.findings[0];
}

// Bad dumps are refused (FusedError, the CLI's exit 2): a slot equal to the slot count, and a
// position at +-2^62 (outside the oracle's |m| < 2^62).
TEST(FusedCases, RefusesSlotsAndPositionsOutOfRange) {
  FusedChain c;
  Dump d = random_dump(8, 8, 4);
  run_kernel(d, c);
  Dump slot = d;
  slot.slot[0] = slot.slots;
  EXPECT_THROW(check(slot, c), ropecheck::scan::FusedError);
  slot.slot[0] = slot.slots - 1;  // the last slot is in range
  EXPECT_NO_THROW(check(slot, c));
  for (std::int64_t m : {std::int64_t{1} << 62, -(std::int64_t{1} << 62)}) {
    Dump p = d;
    p.pos[1] = m;
    try {
      check(p, c);
      ADD_FAILURE() << "position " << m << " accepted";
    } catch (const ropecheck::scan::FusedError& e) {
      EXPECT_NE(std::string(e.what()).find("2^62"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "position " << m << ": not a FusedError: " << e.what();
    }
  }
}

// divide: the chain accepts r / scale and r * fl32(1 / scale) (fp8_chain.hpp); the two f32
// quotients differ by an ulp and can land on different FP8 values. For a bf16 input at position 0
// (exact value = x) where they do (found by search over scales and inputs), both bytes are
// accepted.
TEST(FusedCases, DivideAcceptsTheReciprocalsProduct) {
  FusedChain c;
  c.format = Fp8Format::e4m3fn;
  c.divide = true;
  int found = 0;
  for (float sf : {3.0f, 5.0f, 7.0f, 10.0f, 11.0f, 13.0f})
    for (int k = 0; k < 4000 && found < 4; ++k) {
      const double x = ropecheck::round_to_dtype(0.01 * (k + 1) * sf, Dtype::bf16);
      const float rf = static_cast<float>(x);
      const double by_div = ropecheck::fp8_round(rf / sf, c.format, c.overflow);
      const double by_rcp = ropecheck::fp8_round(rf * (1.0f / sf), c.format, c.overflow);
      if (by_div == by_rcp) continue;
      ++found;
      Dump d;
      d.T = 1, d.H = 1, d.D = 8, d.W = 8, d.slots = 1;
      d.x.assign(8, 0.0);
      d.x[2] = x;
      d.pos = {0};
      d.slot = {0};
      d.before.assign(8, 0);
      d.scale = {sf};
      run_kernel(d, c);
      for (double v : {by_div, by_rcp}) {
        d.after[2] = ropecheck::fp8_encode(c.format, v);
        const auto r = check(d, c);
        EXPECT_TRUE(r.passed()) << "x " << x << " scale " << sf << " byte value " << v << ": "
                                << (r.findings.empty() ? "" : r.findings[0]);
      }
    }
  EXPECT_GT(found, 0);
}

// chain_range's contract (every chain image of a value inside [lo, hi] is accepted) when the
// interval crosses both overflow thresholds under overflow nan: both ends are NaN, yet 0 and the
// finite values between are images of values inside; only an interval past +max on both ends
// accepts NaN alone.
TEST(FusedCases, RangeAcrossBothOverflowsKeepsTheFiniteValues) {
  for (Fp8Format f : {Fp8Format::e4m3fn, Fp8Format::e4m3fnuz, Fp8Format::e5m2}) {
    FusedChain c;
    c.format = f;
    c.overflow = Fp8Overflow::nan;
    const double big = 4 * ropecheck::traits(f).max_finite;
    const auto r = ropecheck::verify::chain_range(c, -big, big, 1.0);
    EXPECT_TRUE(r.nan_ok) << name(f);
    for (double v : {-big / 8, 0.0, 1.0, big / 8}) {
      const double img = ropecheck::verify::chain_trace(c, v, 1.0).c;
      EXPECT_TRUE(img >= r.lo && img <= r.hi) << name(f) << " image " << img << " of " << v;
    }
    const auto up = ropecheck::verify::chain_range(c, 2 * big, 3 * big, 1.0);
    EXPECT_TRUE(up.nan_ok && up.lo > up.hi) << name(f);  // NaN alone
    const auto down = ropecheck::verify::chain_range(c, -3 * big, -2 * big, 1.0);
    EXPECT_TRUE(down.nan_ok && down.lo > down.hi) << name(f);
  }
}

}  // namespace
