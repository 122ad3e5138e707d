// RopeSpec: the single description of a RoPE configuration, read by the reference, the kernels,
// the properties and the reports. It holds parameters only, no numerics: the reference computes
// the inverse-frequency ladder in multiprecision, each kernel in its declared precision.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ropecheck {

// Pairing of rotated dims.
//   interleaved: pair i = (2i, 2i+1)              (GPT-J, RoFormer, ggml NORMAL, Meta complex)
//   half:        pair i = (i, i + rotary_dim/2)   (GPT-NeoX, HF rotate_half, ggml NEOX)
enum class Layout : int { interleaved = 0, half = 1 };

// Frequency scaling variant. Only `none` exists today; the scaling issue adds linear, dynamic NTK,
// YaRN, llama3, LongRoPE here. Everything that turns a spec into theta_i or into the magnitude
// scale switches on this enum, so a new variant is one case in each of those places.
enum class ScalingKind : int { none = 0 };

struct Scaling {
  ScalingKind kind = ScalingKind::none;
  bool operator==(const Scaling&) const = default;
};

class SpecError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct RopeSpec {
  std::int64_t head_dim = 0;
  // Even and <= head_dim. Dims >= rotary_dim pass through unchanged. 0 in a freshly built spec
  // means "default" and is resolved by `normalized()` to head_dim rounded down to even.
  std::int64_t rotary_dim = 0;
  // theta_i = base^(-2i/rotary_dim). Taken as the exact value of this double.
  double base = 10000.0;
  Layout layout = Layout::interleaved;
  // Magnitude scale s: every rotation block is s * [[cos, -sin], [sin, cos]].
  double scale = 1.0;
  Scaling scaling;

  std::int64_t n_pairs() const { return rotary_dim / 2; }

  // Element indices (a, b) of rotation pair i: out_a = s(x_a cos - x_b sin),
  // out_b = s(x_a sin + x_b cos), with angle m * theta_i.
  std::pair<std::int64_t, std::int64_t> pair(std::int64_t i) const {
    return layout == Layout::interleaved ? std::pair{2 * i, 2 * i + 1}
                                         : std::pair{i, i + rotary_dim / 2};
  }

  // Resolves defaults (rotary_dim 0 -> head_dim rounded down to even) and validates; throws
  // SpecError with a message naming the offending field.
  RopeSpec normalized() const;
  // Throws SpecError if the spec is not valid (after normalization).
  void validate() const;

  bool operator==(const RopeSpec&) const = default;
};

// Largest head_dim accepted (the dense reference is head_dim^2 multiprecision numbers).
inline constexpr std::int64_t kMaxHeadDim = 1 << 14;

std::optional<Layout> parse_layout(std::string_view s);
const char* name(Layout l);
const char* name(ScalingKind k);
std::string describe(const RopeSpec& s);  // short human-readable one-liner

}  // namespace ropecheck
