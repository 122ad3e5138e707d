// `simd`: table-based, vectorized, with run-time dispatch (avx512bf16 / avx512 / avx2+fma+f16c /
// portable; cpu.cpp). Numerics, identical in every path and both layouts, so results are
// bit-identical across paths, layouts, head counts and token orders:
//   angle   = double(m) * theta'_i                                  f64, same code as `scalar`
//   c, s    = A(scale * cos(angle)), A(scale * sin(angle))          one rounding into the table
//             cos/sin: simd_sincos / simd_step_sincos (contracts in trig.hpp), table.hpp
//   out_a   = fma(x_a, c, x_b * (-s))                               A = f32 (f64 for f64)
//   out_b   = fma(x_b, c, x_a * s)                                  (rotate_pair1, convert.hpp)
// then one rounding into storage (convert.hpp).
#include "../common.hpp"
#include "table.hpp"
#include "target.hpp"
#include "trig.hpp"

#include <cstdint>
#include <string>

namespace ropecheck::kernels {
namespace simd {
namespace {

// Interleaved pairing: interleaved and axial; every other layout pairs (i, i + off).
bool half_style(Layout l) { return l != Layout::interleaved && l != Layout::axial; }
std::int64_t half_offset(const RopeSpec& spec) {
  return spec.layout == Layout::proportional ? spec.head_dim / 2 : spec.rotary_dim / 2;
}

// Large calls (output >= kLargeBytes, far beyond L2) are memory-bound; two things bring them to
// memcpy speed, neither changes a value:
// * Software prefetch of the input kPrefetchAhead bytes ahead, once per head vector: the hardware
//   prefetcher alone leaves the head loop stalled on loads (measured: f32 1.4x -> 0.9x memcpy).
// * Non-temporal stores for the full vectors of out-of-place calls (AVX-512 paths). A memcpy of a
//   tensor this size streams its stores past the cache (glibc does above ~3/4 of the L3 share);
//   with ordinary stores every output line is first read (write-allocate), 1.5x the traffic.
//   Needs every full-vector store aligned to its width (64 bytes; 32 for f16/bf16, 16 f32 lanes
//   narrowed): out, both strides and, for the half layout, the second half's offset rd/2.
constexpr std::int64_t kLargeBytes = std::int64_t{8} << 20;

template <class T>
bool is_large(const RopeSpec& spec, const TensorArgs& a, Path path) {
  return path != Path::portable &&
         a.n_tokens * a.n_heads * spec.head_dim * static_cast<std::int64_t>(sizeof(T)) >=
             kLargeBytes;
}

template <class T>
bool use_streaming_stores(const RopeSpec& spec, const TensorArgs& a, Path path) {
  if (path < Path::avx512 || a.in == a.out || !is_large<T>(spec, a, path)) return false;
  const std::int64_t align = sizeof(T) == 2 ? 32 : 64;
  const std::int64_t sz = sizeof(T);
  const std::int64_t half_off = half_style(spec.layout) ? half_offset(spec) * sz : 0;
  return reinterpret_cast<std::uintptr_t>(a.out) % align == 0 &&
         (a.token_stride * sz) % align == 0 && (a.head_stride * sz) % align == 0 &&
         half_off % align == 0;
}

template <class T>
HeadsFn<T> pick_heads(const HeadLoops<T>& loops, bool half, bool stream) {
  if (stream) return half ? loops.half_stream : loops.interleaved_stream;
  return half ? loops.half : loops.interleaved;
}

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a, Path path) {
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  const std::int64_t rd = spec.rotary_dim, hoff = half_offset(spec);
  const Target& target = target_of(path);
  const HeadLoops<T>& loops = target.heads<T>();
  const bool half = half_style(spec.layout);
  const bool stream = use_streaming_stores<T>(spec, a, path);
  const HeadsFn<T> heads = pick_heads(loops, half, stream);
  const std::int64_t prefetch_bytes =
      is_large<T>(spec, a, path) ? spec.head_dim * static_cast<std::int64_t>(sizeof(T)) : 0;
  AngleTable<arith_t<T>> table(spec, a, target, half || loops.interleaved_pair_table);

  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    const std::int64_t toff = t * a.token_stride;
    if (rd > 0) {
      table.at_token(t);
      heads(in + toff, out + toff, a.n_heads, a.head_stride, rd, hoff, table.C(), table.S(),
            prefetch_bytes);
    }
    if (rd < spec.head_dim)  // else copy_tail has nothing to copy
      for (std::int64_t hd = 0; hd < a.n_heads; ++hd)
        copy_tail(spec, in + toff + hd * a.head_stride, out + toff + hd * a.head_stride);
  }
#ifdef ROPECHECK_X86
  // Streaming stores are weakly ordered: make them visible before the caller reads the output.
  if (stream) _mm_sfence();
#endif
}

class SimdKernel final : public BuiltinKernel {
 public:
  std::string name() const override { return "simd"; }
  std::string description() const override {
    return "f64 angle and vectorized f64 cos/sin (own, |err| <= 2^-53) per distinct token into "
           "an f32 table (f64 for f64), FMA rotation vectorized with run-time dispatch (avx512bf16 "
           "/ avx512 / avx2+fma+f16c / portable)";
  }
  Policy policy(Dtype d) const override {
    const Precision p = d == Dtype::f64 ? Dtype::f64 : Dtype::f32;
    return {Dtype::f64,
            p,
            p,
            AngleRecipe::pow_product,
            true,
            std::string("path: ") + path_name(current_path()) +
                " (all paths bit-identical); cos/sin: own vectorized f64 evaluation, absolute "
                "error <= 2^-53 for |angle| <= 2^28, libm beyond; out_a = fma(x_a, c, x_b*(-s)), "
                "out_b = fma(x_b, c, x_a*s); table holds scale*cos, scale*sin; scaling variants, "
                "magnitude and multi-axis angles by the f64 recipe formulas (theta_ladder_f64, "
                "magnitude_f64), as `scalar`" +
                (d == Dtype::f64 ? std::string()
                                 : "; f32-table entries by angle addition from sincos(m0 theta) "
                                   "and sincos(j theta), m = m0 + j, |j| < 16 (trig error <= "
                                   "6.5 u64)"),
            d == Dtype::f64 ? 2.0 : kSimdStepTrigError};
  }
  bool extended() const override { return true; }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    const Path p = current_path();
    return checked_apply(spec, a, [&](auto tag) { rotate_all<decltype(tag)>(spec, a, p); });
  }
};

}  // namespace
}  // namespace simd

const Kernel& simd_kernel() {
  static const simd::SimdKernel k;
  return k;
}

}  // namespace ropecheck::kernels
