// The kernel interface: a run-time value in a registry. Built-in kernels and (later) third-party
// plugins loaded through the C ABI are both `Kernel`s, so every property and report is written
// once against this interface.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/spec.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
};
// "pow_product", "hf_f32", "ladder_f32" (the names of reports, `check` and the plugin docs).
const char* name(AngleRecipe r);
std::optional<AngleRecipe> parse_angle_recipe(std::string_view s);

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
};

// Every field of a declared policy on one line (`check` and `validate` print it):
// "angle f32, table f32, arithmetic f32, recipe hf_f32, fused false, trig_error 2".
std::string describe(const Policy& p);

// The precision the recipe's angle is computed in: f32 for the f32 recipes (hf_f32, ladder_f32)
// whatever `angle` says, else `angle`. Bounds, properties and reports all ask this.
inline Precision angle_precision(const Policy& p) {
  return p.recipe == AngleRecipe::hf_f32 || p.recipe == AngleRecipe::ladder_f32 ? Dtype::f32
                                                                                : p.angle;
}

// One call: n_tokens x n_heads vectors of head_dim elements. Element (t, h, j) is at
// base + t * token_stride + h * head_stride + j (strides in elements). `out` may equal `in`
// (in-place). positions[t * n_axes + a] is token t's position on axis a; n_axes is 1 (the
// default: one position per token, used on every axis of a multi-axis spec, i.e. t = h = w) or
// spec.n_axes(). real_positions, when set, replaces `positions` (same indexing) with real-valued
// positions taken as exact doubles (CogVideoX linspace grids); kernels that cannot take them
// return unsupported.
struct TensorArgs {
  Dtype dtype = Dtype::f32;
  std::int64_t n_tokens = 0;
  std::int64_t n_heads = 0;
  const std::int64_t* positions = nullptr;
  const void* in = nullptr;
  void* out = nullptr;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
  std::int64_t n_axes = 1;
  const double* real_positions = nullptr;
};

enum class KernelStatus : int { ok = 0, unsupported = 1, error = 2 };

// What a kernel declares it can be called with, beyond supports(spec, dtype) (which decides dtype,
// layout, scaling kind and shape). Declarations are contracts: every property draws its cases
// inside the domain, and a call inside it that returns `unsupported` is a declaration mismatch
// (a failure), never a skipped case. The defaults are an unrestricted kernel.
struct Domain {
  // The head dims the kernel takes (empty: any head_dim; supports() may still filter). Most
  // production kernels take a short list (flash-attn, vLLM, TensorRT-LLM: 64, 128, 256, ...).
  std::vector<std::int64_t> head_dims;
  // Every position passed (every axis) lies in [min_position, max_position]: e.g. int32 positions,
  // or non-negative ones only (then no inverse rotation and no negative KV-cache shift is asked).
  std::int64_t min_position = std::numeric_limits<std::int64_t>::min();
  std::int64_t max_position = std::numeric_limits<std::int64_t>::max();
  bool magnitude_scale = true;  // spec.scale != 1 may be passed (else scale is exactly 1)
  bool in_place = true;         // out == in may be passed
  // K_half(P x) == P K_interleaved(x) bit for bit (the same operations per pair, only the indexing
  // differs); otherwise LayoutsArePermutations compares within the derived pair bound.
  bool layouts_bitwise_symmetric = false;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual Policy policy(Dtype d) const = 0;
  virtual bool supports(const RopeSpec& spec, Dtype d) const = 0;
  // spec is normalized. Returns unsupported when !supports(spec, dtype); inside the declared
  // domain (supports() true, Domain respected) unsupported is a declaration mismatch.
  virtual KernelStatus apply(const RopeSpec& spec, const TensorArgs& args) const = 0;
  virtual Domain domain() const { return {}; }
};

// Built-in kernels: scalar, table_f32, simd, complex (registry order).
const std::vector<const Kernel*>& builtin_kernels();
const Kernel* find_builtin_kernel(const std::string& name);  // nullptr if absent

// Contiguous [tokens][heads][head_dim] convenience wrapper.
KernelStatus apply_contiguous(const Kernel& k, const RopeSpec& spec, Dtype d, std::int64_t n_tokens,
                              std::int64_t n_heads, const std::int64_t* positions, const void* in,
                              void* out);

}  // namespace ropecheck
