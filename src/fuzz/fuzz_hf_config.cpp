// libFuzzer target: the Hugging Face config.json reader (ropecheck::spec_from_hf_config) on
// arbitrary text, with an optional sequence length and layer type (none, the two real ones, a
// bogus one). A config is either refused (malformed JSON or SpecError) or gives a normalized
// spec whose pairs lie inside rotary_dim. The seeds include each family's spelling (GPT-NeoX,
// GPT-J, ChatGLM, DeepSeek-V3, Gemma 3 nested in text_config).
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "ropecheck/hf_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  ropecheck::HfConfigOptions opts;
  std::uint32_t seq = 0;
  std::memcpy(&seq, data, 4);
  opts.seq_len = seq % 3 == 0 ? 0 : static_cast<std::int64_t>(seq >> 2);
  static const char* kLayerTypes[] = {"", "full_attention", "sliding_attention", "global"};
  opts.layer_type = kLayerTypes[seq >> 30];
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data + 4, data + size);
  } catch (const nlohmann::json::exception&) {  // as read_hf_config: not JSON -> refused
    return 0;
  }
  try {
    const ropecheck::RopeSpec s = ropecheck::spec_from_hf_config(j, opts);
    FUZZ_REQUIRE(s.head_dim >= 1);
    FUZZ_REQUIRE(s.rotary_dim >= 0 && s.rotary_dim <= s.head_dim && s.rotary_dim % 2 == 0);
    // Pair indices: bounded loop (head_dim comes from the input).
    const std::int64_t n = s.n_pairs() < 4096 ? s.n_pairs() : 4096;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto [a, b] = s.pair(i);
      FUZZ_REQUIRE(a >= 0 && a < s.head_dim && b >= 0 && b < s.head_dim && a != b);
    }
    (void)ropecheck::describe(s);
  } catch (const ropecheck::SpecError&) {
  }
  return 0;
}
