// FP8 storage formats (8-bit floats of FP8 KV caches and fused RoPE + quantization kernels), as
// value vocabulary: decoding a byte, and one correct rounding (to nearest, ties to even) of a
// double into a format under a declared overflow policy. The formats (OCP FP8 spec v1.0 and the
// "fnuz" variant of AMD/Graphcore):
//   e4m3fn    4 exponent bits (bias 7), 3 mantissa bits; no inf; NaN = S.1111.111; max 448;
//             smallest subnormal 2^-9. safetensors F8_E4M3, torch.float8_e4m3fn.
//   e4m3fnuz  4/3 bits, bias 8; no inf, no -0: 0x80 is the only NaN; max 240; smallest
//             subnormal 2^-10. torch.float8_e4m3fnuz (ROCm).
//   e5m2      5 exponent bits (bias 15), 2 mantissa bits; IEEE-like: inf = S.11111.00, NaN above;
//             max 57344; smallest subnormal 2^-16. safetensors F8_E5M2, torch.float8_e5m2.
// Overflow: the value is rounded to nearest-even on the format's grid extended above its largest
// finite value; a result above it is then clamped to +-max (saturate: CUDA's satfinite
// conversions, most fused kernels), NaN, or +-inf (e5m2 only). `nan` is a model of PyTorch's
// .to(float8_e4m3fn), read (not run: Debian's torch 1.13 has no float8) in
// c10/util/Float8_e4m3fn.h fp8e4m3fn_from_fp32_value (now torch/headeronly/util/), found in stored
// copies without a pinned commit: inputs >= 480.0f give 0x7F (NaN), and (464, 480) round to 480's
// code, also 0x7F; the same as rounding on the extended grid and mapping above 448 to NaN.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ropecheck {

enum class Fp8Format { e4m3fn, e4m3fnuz, e5m2 };
enum class Fp8Overflow { saturate, nan, inf };

struct Fp8Traits {
  int exponent_bits, mantissa_bits, bias;
  double max_finite;
  bool has_inf, has_negative_zero;
};
const Fp8Traits& traits(Fp8Format f);
const char* name(Fp8Format f);
const char* name(Fp8Overflow o);
// "e4m3fn" (also "f8e4m3", "f8e4m3fn", "float8_e4m3fn", "F8_E4M3"), "e4m3fnuz" ("f8e4m3fnuz"),
// "e5m2" ("f8e5m2", "float8_e5m2", "F8_E5M2"); nullopt otherwise.
std::optional<Fp8Format> parse_fp8_format(std::string_view s);
std::optional<Fp8Overflow> parse_fp8_overflow(std::string_view s);  // saturate | nan | inf

// The value of byte b in format f (NaN for its NaN codes, +-inf for e5m2's).
double fp8_decode(Fp8Format f, std::uint8_t b);
// v rounded once to nearest-even into f, with the overflow policy (inf: e5m2 only; with another
// format it is read as nan). NaN stays NaN; +-inf overflows. e4m3fnuz has no -0: -0 and negative
// values that round to 0 give +0.
double fp8_round(double v, Fp8Format f, Fp8Overflow o);
// The byte of a value of f (finite and representable, or NaN / +-inf where f has them).
std::uint8_t fp8_encode(Fp8Format f, double representable);
// Position of a finite value of f in the ordered list of f's finite values (-max .. +max, one
// zero), for distances in "fp8 ulps".
int fp8_rank(Fp8Format f, double representable);

}  // namespace ropecheck
