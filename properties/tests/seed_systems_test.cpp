// Seed systems: the additive sinusoidal position encoding as the negative control
// of ScoresDependOnlyOnOffset, a generic group-representation checker, and the attention-matrix
// (Toeplitz) view with an unrotated V. All exact comparisons are at the reference's MP precision;
// "equal" means a residual below 2^-(precision-20) times the magnitudes involved: every quantity
// here is a short sum/product chain (< 2^10 MP roundings of relative 2^-precision each, plus up to
// 2^12 amplification from squaring in expm below), so 2^20 roundings of headroom is a derived
// ceiling, not a tuned one, and anything a position-dependence would produce is many orders larger.
#include "ropecheck/properties.hpp"
#include "ropecheck/reference/reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

namespace {

namespace R = ropecheck::reference;
namespace P = ropecheck::properties;
using R::Mp;
using R::MpMatrix;
using R::MpVector;
using ropecheck::Dtype;
using ropecheck::RopeSpec;

Mp tol() { return pow(Mp(2), -static_cast<int>(R::precision_bits()) + 20); }
Mp max_abs(const MpMatrix& m) {
  Mp r = 0;
  for (Eigen::Index i = 0; i < m.size(); ++i) r = std::max(r, Mp(abs(m(i))));
  return r;
}

class Seeds : public testing::Test {
 protected:
  void SetUp() override { R::set_precision_bits(R::default_bits(Dtype::f64)); }
};

// ---- negative control: additive sinusoidal position encoding (Vaswani et al.) as a "kernel" ----
// out = x + p_m, p_m[2i] = sin(m theta_i), p_m[2i+1] = cos(m theta_i): the position enters by
// addition, so <x+p_m, y+p_n> has cross terms <x, p_n> that depend on n itself, not on n - m.
class AdditiveSinusoidal final : public ropecheck::Kernel {
 public:
  std::string name() const override { return "additive_sinusoidal"; }
  std::string description() const override { return "x + PE(m) (negative control)"; }
  ropecheck::Policy policy(Dtype) const override {
    return {Dtype::f64, Dtype::f64, Dtype::f64, ropecheck::AngleRecipe::pow_product, false, ""};
  }
  bool supports(const RopeSpec&, Dtype) const override { return true; }
  ropecheck::KernelStatus apply(const RopeSpec& s, const ropecheck::TensorArgs& a) const override {
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        const std::int64_t off = t * a.token_stride + h * a.head_stride;
        for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
          const auto [ia, ib] = s.pair(i);
          const double th = std::pow(s.base, -2.0 * i / s.rotary_dim);
          const double ang = static_cast<double>(a.positions[t]) * th;
          ropecheck::store(a.dtype, a.out, off + ia,
                           ropecheck::round_to_dtype(
                               ropecheck::load(a.dtype, a.in, off + ia) + std::sin(ang), a.dtype));
          ropecheck::store(a.dtype, a.out, off + ib,
                           ropecheck::round_to_dtype(
                               ropecheck::load(a.dtype, a.in, off + ib) + std::cos(ang), a.dtype));
        }
        for (std::int64_t j = s.rotary_dim; j < s.head_dim; ++j)
          ropecheck::store(a.dtype, a.out, off + j, ropecheck::load(a.dtype, a.in, off + j));
      }
    return ropecheck::KernelStatus::ok;
  }
};

TEST_F(Seeds, AdditiveSinusoidalFailsScoresDependOnlyOnOffset) {
  AdditiveSinusoidal k;
  P::Options o;
  o.seed = 7;
  o.max_success = 100;
  o.shrink = false;
  o.id = "Seeds/additive_sinusoidal_f64.ScoresDependOnlyOnOffset";
  const auto v = P::check(P::Property::ScoresDependOnlyOnOffset, k, Dtype::f64, o);
  EXPECT_EQ(v.status, P::Status::failed) << "the negative control passed: the property is blind";
}

// The seed's full form: score = (x_m + p_m)^T Wq^T Wk (x_n + p_n) with general Wq, Wk, against
// RoPE's (R_m Wq x)^T (R_n Wk y); shift both positions by Delta.
TEST_F(Seeds, AdditivePeWithProjectionsDependsOnAbsolutePosition) {
  const int d = 8;
  RopeSpec s;
  s.head_dim = d;
  s = s.normalized();
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> U(-1, 1);
  MpMatrix Wq(d, d), Wk(d, d);
  MpVector x(d), y(d);
  for (int i = 0; i < d; ++i) {
    x(i) = R::exact(U(rng));
    y(i) = R::exact(U(rng));
    for (int j = 0; j < d; ++j) Wq(i, j) = R::exact(U(rng)), Wk(i, j) = R::exact(U(rng));
  }
  auto pe = [&](const Mp& m) {
    MpVector p(d);
    for (int i = 0; i < d / 2; ++i) {
      const Mp a = R::angle(s, i, m);
      p(2 * i) = sin(a);
      p(2 * i + 1) = cos(a);
    }
    return p;
  };
  auto additive = [&](const Mp& m, const Mp& n) -> Mp {
    return ((x + pe(m)).transpose() * Wq.transpose() * Wk * (y + pe(n)))(0, 0);
  };
  auto rope = [&](const Mp& m, const Mp& n) -> Mp {
    return ((R::rotation(s, m) * Wq * x).transpose() * (R::rotation(s, n) * Wk * y))(0, 0);
  };
  for (auto [m, n, delta] : {std::tuple{3, 5, 100}, {0, 7, 1000}, {40, 2, 65536}}) {
    const Mp a1 = additive(m, n), a2 = additive(m + delta, n + delta);
    const Mp r1 = rope(m, n), r2 = rope(m + delta, n + delta);
    const Mp scale = 1 + abs(a1) + abs(r1);
    EXPECT_GT(abs(a1 - a2), 1e6 * tol() * scale) << "additive PE looked relative at m=" << m;
    EXPECT_LE(abs(r1 - r2), tol() * scale) << "RoPE score moved with a common shift at m=" << m;
  }
}

// ---- generic group-representation checker ----
struct RepReport {
  Mp orthogonal, identity, homomorphism, relative;  // residuals (max abs entry)
};

RepReport check_representation(const std::function<MpMatrix(const Mp&)>& Rf,
                               const std::vector<double>& positions) {
  RepReport r{0, 0, 0, 0};
  const MpMatrix R0 = Rf(Mp(0));
  const MpMatrix I = MpMatrix::Identity(R0.rows(), R0.cols());
  r.identity = max_abs(R0 - I);
  for (double a : positions) {
    const MpMatrix Ra = Rf(R::exact(a));
    r.orthogonal = std::max(r.orthogonal, max_abs(Ra.transpose() * Ra - I));
    for (double b : positions) {
      const MpMatrix Rb = Rf(R::exact(b));
      r.homomorphism = std::max(r.homomorphism, max_abs(Ra * Rb - Rf(R::exact(a) + R::exact(b))));
      // R_a^T R_b depends only on b - a: compare with the pair shifted by 17.25.
      const Mp sh = R::exact(17.25);
      r.relative = std::max(
          r.relative,
          max_abs(Ra.transpose() * Rb - Rf(R::exact(a) + sh).transpose() * Rf(R::exact(b) + sh)));
    }
  }
  return r;
}

// exp(M) in MP by scaling and squaring with a Taylor series (||M/2^k|| <= 1/4, 60 terms: the
// truncation (1/4)^60/60! is far below 2^-160).
MpMatrix expm(const MpMatrix& M) {
  Mp norm = 0;
  for (Eigen::Index j = 0; j < M.cols(); ++j) {
    Mp c = 0;
    for (Eigen::Index i = 0; i < M.rows(); ++i) c += abs(M(i, j));
    norm = std::max(norm, c);
  }
  int k = 0;
  while (norm > Mp(0.25)) norm /= 2, ++k;
  const MpMatrix B = M / pow(Mp(2), k);
  MpMatrix term = MpMatrix::Identity(M.rows(), M.cols()), sum = term;
  for (int n = 1; n <= 60; ++n) {
    term = (term * B) / Mp(n);
    sum += term;
  }
  for (int i = 0; i < k; ++i) sum = sum * sum;
  return sum;
}

const std::vector<double> kRepPositions = {0.5, 3, -7, 12.25, 1000};

TEST_F(Seeds, RopeIsAnOrthogonalRepresentation) {
  RopeSpec s;
  s.head_dim = 6;
  s.layout = ropecheck::Layout::half;
  s = s.normalized();
  const auto r =
      check_representation([&](const Mp& a) { return R::rotation(s, a); }, kRepPositions);
  EXPECT_LE(r.orthogonal, tol());
  EXPECT_LE(r.identity, tol());
  EXPECT_LE(r.homomorphism, tol());
  EXPECT_LE(r.relative, tol());
}

TEST_F(Seeds, ExpOfSkewSymmetricIsARepresentationToo) {
  // Dense (not block-diagonal) skew-symmetric generator: the seed's point that RoPE is one member
  // of a family; the checker must not depend on the block structure.
  const int d = 5;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> U(-0.05, 0.05);
  MpMatrix A = MpMatrix::Zero(d, d);
  for (int i = 0; i < d; ++i)
    for (int j = i + 1; j < d; ++j) {
      A(i, j) = R::exact(U(rng));
      A(j, i) = -A(i, j);
    }
  int nonzero_off_block = 0;
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j)
      if (std::abs(i - j) > 1 && A(i, j) != 0) ++nonzero_off_block;
  ASSERT_GT(nonzero_off_block, 0);
  const auto r =
      check_representation([&](const Mp& a) { return expm(MpMatrix(A * a)); }, kRepPositions);
  EXPECT_LE(r.orthogonal, tol());
  EXPECT_LE(r.identity, tol());
  EXPECT_LE(r.homomorphism, tol());
  EXPECT_LE(r.relative, tol());
}

TEST_F(Seeds, NonRepresentationsAreRejected) {
  // Rotation by a^2: orthogonal and R(0) = I, but R(a)R(b) = R(a^2 + b^2) != R((a+b)^2).
  auto quad = [](const Mp& a) {
    MpMatrix m(2, 2);
    const Mp t = a * a / 100;
    m << cos(t), -sin(t), sin(t), cos(t);
    return m;
  };
  const auto q = check_representation(quad, kRepPositions);
  EXPECT_LE(q.orthogonal, tol());
  EXPECT_LE(q.identity, tol());
  EXPECT_GT(q.homomorphism, Mp(1e-3));
  EXPECT_GT(q.relative, Mp(1e-3));
  // Scaling diag(2^a, 2^-a): a homomorphism, but not orthogonal, so R_m^T R_n is not relative.
  auto hyper = [](const Mp& a) {
    MpMatrix m = MpMatrix::Zero(2, 2);
    m(0, 0) = pow(Mp(2), a / 1024);
    m(1, 1) = pow(Mp(2), -a / 1024);
    return m;
  };
  const auto h = check_representation(hyper, kRepPositions);
  EXPECT_LE(h.homomorphism, tol() * 16);  // entries up to 2^2: residual scales with them
  EXPECT_GT(h.orthogonal, Mp(1e-3));
  EXPECT_GT(h.relative, Mp(1e-3));
}

// ---- attention-matrix view: Toeplitz structure, V never rotated ----
TEST_F(Seeds, AttentionMatrixIsToeplitzAndVIsNotRotated) {
  RopeSpec s;
  s.head_dim = 8;
  s = s.normalized();
  const int N = 6, d = 8;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> U(-1, 1);
  auto rnd = [&] {
    std::vector<double> v(d);
    for (auto& e : v) e = U(rng);
    return v;
  };
  // 1. Position operator on diagonal j - i = c is the same R_c.
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j)
      EXPECT_LE(max_abs(R::rotation(s, Mp(i)).transpose() * R::rotation(s, Mp(j)) -
                        R::rotation(s, Mp(j - i))),
                tol());
  // 2. Same q, k at every position: the score matrix is Toeplitz.
  const auto q = rnd(), k = rnd();
  auto scores = [&](int shift, const std::vector<std::vector<double>>& qs,
                    const std::vector<std::vector<double>>& ks) {
    MpMatrix S(N, N);
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j)
        S(i, j) = R::apply_blocked(s, Mp(i + shift), qs[i])
                      .dot(R::apply_blocked(s, Mp(j + shift), ks[j]));
    return S;
  };
  const std::vector<std::vector<double>> qsame(N, q), ksame(N, k);
  const MpMatrix S = scores(0, qsame, ksame);
  for (int i = 0; i + 1 < N; ++i)
    for (int j = 0; j + 1 < N; ++j) EXPECT_LE(abs(S(i, j) - S(i + 1, j + 1)), tol() * 10);
  // 3. Causal softmax attention with V unrotated is invariant under a common position shift;
  // rotating V as well (the bug) makes the output depend on absolute position.
  std::vector<std::vector<double>> qs, ks, vs;
  for (int i = 0; i < N; ++i) qs.push_back(rnd()), ks.push_back(rnd()), vs.push_back(rnd());
  auto attend = [&](int shift, bool rotate_v) {
    const MpMatrix Sc = scores(shift, qs, ks);
    MpMatrix O = MpMatrix::Zero(N, d);
    for (int i = 0; i < N; ++i) {
      Mp z = 0;
      std::vector<Mp> w(i + 1);
      for (int j = 0; j <= i; ++j) z += (w[j] = exp(Sc(i, j)));
      for (int j = 0; j <= i; ++j) {
        MpVector v(d);
        if (rotate_v)
          v = R::apply_blocked(s, Mp(j + shift), vs[j]);
        else
          for (int e = 0; e < d; ++e) v(e) = R::exact(vs[j][e]);
        O.row(i) += (w[j] / z) * v.transpose();
      }
    }
    return O;
  };
  EXPECT_LE(max_abs(attend(0, false) - attend(1000, false)), tol() * 10);
  EXPECT_GT(max_abs(attend(0, true) - attend(1000, true)), Mp(1e-3));
}

}  // namespace
