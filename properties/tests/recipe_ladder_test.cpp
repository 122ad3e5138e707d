// The ladder_f32 recipe at the property level: a transcription of ggml's CPU rope (ggml-cpu
// ops.cpp: ggml_rope_cache_init + rope_yarn with ext_factor 0, then the NORMAL / NEOX rotation),
// every step in f32, as a ropecheck::Kernel.
//   - declared {angle f32, table f32, arithmetic f32, recipe ladder_f32}: every property passes
//     (f32, f16, bf16 storage; unscaled, linear and freq_factors specs);
//   - the same kernel declared hf_f32 fails MatchesReferenceWithinBound: the false alarm an honest
//     ggml kernel got before the recipe existed (its angle error is ~3x the hf_f32 angle bound at
//     position 4095, base 1e4, head_dim 128; src/bounds/tests/bounds_test.cpp has the numbers);
//   - broken ladders declared ladder_f32 fail: theta_scale over n_dims + 2, the sin sign flipped.
// Case count: RC_PARAMS from CMake for the passing gate (the suite's default), fixed seeds for the
// must-fail checks.
#include "ropecheck/bounds.hpp"
#include "ropecheck/kernel.hpp"
#include "ropecheck/properties.hpp"
#include "ropecheck/reference/reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace ropecheck;
namespace P = ropecheck::properties;

struct LadderKnobs {
  AngleRecipe declared = AngleRecipe::ladder_f32;
  std::int64_t n_dims_offset = 0;  // broken: theta_scale = powf(base, -2/(n_dims + offset))
  bool flip_sin = false;           // broken: sin_sign = -1 in the forward pass
};

template <class T>
float to_f32(T v) {
  return static_cast<float>(v);  // f32 / f16 / bf16 -> f32: exact (GGML_FP16_TO_FP32)
}
template <class T>
T from_f32(float v) {
  return T(v);  // one round-to-nearest-even (GGML_FP32_TO_FP16, Eigen's float -> bf16)
}

class GgmlLadderKernel final : public Kernel {
 public:
  GgmlLadderKernel(std::string name, LadderKnobs k) : name_(std::move(name)), k_(k) {}
  std::string name() const override { return name_; }
  std::string description() const override {
    return "ggml CPU rope transcribed: f32 theta *= powf(base, -2/n_dims), cosf/sinf, f32 rotation";
  }
  Policy policy(Dtype) const override {
    return {Dtype::f32, Dtype::f32, Dtype::f32, k_.declared, false, "ggml-cpu transcription"};
  }
  // ggml's 1-D modes (NORMAL = interleaved, NEOX = half, partial rotary), f32/f16/bf16 tensors,
  // and the scalings that are ggml_rope_ext arguments: freq_scale (linear), freq_factors.
  bool supports(const RopeSpec& s, Dtype d) const override {
    const ScalingKind k = s.scaling.kind;
    return d != Dtype::f64 && (s.layout == Layout::interleaved || s.layout == Layout::half) &&
           s.sections.empty() &&
           (k == ScalingKind::none || k == ScalingKind::linear || k == ScalingKind::freq_factors);
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    if (!supports(s, a.dtype) || a.n_axes != 1 || a.real_positions)
      return KernelStatus::unsupported;
    switch (a.dtype) {
      case Dtype::f32:
        run<float>(s, a);
        break;
      case Dtype::f16:
        run<Eigen::half>(s, a);
        break;
      case Dtype::bf16:
        run<Eigen::bfloat16>(s, a);
        break;
      case Dtype::f64:
        return KernelStatus::unsupported;
    }
    return KernelStatus::ok;
  }

 private:
  // ggml_rope_cache_init: theta = p; per pair rope_yarn(theta / ff, freq_scale, ...) (ext_factor
  // 0: cos/sin of freq_scale * theta / ff, times mscale), cache[i0 + 1] *= sin_sign, then
  // theta *= theta_scale.
  void cache(const RopeSpec& s, std::int64_t pos, std::vector<float>& c) const {
    const Scaling& sc = s.scaling;
    const std::int64_t n_dims = s.rotary_dim + k_.n_dims_offset;
    const float freq_base = static_cast<float>(s.base);
    const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_dims));
    const float freq_scale =
        sc.kind == ScalingKind::linear ? 1.0f / static_cast<float>(sc.factor) : 1.0f;
    const float mscale = static_cast<float>(s.scale);  // ggml's attn_factor
    const float sin_sign = k_.flip_sin ? -1.0f : 1.0f;
    float theta = static_cast<float>(pos);
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const float ff = sc.kind == ScalingKind::freq_factors
                           ? static_cast<float>(sc.freq_factors[static_cast<std::size_t>(i)])
                           : 1.0f;
      const float th = freq_scale * (theta / ff);
      c[2 * i] = std::cos(th) * mscale;  // float overloads: cosf / sinf
      c[2 * i + 1] = std::sin(th) * mscale * sin_sign;
      theta *= theta_scale;
    }
  }

  template <class T>
  void run(const RopeSpec& s, const TensorArgs& a) const {
    const auto* in = static_cast<const T*>(a.in);
    auto* out = static_cast<T*>(a.out);
    std::vector<float> c(static_cast<std::size_t>(2 * s.n_pairs()));
    for (std::int64_t t = 0; t < a.n_tokens; ++t) {
      cache(s, a.positions[t], c);
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        const std::int64_t off = t * a.token_stride + h * a.head_stride;
        for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
          // NORMAL: (i0, i0 + 1); NEOX: (i, i + n_dims/2): spec.pair(i) for both.
          const auto [ia, ib] = s.pair(i);
          const float x0 = to_f32(in[off + ia]), x1 = to_f32(in[off + ib]);
          const float cos_theta = c[2 * i], sin_theta = c[2 * i + 1];
          out[off + ia] = from_f32<T>(x0 * cos_theta - x1 * sin_theta);
          out[off + ib] = from_f32<T>(x0 * sin_theta + x1 * cos_theta);
        }
        if (in != out)  // dims past n_dims are copied
          for (std::int64_t j = s.rotary_dim; j < s.head_dim; ++j)
            std::memcpy(out + off + j, in + off + j, sizeof(T));
      }
    }
  }

  std::string name_;
  LadderKnobs k_;
};

const GgmlLadderKernel kHonest{"ggml_ladder", {}};
const GgmlLadderKernel kHonestAsHf{"ggml_ladder_declared_hf", {AngleRecipe::hf_f32, 0, false}};
const GgmlLadderKernel kDimsPlus2{"ggml_ladder_n_dims_plus_2", {AngleRecipe::ladder_f32, 2, false}};
const GgmlLadderKernel kSinFlipped{"ggml_ladder_sin_flipped", {AngleRecipe::ladder_f32, 0, true}};

// Fixed seed and case count for the checks that must fail (independent of RC_PARAMS); no
// shrinking: only the verdict matters, and the message still holds the counterexample.
P::Options must_fail_options(const Kernel& k, P::Property p) {
  P::Options o;
  o.seed = 1729;
  o.max_success = 1000;
  o.shrink = false;
  o.variants = true;
  o.id = P::test_id("RecipeLadder", k.name(), Dtype::f32, p);
  return o;
}

std::string head(const std::string& msg) { return msg.substr(0, msg.find('\n', 400)); }

class HonestLadder : public testing::TestWithParam<Dtype> {};

// Every property, on unscaled, linear and freq_factors specs (variants on; the kernel declines
// the other kinds and layouts, which are discarded).
TEST_P(HonestLadder, PassesEveryPropertyDeclaredLadderF32) {
  const Dtype d = GetParam();
  for (P::Property p : P::all_properties()) {
    P::Options o;
    o.variants = true;
    o.id = P::test_id("RecipeLadder", kHonest.name(), d, p);
    const auto v = P::check(p, kHonest, d, o);
    std::cout << "[cases] " << o.id << " " << v.cases << "\n";
    if (P::is_multi_axis_property(p) || P::is_backward_property(p)) {  // 1-D, no backward
      EXPECT_EQ(v.status, P::Status::not_applicable) << o.id << ": " << v.message;
      continue;
    }
    EXPECT_EQ(v.status, P::Status::passed) << o.id << ": " << v.message;
  }
}

// The differential gate once more with every spec linear, then with every spec freq_factors.
TEST_P(HonestLadder, MatchesReferenceOnLinearAndFreqFactors) {
  const Dtype d = GetParam();
  for (ScalingKind k : {ScalingKind::linear, ScalingKind::freq_factors}) {
    P::Options o;
    o.variants = true;
    o.focus_scaling = k;
    o.id = P::test_id("RecipeLadder", kHonest.name() + std::string("_") + name(k), d,
                      P::Property::MatchesReferenceWithinBound);
    const auto v = P::check(P::Property::MatchesReferenceWithinBound, kHonest, d, o);
    std::cout << "[cases] " << o.id << " " << v.cases << "\n";
    EXPECT_EQ(v.status, P::Status::passed) << o.id << ": " << v.message;
  }
}

INSTANTIATE_TEST_SUITE_P(RecipeLadder, HonestLadder,
                         testing::Values(Dtype::f32, Dtype::f16, Dtype::bf16),
                         [](const testing::TestParamInfo<Dtype>& i) { return name(i.param); });

// The false alarm, demonstrated: the honest ladder declared as the HF recipe is flagged.
TEST(RecipeLadder, HonestLadderDeclaredHfF32FailsMatchesReference) {
  const auto p = P::Property::MatchesReferenceWithinBound;
  const auto v = P::check(p, kHonestAsHf, Dtype::f32, must_fail_options(kHonestAsHf, p));
  EXPECT_EQ(v.status, P::Status::failed) << v.message;
  std::cout << "[declared hf_f32] failed after " << v.cases << " cases: " << head(v.message)
            << "\n";
}

// The false alarm's case without a generator: base 1e4, head_dim 128, f32, position 4095. Each
// pair's error against the MP reference, over the pair bound of each declaration.
TEST(RecipeLadder, IssueCaseAtPosition4095) {
  namespace ref = ropecheck::reference;
  ref::set_precision_bits(ref::default_bits(Dtype::f32));
  RopeSpec s;
  s.head_dim = 128;
  s = s.normalized();
  std::mt19937_64 rng(4095);
  std::normal_distribution<float> nd;
  std::vector<float> in(128), out(128);
  for (auto& v : in) v = nd(rng);
  const std::int64_t m = 4095;
  TensorArgs args;
  args.n_tokens = args.n_heads = 1;
  args.positions = &m;
  args.in = in.data();
  args.out = out.data();
  args.token_stride = args.head_stride = 128;
  ASSERT_EQ(kHonest.apply(s, args), KernelStatus::ok);
  const std::vector<double> x(in.begin(), in.end());
  const auto exact = ref::apply_blocked(s, ref::Mp(m), x);
  double worst_ladder = 0, worst_hf = 0;
  std::int64_t at_hf = -1;
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    const double n = std::hypot(x[a], x[b]);
    const double err_u = std::hypot(static_cast<double>(ref::exact(out[a]) - exact[a]),
                                    static_cast<double>(ref::exact(out[b]) - exact[b])) /
                         n / unit_roundoff(Dtype::f32);
    const auto bound = [&](const Kernel& k) {
      return bounds::pair_error_bound(k.policy(Dtype::f32), s, Dtype::f32, i, m).total_u(n);
    };
    worst_ladder = std::max(worst_ladder, err_u / bound(kHonest));
    if (err_u / bound(kHonestAsHf) > worst_hf) worst_hf = err_u / bound(kHonestAsHf), at_hf = i;
  }
  std::cout << "[m=4095] worst pair error / ladder_f32 bound = " << worst_ladder
            << "; / hf_f32 bound = " << worst_hf << " (pair " << at_hf << ")\n";
  EXPECT_LT(worst_ladder, 1.0);
  EXPECT_GT(worst_hf, 1.0);
}

TEST(RecipeLadder, BrokenLaddersDeclaredLadderF32Fail) {
  const auto p = P::Property::MatchesReferenceWithinBound;
  for (const GgmlLadderKernel* k : {&kDimsPlus2, &kSinFlipped}) {
    const auto v = P::check(p, *k, Dtype::f32, must_fail_options(*k, p));
    EXPECT_EQ(v.status, P::Status::failed) << k->name() << ": " << v.message;
    std::cout << "[" << k->name() << "] failed after " << v.cases << " cases\n";
  }
}

}  // namespace
