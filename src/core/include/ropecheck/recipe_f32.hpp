// The inverse frequencies of the two f32 angle recipes that carry scaling formulas
// (policy.hpp AngleRecipe::hf_f32 and vllm_f32), step by step in f32 as the code that defines
// them computes them. One definition for the engines that implement a recipe
// (src/kernels/engines/hf_eager.cpp, vllm_native.cpp, onnxruntime_cpu.cpp) and for the reports
// that reproduce it (reports/src/recipe.cpp: the angle-vs-rotation split and what limits a cell
// are only right when the report forms the engine's own angles). Derivations of their error:
// src/bounds/scaled_f32.cpp (hf_f32), src/bounds/scaled_vllm.cpp (vllm_f32).
#pragma once

#include "ropecheck/policy.hpp"
#include "ropecheck/spec.hpp"

#include <cstdint>
#include <vector>

namespace ropecheck {

// The recipe's f32 inv_freq, one entry per frequency j = 0 .. ladder_dim()/2 - 1 (pair i of the
// half, interleaved and M-RoPE layouts takes entry i):
//   hf_f32:   transformers' ROPE_INIT_FUNCTIONS for the spec's scaling kind (none, linear,
//             dynamic at the spec's seq_len, yarn, longrope by seq_len, llama3), every tensor op
//             in f32 (recipe_f32.cpp has each kind's steps and the upstream file);
//   vllm_f32: vLLM's scaled classes: as hf_f32 except linear (inv_freq unscaled: vLLM divides
//             the position, f32_position_divisor) and dynamic (one base, HF's formula at
//             seq_len = factor * max_position_embeddings, in f64, for every position).
// Other recipes: the unscaled hf_f32 inv_freq (callers reproduce those recipes themselves).
std::vector<float> f32_inv_freq(AngleRecipe recipe, const RopeSpec& spec);

// vllm_f32 with linear scaling: the f32 divisor of the f32 position row (`t / factor`); 0 when
// the recipe divides no position.
float f32_position_divisor(AngleRecipe recipe, const RopeSpec& spec);

// The angle these recipes form: fl32(fl32(m) [/ divisor]) * inv (one f32 product; float(m)
// rounds above 2^24).
inline float f32_recipe_angle(std::int64_t m, float divisor, float inv) {
  float row = static_cast<float>(m);
  if (divisor != 0) row = row / divisor;
  return row * inv;
}

}  // namespace ropecheck
