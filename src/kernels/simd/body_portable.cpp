// Path portable: plain C++ (no target region), one pair at a time; also the reference the vector
// paths are compared with bit for bit.
#include "target.hpp"
#include "trig.hpp"

#include <cstdint>

#include "heads-inl.hpp"

namespace ropecheck::kernels::simd {
namespace {

void sincos_rows_scalar(const double* theta, std::int64_t np, double m, double* cb, double* sb) {
  for (std::int64_t i = 0; i < np; ++i) simd_sincos(m * theta[i], sb[i], cb[i]);
}

void compose_scalar(std::int64_t np, const double* bc, const double* bs, const double* jc,
                    const double* js, double* cb, double* sb) {
  for (std::int64_t i = 0; i < np; ++i) compose1(bc[i], bs[i], jc[i], js[i], cb[i], sb[i]);
}

template <class T>
void head_half(const T* x, T* y, std::int64_t rd, std::int64_t off, const arith_t<T>* C,
               const arith_t<T>* S) {
  const std::int64_t n = rd / 2;
  for (std::int64_t i = 0; i < n; ++i) rotate_pair1(x, y, i, i + off, C[i], S[i]);
}

template <class T>
void head_interleaved(const T* x, T* y, std::int64_t rd, std::int64_t, const arith_t<T>* C2,
                      const arith_t<T>* S2) {
  for (std::int64_t j = 0; j < rd; j += 2) rotate_pair1(x, y, j, j + 1, C2[j], S2[j + 1]);
}

template <class T>
HeadLoops<T> loops() {
  const HeadsFn<T> half = heads<T, head_half<T>>, inter = heads<T, head_interleaved<T>>;
  return {.half = half, .interleaved = inter, .half_stream = half, .interleaved_stream = inter};
}

}  // namespace

const Target& portable_target() {
  static const Target t{.sincos_rows = sincos_rows_scalar,
                        .compose = compose_scalar,
                        .fill_f64 = fill_tables<double>,
                        .fill_f32 = fill_tables<float>,
                        .f64 = loops<double>(),
                        .f32 = loops<float>(),
                        .f16 = loops<Eigen::half>(),
                        .bf16 = loops<Eigen::bfloat16>()};
  return t;
}

}  // namespace ropecheck::kernels::simd
