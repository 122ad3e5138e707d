// Which vector path the `simd` kernel runs. The path is chosen per call: the best one the CPU
// supports (checked with __builtin_cpu_supports / CPUID), lowered by the environment variable
// ROPECHECK_SIMD=portable|avx2|avx512|avx512bf16 (a request above what the CPU has is clamped
// down), so tests can run and compare every path on one machine. All paths give bit-identical
// results. avx512bf16 is avx512 with bf16 stored by vcvtneps2bf16 (AVX512-BF16 CPUs).
#pragma once

#include <cstdint>

namespace ropecheck {

// The path the next simd call will take: "avx512bf16", "avx512", "avx2" or "portable".
const char* simd_path();
// The best path this CPU supports, ignoring ROPECHECK_SIMD.
const char* simd_best_path();
// Self-check of path avx512bf16: how many f32 bit patterns in [first, last] the vcvtneps2bf16
// store converts to other bf16 bits than the integer RNE store; -1 when this CPU lacks the path.
std::int64_t simd_bf16_native_mismatches(std::uint32_t first, std::uint32_t last);

}  // namespace ropecheck
