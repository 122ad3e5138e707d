// `scalar`: the readable kernel. Everything in f64 for every dtype: theta'_i by std::pow and the
// variant's f64 formula (theta_ladder_f64), the angle m_axis * theta'_i, std::cos/std::sin, the
// rotation with s = magnitude_f64(spec), then one rounding into storage. Supports every scaling
// variant, every layout, multi-axis and real positions.
#include "common.hpp"

#include <cmath>
#include <vector>

namespace ropecheck::kernels {
namespace {

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  const std::vector<double> theta = theta_ladder_f64(spec);
  const double scale = magnitude_f64(spec);
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const double m = position_of(spec, a, t, spec.pair_axis(i));
      const double angle = m * theta[static_cast<std::size_t>(i)];
      const double c = std::cos(angle);
      const double s = std::sin(angle);
      const auto [ia, ib] = spec.pair(i);
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        const std::int64_t off = t * a.token_stride + h * a.head_stride;
        // Read both elements before writing either: out may alias in.
        const double xa = load_as_double(in[off + ia]);
        const double xb = load_as_double(in[off + ib]);
        out[off + ia] = store_from_double<T>(scale * (xa * c - xb * s));
        out[off + ib] = store_from_double<T>(scale * (xa * s + xb * c));
      }
    }
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      copy_tail(spec, in + off, out + off);
    }
  }
}

class ScalarKernel final : public BuiltinKernel {
 public:
  std::string name() const override { return "scalar"; }
  std::string description() const override {
    return "plain loop; theta, angle, cos/sin and rotation in f64 for every dtype, one rounding "
           "to storage";
  }
  Policy policy(Dtype) const override {
    return {Dtype::f64,
            Dtype::f64,
            Dtype::f64,
            AngleRecipe::pow_product,
            false,
            "cos/sin recomputed per (token, pair) with std::cos/std::sin; no table; "
            "f16/bf16 rounded once from f64 (round_to_dtype); scaling variants and magnitude "
            "by the f64 recipe formulas (theta_ladder_f64, magnitude_f64)"};
  }
  bool extended() const override { return true; }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    return checked_apply(spec, a, [&](auto tag) { rotate_all<decltype(tag)>(spec, a); });
  }
};

}  // namespace

const Kernel& scalar_kernel() {
  static const ScalarKernel k;
  return k;
}

}  // namespace ropecheck::kernels
