// The ladder_f32 recipe on the scaling variants llama.cpp computes in f32 itself: ggml's own YaRN
// (ggml_rope_cache_init -> rope_yarn, the correction dims of ggml_rope_yarn_corr_dims and
// llama.cpp's attention factor) and llama3 as the `rope_freqs` its converter writes in torch
// float32: the angle and magnitude terms of the pair bound. Derivation in ladder_scaled.cpp;
// bounds.cpp section 1 calls these for a ladder_f32 policy on a yarn or llama3 spec. Private to
// src/bounds.
#pragma once

#include "ropecheck/spec.hpp"

#include <cstdint>

namespace ropecheck::bounds::detail {

// Relative error of ggml's YaRN angle for pair `pair`, given rho_ladder (the relative error of the
// unscaled ladder angle fl(m) ts^j at this pair: section 1's e^L - 1). +inf where the f32
// correction dims may floor/ceil to other integers than the exact ones (no angle claim).
double ladder_yarn_angle_rel(const RopeSpec& spec, std::int64_t pair, double rho_ladder);

// Relative error of ggml's f32 magnitude, cos(theta) * mscale with mscale = attn_factor * (1 +
// 0.1 ln(1 / freq_scale)) and llama.cpp's cancelling attn_factor, against the exact attention
// factor 1 + 0.1 ln(factor): replaces section 4's generic 2 max(u_T, u_R).
double ladder_yarn_scale_rel(const RopeSpec& spec);

// Relative error of the ladder angle divided by llama3's converter-written factor for pair `pair`
// (rho_ladder as above).
double ladder_llama3_angle_rel(const RopeSpec& spec, std::int64_t pair, double rho_ladder);

}  // namespace ropecheck::bounds::detail
