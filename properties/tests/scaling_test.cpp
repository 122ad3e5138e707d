// Scaling variants and multi-axis RoPE: identities of the exact reference (MP), agreement of the
// built-in kernels with them, and where length-dependent scaling stops composing. Tolerances:
// MP identities hold up to a few roundings at the working precision p, so residuals are compared
// with 2^-(p - 20) (relative), the same margin as the reference self-checks; kernel comparisons use
// the bound table (ropecheck::bounds) or bit identity.
#include "ropecheck/bounds.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/reference/reference.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace ropecheck {
namespace {

namespace ref = ropecheck::reference;
using ref::Mp;

Mp tol() { return ldexp(Mp(1), -static_cast<int>(ref::precision_bits()) + 20); }

RopeSpec base_spec(std::int64_t hd, double base, Layout l) {
  RopeSpec s;
  s.head_dim = hd;
  s.base = base;
  s.layout = l;
  return s.normalized();
}

std::vector<RopeSpec> yarn_specs() {
  std::vector<RopeSpec> v;
  for (double f : {2.0, 8.0, 32.0, 40.0})
    for (bool trunc : {true, false})
      for (std::int64_t orig : {2048, 4096, 8192}) {
        RopeSpec s = base_spec(128, f > 30 ? 150000 : 10000, Layout::half);
        s.scaling.kind = ScalingKind::yarn;
        s.scaling.factor = f;
        s.scaling.truncate = trunc;
        s.scaling.original_max_position_embeddings = orig;
        v.push_back(s.normalized());
      }
  return v;
}

// YaRN interpolates between theta_i/f (interpolation) and theta_i (extrapolation).
TEST(Scaling, YarnThetaBetweenInterpolationAndExtrapolation) {
  for (const RopeSpec& s : yarn_specs()) {
    RopeSpec plain = s;
    plain.scaling = {};
    const auto th = ref::inv_freqs(plain), ty = ref::inv_freqs(s);
    const Mp f = ref::exact(s.scaling.factor);
    bool interpolated = false, extrapolated = false;
    for (std::size_t i = 0; i < th.size(); ++i) {
      EXPECT_LE(th[i] / f, ty[i] * (1 + tol())) << describe(s) << " pair " << i;
      EXPECT_LE(ty[i], th[i] * (1 + tol())) << describe(s) << " pair " << i;
      interpolated |= ty[i] == th[i] / f;
      extrapolated |= ty[i] == th[i];
    }
    // Both ends of the ramp are reached (high-frequency pairs untouched, low ones divided by f).
    EXPECT_TRUE(extrapolated) << describe(s);
    EXPECT_TRUE(interpolated) << describe(s);
  }
}

// Linear scaling at position m is unscaled RoPE at position m / f.
TEST(Scaling, LinearEqualsPositionsDividedByFactor) {
  for (double f : {2.0, 4.0, 0.5, 3.0, 16.0}) {
    RopeSpec s = base_spec(64, 10000, Layout::interleaved);
    RopeSpec lin = s;
    lin.scaling.kind = ScalingKind::linear;
    lin.scaling.factor = f;
    for (std::int64_t m : {1, 7, 4096, 1000003, -77}) {
      const auto a = ref::rotation(lin, Mp(m));
      const auto b = ref::rotation(s, Mp(m) / ref::exact(f));
      // Angles agree to ~2 MP roundings of |m| theta: entries to |m| * tol.
      const Mp err = (a - b).cwiseAbs().maxCoeff();
      EXPECT_LE(err, tol() * (1 + std::abs(m))) << "f=" << f << " m=" << m;
    }
  }
}

RopeSpec llama31() {
  RopeSpec s = base_spec(128, 500000, Layout::half);
  s.scaling.kind = ScalingKind::llama3;
  s.scaling.factor = 8;
  s.scaling.low_freq_factor = 1;
  s.scaling.high_freq_factor = 4;
  s.scaling.original_max_position_embeddings = 8192;
  return s.normalized();
}

// The llama3 direct form equals its GGUF freq-factor form theta_i / ff_i.
TEST(Scaling, Llama3DirectFormEqualsFreqFactorForm) {
  const RopeSpec s = llama31();
  RopeSpec plain = s;
  plain.scaling = {};
  const auto th = ref::inv_freqs(plain), tl = ref::inv_freqs(s);
  // (a) exact factors ff_i = theta_i / theta'_i rounded once to f64: theta_i / ff_i is theta'_i
  // to within that one rounding, |rel| <= 2^-53 / (1 - 2^-53), plus MP roundings.
  RopeSpec ffs = s;
  ffs.scaling = {};
  ffs.scaling.kind = ScalingKind::freq_factors;
  for (std::size_t i = 0; i < th.size(); ++i)
    ffs.scaling.freq_factors.push_back((th[i] / tl[i]).convert_to<double>());
  const auto tf = ref::inv_freqs(ffs);
  const Mp rel53 = ldexp(Mp(1), -53) / (1 - ldexp(Mp(1), -53)) + tol();
  int divided = 0, untouched = 0, smooth = 0;
  for (std::size_t i = 0; i < th.size(); ++i) {
    EXPECT_LE(abs(tf[i] / tl[i] - 1), rel53) << "pair " << i;
    const double ff = ffs.scaling.freq_factors[i];
    divided += ff == 8.0;
    untouched += ff == 1.0;
    smooth += ff != 8.0 && ff != 1.0;
  }
  EXPECT_GT(divided, 0);
  EXPECT_GT(untouched, 0);
  EXPECT_GT(smooth, 0);  // Llama-3.1-8B has pairs in all three bands
  // (b) the llama.cpp converter's f64 factors: same three bands, and each within the bound
  // table's llama3 angle-recipe error of the exact factor (relative, per pair).
  const auto ff64 = llama3_freq_factors_f64(s);
  Policy p{Dtype::f64, Dtype::f64, Dtype::f64, AngleRecipe::pow_product, false, ""};
  for (std::size_t i = 0; i < th.size(); ++i) {
    const double rel = bounds::angle_error_bound(p, s, static_cast<std::int64_t>(i), 1.0).rel;
    EXPECT_LE(abs(ref::exact(ff64[i]) * tl[i] / th[i] - 1), Mp(rel)) << "pair " << i;
  }
}

// Dynamic NTK: with one table (one length bucket) rotations compose exactly; HF recomputes the
// base when the sequence grows past max_position_embeddings, and across that threshold
// R_L(a) R_L(b) != R_L'(a + b).
TEST(Scaling, DynamicNtkComposesWithinBucketNotAcross) {
  RopeSpec s = base_spec(64, 10000, Layout::half);
  s.scaling.kind = ScalingKind::dynamic;
  s.scaling.factor = 4;
  s.scaling.max_position_embeddings = 4096;
  const auto at_len = [&](std::int64_t seq_len) {
    RopeSpec t = s;
    t.scaling.seq_len = seq_len;
    return t.normalized();
  };
  const Mp a(3000), b(1000), c(3000);
  // Within the bucket (all lengths <= 4096 -> base unchanged; and a fixed seq_len 10000).
  for (std::int64_t L : {std::int64_t{0}, std::int64_t{10000}}) {
    const RopeSpec t = at_len(L);
    const Mp err =
        (ref::rotation(t, a) * ref::rotation(t, b) - ref::rotation(t, a + b)).cwiseAbs().maxCoeff();
    EXPECT_LE(err, tol() * 8192) << "seq_len " << L;
  }
  // Across: the first rotation built at length a+1 = 3001 (bucket <= 4096), the second at
  // length a+c+1 = 6001, the direct one at 6001 too.
  const Mp across = (ref::rotation(at_len(6001), c) * ref::rotation(at_len(3001), a) -
                     ref::rotation(at_len(6001), a + c))
                        .cwiseAbs()
                        .maxCoeff();
  EXPECT_GT(across, Mp(1e-3)) << "composition should break across the dynamic-NTK threshold";
  std::cout << "[dynamic] max |R_6001(3000) R_3001(3000) - R_6001(6000)| = "
            << ref::to_decimal(across, 6) << " (within one bucket: < 2^-(p-20) * 8192)\n";
}

struct MropeCase {
  std::int64_t hd;
  std::vector<std::int64_t> sections;
  Layout layout;
};
const std::vector<MropeCase> kMrope = {{128, {16, 24, 24}, Layout::mrope},
                                       {128, {24, 20, 20}, Layout::imrope},
                                       {128, {24, 20, 20}, Layout::mrope},
                                       {64, {8, 12, 12}, Layout::mrope},
                                       {64, {8, 12, 12}, Layout::imrope}};

// M-RoPE / interleaved M-RoPE with t = h = w are 1-D RoPE (half layout) exactly: the reference
// matrices are identical, and the built-in kernels give bit-identical outputs.
TEST(MultiAxis, MropeWithEqualAxesIsOneDimensionalRope) {
  for (const auto& c : kMrope) {
    RopeSpec m = base_spec(c.hd, 1000000, Layout::half);
    m.layout = c.layout;
    m.sections = c.sections;
    m = m.normalized();
    const RopeSpec h = base_spec(c.hd, 1000000, Layout::half);
    for (std::int64_t p : {0, 1, 77, 32767, 1000000}) {
      EXPECT_TRUE(ref::rotation(m, {Mp(p), Mp(p), Mp(p)}) == ref::rotation(h, Mp(p)))
          << describe(m) << " p=" << p;
    }
    for (const char* kn : {"scalar", "simd"}) {
      const Kernel* k = find_builtin_kernel(kn);
      ASSERT_TRUE(k->supports(m, Dtype::f32));
      std::vector<float> x(static_cast<std::size_t>(2 * c.hd));
      for (std::size_t j = 0; j < x.size(); ++j) x[j] = static_cast<float>(std::sin(j * 1.3) * 3);
      const std::vector<std::int64_t> p1 = {5, 123457}, p3 = {5, 5, 5, 123457, 123457, 123457};
      std::vector<float> y1(x.size()), y3(x.size());
      TensorArgs a;
      a.dtype = Dtype::f32;
      a.n_tokens = 2;
      a.n_heads = 1;
      a.in = x.data();
      a.head_stride = c.hd;
      a.token_stride = c.hd;
      a.positions = p1.data();
      a.out = y1.data();
      ASSERT_EQ(k->apply(h, a), KernelStatus::ok);
      a.positions = p3.data();
      a.n_axes = 3;
      a.out = y3.data();
      ASSERT_EQ(k->apply(m, a), KernelStatus::ok);
      EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float)))
          << kn << " " << describe(m);
    }
  }
}

// Distinct (t, h, w): each pair turns by its own axis' position; kernels within the bound table.
TEST(MultiAxis, KernelsMatchReferenceWithDistinctAxes) {
  Policy pol;
  for (const auto& c : kMrope) {
    RopeSpec m = base_spec(c.hd, 1000000, Layout::half);
    m.layout = c.layout;
    m.sections = c.sections;
    m = m.normalized();
    const std::vector<std::int64_t> pos = {3, 40, 17};
    std::vector<double> x(static_cast<std::size_t>(c.hd));
    for (std::size_t j = 0; j < x.size(); ++j) x[j] = static_cast<float>(std::cos(j * 0.7) * 2);
    const auto exact = ref::apply_blocked(m, {Mp(pos[0]), Mp(pos[1]), Mp(pos[2])}, x);
    for (const char* kn : {"scalar", "simd"}) {
      const Kernel* k = find_builtin_kernel(kn);
      pol = k->policy(Dtype::f32);
      std::vector<float> xf(x.begin(), x.end()), y(x.size());
      TensorArgs a;
      a.dtype = Dtype::f32;
      a.n_tokens = 1;
      a.n_heads = 1;
      a.in = xf.data();
      a.out = y.data();
      a.head_stride = a.token_stride = c.hd;
      a.positions = pos.data();
      a.n_axes = 3;
      ASSERT_EQ(k->apply(m, a), KernelStatus::ok);
      for (std::int64_t i = 0; i < m.n_pairs(); ++i) {
        const auto [ia, ib] = m.pair(i);
        const double mp = static_cast<double>(pos[static_cast<std::size_t>(m.pair_axis(i))]);
        const auto B = bounds::pair_error_bound(pol, m, Dtype::f32, i, mp);
        const double nrm = std::hypot(x[ia], x[ib]);
        const Mp err =
            sqrt(pow(ref::exact(y[ia]) - exact[ia], 2) + pow(ref::exact(y[ib]) - exact[ib], 2));
        EXPECT_LE(err, Mp(B.abs(nrm))) << kn << " " << describe(m) << " pair " << i;
      }
    }
    // The axis assignment matters: the same call read as 1-D RoPE at t is different.
    const RopeSpec h = base_spec(c.hd, 1000000, Layout::half);
    EXPECT_FALSE(ref::apply_blocked(h, Mp(pos[0]), x) == exact);
  }
}

RopeSpec cogvideox(std::int64_t hd) {
  // CogVideoX 3-D: t D/4, h 3D/8, w 3D/8 dims (pairs D/8, 3D/16, 3D/16), interleaved.
  RopeSpec s;
  s.head_dim = hd;
  s.base = 10000;
  s.layout = Layout::axial;
  s.sections = {hd / 8, 3 * hd / 16, 3 * hd / 16};
  return s.normalized();
}

// Axial 2-D and 3-D: per-axis composition R(p) R(q) = R(p + q) and shift invariance of scores,
// with fractional positions from a linspace grid (CogVideoX crops h, w with linspace).
TEST(MultiAxis, AxialComposesAndIsShiftInvariantPerAxis) {
  RopeSpec ax2;
  ax2.head_dim = 64;
  ax2.base = 100;
  ax2.layout = Layout::axial;
  ax2.sections = {16, 16};
  ax2 = ax2.normalized();
  for (const RopeSpec& s : {cogvideox(64), cogvideox(128), ax2}) {
    const auto n = static_cast<std::size_t>(s.n_axes());
    // linspace(0, 29 * 29/30, 30)-style fractional grid points.
    ref::Positions p, q, pq, d;
    for (std::size_t a = 0; a < n; ++a) {
      p.push_back(Mp(static_cast<std::int64_t>(3 + 5 * a)) * 29 / 30);
      q.push_back(Mp(static_cast<std::int64_t>(11 - 2 * a)) * 7 / 13);
      pq.push_back(p[a] + q[a]);
      d.push_back(Mp(static_cast<std::int64_t>(100 + 37 * a)) / 3);
    }
    const Mp comp =
        (ref::rotation(s, q) * ref::rotation(s, p) - ref::rotation(s, pq)).cwiseAbs().maxCoeff();
    EXPECT_LE(comp, tol() * 64) << describe(s);
    // <R(p) x, R(q) y> == <R(p + d) x, R(q + d) y>
    ref::MpVector x(s.head_dim), y(s.head_dim);
    for (std::int64_t j = 0; j < s.head_dim; ++j) {
      x(j) = Mp(static_cast<std::int64_t>(j % 7 - 3));
      y(j) = Mp(static_cast<std::int64_t>(j % 5 - 2));
    }
    ref::Positions pd, qd;
    for (std::size_t a = 0; a < n; ++a) pd.push_back(p[a] + d[a]), qd.push_back(q[a] + d[a]);
    const Mp s1 = (ref::rotation(s, p) * x).dot(ref::rotation(s, q) * y);
    const Mp s2 = (ref::rotation(s, pd) * x).dot(ref::rotation(s, qd) * y);
    EXPECT_LE(abs(s1 - s2), tol() * 1024) << describe(s);
    // Shifting one axis only leaves the other axes' contributions alone but changes the score.
    ref::Positions p1 = p;
    p1[0] += 1;
    const Mp s3 = (ref::rotation(s, p1) * x).dot(ref::rotation(s, q) * y);
    EXPECT_GT(abs(s3 - s1), Mp(1e-6)) << describe(s);
  }
}

// Kernels on CogVideoX with real (fractional) positions: within the bound of the reference.
TEST(MultiAxis, KernelsTakeFractionalPositions) {
  const RopeSpec s = cogvideox(64);
  const std::vector<double> pos = {2.0, 29.0 * 7 / 30, 44.0 * 3 / 45};  // linspace grid points
  std::vector<double> x(64);
  for (std::size_t j = 0; j < x.size(); ++j) x[j] = std::sin(static_cast<double>(j)) * 4;
  ref::Positions pm;
  for (double v : pos) pm.push_back(ref::exact(v));
  const auto exact = ref::apply_blocked(s, pm, x);
  for (const char* kn : {"scalar", "simd"}) {
    const Kernel* k = find_builtin_kernel(kn);
    std::vector<double> y(64);
    TensorArgs a;
    a.dtype = Dtype::f64;
    a.n_tokens = a.n_heads = 1;
    a.in = x.data();
    a.out = y.data();
    a.head_stride = a.token_stride = 64;
    a.real_positions = pos.data();
    a.n_axes = 3;
    ASSERT_EQ(k->apply(s, a), KernelStatus::ok);
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [ia, ib] = s.pair(i);
      const auto B = bounds::pair_error_bound(k->policy(Dtype::f64), s, Dtype::f64, i,
                                              pos[static_cast<std::size_t>(s.pair_axis(i))]);
      const Mp err =
          sqrt(pow(ref::exact(y[ia]) - exact[ia], 2) + pow(ref::exact(y[ib]) - exact[ib], 2));
      EXPECT_LE(err, Mp(B.abs(std::hypot(x[ia], x[ib])))) << kn << " pair " << i;
    }
  }
  // Kernels without real-position support skip rather than guess.
  EXPECT_FALSE(find_builtin_kernel("table_f32")->supports(s, Dtype::f64));
}

// The switch to LongRoPE's long factors is strict: at seq_len == original, short factors.
TEST(Scaling, LongRopeSwitchIsStrict) {
  RopeSpec s = base_spec(8, 10000, Layout::half);
  s.scaling.kind = ScalingKind::longrope;
  s.scaling.short_factor = {1, 1.5, 2, 3};
  s.scaling.long_factor = {4, 8, 16, 32};
  s.scaling.original_max_position_embeddings = 4096;
  s.scaling.max_position_embeddings = 131072;
  RopeSpec plain = s;
  plain.scaling = {};
  const auto th = ref::inv_freqs(plain.normalized());
  for (std::int64_t L : {0, 4095, 4096, 4097}) {
    s.scaling.seq_len = L;
    const auto t = ref::inv_freqs(s.normalized());
    const auto& f = L > 4096 ? s.scaling.long_factor : s.scaling.short_factor;
    for (std::size_t i = 0; i < t.size(); ++i)
      EXPECT_EQ(t[i], th[i] / ref::exact(f[i])) << "seq_len " << L << " pair " << i;
  }
  // Default attention factor: sqrt(1 + ln 32 / ln 4096) = sqrt(17/12).
  EXPECT_LE(abs(ref::magnitude(s.normalized()) - sqrt(Mp(17) / 12)), tol());
}

// Validation: clear messages for inconsistent parameters.
TEST(Scaling, InvalidParametersAreRejected) {
  RopeSpec s = base_spec(128, 10000, Layout::half);
  s.layout = Layout::mrope;
  s.sections = {16, 24, 16};
  EXPECT_THROW(s.normalized(), SpecError);
  s = base_spec(8, 10000, Layout::half);
  s.scaling.kind = ScalingKind::freq_factors;
  s.scaling.freq_factors = {1, 2, 3};
  EXPECT_THROW(s.normalized(), SpecError);
  s.scaling.kind = ScalingKind::llama3;
  s.scaling.factor = 8;
  s.scaling.low_freq_factor = 4;
  s.scaling.high_freq_factor = 1;
  s.scaling.original_max_position_embeddings = 8192;
  try {
    s.normalized();
    ADD_FAILURE() << "no error";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("high_freq_factor"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ropecheck
