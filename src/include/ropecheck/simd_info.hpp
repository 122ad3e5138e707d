// Which vector path the `simd` kernel runs. The path is chosen per call: the best one the CPU
// supports (checked with __builtin_cpu_supports), lowered by the environment variable
// ROPECHECK_SIMD=portable|avx2|avx512 (a request above what the CPU has is clamped down), so tests
// can run and compare every path on one machine. All paths give bit-identical results.
#pragma once

namespace ropecheck {

// The path the next simd call will take: "avx512", "avx2" or "portable".
const char* simd_path();
// The best path this CPU supports, ignoring ROPECHECK_SIMD.
const char* simd_best_path();

}  // namespace ropecheck
