// `scalar`: the readable kernel. Everything in f64 for every dtype: theta_i by std::pow, the angle
// m * theta_i, std::cos/std::sin, the rotation, then one rounding into storage.
#include "common.hpp"

#include <cmath>

namespace ropecheck::kernels {
namespace {

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    const double m = static_cast<double>(a.positions[t]);
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const double angle = m * theta_f64(spec, i);
      const double c = std::cos(angle);
      const double s = std::sin(angle);
      const auto [ia, ib] = spec.pair(i);
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        const std::int64_t off = t * a.token_stride + h * a.head_stride;
        // Read both elements before writing either: out may alias in.
        const double xa = load_as_double(in[off + ia]);
        const double xb = load_as_double(in[off + ib]);
        out[off + ia] = store_from_double<T>(spec.scale * (xa * c - xb * s));
        out[off + ib] = store_from_double<T>(spec.scale * (xa * s + xb * c));
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
            "f16/bf16 rounded once from f64 (round_to_dtype)"};
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (auto st = check(spec, a); st != KernelStatus::ok || a.n_tokens == 0 || a.n_heads == 0)
      return st;
    return dispatch_dtype(a.dtype, [&](auto tag) {
      rotate_all<decltype(tag)>(spec, a);
      return KernelStatus::ok;
    });
  }
};

}  // namespace

const Kernel& scalar_kernel() {
  static const ScalarKernel k;
  return k;
}

}  // namespace ropecheck::kernels
