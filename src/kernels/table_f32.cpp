// `table_f32`: the HF transformers / vLLM production recipe, all in f32:
//   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
//   freqs = outer(positions.float(), inv_freq); cos = freqs.cos() * s; sin = freqs.sin() * s
//   out = x * cos + rotate_half(x) * sin          (unfused: separate f32 multiplies and add)
// It loses accuracy at long context by design (f32 positions and f32 angles); it is here to be
// measured, not fixed.
#include "common.hpp"

#include <cmath>
#include <vector>

namespace ropecheck::kernels {
namespace {

template <class T>
inline float load_f32(T v) {
  return static_cast<float>(v);  // f64 -> f32 rounds (declared: arithmetic is f32 for f64 too)
}

template <class T>
inline T store_f32(float v) {
  if constexpr (std::is_same_v<T, double>)
    return static_cast<double>(v);
  else
    return T(v);  // float -> float / Eigen::half / Eigen::bfloat16: one RNE rounding
}

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  const std::int64_t np = spec.n_pairs();
  // base is a Python float that torch turns into an f32 tensor element; arange(0, dim, 2) is
  // exact in f32 (dims are far below 2^24), so the exponent is one f32 division.
  const float base_f = static_cast<float>(spec.base);
  const float rd_f = static_cast<float>(spec.rotary_dim);
  const float scale_f = static_cast<float>(spec.scale);
  std::vector<float> inv_freq(np), cos_t(np), sin_t(np);
  for (std::int64_t i = 0; i < np; ++i)
    inv_freq[i] = 1.0f / std::pow(base_f, static_cast<float>(2 * i) / rd_f);

  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    // positions.float(): exact below 2^24, rounded above (that is the recipe's long-context loss).
    const float m = static_cast<float>(a.positions[t]);
    for (std::int64_t i = 0; i < np; ++i) {
      const float angle = m * inv_freq[i];
      cos_t[i] = std::cos(angle) * scale_f;  // float overloads: cosf/sinf
      sin_t[i] = std::sin(angle) * scale_f;
    }
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      for (std::int64_t i = 0; i < np; ++i) {
        const auto [ia, ib] = spec.pair(i);
        const float xa = load_f32(in[off + ia]);
        const float xb = load_f32(in[off + ib]);
        const float c = cos_t[i], s = sin_t[i];
        // x*cos + rotate_half(x)*sin, rotate_half puts -x_b at a and x_a at b. Three f32
        // roundings per output (the kernels library is built with -ffp-contract=off).
        const float ya = xa * c + (-xb) * s;
        const float yb = xb * c + xa * s;
        out[off + ia] = store_f32<T>(ya);
        out[off + ib] = store_f32<T>(yb);
      }
      copy_tail(spec, in + off, out + off);
    }
  }
}

class TableF32Kernel final : public BuiltinKernel {
 public:
  std::string name() const override { return "table_f32"; }
  std::string description() const override {
    return "HF/vLLM recipe: f32 inv_freq, f32 angle, cosf/sinf table per token, f32 rotation";
  }
  Policy policy(Dtype) const override {
    return {Dtype::f32,
            Dtype::f32,
            Dtype::f32,
            AngleRecipe::hf_f32,
            false,
            "f64 inputs are rounded to f32 before the rotation and the f32 result is stored; "
            "expected to lose accuracy at long context"};
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    return checked_apply(spec, a, [&](auto tag) { rotate_all<decltype(tag)>(spec, a); });
  }
};

}  // namespace

const Kernel& table_f32_kernel() {
  static const TableF32Kernel k;
  return k;
}

}  // namespace ropecheck::kernels
