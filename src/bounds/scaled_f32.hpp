// Private to src/bounds: the angle terms of Hugging Face's f32 evaluation of the scaling variants
// (AngleRecipe::hf_f32 with a scaling kind), derived in scaled_f32.cpp; bounds.cpp asks it from
// its section-1 recipe dispatch.
#pragma once

#include "ropecheck/spec.hpp"

#include <cstdint>

namespace ropecheck::bounds::detail {

// What bounds.cpp has already derived in f64 for the spec (section 8), passed in.
struct F64Terms {
  double dynamic_base_rel = 0;  // dynamic NTK: relative error of base' evaluated in f64
  double yarn_ramp_abs = 0;     // yarn: absolute error of the f64 ramp (+inf: unstable)
};

// Whether hf_scaled_f32_theta_rel claims the spec's kind (linear, dynamic, yarn, llama3,
// longrope): the rope_types of HF's ROPE_INIT_FUNCTIONS.
bool hf_scaled_f32_applies(const RopeSpec& spec);

// Relative error of HF's f32 theta'_i of pair `pair` against the exact theta'_i, before the
// product with the position (+inf: no claim).
double hf_scaled_f32_theta_rel(const RopeSpec& spec, std::int64_t pair, const F64Terms& f64);

}  // namespace ropecheck::bounds::detail
