// libFuzzer target: the `ropecheck check --spec` JSON reader (text -> keys -> RopeSpec). Byte 0
// is the last dimension of the recorded tensors (1..256), the rest the JSON text. Accepted specs
// must be internally consistent; rejected ones must be UsageError or SpecError (exit 2 in the
// CLI), never another exception or a crash.
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string_view>

#include "cli.hpp"
#include "fuzz_check.hpp"
#include "ropecheck/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // resolve() notes unknown keys on stderr; muted so the fuzzer is not I/O bound.
  static const bool muted = (std::cerr.rdbuf(nullptr), true);
  (void)muted;
  const std::int64_t last_dim = 1 + data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const auto keys = ropecheck::cli::parse_spec_json(text, "fuzz");
    const ropecheck::RopeSpec s = ropecheck::cli::resolve_check_spec(keys, last_dim, 3);
    FUZZ_REQUIRE(s.head_dim == last_dim);
    FUZZ_REQUIRE(s.rotary_dim >= 0 && s.rotary_dim <= s.head_dim && s.rotary_dim % 2 == 0);
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [a, b] = s.pair(i);
      FUZZ_REQUIRE(a >= 0 && a < s.head_dim && b >= 0 && b < s.head_dim && a != b);
    }
    (void)ropecheck::describe(s);
  } catch (const ropecheck::cli::UsageError&) {
  } catch (const ropecheck::SpecError&) {
  }
  return 0;
}
