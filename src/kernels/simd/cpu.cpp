// Which path the simd kernel runs: CPU detection, the ROPECHECK_SIMD override, and the public
// queries of simd_info.hpp.
#include "ropecheck/kernels/simd_info.hpp"
#include "target.hpp"

#include <cstdlib>
#include <string_view>

#ifdef ROPECHECK_X86
#include <cpuid.h>
#endif

namespace ropecheck {
namespace kernels::simd {
namespace {

Path detect_best() {
#ifdef ROPECHECK_X86
  __builtin_cpu_init();
  // Clang's __builtin_cpu_supports does not know "f16c": read CPUID.1:ECX directly (the avx2
  // check already covers OS support for the YMM state).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    // AVX512_BF16: CPUID.(EAX=7, ECX=1):EAX bit 5 (not known to every compiler's cpu_supports);
    // vfpclassps needs AVX512DQ.
    unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0;
    const bool bf16 = __get_cpuid_count(7, 1, &a7, &b7, &c7, &d7) && (a7 & (1u << 5)) &&
                      __builtin_cpu_supports("avx512dq");
    return bf16 ? Path::avx512bf16 : Path::avx512;
  }
  if (avx2) return Path::avx2;
#endif
  return Path::portable;
}

}  // namespace

const char* path_name(Path p) {
  switch (p) {
    case Path::avx512bf16:
      return "avx512bf16";
    case Path::avx512:
      return "avx512";
    case Path::avx2:
      return "avx2";
    case Path::portable:
      return "portable";
  }
  return "?";
}

Path best_path() {
  static const Path p = detect_best();
  return p;
}

Path current_path() {
  const Path best = best_path();
  const char* env = std::getenv("ROPECHECK_SIMD");
  if (!env) return best;
  const std::string_view v(env);
  Path want = best;
  if (v == "portable")
    want = Path::portable;
  else if (v == "avx2")
    want = Path::avx2;
  else if (v == "avx512")
    want = Path::avx512;
  else if (v == "avx512bf16")
    want = Path::avx512bf16;
  return static_cast<int>(want) < static_cast<int>(best) ? want : best;
}

const Target& target_of(Path p) {
  switch (p) {
#ifdef ROPECHECK_X86
    case Path::avx512bf16:
      return avx512bf16_target();
    case Path::avx512:
      return avx512_target();
    case Path::avx2:
      return avx2_target();
#endif
    default:
      return portable_target();
  }
}

}  // namespace kernels::simd

const char* simd_path() { return kernels::simd::path_name(kernels::simd::current_path()); }
const char* simd_best_path() { return kernels::simd::path_name(kernels::simd::best_path()); }
std::int64_t simd_bf16_native_mismatches(std::uint32_t first, std::uint32_t last) {
#ifdef ROPECHECK_X86
  if (kernels::simd::best_path() == kernels::simd::Path::avx512bf16)
    return static_cast<std::int64_t>(kernels::simd::bf16_native_mismatches(first, last));
#endif
  return -1;
}

}  // namespace ropecheck
