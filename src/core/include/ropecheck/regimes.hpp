// Where a spec sits among the cases that behave differently: the regime of its scaling variant
// (dynamic NTK below / at / above its trained length, LongRoPE's short / long side, YaRN's
// truncation and attention-factor source, llama3's populated bands, a linear factor that is or is
// not a power of two) and the realistic sizes (head dims, pairs) at which a bug of a structural
// path can show. One definition for the directed specs of `validate` (which must hold every
// regime), its printed plan, and the tests of the property generators' distribution.
#pragma once

#include "ropecheck/kernel.hpp"
#include "ropecheck/spec.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck {

// The regime of s's scaling variant as a short phrase, e.g. "dynamic below trained length",
// "longrope short side", "yarn truncate=off factor=derived", "llama3 bands 3 (high 8 mid 6 low
// 50)", "linear factor not a power of two"; "none" for an unscaled spec. s must be normalized.
std::string scaling_regime(const RopeSpec& s);

// Number of llama3 bands (high frequency: unscaled, middle: interpolated, low: divided by the
// factor) that hold at least one pair of s, and the pair count of each.
struct Llama3Bands {
  std::int64_t high = 0, mid = 0, low = 0;
  int populated() const { return (high > 0) + (mid > 0) + (low > 0); }
};
Llama3Bands llama3_bands(const RopeSpec& s);

// The head dims production kernels run: the declared list, else 64, 80, 96, 128, 256.
std::vector<std::int64_t> realistic_head_dims(const Domain& d);

// Pairs a structural path (partial rotary, an odd head_dim, a scaled path) needs for its bugs to
// show (an exponent over the wrong dim, a pair index): the directed specs hold them, and a kernel
// that accepts such a path only below it is a coverage gap.
inline constexpr std::int64_t kRealisticPairs = 4;

}  // namespace ropecheck
