// Internal to reports/: the recipe-faithful angle, and exact rotation by given angles (recipe.cpp);
// RecipeReference, the sweep's fast questions about them (recipe_reference.cpp).
#pragma once

#include "ropecheck/kernel.hpp"
#include "ropecheck/reference/reference.hpp"

#include <cstdint>
#include <vector>

namespace ropecheck::reports::detail {

// The angle a kernel with policy `p` computes for pair i at position m, reproduced exactly in the
// kernel's declared precision and returned as the double that holds it:
//   pow_product: theta = pow(base, -2i/rd) and angle = m * theta, every step rounded into
//                p.angle (f64: std::pow on doubles; f32: std::pow on floats, as C++ kernels do);
//   hf_f32:      inv_freq = 1.0f / powf(float(base), float(2i) / float(rd)),
//                angle = float(m) * inv_freq (HF / vLLM); vllm_f32 unscaled is the same.
//                With a scaling kind (and on M-RoPE) recipe_angles takes both recipes' f32
//                inv_freq from ropecheck/recipe_f32.hpp, the engines' own function;
//   ladder_f32:  ts = powf(float(base), -2.0f / float(dim)), theta = float(m), then j products
//                theta *= ts, (j, dim) = spec.ladder(i) (ggml / llama.cpp CPU); linear:
//                (1.0f / float(factor)) * theta, freq_factors: theta / float(ff_i), in float. The
//                other scaling kinds are not part of this recipe (recipe_trig's generic path).
//   fast_powf_f32: fast_powf_f32_inv_freq (policy.hpp; FlashInfer's __powf as modelled),
//                angle = float(m) * inv_freq; linear scaling as FlashInfer's rope_scale.
//   fast_powf_ladder_f32: fast_powf_ladder_f32_inv_freq (llama.cpp CUDA's __powf(theta_scale,
//                j) as modelled), angle = float(m) * inv_freq; unscaled, every layout.
// recipe_trig then evaluates cos/sin at the angle the trig function sees: with trig_argument
// turns_f32, 2pi fl32(angle * fl32(1/2pi)) (turns_f32_angle).
double recipe_angle(const Policy& p, const RopeSpec& spec, std::int64_t i, std::int64_t m);

// The angle the trig sees per pair (recipe_angle, then turns_f32 when the policy says so), as the
// double that holds it exactly (turns_f32: within 2^-52); what recipe_trig evaluates.
std::vector<double> recipe_angles(const Policy& p, const RopeSpec& spec, std::int64_t m);

// Whether recipe_angles reproduces the angles of a kernel with policy p on spec (false: a recipe
// with f32 steps of its own for this scaling kind or layout -- ggml's YaRN / llama3 ladder, the
// CUDA models' fast-math scaled inv_freq, hf_f32 on the axial layout -- which recipe_angles only
// approximates by the spec's f64 theta'_i rounded to the angle precision).
bool recipe_reproduced(const Policy& p, const RopeSpec& spec);

// Key that identifies a recipe (kernels with the same key get the same angles).
int recipe_key(const Policy& p);

// cos and sin of each pair's angle, exact at the reference precision.
struct Trig {
  std::vector<reference::Mp> c, s;
};
// Exact angles m * theta_i from the reference.
Trig exact_trig(const RopeSpec& spec, std::int64_t m);
// Exact trig of the recipe's (rounded) angles.
Trig recipe_trig(const Policy& p, const RopeSpec& spec, std::int64_t m);

// s * rotation by the given trig applied to x (exact dtype values), in MP; pass-through copied.
// The definition the sweep's RecipeReference reproduces (and the tests compare with).
reference::MpVector rotate(const RopeSpec& spec, const Trig& t, const std::vector<double>& x);

// What the sweep asks of the recipe-faithful rotation, per pair, as the doubles that
//   RN(rotate(recipe)_j - apply_cached(exact)_j)   (the angle-only error) and
//   RN(got_j - rotate(recipe)_j)                   (the kernel's rotation error)
// give in MP, bit for bit. Per position, the trig is computed in double-double (the exact angle's
// from reference::Oracle::sincos, the recipe's as that plus the difference of the two angles); per
// vector, the two differences are formed in double-double with an error bound that includes the
// MP path's own roundings, and answered when a rounding test shows every value within the bound
// rounds to one double (the oracle's scheme, reference/oracle.hpp). f64 outputs (their error is
// below double-double's resolution) take the trig in three doubles instead: the recipe's from
// MPFR, or from the exact angle's MPFR trig by a Taylor correction when the two angles are within
// 2^-20. Otherwise the MP expressions are evaluated as written above, in reused MPFR scratch,
// with the pair's MPFR trig computed on first need at the position. One object per thread and
// spec (it owns the scratch).
class RecipeReference {
 public:
  // At the current reference precision; mpfr_only: every answer from the MP expressions (the
  // report's --oracle mpfr). error_scale multiplies every error bound of the fast path: 1 in
  // every real use; a test sets it below 1 to show that an understated bound is caught.
  explicit RecipeReference(const RopeSpec& spec, bool mpfr_only = false, double error_scale = 1);
  ~RecipeReference();
  RecipeReference(const RecipeReference&) = delete;
  RecipeReference& operator=(const RecipeReference&) = delete;

  // Position m and the recipes to serve there (slot r = index in `policies`).
  void set_position(std::int64_t m, const std::vector<Policy>& policies);
  // The vector x (spec.head_dim exact values); valid until the next call.
  void set_vector(const double* x);
  // Angle-only error of pair i for recipe slot r: RN(yrec_a - y_a), RN(yrec_b - y_b).
  void angle_diff(int r, std::int64_t i, double& da, double& db);
  // Rotation error of pair i for recipe slot r, outputs g_a, g_b (finite) of a kernel storing
  // `out` (f64 outputs: the three-double path above, then MPFR).
  void rotation_diff(int r, std::int64_t i, double ga, double gb, Dtype out, double& da,
                     double& db);
  // RN(got - y) for the exact rotation y of pair i (reference::apply_cached's MP values, as
  // reference::ExactVector::diff answers it), outputs g_a, g_b (finite), from the pair's MPFR trig
  // (computed once per position) in exact products and double-double sums with a rounding test;
  // false when the test cannot decide (then ask the ExactVector). For f64 outputs, whose
  // differences are below the oracle's double-double resolution. Not counted.
  bool exact_diff(std::int64_t i, double ga, double gb, double& da, double& db);
  // Pair answers that needed MPFR (per vector question: angle or rotation), and all of them.
  std::int64_t fallbacks() const { return fallbacks_; }
  std::int64_t questions() const { return questions_; }

  struct Impl;

 private:
  Impl* impl_;
  std::int64_t fallbacks_ = 0, questions_ = 0;
};

}  // namespace ropecheck::reports::detail
