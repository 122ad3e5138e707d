// Internal to reports/: the recipe-faithful angle, and exact rotation by given angles.
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
//                angle = float(m) * inv_freq (HF / vLLM);
//   ladder_f32:  ts = powf(float(base), -2.0f / float(dim)), theta = float(m), then j products
//                theta *= ts, (j, dim) = spec.ladder(i) (ggml / llama.cpp CPU); linear:
//                (1.0f / float(factor)) * theta, freq_factors: theta / float(ff_i), in float. The
//                other scaling kinds are not part of this recipe (recipe_trig's generic path).
double recipe_angle(const Policy& p, const RopeSpec& spec, std::int64_t i, std::int64_t m);

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
reference::MpVector rotate(const RopeSpec& spec, const Trig& t, const std::vector<double>& x);

}  // namespace ropecheck::reports::detail
