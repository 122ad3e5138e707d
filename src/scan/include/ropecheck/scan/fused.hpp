// The fused output chain of RoPE + FP8 quantization + KV-cache write (vLLM, SGLang, FlashInfer,
// TensorRT-LLM, aiter): a declared policy, and the check of a dump of one such call.
//
// Chain, per element j of token t, head h (pass-through dims included; they carry x_j itself):
//   v   the rotation, computed under the declared rotation Policy: within the derived pre-storage
//       bound P_j of the exact s (R(m) x)_j (bounds.hpp; one bound per pair, both elements)
//   r   an optional intermediate rounding of v (bf16 / f16 / f32), else v as the f32 the kernel
//       holds
//   q   r (x) scale in f32, one rounding: multiply (FlashInfer) or divide (vLLM; fp8_chain.hpp
//       cites both sources); divide accepts r / scale and r * fl32(1 / scale)
//   c   q rounded once to nearest-even into the FP8 format with its overflow policy (fp8.hpp)
// scale: one per tensor, per head, or per token x head (the scale tensor's shape says which; the
// declaration must agree).
// Acceptance, no fixed tolerance: every step is monotone in v, so the stored value must lie
// between the chain's images of the two ends of [exact - P_j, exact + P_j] (widened outward by one
// double ulp for the exact value's own rounding); where those images coincide (nearly always)
// exactly one byte is right. An image that overflows to NaN (overflow nan) admits NaN.
// Addressing: slot_mapping[t] >= 0 names the cache row token t writes (-1: none); the cache is
// [slots, heads, W] or a paged [blocks, block_size, heads, W] (cache_layout shd), or
// [slots, W] / [blocks, block_size, W] with one head (sd: MLA's latent cache); the RoPE output
// occupies [row_offset, row_offset + head_dim) of a row (MLA: compressed KV first, then the
// 64-wide RoPE slice). Every byte of a row no token addresses must be unchanged; bytes of
// addressed rows outside the slice are not checked (counted). The angle comes from positions[t],
// never from the slot.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/fp8.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/tensorio/tensorio.hpp"
#include "ropecheck/verify/fp8_chain.hpp"
#include "ropecheck/verify/verify.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ropecheck::scan {

enum class ScaleGranularity { tensor, head, token_head };
const char* name(ScaleGranularity g);

// The value chain (format, overflow, scale convention, intermediate rounding) is
// verify::Fp8Chain, shared with the reports' FP8 section; a fused dump adds where it is stored.
struct FusedChain : verify::Fp8Chain {
  ScaleGranularity granularity = ScaleGranularity::tensor;
  std::int64_t row_offset = 0;  // where the RoPE output starts in a cache row (elements)
  bool one_head_rows = false;   // cache_layout sd: rows hold one head ([..., W])
};
std::string describe(const FusedChain& c);

struct FusedTensors {
  tensorio::TensorRef x;             // [T, H, D] (or [T, D]: one head), f64/f32/f16/bf16
  tensorio::TensorRef positions;     // [T], int64/int32 (1-D layouts)
  tensorio::TensorRef slot_mapping;  // [T], int64/int32
  tensorio::TensorRef cache_before, cache_after;  // u8 (U8 / F8_E4M3 / F8_E5M2), same shape
  tensorio::TensorRef scale;                      // f32/f64: [] or [1], [H], or [T, H]
};

// A dump that cannot be checked as declared (shapes, types, a slot out of range or written twice,
// a scale shape that is not the declared granularity): exit 2 in `check`.
class FusedError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct FusedResult {
  std::int64_t tokens = 0, written_tokens = 0, elements = 0;
  std::int64_t wrong = 0;                // stored values outside the accepted range
  std::int64_t max_ulps = 0;             // the largest distance from the range, in fp8 ulps
  std::int64_t ties = 0;                 // elements with more than one byte accepted
  std::int64_t overflowed = 0;           // elements whose chain image is past the format's max
  std::int64_t unaddressed_changed = 0;  // bytes of rows no token addresses that changed
  std::int64_t unchecked_bytes = 0;      // bytes of addressed rows outside the RoPE slice
  std::int64_t skipped_nonfinite = 0;    // written head vectors whose input is not finite
  std::vector<std::string> findings;     // the first few, located
  // No element checked (no token writes a slot, or every written input is non-finite) is not a
  // pass: nothing of the chain was exercised.
  bool passed() const { return elements > 0 && wrong == 0 && unaddressed_changed == 0; }
};

FusedResult check_fused(const FusedTensors& t, const FusedChain& chain,
                        const verify::PairChecker& checker, const reference::Oracle& oracle,
                        int max_failures);

using verify::chain_range;
using verify::ChainRange;

}  // namespace ropecheck::scan
