// libFuzzer target: ropecheck::tensorio::parse_safetensors on arbitrary bytes. Either the file
// parses into tensors whose byte counts match shape x dtype and every element can be read, or it
// is refused with a FormatError; anything else (a crash, a sanitizer report, another exception)
// is a finding.
#include <cstddef>
#include <cstdint>

#include "fuzz_check.hpp"
#include "ropecheck/tensorio/tensorio.hpp"

namespace tio = ropecheck::tensorio;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tio::Limits lim;
  lim.max_bytes = 1 << 20;  // the memory-limit refusal is part of what is fuzzed
  try {
    const tio::TensorFile f = tio::parse_safetensors(data, size, "fuzz", lim);
    for (const auto& t : f.tensors) {
      const int eb = tio::elem_bytes(t.type);
      if (eb == 0) continue;  // dtypes ropecheck carries but never reads (BOOL, U8, ...)
      FUZZ_REQUIRE(static_cast<std::uint64_t>(t.numel()) * eb == t.data.size());
      volatile double sink = 0;
      for (std::int64_t i = 0; i < t.numel(); ++i) sink = sink + t.get(i);
    }
  } catch (const tio::FormatError&) {
  }
  return 0;
}
