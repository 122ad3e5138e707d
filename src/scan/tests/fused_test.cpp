// FP8 rounding (ropecheck/fp8.hpp) against brute force over each format's decoded codes, and the
// fused chain's accepted range (scan/fused.hpp) against the chain evaluated inside it.
#include "ropecheck/scan/fused.hpp"
#include "ropecheck/fp8.hpp"

#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/tensorio/tensorio.hpp"
#include "ropecheck/verify/verify.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <memory>
#include <set>

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <vector>

namespace {

using ropecheck::Fp8Format;
using ropecheck::Fp8Overflow;

const Fp8Format kFormats[] = {Fp8Format::e4m3fn, Fp8Format::e4m3fnuz, Fp8Format::e5m2};

// Nearest finite value by brute force, ties to the even code (mantissa LSB 0); the sign's zero.
double brute_round(Fp8Format f, double v) {
  double best = std::numeric_limits<double>::quiet_NaN(), dist = INFINITY;
  int best_code = -1;
  for (int b = 0; b < 256; ++b) {
    const double d = ropecheck::fp8_decode(f, static_cast<std::uint8_t>(b));
    if (!std::isfinite(d)) continue;
    const double e = std::fabs(d - v);
    const bool tie = e == dist && d != best;
    if (e < dist || (tie && (b % 2 == 0))) {
      dist = e, best = d, best_code = b;
    }
  }
  (void)best_code;
  if (best == 0) return ropecheck::traits(f).has_negative_zero ? std::copysign(0.0, v) : 0.0;
  return best;
}

TEST(Fp8, EveryCodeDecodesAndRoundsToItself) {
  for (Fp8Format f : kFormats) {
    int finite = 0;
    for (int b = 0; b < 256; ++b) {
      const double d = ropecheck::fp8_decode(f, static_cast<std::uint8_t>(b));
      if (!std::isfinite(d)) continue;
      ++finite;
      EXPECT_EQ(ropecheck::fp8_round(d, f, Fp8Overflow::saturate), d) << name(f) << " " << b;
      EXPECT_EQ(ropecheck::fp8_encode(f, d) == b || d == 0, true) << name(f) << " " << b;
    }
    // e4m3fn: 256 - 2 NaN; e4m3fnuz: 256 - 1 NaN; e5m2: 256 - 2 inf - 6 NaN.
    EXPECT_EQ(finite, f == Fp8Format::e4m3fn ? 254 : f == Fp8Format::e4m3fnuz ? 255 : 248);
    EXPECT_EQ(ropecheck::fp8_round(1e9, f, Fp8Overflow::saturate), ropecheck::traits(f).max_finite);
  }
}

TEST(Fp8, RoundingIsNearestEvenAgainstBruteForce) {
  std::mt19937_64 rng(7);
  for (Fp8Format f : kFormats) {
    const double top = ropecheck::traits(f).max_finite;
    std::vector<double> vals;
    for (int b = 0; b < 256; ++b) {  // every midpoint (a tie) and points around it
      const double d = ropecheck::fp8_decode(f, static_cast<std::uint8_t>(b));
      const double n = ropecheck::fp8_decode(f, static_cast<std::uint8_t>(b + 1 < 256 ? b + 1 : b));
      if (!std::isfinite(d) || !std::isfinite(n)) continue;
      const double mid = (d + n) / 2;
      for (double v : {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)})
        vals.push_back(v);
    }
    std::uniform_real_distribution<double> u(-1, 1);
    for (int i = 0; i < 20000; ++i)
      vals.push_back(u(rng) * top * std::exp2(-20 * std::fabs(u(rng))));
    for (double v : vals)
      ASSERT_EQ(ropecheck::fp8_round(v, f, Fp8Overflow::saturate), brute_round(f, v))
          << name(f) << " v=" << v;
  }
}

TEST(Fp8, OverflowPolicies) {
  using ropecheck::fp8_round;
  // e4m3fn: 464 is the tie of 448 and the first value past max (480): even -> 448; above -> NaN
  // (PyTorch's cast), saturate -> 448.
  EXPECT_EQ(fp8_round(464, Fp8Format::e4m3fn, Fp8Overflow::nan), 448);
  EXPECT_TRUE(std::isnan(fp8_round(464.01, Fp8Format::e4m3fn, Fp8Overflow::nan)));
  EXPECT_EQ(fp8_round(-1e6, Fp8Format::e4m3fn, Fp8Overflow::saturate), -448);
  EXPECT_EQ(fp8_round(-INFINITY, Fp8Format::e4m3fn, Fp8Overflow::saturate), -448);
  // e5m2: max 57344 (odd code), the tie 61440 goes up to the even point past max.
  EXPECT_EQ(fp8_round(61439, Fp8Format::e5m2, Fp8Overflow::inf), 57344);
  EXPECT_EQ(fp8_round(61440, Fp8Format::e5m2, Fp8Overflow::inf), INFINITY);
  EXPECT_TRUE(std::isnan(fp8_round(61440, Fp8Format::e5m2, Fp8Overflow::nan)));
  // e4m3fnuz: max 240, no -0.
  EXPECT_EQ(fp8_round(250, Fp8Format::e4m3fnuz, Fp8Overflow::saturate), 240);
  EXPECT_FALSE(std::signbit(fp8_round(-1e-9, Fp8Format::e4m3fnuz, Fp8Overflow::saturate)));
  EXPECT_TRUE(std::signbit(fp8_round(-1e-9, Fp8Format::e4m3fn, Fp8Overflow::saturate)));
  EXPECT_TRUE(std::isnan(ropecheck::fp8_decode(Fp8Format::e4m3fnuz, 0x80)));
}

// fp8_rank (computed from the exponent and mantissa) is the position of the value among the
// format's finite values in increasing order (one zero), for every code.
TEST(Fp8, RankIsThePositionAmongTheFiniteValues) {
  for (Fp8Format f : kFormats) {
    std::vector<double> v;
    for (int b = 0; b < 256; ++b) {
      const double d = ropecheck::fp8_decode(f, static_cast<std::uint8_t>(b));
      if (std::isfinite(d)) v.push_back(d);
    }
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());  // -0 == +0
    for (std::size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(ropecheck::fp8_rank(f, v[i]), static_cast<int>(i))
          << ropecheck::name(f) << " " << v[i];
  }
}

// verify::fp8_correct is the exact value's one rounding (the MP path), ties included: at position
// 0 the exact output is the input itself, so inputs on an FP8 midpoint are exact ties, and inputs
// a hair above them must round up (the double fast path straddles and defers to MP).
TEST(Fp8Chain, CorrectIsTheOneRoundingOfTheExactValue) {
  using ropecheck::verify::fp8_correct;
  using ropecheck::verify::fp8_round_exact;
  ropecheck::RopeSpec spec;
  spec.head_dim = 8;
  spec = spec.normalized();
  const ropecheck::reference::Oracle oracle(spec);
  const std::vector<double> x = {1.0625, 1.0625 + 0x1p-40, -1.1875,     464.0,
                                 465.0,  0x1p-10,          3 * 0x1p-10, -0.0};
  const auto y = oracle.at({0}).apply(x.data());
  const Fp8Format e4 = Fp8Format::e4m3fn;
  // 2^-10 and 3 x 2^-10: ties on e4m3fn's subnormal grid (multiples of 2^-9), to the even code.
  const double want_sat[] = {1.0, 1.125, -1.25, 448, 448, 0, 0x1p-8, 0};
  for (std::size_t j = 0; j < x.size(); ++j)
    EXPECT_EQ(fp8_correct(y, static_cast<std::int64_t>(j), 1.0, false, e4, Fp8Overflow::saturate),
              want_sat[j])
        << j;
  EXPECT_EQ(fp8_correct(y, 3, 1.0, false, e4, Fp8Overflow::nan), 448);  // the tie goes to 448
  EXPECT_TRUE(std::isnan(fp8_correct(y, 4, 1.0, false, e4, Fp8Overflow::nan)));
  // Scale 2 (exact): the ties move with it; divide by 0.5 is the same value.
  EXPECT_EQ(fp8_correct(y, 0, 2.0, false, e4, Fp8Overflow::saturate), 2.0);
  EXPECT_EQ(fp8_correct(y, 0, 0.5, true, e4, Fp8Overflow::saturate), 2.0);
  // A double product that lands on a midpoint the exact one is not on: (1.0625 - 2^-52) x
  // (1 + 2^-52) = 1.0625 + 2^-56 - 2^-104 rounds to 1.0625 in double (a tie, to even: 1.0), but
  // exactly it is above the tie: 1.125.
  const std::vector<double> near_tie = {1.0625 - 0x1p-52, 0, 0, 0, 0, 0, 0, 0};
  const auto yt = oracle.at({0}).apply(near_tie.data());
  EXPECT_EQ(fp8_correct(yt, 0, 1 + 0x1p-52, false, e4, Fp8Overflow::saturate), 1.125);
  // Random vectors, positions and scales: the fast path agrees with the MP definition.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-2, 2);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<double> xr(8);
    for (auto& e : xr) e = static_cast<float>(u(rng));
    const std::int64_t m =
        trial % 3 == 0 ? 0 : static_cast<std::int64_t>(std::exp2(20 * std::fabs(u(rng)) / 2));
    const double scale = trial % 4 == 0 ? 1.0 : std::exp2(4 * u(rng));
    const Fp8Format f = kFormats[trial % 3];
    const bool divide = trial % 2 == 1;
    const auto yr = oracle.at({m}).apply(xr.data());
    const ropecheck::reference::Mp s = ropecheck::reference::exact(scale);
    for (std::int64_t j = 0; j < 8; ++j, ++checked) {
      const ropecheck::reference::Mp q =
          divide ? ropecheck::reference::Mp(yr.mp(j) / s) : ropecheck::reference::Mp(yr.mp(j) * s);
      const double want = fp8_round_exact(q, f, Fp8Overflow::saturate);
      EXPECT_EQ(fp8_correct(yr, j, scale, divide, f, Fp8Overflow::saturate), want)
          << "trial " << trial << " j " << j;
      // And the MP rounding is the brute-force nearest-even of a value that is not a tie in
      // double (q's double is within half an ulp; a tie would need q exactly on a midpoint).
      const double qd = q.convert_to<double>();
      if (std::fabs(qd) < ropecheck::traits(f).max_finite)
        EXPECT_EQ(want, brute_round(f, qd)) << "trial " << trial << " j " << j;
    }
  }
  EXPECT_EQ(checked, 2400);
}

// Every chain image of a value inside [lo, hi] lies in chain_range(lo, hi), for each convention,
// intermediate and overflow policy; and a point interval accepts exactly one value.
TEST(FusedChain, RangeHoldsTheChainOfEveryValueInside) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  int checked = 0;
  for (Fp8Format f : kFormats)
    for (bool divide : {false, true})
      for (int im = 0; im < 3; ++im)
        for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nan}) {
          ropecheck::scan::FusedChain c;
          c.format = f, c.divide = divide, c.overflow = o;
          if (im == 1) c.intermediate = ropecheck::Dtype::bf16;
          if (im == 2) c.intermediate = ropecheck::Dtype::f16;
          for (int i = 0; i < 300; ++i) {
            const double v = u(rng) * std::exp2(10 * u(rng)),
                         w = std::fabs(v) * 1e-3 * (u(rng) + 1);
            const double scale = std::exp2(4 * u(rng));
            const auto r = ropecheck::scan::chain_range(c, v - w, v + w, scale);
            for (double t : {v - w, v, v + w, v - w / 3}) {
              const auto p = ropecheck::scan::chain_range(c, t, t, scale);
              ASSERT_TRUE(p.lo == p.hi || p.nan_ok);
              if (std::isnan(p.lo) || (p.nan_ok && p.lo > p.hi)) {
                ASSERT_TRUE(r.nan_ok);
              } else {
                ASSERT_TRUE((p.lo >= r.lo && p.hi <= r.hi) || (p.nan_ok && r.nan_ok))
                    << name(f) << " v=" << t << " [" << r.lo << ", " << r.hi << "]";
              }
              ++checked;
            }
          }
        }
  EXPECT_EQ(checked, 3 * 2 * 3 * 2 * 300 * 4);
}

// ---- random fused dumps: a correct kernel always passes; a broken one is flagged whenever its
// bytes differ from the correct kernel's -------------------------------------------------------

namespace tio = ropecheck::tensorio;
using ropecheck::Dtype;
using ropecheck::scan::FusedChain;

enum class Bug { none, truncation, scale_wrong_way, undeclared_bf16, stray_write, slot_position };

struct Dump {
  std::vector<double> x;  // bf16 values, [T, H, D]
  std::vector<std::int64_t> pos, slot;
  std::vector<unsigned char> before, after;
  float scale = 1;
  std::int64_t T = 0, H = 0, D = 0, slots = 0;
};

double truncate_fp8(Fp8Format f, double q) {  // toward zero, saturating
  double best = 0;
  for (int b = 0; b < 128; ++b) {
    const double d = ropecheck::fp8_decode(f, static_cast<std::uint8_t>(b));
    if (std::isfinite(d) && d <= std::fabs(q)) best = std::max(best, d);
  }
  return std::copysign(best, q);
}

// The kernel: f64 angle, cos/sin and rotation (half layout), then the chain of `c` (or a bug).
void run_kernel(Dump& d, const FusedChain& c, const ropecheck::RopeSpec& spec, Bug bug) {
  d.after = d.before;
  const std::int64_t n = d.D / 2;
  for (std::int64_t t = 0; t < d.T; ++t) {
    std::int64_t slot = d.slot[t];
    if (slot < 0 && bug == Bug::stray_write) slot = d.slots - 1;  // cache[-1] = ...
    if (slot < 0) continue;
    const double m = static_cast<double>(bug == Bug::slot_position ? slot : d.pos[t]);
    for (std::int64_t h = 0; h < d.H; ++h) {
      const double* x = &d.x[(t * d.H + h) * d.D];
      for (std::int64_t j = 0; j < d.D; ++j) {
        const std::int64_t i = j % n;
        const double th =
            std::pow(spec.base, -2.0 * static_cast<double>(i) / static_cast<double>(d.D));
        const double cs = std::cos(m * th), sn = std::sin(m * th);
        const double v = j < n ? x[j] * cs - x[j + n] * sn : x[j - n] * sn + x[j] * cs;
        double r = v;
        if (c.intermediate || bug == Bug::undeclared_bf16)
          r = ropecheck::round_to_dtype(v, Dtype::bf16);
        const bool divide = c.divide != (bug == Bug::scale_wrong_way);
        const float rf = static_cast<float>(r);
        const double q = divide ? rf / d.scale : rf * d.scale;
        const double out = bug == Bug::truncation ? truncate_fp8(c.format, q)
                                                  : ropecheck::fp8_round(q, c.format, c.overflow);
        d.after[(slot * d.H + h) * d.D + j] = ropecheck::fp8_encode(c.format, out);
      }
    }
  }
}

ropecheck::scan::FusedResult check(const Dump& d, const FusedChain& c,
                                   const ropecheck::RopeSpec& spec) {
  const ropecheck::Policy f64{
      Dtype::f64, Dtype::f64, Dtype::f64, ropecheck::AngleRecipe::pow_product, false, "test"};
  auto x = std::make_shared<tio::Tensor>(
      tio::make_tensor("x", tio::ElemType::bf16, {d.T, d.H, d.D}, d.x));
  auto keep = std::make_shared<std::vector<std::vector<unsigned char>>>();
  ropecheck::scan::FusedTensors t;
  t.x = tio::memory_tensor("x", tio::ElemType::bf16, {d.T, d.H, d.D}, x->data.data(), x);
  t.positions = tio::memory_tensor("positions", tio::ElemType::i64, {d.T}, d.pos.data());
  t.slot_mapping = tio::memory_tensor("slot_mapping", tio::ElemType::i64, {d.T}, d.slot.data());
  t.cache_before =
      tio::memory_tensor("cache_before", tio::ElemType::u8, {d.slots, d.H, d.D}, d.before.data());
  t.cache_after =
      tio::memory_tensor("cache_after", tio::ElemType::u8, {d.slots, d.H, d.D}, d.after.data());
  t.scale = tio::memory_tensor("scale", tio::ElemType::f32, {1}, &d.scale);
  const ropecheck::reference::Oracle oracle(spec);
  const ropecheck::verify::PairChecker pc(f64, spec, Dtype::bf16);
  return ropecheck::scan::check_fused(t, c, pc, oracle, 3);
}

// The dump of one drawn case: the chain, its spec and the bytes a correct kernel writes.
struct DrawnDump {
  FusedChain c;
  ropecheck::RopeSpec spec;
  Dump d;
};

// One random fused dump, drawn by RapidCheck (a failure shrinks toward head dim 8, no
// intermediate, scale 1, short positions): 3 formats, both conventions, a bf16 intermediate in
// about 1 of 5, overflowing scales in about 1 of 7, FP8 ties placed at position 0 (the exact value
// there is x itself), position 131072 and three more up to 2^22 (long context), a padding token
// (slot -1), the other slots a permutation, random bytes in the cache before the call.
DrawnDump draw_dump() {
  const auto full = [](auto g) { return rc::gen::resize(100, g); };  // inRange's whole range
  DrawnDump w;
  FusedChain& c = w.c;
  c.format = kFormats[*full(rc::gen::inRange(0, 3))];
  c.divide = *rc::gen::arbitrary<bool>();
  if (*rc::gen::weightedElement<bool>({{1, true}, {4, false}})) c.intermediate = Dtype::bf16;
  Dump& d = w.d;
  d.T = 6, d.H = 2, d.D = *rc::gen::element<std::int64_t>(8, 64), d.slots = 10;
  const bool overflow = *rc::gen::weightedElement<bool>({{1, true}, {6, false}});
  const int scale_exp = *full(rc::gen::inRange(-3, 3));
  d.scale = static_cast<float>(overflow ? (c.divide ? 1.0 / 256 : 256.0) : std::exp2(scale_exp));
  const auto bits = *rc::gen::container<std::vector<int>>(3, full(rc::gen::inRange(0, 23)));
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint32_t>());
  std::uniform_real_distribution<double> u(0, 1);
  w.spec.head_dim = d.D;
  w.spec.layout = ropecheck::Layout::half;
  w.spec = w.spec.normalized();
  std::vector<std::int64_t> perm(static_cast<std::size_t>(d.slots - 1));
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (std::int64_t t = 0; t < d.T; ++t) {
    d.pos.push_back(t == 0   ? 0
                    : t == 1 ? 131072
                    : t == 2 ? 5
                             : (std::int64_t{1} << bits[static_cast<std::size_t>(t - 3)]) +
                                   static_cast<std::int64_t>(u(rng) * 1000));
    d.slot.push_back(t == 2 ? -1 : perm[static_cast<std::size_t>(t)]);
    for (std::int64_t j = 0; j < d.H * d.D; ++j) {
      double v = (u(rng) - 0.5) * std::exp2(8 * u(rng) - 3);
      if (t == 0 && j % 3 == 0) {  // an FP8 tie at position 0: the midpoint of two codes / scale
        const int b = 1 + static_cast<int>(u(rng) * 100);
        const double lo = ropecheck::fp8_decode(c.format, static_cast<std::uint8_t>(b));
        const double hi = ropecheck::fp8_decode(c.format, static_cast<std::uint8_t>(b + 1));
        v = (lo + hi) / 2 * (c.divide ? d.scale : 1 / d.scale);
      }
      d.x.push_back(ropecheck::round_to_dtype(v, Dtype::bf16));
    }
  }
  d.before.resize(static_cast<std::size_t>(d.slots * d.H * d.D));
  for (auto& b : d.before) b = static_cast<unsigned char>(rng());
  return w;
}

// The acceptance rule on random dumps: the correct kernel passes every one (ties, overflow and
// long positions included), and each broken kernel (truncation, scale the wrong way, undeclared
// bf16, a stray write into the padding token's cache[-1], the slot as the position) is flagged in
// every dump where it changed a byte (a bug can leave a dump's bytes as they were: then there is
// nothing to flag). RC_CLASSIFY prints how often each case arose.
RC_GTEST_PROP(FusedChain, RandomDumpsCorrectPassesBrokenFlagged, ()) {
  DrawnDump w = draw_dump();
  const FusedChain& c = w.c;
  Dump& d = w.d;
  run_kernel(d, c, w.spec, Bug::none);
  const auto ok = check(d, c, w.spec);
  RC_ASSERT(ok.elements > 0);
  if (!ok.passed()) RC_FAIL(describe(c) + ": " + (ok.findings.empty() ? "" : ok.findings[0]));
  RC_CLASSIFY(ok.ties > 0, "an element accepting two bytes");
  RC_CLASSIFY(ok.overflowed > 0, "overflow");
  const std::vector<unsigned char> good = d.after;
  const char* names[] = {"",
                         "truncation",
                         "scale the wrong way",
                         "undeclared bf16",
                         "stray write",
                         "slot as position"};
  for (Bug b : {Bug::truncation, Bug::scale_wrong_way, Bug::undeclared_bf16, Bug::stray_write,
                Bug::slot_position}) {
    run_kernel(d, c, w.spec, b);
    if (d.after == good) continue;  // the bug changed no byte in this dump
    RC_CLASSIFY(true, std::string("changed by ") + names[static_cast<int>(b)]);
    if (check(d, c, w.spec).passed())
      RC_FAIL(std::string(names[static_cast<int>(b)]) + " passed: " + describe(c));
  }
}

}  // namespace
