#include "ropecheck/spec.hpp"

#include <cmath>
#include <sstream>

namespace ropecheck {

std::optional<Layout> parse_layout(std::string_view s) {
  if (s == "interleaved") return Layout::interleaved;
  if (s == "half") return Layout::half;
  return std::nullopt;
}

const char* name(Layout l) { return l == Layout::interleaved ? "interleaved" : "half"; }

const char* name(ScalingKind k) {
  switch (k) {
    case ScalingKind::none:
      return "none";
  }
  return "?";
}

RopeSpec RopeSpec::normalized() const {
  RopeSpec s = *this;
  if (s.rotary_dim == 0 && s.head_dim > 0) s.rotary_dim = s.head_dim - (s.head_dim % 2);
  s.validate();
  return s;
}

void RopeSpec::validate() const {
  auto fail = [](const std::string& m) { throw SpecError("invalid spec: " + m); };
  if (head_dim < 1) fail("head_dim must be >= 1 (got " + std::to_string(head_dim) + ")");
  if (head_dim > kMaxHeadDim)
    fail("head_dim must be <= " + std::to_string(kMaxHeadDim) + " (got " +
         std::to_string(head_dim) + ")");
  if (rotary_dim < 0 || rotary_dim % 2 != 0)
    fail("rotary_dim must be even and >= 0 (got " + std::to_string(rotary_dim) + ")");
  if (rotary_dim > head_dim)
    fail("rotary_dim (" + std::to_string(rotary_dim) + ") must be <= head_dim (" +
         std::to_string(head_dim) + ")");
  // base > 1 keeps theta_i decreasing and finite; base == 1 would make every pair spin at
  // 1 rad/token, which no model uses and which hides pairing bugs.
  if (!std::isfinite(base) || !(base > 1.0))
    fail("base must be finite and > 1 (got " + std::to_string(base) + ")");
  if (!std::isfinite(scale) || !(scale > 0.0))
    fail("magnitude scale must be finite and > 0 (got " + std::to_string(scale) + ")");
  if (layout != Layout::interleaved && layout != Layout::half) fail("unknown layout");
  if (scaling.kind != ScalingKind::none) fail("unknown scaling kind");
}

std::string describe(const RopeSpec& s) {
  std::ostringstream o;
  o << "head_dim=" << s.head_dim << " rotary_dim=" << s.rotary_dim << " base=" << s.base
    << " layout=" << name(s.layout);
  if (s.scale != 1.0) o << " scale=" << s.scale;
  if (s.scaling.kind != ScalingKind::none) o << " scaling=" << name(s.scaling.kind);
  return o.str();
}

}  // namespace ropecheck
