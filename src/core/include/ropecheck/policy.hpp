// The declared precision policy of a kernel, as data: how the angle is computed (recipe and
// precisions), what cos/sin are held in, how the rotation is rounded, how good the trig is. The
// bounds (src/bounds) are derived from it; reports and `check` print it (describe()).
#pragma once

#include "ropecheck/dtype.hpp"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ropecheck {

// Arithmetic precision named by its format (f64, f32, bf16, f16) — same vocabulary as Dtype.
using Precision = Dtype;

// How a kernel turns (spec, position) into cos/sin. The report's "recipe-faithful reference"
// reproduces the angle recipe exactly and then uses exact trig and arithmetic, to separate
// angle-table error from rotation arithmetic.
enum class AngleRecipe : int {
  // theta_i = pow(base, -2i/rotary_dim) and angle = m * theta_i, both in `angle` precision.
  pow_product = 0,
  // HF / vLLM: inv_freq = 1 / base^(arange(0, rd, 2) / rd) in f32, angle = f32(m) * inv_freq.
  hf_f32 = 1,
  // ggml / llama.cpp CPU rope (ggml_rope_cache_init), all in f32, with (j, dim) = spec.ladder(i):
  //   theta_scale = powf(float(base), -2.0f / float(dim)); theta = float(m); then for each ladder
  //   index in order theta *= theta_scale, so pair j's angle is fl(...fl(fl(m) * ts) ... * ts)
  //   with j roundings (pair 0: float(m) itself). linear: angle = fl(freq_scale * theta) with
  //   freq_scale = 1.0f / float(factor); freq_factors: angle = fl(theta / float(ff_j)).
  ladder_f32 = 2,
  // inv_freq = 1 / base^(2i / rotary_dim) computed in f64 (a few f64 ulps off the exact value, as
  // pow gives; scaling variants by their f64 formulas), rounded once into `angle` precision, and
  // angle = m * inv_freq in `angle` precision: gemma.cpp (ops/ops.h CreateInvTimescale: f64, then
  // f32), and the host's own inv_freq_f32 / inv_freq_f64 tables handed to plugins (correctly
  // rounded, which this covers).
  inv_freq_f64 = 3,
  // CUDA under -use_fast_math (FlashInfer include/flashinfer/pos_enc.cuh, which calls __powf and
  // builds with -use_fast_math): inv_freq = __powf(fl32(1 / fl32(base)), 2i / rd) =
  // ex2.approx(fl32(y * lg2.approx(x))) with y = 2i / rd by the approximate f32 division, all f32;
  // linear scaling multiplies by fl32(1 / fl32(factor)); angle = fl32(float(m) * inv_freq). The
  // bound takes PTX's documented errors: lg2.approx 2^-22 relative (absolute in (0.5, 2)),
  // ex2.approx 2 ulp from the correctly rounded value, div.approx/div.full 2 ulp (bounds.cpp 1.).
  fast_powf_f32 = 4,
  // ggml / llama.cpp CUDA (ggml src/ggml-cuda/rope.cu, built with -use_fast_math): theta_scale =
  // powf(float(base), -2.0f / float(dim)) on the host (glibc, f32), inv_freq = __powf(theta_scale,
  // float(j)) = ex2.approx(fl32(j * lg2.approx(theta_scale))) on the device, angle =
  // fl32(float(m) * inv_freq), (j, dim) = spec.ladder(i). lg2.approx errs by 2^-22 absolute for
  // theta_scale in (0.5, 2) (most specs): multiplied by j, about 2.8 j u relative in inv_freq.
  fast_powf_ladder_f32 = 5,
  // vLLM's scaled classes (vllm/model_executor/layers/rotary_embedding/, src/kernels/engines/
  // vllm_native.cpp): hf_f32's inv_freq and product, the scaling formulas evaluated in f32 as
  // vLLM does (linear divides the f32 position by the factor, YaRN's ramp and blend, llama3's
  // wave lengths, LongRoPE's factor times the power, each one f32 op), dynamic NTK's base in f64
  // then rounded. Unscaled, the same angles as hf_f32 (bounds: src/bounds/scaled_vllm.cpp).
  vllm_f32 = 6,
};
// Every recipe, in enum order: the one list that parse_angle_recipe accepts and
// angle_recipe_names() spells (a recipe added to the enum and not here fails core_test).
inline constexpr std::array<AngleRecipe, 7> kAllAngleRecipes = {
    AngleRecipe::pow_product,  AngleRecipe::hf_f32,        AngleRecipe::ladder_f32,
    AngleRecipe::inv_freq_f64, AngleRecipe::fast_powf_f32, AngleRecipe::fast_powf_ladder_f32,
    AngleRecipe::vllm_f32};
// "pow_product", "hf_f32", "ladder_f32", "inv_freq_f64", "fast_powf_f32",
// "fast_powf_ladder_f32", "vllm_f32" (the names of reports, `check` and the plugin docs).
const char* name(AngleRecipe r);
std::optional<AngleRecipe> parse_angle_recipe(std::string_view s);
// "pow_product, hf_f32, ..., fast_powf_ladder_f32 or vllm_f32": kAllAngleRecipes' names, for a
// usage message that cannot drift from what parse_angle_recipe accepts.
std::string angle_recipe_names();

// How a value is rounded into a storage format (the cos/sin table, the output tensor). Values are
// the plugin ABI's ROPECHECK_ROUNDING_* bits shifted into place (plugin.h).
//   nearest_even: IEEE round-to-nearest-even (C casts, PyTorch .to(), F16C, AVX512-BF16
//                 vcvtneps2bf16): error <= u |x| (half an ulp).
//   toward_zero:  truncation, e.g. f32 -> bf16 by `bits >> 16` (ncnn's float32_to_bfloat16 in
//                 src/mat.h; its x86 float2bfloat helpers without AVX512-BF16): error < 2u |x|
//                 (a whole ulp), and |result| <= |x|.
enum class Rounding : int { nearest_even = 0, toward_zero = 1 };
// "nearest_even", "toward_zero".
const char* name(Rounding r);
std::optional<Rounding> parse_rounding(std::string_view s);

// What the trig function is evaluated at.
//   exact:     cos/sin of the kernel's angle x (within trig_error, Policy).
//   turns_f32: a hardware sine/cosine that takes its argument in turns: t = x * fl32(1/2pi)
//              rounded in f32 (either direction; a wider angle is first rounded to f32), then
//              sin(2pi t), cos(2pi t) within trig_error: CUDA's sin.approx / cos.approx (__sinf,
//              __cosf, __sincosf, and sinf/cosf/sincosf under -use_fast_math). fl32(1/2pi) is
//              0.68 u off and the product errs by up to an ulp of t, so the angle the hardware
//              rotates by is off by up to ~2.7 u |x| (relative; bounds.cpp 1.), which at |x| ~ 1e6
//              rad is ~0.16 rad. PTX documents sin.approx's absolute error as 2^-20.5 on [-2pi,
//              2pi] and 2^-14.7 on [-100pi, 100pi], with no guarantee beyond: this model meets
//              both figures and is what the bound assumes past 100pi.
enum class TrigArgument : int { exact = 0, turns_f32 = 1 };
// "exact", "turns_f32".
const char* name(TrigArgument t);
std::optional<TrigArgument> parse_trig_argument(std::string_view s);

// Declared precision policy, as data: what the bounds are derived from and what reports print.
struct Policy {
  Precision angle;       // precision of theta_i and of m * theta_i
  Precision table;       // precision cos/sin are held in before the rotation
  Precision arithmetic;  // precision of the multiply-adds of the rotation
  AngleRecipe recipe = AngleRecipe::pow_product;
  bool fused = false;  // rotation uses FMA (one rounding per output instead of up to three)
  std::string notes;   // free text, e.g. "AVX2+F16C path when the CPU has it"
  // Each cos/sin value, before it is rounded into the table precision, is within
  // trig_error * u_angle (absolute) of the exact cos/sin of the kernel's angle. 2 is a correctly
  // rounded or 1-ulp libm (the default); a kernel that builds entries from other entries (angle
  // addition) declares its derived figure. Enters the bound's trig term (bounds.cpp, section 2).
  double trig_error = 2;
  // How cos/sin are rounded into `table` (when it is narrower than the angle precision) and the
  // result into the storage dtype. Enter the bound's table and storage terms (bounds.cpp,
  // sections 2 and 5) and the faithful-rounding check of MatchesReferenceWithinBound.
  Rounding table_rounding = Rounding::nearest_even;
  Rounding output_rounding = Rounding::nearest_even;
  // What cos/sin are evaluated at (TrigArgument). Enters the angle term (bounds.cpp, section 1).
  TrigArgument trig_argument = TrigArgument::exact;
};

// Every field of a declared policy on one line (`check` and `validate` print it):
// "angle f32, table f32, arithmetic f32, recipe hf_f32, fused false, trig_error 2", then
// ", table_rounding toward_zero" / ", output_rounding toward_zero" / ", trig_argument turns_f32"
// when declared (the defaults are not spelled out so that every existing declaration reads as
// before).
std::string describe(const Policy& p);
// The policy as reports, `list --json` and `eval` print it (field order kept).
nlohmann::ordered_json policy_json(const Policy& p);

// The precision the recipe's angle is computed in: f32 for the f32 recipes (hf_f32, ladder_f32,
// fast_powf_f32, fast_powf_ladder_f32, vllm_f32) whatever `angle` says, else `angle`. Bounds,
// properties and reports all ask this.
inline Precision angle_precision(const Policy& p) {
  return p.recipe == AngleRecipe::hf_f32 || p.recipe == AngleRecipe::ladder_f32 ||
                 p.recipe == AngleRecipe::fast_powf_f32 ||
                 p.recipe == AngleRecipe::fast_powf_ladder_f32 || p.recipe == AngleRecipe::vllm_f32
             ? Dtype::f32
             : p.angle;
}

// The fast_powf_f32 recipe as ropecheck models it on a CPU (the FlashInfer emulation and the
// report's recipe-faithful reference share this one definition): the device's f32 steps in its
// order, with lg2.approx, ex2.approx and the approximate division replaced by f64 evaluations
// rounded once into f32 (their documented errors are in the bound, not in the model's figures).
// linear_factor: the linear scaling factor, or 0 for none.
float fast_powf_f32_inv_freq(double base, std::int64_t pair, std::int64_t rotary_dim,
                             double linear_factor);
// The fast_powf_ladder_f32 recipe as modelled (llama.cpp CUDA): theta_scale by the host's powf,
// then __powf(theta_scale, j) with lg2.approx / ex2.approx evaluated in f64 and rounded once.
float fast_powf_ladder_f32_inv_freq(double base, std::int64_t j, std::int64_t dim);
// turns_f32: the angle a hardware sine is evaluated at for the f32 angle x, 2pi t with
// t = fl32(x * fl32(1/2pi)) (round to nearest in the model), as the nearest double (2^-53
// relative, far below the f32 terms).
double turns_f32_angle(float x);

}  // namespace ropecheck
