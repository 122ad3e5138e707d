// `complex`: the complex-number form (Meta's LLaMA reference: freqs_cis = polar(1, angle), x viewed
// as complex and multiplied). Each pair is x_a + i x_b, multiplied by std::polar(s, angle); angle
// and arithmetic in f64, one rounding into storage.
#include "common.hpp"

#include <cmath>
#include <complex>

namespace ropecheck::kernels {
namespace {

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    const double m = static_cast<double>(a.positions[t]);
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const std::complex<double> w = std::polar(spec.scale, m * theta_f64(spec, i));
      const auto [ia, ib] = spec.pair(i);
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        const std::int64_t off = t * a.token_stride + h * a.head_stride;
        const std::complex<double> z =
            std::complex<double>(load_as_double(in[off + ia]), load_as_double(in[off + ib])) * w;
        out[off + ia] = store_from_double<T>(z.real());
        out[off + ib] = store_from_double<T>(z.imag());
      }
    }
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      const std::int64_t off = t * a.token_stride + h * a.head_stride;
      copy_tail(spec, in + off, out + off);
    }
  }
}

class ComplexKernel final : public BuiltinKernel {
 public:
  std::string name() const override { return "complex"; }
  std::string description() const override {
    return "complex multiplication (x_a + i x_b) * polar(s, m theta) in std::complex<double>";
  }
  Policy policy(Dtype) const override {
    return {Dtype::f64,
            Dtype::f64,
            Dtype::f64,
            AngleRecipe::pow_product,
            false,
            "w = std::polar(s, angle) holds s*cos, s*sin in f64; product by the compiler's "
            "complex multiply (ac - bd, ad + bc; NaN recovery only when the result is NaN)"};
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    return checked_apply(spec, a, [&](auto tag) { rotate_all<decltype(tag)>(spec, a); });
  }
};

}  // namespace

const Kernel& complex_kernel() {
  static const ComplexKernel k;
  return k;
}

}  // namespace ropecheck::kernels
