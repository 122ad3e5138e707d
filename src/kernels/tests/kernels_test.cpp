// Unit tests of the built-in kernels: golden values, exact identities (position 0, pass-through,
// in-place, strides, layout permutation, batching), bit-identity of the simd dispatch paths, the
// simd kernel's declared formula and trig contracts, and every kernel against the exact rotation
// within its bound. Every output buffer is surrounded by guard bytes. Tolerances come from the one
// tolerance table (ropecheck::bounds) through the kernel's declared policy, and the comparison
// with the exact rotation from ropecheck::verify; this file has no error terms of its own.
#include "../simd/trig.hpp"
#include "ropecheck/bounds.hpp"
#include "ropecheck/dtype.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/kernels/simd_info.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/spec.hpp"
#include "ropecheck/verify/verify.hpp"
#include "support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ropecheck {

// Readable dtype parameters in gtest's failure lines (found by ADL, so in ropecheck itself;
// static keeps it private to this test).
static void PrintTo(const Dtype& d, std::ostream* os) { *os << name(d); }

namespace {

using namespace kernel_tests;

bool is_nan(Dtype d, const Bytes& b, std::int64_t i) { return std::isnan(get(d, b, i)); }

// Bit-for-bit comparison. nan_any: any NaN matches any NaN (payload propagation through FMA is
// operand-order dependent and not part of any claim). zero_sign: +0 matches -0.
::testing::AssertionResult same_bits(Dtype d, const Bytes& a, const Bytes& b, bool nan_any = false,
                                     bool zero_sign = false) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "size mismatch";
  const std::int64_t n = static_cast<std::int64_t>(a.size()) / bytes_of(d);
  std::int64_t bad = 0, first = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    if (raw(d, a, i) == raw(d, b, i)) continue;
    if (nan_any && is_nan(d, a, i) && is_nan(d, b, i)) continue;
    if (zero_sign && get(d, a, i) == 0 && get(d, b, i) == 0) continue;
    if (first < 0) first = i;
    ++bad;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream m;
  m << bad << " of " << n << " elements differ; first at " << first << ": " << get(d, a, first)
    << " (0x" << std::hex << raw(d, a, first) << ") vs " << std::dec << get(d, b, first) << " (0x"
    << std::hex << raw(d, b, first) << ")";
  return ::testing::AssertionFailure() << m.str();
}

const std::vector<std::int64_t> kAwkwardPositions = {0,
                                                     1,
                                                     -1,
                                                     7,
                                                     4096,
                                                     65535,
                                                     std::int64_t{1} << 24 | 1,
                                                     (std::int64_t{1} << 31) - 1,
                                                     std::int64_t{1} << 31,
                                                     -(std::int64_t{1} << 31) - 5,
                                                     std::int64_t{1} << 40,
                                                     (std::int64_t{1} << 53) + 1,
                                                     std::numeric_limits<std::int64_t>::max(),
                                                     std::numeric_limits<std::int64_t>::min()};

std::string param_name(const std::string& kernel, Dtype d) { return kernel + "_" + name(d); }

// ==== per (kernel, dtype) tests =================================================================
struct KD {
  std::string kernel;
  Dtype dtype;
};

void PrintTo(const KD& p, std::ostream* os) { *os << param_name(p.kernel, p.dtype); }

class KernelDtype : public ::testing::TestWithParam<KD> {
 protected:
  const Kernel& k() const { return *find_builtin_kernel(GetParam().kernel); }
  Dtype d() const { return GetParam().dtype; }
  std::mt19937_64 rng{0x5EED0003u};
};

// A worked example with printed golden values: head_dim 8, base 10000, half layout, position 1,
// x = 9..16, output to 3 decimals. The exact value lies within 5e-4 of each printed number (half a
// unit of the last digit), and a component errs by at most its pair's bound (PairBound::abs, the
// kernel's declared policy), so |y - golden| <= 5e-4 + bound. The storage term makes that the
// honest resolution of the dtype: e.g. about +-0.08 for bf16 near 16, +-0.01 for f16.
TEST_P(KernelDtype, MatchesGoldenValues) {
  const RopeSpec spec = make_spec(8, 8, Layout::half);
  const Policy policy = k().policy(d());
  const double golden[8] = {-6.076, 8.552, 10.849, 11.984, 14.597, 14.928, 15.109, 16.012};
  Bytes in(8 * bytes_of(d()));
  for (int j = 0; j < 8; ++j) set(d(), in, j, 9.0 + j);
  const Bytes out = run(k(), spec, d(), {1}, 1, in);
  for (int j = 0; j < 8; ++j) {
    const std::int64_t i = j % 4;
    const double norm = std::hypot(9.0 + i, 13.0 + i);
    const double tol = 5e-4 + bounds::pair_error_bound(policy, spec, d(), i, 1.0).abs(norm);
    EXPECT_NEAR(get(d(), out, j), golden[j], tol) << "element " << j;
  }
}

// At m = 0, cos = 1 and sin = 0 exactly in every recipe, and x*1 + y*(+-0) = x for finite x != 0,
// so the output is the input bit-for-bit. Zeros may change sign (-0 + +0 = +0 under RNE), which
// no claim pins down. A kernel whose arithmetic is narrower than storage (table_f32 on f64)
// returns the input rounded once to its arithmetic precision.
TEST_P(KernelDtype, ZeroPositionIsIdentity) {
  const Policy pol = k().policy(d());
  const bool narrow_arith = traits(pol.arithmetic).digits < traits(d()).digits;
  for (Layout l : {Layout::interleaved, Layout::half}) {
    for (auto [hd, rd] : {std::pair{8, 8}, {7, 6}, {70, 64}, {33, 18}}) {
      const RopeSpec spec = make_spec(hd, rd, l);
      const std::int64_t n_heads = 3;
      const std::vector<std::int64_t> pos(4, 0);
      Bytes in = random_tensor(d(), 4 * n_heads * hd, rng);
      const auto aw = awkward_values(d());
      for (std::size_t j = 0; j < aw.size(); ++j) {
        double v = aw[j];
        // Values the arithmetic precision cannot hold would become inf and then inf*0 = NaN.
        if (narrow_arith && std::fabs(v) > max_finite(pol.arithmetic)) v = 1.0;
        set(d(), in, static_cast<std::int64_t>(j * 5 % (4 * n_heads * hd)), v);
      }
      Bytes expect = in;
      if (narrow_arith)
        for (std::int64_t j = 0; j < 4 * n_heads * hd; ++j)
          if (j % hd < rd) set(d(), expect, j, round_to_dtype(get(d(), in, j), pol.arithmetic));
      EXPECT_TRUE(same_bits(d(), run(k(), spec, d(), pos, n_heads, in), expect, false, true))
          << describe(spec);
    }
  }
}

// s = 2 at m = 0: every recipe's scaled cos/sin are exactly (2, 0) and 2x is exact (no overflow
// for |x| <= max/8, subnormals double exactly), so the output is exactly 2x.
TEST_P(KernelDtype, PowerOfTwoScaleAtZeroIsExact) {
  const Policy pol = k().policy(d());
  const Dtype ar = traits(pol.arithmetic).digits < traits(d()).digits ? pol.arithmetic : d();
  const RopeSpec spec = make_spec(16, 16, Layout::interleaved, 10000, 2.0);
  Bytes in = random_tensor(d(), 2 * 16, rng);
  const auto aw = awkward_values(d());
  for (std::size_t j = 0; j < aw.size(); ++j)
    set(d(), in, j, std::fabs(aw[j]) > max_finite(ar) / 8 ? 1.0 : aw[j]);
  Bytes expect = in;
  for (std::int64_t j = 0; j < 32; ++j)
    set(d(), expect, j, round_to_dtype(2 * round_to_dtype(get(d(), in, j), ar), d()));
  EXPECT_TRUE(same_bits(d(), run(k(), spec, d(), {0, 0}, 1, in), expect, false, true));
}

// Dims >= rotary_dim are copied bit-exactly (any bit pattern, NaN payloads included) out of
// place and left untouched in place.
TEST_P(KernelDtype, PassThroughIsBitExact) {
  std::uniform_int_distribution<std::uint64_t> bits;
  const std::uint64_t mask = bytes_of(d()) == 8 ? ~0ull : (1ull << (8 * bytes_of(d()))) - 1;
  for (Layout l : {Layout::interleaved, Layout::half}) {
    // rotary_dim 0 normalizes to the default (head_dim rounded down to even): {1, 0} is the
    // only spec with nothing to rotate.
    for (auto [hd, rd0] : {std::pair{7, 4}, {80, 32}, {5, 4}, {1, 0}, {9, 8}}) {
      const RopeSpec spec = make_spec(hd, rd0, l);
      const std::int64_t rd = spec.rotary_dim;
      const std::int64_t n_heads = 2, n_tok = 3;
      const std::vector<std::int64_t> pos = {5, -3, std::int64_t{1} << 33};
      Bytes in = random_tensor(d(), n_tok * n_heads * hd, rng);
      for (std::int64_t v = 0; v < n_tok * n_heads; ++v)
        for (std::int64_t j = rd; j < hd; ++j) set_raw(d(), in, v * hd + j, bits(rng) & mask);
      const Bytes out = run(k(), spec, d(), pos, n_heads, in);
      Bytes inplace = in;
      ASSERT_EQ(apply_contiguous(k(), spec, d(), n_tok, n_heads, pos.data(), inplace.data(),
                                 inplace.data()),
                KernelStatus::ok);
      for (std::int64_t v = 0; v < n_tok * n_heads; ++v)
        for (std::int64_t j = rd; j < hd; ++j) {
          ASSERT_EQ(raw(d(), out, v * hd + j), raw(d(), in, v * hd + j)) << describe(spec);
          ASSERT_EQ(raw(d(), inplace, v * hd + j), raw(d(), in, v * hd + j)) << describe(spec);
        }
    }
  }
}

TEST_P(KernelDtype, InPlaceMatchesOutOfPlace) {
  for (Layout l : {Layout::interleaved, Layout::half}) {
    for (auto [hd, rd] : {std::pair{64, 64}, {7, 6}, {80, 32}, {130, 128}, {3, 2}}) {
      const RopeSpec spec = make_spec(hd, rd, l);
      const std::int64_t n_heads = 3;
      const auto& pos = kAwkwardPositions;
      const std::int64_t n_tok = static_cast<std::int64_t>(pos.size());
      const Bytes in = random_tensor(d(), n_tok * n_heads * hd, rng);
      const Bytes out = run(k(), spec, d(), pos, n_heads, in);
      Bytes inplace = in;
      ASSERT_EQ(apply_contiguous(k(), spec, d(), n_tok, n_heads, pos.data(), inplace.data(),
                                 inplace.data()),
                KernelStatus::ok);
      EXPECT_TRUE(same_bits(d(), inplace, out)) << describe(spec);
    }
  }
}

// Non-contiguous strides (padded heads and tokens; head-major) give the contiguous result, and
// nothing in the gaps is written.
TEST_P(KernelDtype, StridedMatchesContiguous) {
  for (Layout l : {Layout::interleaved, Layout::half}) {
    for (auto [hd, rd] : {std::pair{64, 64}, {7, 4}, {34, 34}}) {
      const RopeSpec spec = make_spec(hd, rd, l);
      const std::int64_t n_heads = 3;
      const std::vector<std::int64_t> pos = {3, 1000, -77, std::int64_t{1} << 35};
      const std::int64_t n_tok = 4;
      const Bytes in = random_tensor(d(), n_tok * n_heads * hd, rng);
      const Bytes ref = run(k(), spec, d(), pos, n_heads, in);
      struct Strides {
        std::int64_t token, head, total;
      };
      const Strides variants[] = {
          {n_heads * (hd + 3) + 5, hd + 3, n_tok * (n_heads * (hd + 3) + 5)},
          {hd + 1, n_tok * (hd + 1) + 2, n_heads * (n_tok * (hd + 1) + 2)}};  // head-major
      for (const Strides& st : variants) {
        Bytes sin(st.total * bytes_of(d()), 0x5A), sout(st.total * bytes_of(d()), kGuardByte);
        for (std::int64_t t = 0; t < n_tok; ++t)
          for (std::int64_t h = 0; h < n_heads; ++h)
            for (std::int64_t j = 0; j < hd; ++j)
              set_raw(d(), sin, t * st.token + h * st.head + j,
                      raw(d(), in, (t * n_heads + h) * hd + j));
        TensorArgs a;
        a.dtype = d();
        a.n_tokens = n_tok;
        a.n_heads = n_heads;
        a.positions = pos.data();
        a.in = sin.data();
        a.out = sout.data();
        a.token_stride = st.token;
        a.head_stride = st.head;
        ASSERT_EQ(k().apply(spec, a), KernelStatus::ok);
        Bytes touched(st.total, 0);
        for (std::int64_t t = 0; t < n_tok; ++t)
          for (std::int64_t h = 0; h < n_heads; ++h)
            for (std::int64_t j = 0; j < hd; ++j) {
              const std::int64_t e = t * st.token + h * st.head + j;
              touched[e] = 1;
              ASSERT_EQ(raw(d(), sout, e), raw(d(), ref, (t * n_heads + h) * hd + j))
                  << describe(spec) << " t=" << t << " h=" << h << " j=" << j;
            }
        for (std::int64_t e = 0; e < st.total; ++e)
          if (!touched[e]) {
            for (std::int64_t b = 0; b < bytes_of(d()); ++b)
              ASSERT_EQ(sout[e * bytes_of(d()) + b], kGuardByte) << "gap written at " << e;
          }
      }
    }
  }
}

// K_half(P x) == P K_interleaved(x) bit-for-bit, P moving (2i, 2i+1) to (i, i + rd/2): each pair
// goes through the same arithmetic whichever layout stores it.
TEST_P(KernelDtype, LayoutsArePermutations) {
  for (auto [hd, rd] : {std::pair{8, 8}, {64, 64}, {7, 6}, {80, 32}, {70, 70}, {130, 128}}) {
    const RopeSpec si = make_spec(hd, rd, Layout::interleaved);
    const RopeSpec sh = make_spec(hd, rd, Layout::half);
    const std::int64_t n_heads = 2;
    const auto& pos = kAwkwardPositions;
    const std::int64_t nv = static_cast<std::int64_t>(pos.size()) * n_heads;
    const Bytes x = random_tensor(d(), nv * hd, rng);
    // perm[j]: index in the half layout of interleaved element j.
    std::vector<std::int64_t> perm(hd);
    for (std::int64_t j = 0; j < hd; ++j) perm[j] = j >= rd ? j : (j % 2 ? j / 2 + rd / 2 : j / 2);
    Bytes px(x.size());
    for (std::int64_t v = 0; v < nv; ++v)
      for (std::int64_t j = 0; j < hd; ++j)
        set_raw(d(), px, v * hd + perm[j], raw(d(), x, v * hd + j));
    const Bytes yi = run(k(), si, d(), pos, n_heads, x);
    const Bytes yh = run(k(), sh, d(), pos, n_heads, px);
    Bytes pyi(x.size());
    for (std::int64_t v = 0; v < nv; ++v)
      for (std::int64_t j = 0; j < hd; ++j)
        set_raw(d(), pyi, v * hd + perm[j], raw(d(), yi, v * hd + j));
    EXPECT_TRUE(same_bits(d(), yh, pyi)) << "head_dim " << hd << " rotary_dim " << rd;
  }
}

// A (token, head) vector's result depends only on its own data and position: not on the number
// of heads or tokens in the call, nor on token order.
TEST_P(KernelDtype, IndependentOfBatching) {
  for (Layout l : {Layout::interleaved, Layout::half}) {
    const RopeSpec spec = make_spec(46, 40, l);
    const std::int64_t n_heads = 5;
    const auto& pos = kAwkwardPositions;
    const std::int64_t n_tok = static_cast<std::int64_t>(pos.size());
    const std::int64_t hd = spec.head_dim, eb = hd * bytes_of(d());
    const Bytes x = random_tensor(d(), n_tok * n_heads * hd, rng);
    const Bytes y = run(k(), spec, d(), pos, n_heads, x);
    // Reversed token order.
    std::vector<std::int64_t> rpos(pos.rbegin(), pos.rend());
    Bytes rx(x.size());
    for (std::int64_t t = 0; t < n_tok; ++t)
      std::memcpy(rx.data() + (n_tok - 1 - t) * n_heads * eb, x.data() + t * n_heads * eb,
                  n_heads * eb);
    const Bytes ry = run(k(), spec, d(), rpos, n_heads, rx);
    for (std::int64_t t = 0; t < n_tok; ++t) {
      ASSERT_EQ(0, std::memcmp(ry.data() + (n_tok - 1 - t) * n_heads * eb,
                               y.data() + t * n_heads * eb, n_heads * eb))
          << "token order changed token " << t;
      for (std::int64_t h = 0; h < n_heads; ++h) {
        const Bytes one(x.begin() + (t * n_heads + h) * eb, x.begin() + (t * n_heads + h + 1) * eb);
        const Bytes y1 = run(k(), spec, d(), {pos[t]}, 1, one);
        ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + (t * n_heads + h) * eb, eb))
            << "single-vector call differs at token " << t << " head " << h;
      }
    }
  }
}

// Small positions, where every recipe's angle is accurate, and long-context ones, where the f32
// recipe's angle error dominates (the bound is position-aware).
const std::vector<std::int64_t> kReferencePositions = {0,
                                                       1,
                                                       -1,
                                                       64,
                                                       -64,
                                                       4096,
                                                       65535,
                                                       -(std::int64_t{1} << 20),
                                                       (std::int64_t{1} << 24) + 1,
                                                       std::int64_t{1} << 31};

// Every kernel matches the exact rotation within the bound of its declared policy, pair by pair:
// two bases, a non-unit scale, both layouts, partial rotary and odd head_dim, at
// kReferencePositions and random small ones.
TEST_P(KernelDtype, MatchesReferenceWithinBound) {
  std::uniform_int_distribution<std::int64_t> pd(-64, 64);
  double worst = 0;
  for (double base : {10000.0, 500000.0})
    for (double scale : {1.0, 0.75})
      for (Layout l : {Layout::interleaved, Layout::half})
        for (auto [hd, rd] : {std::pair{64, 64}, {80, 32}, {7, 6}}) {
          const RopeSpec spec = make_spec(hd, rd, l, base, scale);
          std::vector<std::int64_t> pos = kReferencePositions;
          for (int j = 0; j < 11; ++j) pos.push_back(pd(rng));
          worst = std::max(worst, check_against_reference(k(), spec, d(), pos, 2, rng));
        }
  RecordProperty("worst_utilization", std::to_string(worst));
}

std::vector<KD> all_kd() {
  std::vector<KD> v;
  for (const Kernel* k : builtin_kernels())
    for (Dtype d : kAllDtypes) v.push_back({k->name(), d});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelDtype, ::testing::ValuesIn(all_kd()),
                         [](const ::testing::TestParamInfo<KD>& p) {
                           return param_name(p.param.kernel, p.param.dtype);
                         });

// ==== engine recipes (src/kernels/engines/) =====================================================
// Each engine kernel x each dtype it supports, on specs and positions inside its declared domain.
class EngineDtype : public ::testing::TestWithParam<KD> {
 protected:
  const EngineKernel& k() const { return *find_engine_kernel(GetParam().kernel); }
  Dtype d() const { return GetParam().dtype; }
  std::mt19937_64 rng{0x5EED0025u};
  // The worst utilization over the domain's specs (both bases, every layout the engine takes,
  // full and partial rotary, a non-unit scale where declared) at kReferencePositions and random
  // small positions inside the declared position range; `declared` as check_against_reference.
  double worst_over_domain(const std::optional<Policy>& declared = std::nullopt) {
    const Domain dom = k().domain();
    std::vector<std::int64_t> pos;
    for (std::int64_t p : kReferencePositions)
      if (p >= dom.min_position && p <= dom.max_position) pos.push_back(p);
    std::uniform_int_distribution<std::int64_t> pd(std::max<std::int64_t>(dom.min_position, -64),
                                                   64);
    for (int j = 0; j < 11; ++j) pos.push_back(pd(rng));
    double worst = 0;
    for (double base : {10000.0, 500000.0})
      for (double scale : {1.0, 0.75})
        for (Layout l : {Layout::interleaved, Layout::half})
          for (auto [hd, rd] : {std::pair{64, 64}, {128, 128}, {128, 64}}) {
            const RopeSpec spec = make_spec(hd, rd, l, base, scale);
            if (!k().supports(spec, d()) || (scale != 1 && !dom.magnitude_scale)) continue;
            worst = std::max(worst, check_against_reference(k(), spec, d(), pos, 2, rng, declared));
          }
    return worst;
  }
};

// The engine's output is within the bound derived from the policy it declares, pair by pair.
TEST_P(EngineDtype, MatchesReferenceWithinBound) {
  const double worst = worst_over_domain();
  EXPECT_GT(worst, 0);  // something was checked
  RecordProperty("worst_utilization", std::to_string(worst));
}

// The same outputs judged by a policy the engine does not meet (f32 table and arithmetic where it
// rounds both into a 16-bit dtype) exceed that policy's bound: the declaration is not vacuous.
// (Understating the arithmetic alone, table still bf16/f16, stays inside: the bf16 table's and the
// storage's terms leave room for the products' roundings; sampled worst 0.998 of that bound.)
TEST_P(EngineDtype, UnderstatedPolicyIsExceeded) {
  const Policy declared = k().policy(d());
  const auto narrow = [](Dtype p) { return p == Dtype::bf16 || p == Dtype::f16; };
  if (!narrow(declared.table) && !narrow(declared.arithmetic))
    GTEST_SKIP() << "table and arithmetic already f32 or wider (e.g. ggml widens f16 to f32)";
  Policy understated = declared;
  understated.table = understated.arithmetic = Dtype::f32;
  EXPECT_GT(worst_over_domain(understated), 1.0);
}

std::vector<KD> engine_kd() {
  std::vector<KD> v;
  for (const EngineKernel* k : engine_kernels())
    for (Dtype d : kAllDtypes)
      if (k->supports(make_spec(64, 64, Layout::half), d) ||
          k->supports(make_spec(64, 64, Layout::interleaved), d))
        v.push_back({k->name(), d});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineDtype, ::testing::ValuesIn(engine_kd()),
                         [](const ::testing::TestParamInfo<KD>& p) {
                           return param_name(p.param.kernel, p.param.dtype);
                         });

// ==== per dtype tests ===========================================================================
class PerDtype : public ::testing::TestWithParam<Dtype> {
 protected:
  Dtype d() const { return GetParam(); }
  std::mt19937_64 rng{0x5EED0103u};
};

// Sets ROPECHECK_SIMD for the lifetime of the object.
class SimdPathScope {
 public:
  explicit SimdPathScope(const char* p) {
    const char* old = std::getenv("ROPECHECK_SIMD");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("ROPECHECK_SIMD", p, 1);
  }
  ~SimdPathScope() {
    if (had_)
      setenv("ROPECHECK_SIMD", old_.c_str(), 1);
    else
      unsetenv("ROPECHECK_SIMD");
  }

 private:
  bool had_ = false;
  std::string old_;
};

std::vector<std::string> available_paths() {
  const std::string best = simd_best_path();
  std::vector<std::string> v = {"portable"};
  if (best == "avx2" || best == "avx512" || best == "avx512bf16") v.push_back("avx2");
  if (best == "avx512" || best == "avx512bf16") v.push_back("avx512");
  if (best == "avx512bf16") v.push_back("avx512bf16");
  return v;
}

// Path avx512bf16 stores bf16 with vcvtneps2bf16 (plus an integer fallback for vectors holding an
// f32 subnormal); the claim is bit identity with the integer RNE store of the other paths, so
// compare the two on every one of the 2^32 f32 bit patterns (about 1 s).
TEST(SimdDispatch, NativeBf16StoreEqualsIntegerRoundingOnAllFloats) {
  const std::int64_t bad = simd_bf16_native_mismatches(0, 0xFFFFFFFFu);
  if (bad < 0) GTEST_SKIP() << "CPU has no AVX512-BF16; path avx512bf16 not available";
  EXPECT_EQ(bad, 0);
}

TEST(SimdDispatch, OverrideSelectsEveryAvailablePath) {
  for (const std::string& p : available_paths()) {
    SimdPathScope s(p.c_str());
    EXPECT_EQ(std::string(simd_path()), p);
    EXPECT_NE(find_builtin_kernel("simd")->policy(Dtype::f32).notes.find(p), std::string::npos);
  }
  SimdPathScope s("avx512bf16");  // clamped to what the CPU has
  EXPECT_EQ(std::string(simd_path()), std::string(simd_best_path()));
  std::printf("simd: best path on this CPU = %s; paths run here:", simd_best_path());
  for (const auto& p : available_paths()) std::printf(" %s", p.c_str());
  std::printf("\n");
}

// Every dispatch path gives the same bits as the portable path, for every head_dim 1..70 and
// every even rotary_dim, both layouts, with inf/NaN/subnormal/huge inputs mixed in (NaN payloads
// excepted; see same_bits).
TEST_P(PerDtype, SimdPathsAreBitIdentical) {
  const Kernel& k = *find_builtin_kernel("simd");
  const auto paths = available_paths();
  const std::vector<std::int64_t> pos = {0, 3, -100000, std::int64_t{1} << 40};
  const std::int64_t n_heads = 2, n_tok = 4;
  std::vector<double> specials = awkward_values(d());
  for (double v :
       {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::quiet_NaN(), max_finite(d()), -max_finite(d())})
    specials.push_back(v);
  std::int64_t compared = 0;
  for (std::int64_t hd = 1; hd <= 70; ++hd) {
    for (std::int64_t rd = 0; rd <= hd; rd += 2) {
      for (Layout l : {Layout::interleaved, Layout::half}) {
        const RopeSpec spec = make_spec(hd, rd, l, 10000, (hd % 3 == 0) ? 0.75 : 1.0);
        Bytes in = random_tensor(d(), n_tok * n_heads * hd, rng);
        for (std::size_t j = 0; j < specials.size(); ++j) {
          if (rng() % 4 == 0)
            set(d(), in, static_cast<std::int64_t>(rng() % (n_tok * n_heads * hd)),
                round_to_dtype(specials[j], d()));
        }
        Bytes ref;
        {
          SimdPathScope s("portable");
          ref = run(k, spec, d(), pos, n_heads, in);
        }
        for (std::size_t p = 1; p < paths.size(); ++p) {
          SimdPathScope s(paths[p].c_str());
          ASSERT_TRUE(same_bits(d(), run(k, spec, d(), pos, n_heads, in), ref, true))
              << paths[p] << " vs portable, " << describe(spec);
          ++compared;
        }
      }
    }
  }
  if (paths.size() > 1) {
    EXPECT_GT(compared, 1000);
  }
}

// The simd kernel computes exactly its declared formula on every path: table entries
// A(s*cos(m*theta)), A(s*sin(m*theta)) from f64 (for the f32 table by angle addition), out_a =
// fma(x_a, c, x_b*(-s)), out_b = fma(x_b, c, x_a*s) in A, then ONE round-to-nearest-even into
// storage. The expected value is computed here independently (std::fma, and dtype.cpp's
// round_to_dtype for f16/bf16 instead of the kernel's F16C / integer bf16 rounding), so this checks
// the vector conversions too.
TEST_P(PerDtype, SimdMatchesDeclaredFormula) {
  const Kernel& k = *find_builtin_kernel("simd");
  for (const std::string& p : available_paths()) {
    SimdPathScope scope(p.c_str());
    for (Layout l : {Layout::interleaved, Layout::half}) {
      // scale 1 + u(d) at m = 0 with x = +-2^e makes every f16/bf16 output an exact rounding
      // tie: x (1 + 2^-p) is exact in f32 and lies halfway between x and its successor in d.
      for (auto [hd, rd, scale] : {std::tuple{64, 64, 0.8},
                                   {37, 30, 0.8},
                                   {130, 128, 0.8},
                                   {45, 44, 1 + unit_roundoff(d())}}) {
        const RopeSpec spec = make_spec(hd, rd, l, 10000, scale);
        // Consecutive, isolated, negative and beyond-2^28-angle positions (bases and steps).
        const std::vector<std::int64_t> pos = {
            0, 17, 18, 19, 33, 123456, 123457, -3, -(std::int64_t{1} << 33) - 5, 1 << 30};
        const std::int64_t n_heads = 3;
        const std::int64_t nt = static_cast<std::int64_t>(pos.size());
        Bytes in = random_tensor(d(), nt * n_heads * hd, rng);
        if (scale != 0.8)
          for (std::int64_t j = 0; j < nt * n_heads * hd; ++j)
            set(d(), in, j, std::ldexp((rng() & 1) ? -1.0 : 1.0, static_cast<int>(rng() % 9) - 4));
        const Bytes out = run(k, spec, d(), pos, n_heads, in);
        Bytes expect = in;
        for (std::size_t t = 0; t < pos.size(); ++t)
          for (std::int64_t h = 0; h < n_heads; ++h)
            for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
              const double angle =
                  static_cast<double>(pos[t]) * std::pow(spec.base, -2.0 * i / spec.rotary_dim);
              // The kernel's own sin/cos is part of its declared formula; its accuracy is
              // checked independently in SimdTrig.WithinDeclaredErrorOfLongDouble.
              // f32 tables: angle addition from a base and a step (simd/trig.hpp).
              double sn = 0, cs = 0;
              if (d() == Dtype::f64)
                kernels::simd_sincos(angle, sn, cs);
              else
                kernels::simd_step_sincos(std::pow(spec.base, -2.0 * i / spec.rotary_dim), pos[t],
                                          sn, cs);
              const double cd = spec.scale * cs, sd = spec.scale * sn;
              const auto [ia, ib] = spec.pair(i);
              const std::int64_t o = (t * n_heads + h) * hd;
              double ya, yb;
              if (d() == Dtype::f64) {
                const double xa = get(d(), in, o + ia), xb = get(d(), in, o + ib);
                ya = std::fma(xa, cd, xb * -sd);
                yb = std::fma(xb, cd, xa * sd);
              } else {
                const float c = static_cast<float>(cd), s = static_cast<float>(sd);
                const float xa = static_cast<float>(get(d(), in, o + ia));
                const float xb = static_cast<float>(get(d(), in, o + ib));
                ya = std::fma(xa, c, xb * -s);
                yb = std::fma(xb, c, xa * s);
              }
              set(d(), expect, o + ia, round_to_dtype(ya, d()));
              set(d(), expect, o + ib, round_to_dtype(yb, d()));
            }
        EXPECT_TRUE(same_bits(d(), out, expect)) << p << " " << describe(spec);
      }
    }
  }
}

// Large out-of-place calls with an aligned output take the streaming-store variant (AVX-512; see
// use_streaming_stores in simd/kernel.cpp); only the store instruction differs, so the result must
// equal, bit for bit, the same tokens done one call at a time (small calls never stream). 9 MiB of
// output per dtype, over the 8 MiB threshold.
TEST_P(PerDtype, SimdLargeCallsMatchSmallCalls) {
  const Kernel& k = *find_builtin_kernel("simd");
  const std::int64_t n_heads = 8, hd = 128;
  const std::int64_t n_tok = (std::int64_t{9} << 20) / (n_heads * hd * bytes_of(d()));
  const std::size_t bytes = static_cast<std::size_t>(n_tok * n_heads * hd * bytes_of(d()));
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> in(
      static_cast<unsigned char*>(std::aligned_alloc(64, bytes))),
      big(static_cast<unsigned char*>(std::aligned_alloc(64, bytes))),
      small(static_cast<unsigned char*>(std::aligned_alloc(64, bytes)));
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  for (std::int64_t j = 0; j < n_tok * n_heads * hd; ++j)
    store(d(), in.get(), j, round_to_dtype(u(rng), d()));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n_tok));
  for (std::int64_t t = 0; t < n_tok; ++t) pos[static_cast<std::size_t>(t)] = t * 7 - 1000;
  for (Layout l : {Layout::interleaved, Layout::half}) {
    const RopeSpec spec = make_spec(hd, hd, l, 10000, 1.0);
    ASSERT_EQ(apply_contiguous(k, spec, d(), n_tok, n_heads, pos.data(), in.get(), big.get()),
              KernelStatus::ok);
    const std::size_t tok_bytes = static_cast<std::size_t>(n_heads * hd * bytes_of(d()));
    for (std::int64_t t = 0; t < n_tok; ++t)
      ASSERT_EQ(apply_contiguous(k, spec, d(), 1, n_heads, &pos[static_cast<std::size_t>(t)],
                                 in.get() + t * tok_bytes, small.get() + t * tok_bytes),
                KernelStatus::ok);
    EXPECT_EQ(std::memcmp(big.get(), small.get(), bytes), 0) << name(l);
  }
}

// The arguments of SimdTrig.WithinDeclaredErrorOfLongDouble.
std::vector<double> sincos_test_arguments() {
  std::mt19937_64 rng(0x7716u);
  std::vector<double> xs = {0.0,
                            -0.0,
                            1e-300,
                            0x1p-1022,
                            1e-8,
                            0.5,
                            0.7853981633974483,
                            0.7853981633974484,
                            1.0,
                            1.5707963267948966,
                            3.141592653589793,
                            4.71238898038469,
                            6.283185307179586,
                            1e6,
                            12345678.9,
                            kernels::kSimdTrigLimit,
                            std::nextafter(kernels::kSimdTrigLimit, 0.0),
                            std::nextafter(kernels::kSimdTrigLimit, 1e300),
                            1e22,
                            0x1p1000};
  // Near multiples of pi/2: k * pi/2 (rounded) and its neighbours.
  for (long long k = 1; k < (1ll << 28); k = k * 3 + 1)
    for (int d = -2; d <= 2; ++d) {
      const double x = static_cast<double>(k) * 1.5707963267948966;
      double y = x;
      for (int j = 0; j < std::abs(d); ++j) y = std::nextafter(y, d < 0 ? 0.0 : 1e300);
      xs.push_back(y);
    }
  std::uniform_real_distribution<double> e(-30.0, 28.0);
  for (int j = 0; j < 200000; ++j) {
    const double x =
        std::ldexp(1.0 + std::ldexp(static_cast<double>(rng() >> 12), -52), 0) * std::exp2(e(rng));
    xs.push_back((rng() & 1) ? -x : x);
  }
  // The kernel's own argument shape: double(m) * theta_i.
  for (int j = 0; j < 100000; ++j) {
    const double m = static_cast<double>(static_cast<std::int64_t>(rng() % (1ull << 28)));
    const double theta = std::pow(10000.0, -2.0 * static_cast<double>(rng() % 64) / 128.0);
    xs.push_back(m * theta);
  }
  return xs;
}

// The simd kernel's f64 sin/cos against long double sinl/cosl (x87, 64-bit significand; glibc
// documents <= 1 ulp for them, i.e. <= 2^-63 absolute here), over the argument shapes the kernel
// sees: m * theta for |m| up to 2^28, near multiples of pi/2 (worst cancellation in the
// reduction), tiny and boundary arguments, and the libm fallback beyond kSimdTrigLimit. The
// contract (simd/trig.hpp) is |error| <= 2^-53 absolute; the check allows 2^-53 + 2^-62 for the
// long-double reference's own error (plus its rounding of the double argument: none, x is exact in
// long double).
TEST(SimdTrig, WithinDeclaredErrorOfLongDouble) {
  const std::vector<double> xs = sincos_test_arguments();
  const double allowed = 0x1p-53 + 0x1p-62;
  double worst_in = 0, worst_beyond = 0;
  for (double x : xs) {
    double s = 0, c = 0;
    kernels::simd_sincos(x, s, c);
    const long double xl = x;
    const double es = static_cast<double>(std::fabs(static_cast<long double>(s) - sinl(xl)));
    const double ec = static_cast<double>(std::fabs(static_cast<long double>(c) - cosl(xl)));
    const double err = std::max(es, ec);
    if (std::fabs(x) <= kernels::kSimdTrigLimit) {
      worst_in = std::max(worst_in, err);
      ASSERT_LE(err, allowed) << std::hexfloat << "x=" << x << " sin=" << s << " cos=" << c;
    } else {
      // libm: within 1 ulp (<= 2^-52 absolute for values of magnitude <= 1).
      worst_beyond = std::max(worst_beyond, err);
      ASSERT_LE(err, 0x1p-52 + 0x1p-62) << std::hexfloat << "x=" << x;
    }
  }
  RecordProperty("worst_abs_error_in_units_of_2^-53", std::to_string(worst_in / 0x1p-53));
  std::printf("simd_sincos: worst |error| = %.3f * 2^-53 over %zu arguments\n", worst_in / 0x1p-53,
              xs.size());
}

// The f32 tables' angle-addition entries (simd_step_sincos) are within the declared
// Policy::trig_error of cos/sin of their angle RN(m0 theta) + RN(j theta) (simd/trig.hpp: the
// angle part is the bound's product rounding). The exact value is formed in long double by the same
// addition theorem from sinl/cosl of the two double arguments (each exact), so it is within
// ~2^-62 at any magnitude. Also shows the bound has teeth: chaining the same products from token
// to token (c(m+1) from c(m), no bases), as a recurrence kernel would, leaves it.
TEST(SimdTrig, StepEntriesWithinDeclaredError) {
  std::mt19937_64 rng(20261129);
  std::vector<double> thetas;
  for (int i = 0; i < 64; ++i) thetas.push_back(std::pow(10000.0, -2.0 * i / 128.0));
  std::uniform_real_distribution<double> lt(-20.0, 0.0);
  for (int i = 0; i < 64; ++i) thetas.push_back(std::exp2(lt(rng)));
  std::vector<std::int64_t> ms;
  for (std::int64_t m = -40; m <= 40; ++m) ms.push_back(m);
  for (int e : {10, 20, 28, 31, 40, 52})
    for (int k = 0; k < 24; ++k) {
      const std::int64_t m = (std::int64_t{1} << e) + static_cast<std::int64_t>(rng() % 4096);
      ms.push_back(m);
      ms.push_back(-m);
    }
  const double allowed = kernels::kSimdStepTrigError * 0x1p-53 + 0x1p-60;
  double worst = 0;
  std::size_t n = 0;
  for (double th : thetas)
    for (std::int64_t m : ms) {
      double s = 0, c = 0;
      kernels::simd_step_sincos(th, m, s, c);
      const std::int64_t j = m % kernels::kSimdStep, m0 = m - j;
      const long double A = static_cast<double>(m0) * th, B = static_cast<double>(j) * th;
      const long double ce = cosl(A) * cosl(B) - sinl(A) * sinl(B);
      const long double se = sinl(A) * cosl(B) + cosl(A) * sinl(B);
      const double err = static_cast<double>(std::max(std::fabs(static_cast<long double>(c) - ce),
                                                      std::fabs(static_cast<long double>(s) - se)));
      worst = std::max(worst, err);
      ++n;
      ASSERT_LE(err, allowed) << std::hexfloat << "theta=" << th << std::dec << " m=" << m;
    }
  std::printf("simd_step_sincos: worst |error| = %.3f * 2^-53 over %zu (theta, m)\n",
              worst / 0x1p-53, n);

  // Recurrence without bases: c(m+1) = fma(c, jc, -(s js)) with (jc, js) = sincos(theta).
  double worst_chain = 0;
  for (double th : thetas) {
    double c = 1, s = 0, js = 0, jc = 0;
    kernels::simd_sincos(th, js, jc);
    for (int m = 1; m <= 256; ++m) {
      const double c1 = std::fma(c, jc, -(s * js)), s1 = std::fma(s, jc, c * js);
      c = c1;
      s = s1;
      const long double a = static_cast<long double>(m) * th;  // exact: 53 + 9 bits
      worst_chain =
          std::max(worst_chain,
                   static_cast<double>(std::max(std::fabs(static_cast<long double>(c) - cosl(a)),
                                                std::fabs(static_cast<long double>(s) - sinl(a)))));
    }
  }
  std::printf("chained recurrence (256 steps): worst |error| = %.1f * 2^-53\n",
              worst_chain / 0x1p-53);
  EXPECT_GT(worst_chain, allowed);
}

INSTANTIATE_TEST_SUITE_P(Kernels, PerDtype, ::testing::ValuesIn(kAllDtypes),
                         [](const ::testing::TestParamInfo<Dtype>& p) { return name(p.param); });

// ==== registry ==================================================================================
TEST(Registry, OrderNamesAndPolicies) {
  const auto& ks = builtin_kernels();
  ASSERT_EQ(ks.size(), 4u);
  const char* order[] = {"scalar", "table_f32", "simd", "complex"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ks[i]->name(), order[i]);
    EXPECT_EQ(find_builtin_kernel(order[i]), ks[i]);
    EXPECT_FALSE(ks[i]->description().empty());
  }
  EXPECT_EQ(find_builtin_kernel("nope"), nullptr);
  const Policy ts = find_builtin_kernel("table_f32")->policy(Dtype::f64);
  EXPECT_EQ(ts.recipe, AngleRecipe::hf_f32);
  EXPECT_EQ(ts.arithmetic, Dtype::f32);
  const Policy sm = find_builtin_kernel("simd")->policy(Dtype::bf16);
  EXPECT_TRUE(sm.fused);
  EXPECT_EQ(sm.angle, Dtype::f64);
  EXPECT_EQ(sm.table, Dtype::f32);
  EXPECT_EQ(find_builtin_kernel("simd")->policy(Dtype::f64).table, Dtype::f64);
}

TEST(Registry, UnsupportedScalingIsSkippedNotFailed) {
  RopeSpec spec = make_spec(8, 8, Layout::half);
  spec.scaling.kind = static_cast<ScalingKind>(99);  // a variant no built-in kernel knows
  std::vector<float> x(8, 1.0f), y(8);
  const std::int64_t pos = 1;
  for (const Kernel* k : builtin_kernels()) {
    EXPECT_TRUE(k->supports(make_spec(8, 8, Layout::half), Dtype::bf16));
    EXPECT_FALSE(k->supports(spec, Dtype::f32));
    EXPECT_EQ(apply_contiguous(*k, spec, Dtype::f32, 1, 1, &pos, x.data(), y.data()),
              KernelStatus::unsupported);
  }
}

}  // namespace
}  // namespace ropecheck
