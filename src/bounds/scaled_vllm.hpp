// Private to src/bounds: the angle terms of the vllm_f32 recipe (vLLM's scaled classes), derived
// in scaled_vllm.cpp. bounds.cpp's recipe_angle_terms hands this recipe over here.
#pragma once

#include "ropecheck/bounds.hpp"

#include <cstdint>

namespace ropecheck::bounds {

// t.theta already holds the exact theta'_i (the spec's formula); sets rel, rel_big and m_big.
PairBounds::AngleTerms vllm_f32_angle_terms(const RopeSpec& spec, std::int64_t pair,
                                            PairBounds::AngleTerms t);

}  // namespace ropecheck::bounds
