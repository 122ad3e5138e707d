// libFuzzer target: ropecheck::tensorio::parse_npy on arbitrary bytes (same contract as
// fuzz_safetensors: a consistent tensor or a FormatError).
#include <cstddef>
#include <cstdint>

#include "fuzz_check.hpp"
#include "ropecheck/tensorio/tensorio.hpp"

namespace tio = ropecheck::tensorio;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tio::Limits lim;
  lim.max_bytes = 1 << 20;
  try {
    const tio::Tensor t = tio::parse_npy(data, size, "fuzz", lim);
    const int eb = tio::elem_bytes(t.type);
    FUZZ_REQUIRE(eb > 0);
    FUZZ_REQUIRE(static_cast<std::uint64_t>(t.numel()) * eb == t.data.size());
    volatile double sink = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) sink = sink + t.get(i);
  } catch (const tio::FormatError&) {
  }
  return 0;
}
