// The validation plan: which configurations (dtype x layout) a plugin is checked in, and what the
// directed differential check of each runs — directed specs (declared or realistic head dims,
// partial rotary at model ratios, odd head dims, scaled copies), scaling variants with real-model
// parameters, and directed positions. Coverage (coverage.hpp) says what of the declared domain
// those specs reach.
#pragma once

#include "ropecheck/kernel.hpp"
#include "ropecheck/plugin/host.hpp"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <vector>

namespace ropecheck::validate {

// What validate runs: configurations (dtype x layout, those the plugin declares) and the specs
// the differential check adds to its directed ones.
struct Plan {
  std::vector<Dtype> dtypes;
  std::vector<Layout> layouts;
  std::optional<RopeSpec> hf_spec;    // --hf-config: the model's spec
  std::optional<RopeSpec> only_spec;  // --spec: the one spec the plugin implements
  bool variants = false;              // the plugin declares scaling kinds or the newer layouts
  std::vector<RopeSpec> extra_specs;
  // The declared scaling kinds' variant groups (variant_groups), every layout of the plan.
  std::vector<std::vector<RopeSpec>> variant_groups;
};

// One configuration of the run.
struct Config {
  Dtype dtype;
  Layout layout;
};

// Adds what the plugin's declaration asks for to a plan whose dtypes, layouts and one spec are
// set: whether the properties draw variants, the one spec or the model's spec, or the variant
// groups of every declared scaling kind.
void add_declared(Plan& plan, const plugin::PluginKernel& pk);

// The plan's configurations the plugin declares, shard `index` of `total` (gtest protocol: the
// supported configurations, in this order, dealt round-robin). dtypes_named: the dtypes were asked
// for by name, so one the plugin does not declare is said on `notes` rather than dropped silently.
// UsageError when none is left.
std::vector<Config> configurations(const Plan& plan, const plugin::PluginKernel& pk,
                                   bool dtypes_named, int index, int total, std::ostream& notes);

// The plugin restricted to one layout, so each (dtype, layout) configuration gets its own verdict
// from properties that draw specs at random. Every call still goes through the isolated worker.
class LayoutRestricted final : public Kernel {
 public:
  LayoutRestricted(const Kernel& k, Layout l) : k_(k), l_(l) {}
  std::string name() const override { return k_.name(); }
  std::string description() const override { return k_.description(); }
  Policy policy(Dtype d) const override { return k_.policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override {
    return admits(s) && k_.supports(s, d);
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    if (!admits(s)) return KernelStatus::unsupported;
    return k_.apply(s, a);
  }
  bool has_backward() const override { return k_.has_backward(); }
  KernelStatus apply_backward(const RopeSpec& s, const TensorArgs& a) const override {
    if (!admits(s)) return KernelStatus::unsupported;
    return k_.apply_backward(s, a);
  }
  Domain domain() const override { return k_.domain(); }
  // A configuration of a newer layout (proportional, mrope, imrope, axial) also admits the two
  // basic layouts: the properties draw the configuration's layout wherever a spec admits it
  // (focus_layout) and fall back to interleaved/half otherwise (e.g. proportional with an odd
  // head_dim), and their applicability probes use interleaved/half specs.
  bool admits(const RopeSpec& s) const {
    if (s.layout == l_) return true;
    const bool basic = l_ == Layout::interleaved || l_ == Layout::half;
    return !basic && (s.layout == Layout::interleaved || s.layout == Layout::half);
  }

 private:
  const Kernel& k_;
  Layout l_;
};

// Directed positions: table-size and power-of-two boundaries where f32 angle recipes and
// cos/sin caches break, negatives (KV-cache shifts), and long context; those in the declared
// range, plus the range's own ends when it is narrower than int64 (e.g. INT32_MAX).
std::vector<std::int64_t> directed_positions(const Domain& d);

// The directed positions of the run: the forward's, or (backward) the backward view's, which
// calls apply_backward at their negations, i.e. at the forward's directed positions (the view's
// own domain, the kernel's negated, would mostly miss the positive boundaries).
std::vector<std::int64_t> run_positions(const Kernel& kernel, bool backward);

// Positions per token on each axis of a multi-axis spec: distinct (t, h, w) so that a kernel
// driving a pair by the wrong axis is caught, from the directed 1-D positions (kept in range).
std::vector<std::int64_t> axis_positions(const std::vector<std::int64_t>& pos1, std::int64_t n_axes,
                                         const Domain& d);

// The scaling variants of the directed differential check, with real-model parameters: per
// variant a group of specs, its model head dim first, then each of `dims`; the differential runs
// the first of a group supports() accepts. with_model_dim false: `dims` only (the small probes of
// structural_coverage).
std::vector<std::vector<RopeSpec>> variant_groups(Layout l, const std::vector<std::int64_t>& dims,
                                                  bool with_model_dim = true);

// The directed specs of a configuration: the declared head dims (or 64, 128, 80 with partial
// rotary 32, 9 with an odd head_dim) with full rotary, a partial rotary of about half the pairs
// and one with an odd number of pairs, then model_partial_specs and odd_head_dim_specs; those
// supports() accepts.
std::vector<RopeSpec> directed_specs(const Kernel& k, Dtype dt, Layout l);
// Partial rotary at realistic head dims and the ratios models ship (plan.cpp says which).
std::vector<RopeSpec> model_partial_specs(const Kernel& k, Dtype dt, Layout l);
// Odd head dims at realistic sizes, at most two (plan.cpp says which).
std::vector<RopeSpec> odd_head_dim_specs(const Kernel& k, Dtype dt, Layout l);

// The magnitude scale of the directed specs that carry one: not a power of two (a scale folded
// into the table, applied twice, divided instead of multiplied, or dropped on one path all show).
inline constexpr double kDirectedScale = 0.75;

// Copies of the first realistic (>= 4 pairs) full, partial and odd-head_dim spec with scale 0.75,
// those supports() accepts, when the kernel declares a magnitude scale.
std::vector<RopeSpec> scaled_specs(const Kernel& k, Dtype dt, const std::vector<RopeSpec>& specs);

// The specs of a configuration's differential check, in the order it runs them: the directed
// ones, the extra ones of the plan (--spec, --hf-config) in this layout, the first accepted spec
// of each variant group of this layout (groups: those groups), and the scaled copies. The check
// runs those supports() accepts.
std::vector<RopeSpec> differential_specs(const Kernel& k, Dtype d, Layout l,
                                         const std::vector<RopeSpec>& extra_specs,
                                         const std::vector<std::vector<RopeSpec>>& variant_groups,
                                         std::vector<std::vector<RopeSpec>>& groups);

}  // namespace ropecheck::validate
