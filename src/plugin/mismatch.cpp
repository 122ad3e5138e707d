// A declaration mismatch said in one line: apply() returned UNSUPPORTED for a call that supports()
// accepted and that lies inside the declared domain, so the descriptor promises more than the
// kernel takes. The host finds which promise by asking the plugin again with the call changed in
// one respect (out of place; scale 1; positions clamped to >= 0; to <= INT32_MAX): the first
// change it accepts names the field to declare. Spec-shape promises (head dims, partial rotary)
// cannot be probed on the same buffers and are named from the call when no probe is accepted.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>
#include <vector>

#include "ropecheck/plugin/host.hpp"

namespace ropecheck::plugin {

namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

bool any_position(const Descriptor& d) { return d.min_position == 0 && d.max_position == 0; }

std::string declared_range(const Descriptor& d) {
  if (any_position(d)) return "(any int64)";
  return "[" + std::to_string(d.min_position) + ", " + std::to_string(d.max_position) + "]";
}

// An out-of-place copy of the call, writing into its own buffer (the caller's stay untouched).
struct Probe {
  RopeSpec spec;
  TensorArgs args;
  std::vector<std::int64_t> pos;
  std::vector<unsigned char> out;
  Probe(const RopeSpec& s, const TensorArgs& a) : spec(s), args(a) {
    if (a.positions)
      pos.assign(a.positions, a.positions + a.n_tokens * std::max<std::int64_t>(a.n_axes, 1));
    const std::int64_t t = (a.n_tokens - 1) * a.token_stride, h = (a.n_heads - 1) * a.head_stride;
    const std::int64_t lo = std::min<std::int64_t>(0, t) + std::min<std::int64_t>(0, h);
    const std::int64_t hi =
        std::max<std::int64_t>(0, t) + std::max<std::int64_t>(0, h) + s.head_dim;
    const int eb = traits(a.dtype).bytes;
    out.assign(static_cast<std::size_t>((hi - lo) * eb), 0);
    args.out = out.data() - lo * eb;
    if (a.positions) args.positions = pos.data();
  }
};

}  // namespace

std::string PluginKernel::mismatch_hint(const RopeSpec& spec, const TensorArgs& a) const {
  const std::string head = "apply() returned UNSUPPORTED for ";
  const auto accepted = [&](Probe& p) { return run_call(p.spec, p.args) == KernelStatus::ok; };
  if (a.in == a.out && !(desc_.flags & ROPECHECK_FLAG_NO_IN_PLACE)) {
    Probe p(spec, a);
    if (accepted(p))
      return head + "an in-place call (in == out), which the descriptor allows: set " +
             "ROPECHECK_FLAG_NO_IN_PLACE in .flags";
  }
  if (spec.scale != 1.0) {
    Probe p(spec, a);
    p.spec.scale = 1.0;
    if (accepted(p)) {
      std::ostringstream o;
      o << head << "scale " << spec.scale << ", and the descriptor sets "
        << "ROPECHECK_FLAG_MAGNITUDE_SCALE: clear it (calls then have scale 1 only)";
      return o.str();
    }
  }
  if (a.positions) {
    Probe p(spec, a);
    const auto [lo, hi] = std::minmax_element(p.pos.begin(), p.pos.end());
    const std::int64_t smallest = *lo, largest = *hi;
    if (smallest < 0) {
      for (auto& v : p.pos) v = std::max<std::int64_t>(v, 0);
      if (accepted(p))
        return head + "position " + std::to_string(smallest) + ", inside the declared range " +
               declared_range(desc_) + ": declare .min_position = 0" +
               (any_position(desc_) || desc_.max_position > kInt32Max
                    ? " (and .max_position = 2147483647 if the kernel takes int32 positions)"
                    : "");
    }
    if (largest > kInt32Max) {
      Probe q(spec, a);
      for (auto& v : q.pos) v = std::min(v, kInt32Max);
      if (accepted(q))
        return head + "position " + std::to_string(largest) + ", inside the declared range " +
               declared_range(desc_) + ": declare .max_position = 2147483647" +
               (any_position(desc_) ? " (and .min_position = 0 if it takes no negative ones)" : "");
    }
  }
  if (desc_.head_dims.empty())
    return head + "head_dim " + std::to_string(spec.head_dim) +
           ", and the descriptor declares any head dim: list the ones the kernel takes in "
           ".head_dims / .n_head_dims, or reject the others in supports()";
  if (spec.rotary_dim < spec.head_dim)
    return head + "rotary_dim " + std::to_string(spec.rotary_dim) + " < head_dim " +
           std::to_string(spec.head_dim) +
           " (partial rotary), which no descriptor field excludes: reject it in supports()";
  return head + "a call supports() accepted (head_dim " + std::to_string(spec.head_dim) +
         " is in .head_dims): reject such calls in supports(), or remove " +
         std::to_string(spec.head_dim) + " from .head_dims";
}

}  // namespace ropecheck::plugin
