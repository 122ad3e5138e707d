// The FP8 output chain of a fused RoPE + quantization kernel, as one definition shared by the
// fused-dump check (`check`, ropecheck::scan) and the FP8 section of the precision reports:
//   v   the rotation's value (the kernel's, or the exact one)
//   r   an optional intermediate rounding of v (bf16 / f16 / f32 / f64), else v
//   q   fl32(r) (x) fl32(scale), one f32 rounding: multiply or divide; divide accepts r / scale
//       and r * fl32(1 / scale), the two forms kernels use. Read in source (not run: no GPU):
//       FlashInfer multiplies, RopeQuantizeKernel's `k_rope_vec[i] * quant_scale_kv` then
//       cast_store (flashinfer-ai/flashinfer include/flashinfer/rope/kernels.cuh @ 30315c17ac74);
//       vLLM divides, `__nv_cvt_float_to_fp8(__bfloat162float(a) / scale, __NV_SATFINITE, ...)`
//       in scaled_vec_conversion (vllm-project/vllm csrc/quantization/fp8/nvidia/quant_utils.cuh
//       @ 2fed15b1649c): a bf16 value, widened exactly, divided in f32, saturated. TensorRT-LLM's
//       multiply is from the issue that asked for this, not read here.
//   c   q rounded once to nearest-even into the FP8 format with its overflow policy (fp8.hpp)
// Every step is non-decreasing in v for scale > 0, so the images of an interval's two ends bound
// the image of every value inside it (chain_range): the acceptance rule of both users, with no
// tolerance of its own.
// The ideal, for comparison: the exact value times the exact scale, rounded once into the format
// (fp8_correct): what a kernel with an exact rotation and an exact scale step would store.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/fp8.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"

#include <optional>

namespace ropecheck::verify {

struct Fp8Chain {
  Fp8Format format = Fp8Format::e4m3fn;
  Fp8Overflow overflow = Fp8Overflow::saturate;
  bool divide = false;                // scale convention: q = r / scale (else r * scale)
  std::optional<Dtype> intermediate;  // rounding of v before the scale (nullopt: none)
};

// r, q and c of the chain for one value v; reciprocal: divide as r * fl32(1 / scale).
struct ChainTrace {
  double r = 0, q = 0, c = 0;
};
ChainTrace chain_trace(const Fp8Chain& ch, double v, double scale, bool reciprocal = false);

// The accepted FP8 values for every v in [lo, hi]: the chain's images of lo and hi (value order),
// over both divide forms.
struct ChainRange {
  double lo = 0, hi = 0;  // fp8 values; an end that overflowed to NaN stands at +-max
  bool nan_ok = false;    // an end overflowed to NaN (overflow nan): NaN is accepted too
  bool single() const { return lo == hi && !nan_ok; }
};
ChainRange chain_range(const Fp8Chain& c, double lo, double hi, double scale);

// q rounded once to nearest-even into f from its exact MP value (no double in between: a double
// rounding could land on an FP8 tie the exact value is not on), then the overflow policy.
double fp8_round_exact(const reference::Mp& q, Fp8Format f, Fp8Overflow o);

// The ideal FP8 value of exact element j of y, scaled exactly (y_j * scale, or y_j / scale when
// divide), rounded once. Fast path: the double product is within 2 double ulps of the exact one,
// so when the FP8 roundings of its neighbours 4 ulps either side agree, that is the answer (the
// rounding is monotone); otherwise (an FP8 tie or the overflow threshold within reach) the MP
// value decides.
double fp8_correct(const reference::ExactVector& y, std::int64_t j, double scale, bool divide,
                   Fp8Format f, Fp8Overflow o);

}  // namespace ropecheck::verify
