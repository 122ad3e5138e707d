// The directed differential check (run.hpp: differential): each supported directed spec of the
// plan with random inputs, the exact outputs once per vector, then three call shapes through the
// isolated worker, every output vector through verify as `check`'s; the hint of a failing run.
#include <memory>
#include <random>

#include "ropecheck/plugin/host.hpp"
#include "ropecheck/properties.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/validate/coverage.hpp"
#include "ropecheck/validate/plan.hpp"
#include "ropecheck/validate/run.hpp"
#include "ropecheck/verify/advise.hpp"
#include "ropecheck/verify/verify.hpp"

namespace ropecheck::validate {

namespace ref = ropecheck::reference;
namespace props = ropecheck::properties;

namespace {

// Each supported directed spec: random inputs (one draw per spec from the configuration's seed),
// the exact outputs once per vector, then three call shapes (contiguous, strided with gaps, in
// place) through the isolated worker, whose guards run on every call; every output vector goes
// through verify like `check`'s.

constexpr std::int64_t kDiffHeads = 2;
constexpr const char* kShapeNames[] = {"contiguous", "strided", "in-place"};

// The inputs of one directed spec: token t, head h at x[(t * kDiffHeads + h) * D], its positions
// at pos[t * n_axes ...], its exact output at exact[t * kDiffHeads + h].
struct DirectedInputs {
  std::vector<std::int64_t> pos;
  std::vector<double> x;
  std::unique_ptr<ref::Oracle> oracle;   // outlives the rotations and exact vectors below
  std::vector<ref::Rotation> rotations;  // one per token
  std::vector<ref::ExactVector> exact;
  std::int64_t tokens() const { return static_cast<std::int64_t>(exact.size()) / kDiffHeads; }
};

DirectedInputs directed_inputs(const RopeSpec& spec, Dtype d, const std::vector<std::int64_t>& pos1,
                               const Domain& dom, std::mt19937_64& rng, ref::OracleMode mode) {
  std::uniform_real_distribution<double> val(-2.0, 2.0);
  const std::int64_t T = static_cast<std::int64_t>(pos1.size()), D = spec.head_dim;
  const std::int64_t NA = spec.n_axes();
  DirectedInputs in;
  in.pos = NA == 1 ? pos1 : axis_positions(pos1, NA, dom);
  in.x.resize(static_cast<std::size_t>(T * kDiffHeads * D));
  for (auto& v : in.x) v = round_to_dtype(val(rng), d);
  in.oracle = std::make_unique<ref::Oracle>(spec, mode);
  in.rotations.reserve(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) {
    in.rotations.push_back(in.oracle->at(
        std::vector<std::int64_t>(in.pos.begin() + t * NA, in.pos.begin() + (t + 1) * NA)));
    for (std::int64_t h = 0; h < kDiffHeads; ++h)
      in.exact.push_back(in.rotations.back().apply(&in.x[(t * kDiffHeads + h) * D]));
  }
  return in;
}

// The running differential check of one configuration.
struct Differential {
  verify::Summary summary;  // every output vector; keeps the first finding
  std::int64_t call_failures = 0, mismatches = 0;
  std::string first_fail, first_mismatch;  // the first failure of any kind, the first mismatch
  bool nonfinite_output = false;           // a finite input gave a NaN/inf output
  // Every checked call's vectors (one entry per directed spec and call shape), kept for the hint:
  // verify::advise re-checks all of them under each candidate (a few MB at most).
  struct Recorded {
    RopeSpec spec;
    std::vector<std::int64_t> pos;
    std::vector<double> x, got;
    std::vector<std::int64_t> failing;  // vectors that failed, the first few
  };
  std::vector<std::unique_ptr<Recorded>> recorded;
  Differential() { summary.keep = 1; }
  std::int64_t failures() const { return call_failures + summary.failures; }
};

// One call's output vectors (res, with the call's strides) against the exact outputs.
void check_outputs(Differential& st, const verify::PairChecker& c, const DirectedInputs& in,
                   const unsigned char* res, const TensorArgs& a, const std::string& context) {
  const RopeSpec& spec = c.spec();
  const std::int64_t D = spec.head_dim, NA = spec.n_axes();
  auto rec = std::make_unique<Differential::Recorded>();
  rec->spec = spec;
  rec->pos = in.pos;
  rec->x = in.x;
  rec->got.resize(in.x.size());
  for (std::int64_t t = 0; t < in.tokens(); ++t)
    for (std::int64_t h = 0; h < kDiffHeads; ++h) {
      const double* xv = &in.x[(t * kDiffHeads + h) * D];
      double* y = &rec->got[(t * kDiffHeads + h) * D];
      for (std::int64_t j = 0; j < D; ++j)
        y[j] = load(c.dtype(), res, t * a.token_stride + h * a.head_stride + j);
      verify::Location at;
      at.token = t;
      at.position.assign(in.pos.begin() + t * NA, in.pos.begin() + (t + 1) * NA);
      at.head = h;
      const auto& ex = in.exact[t * kDiffHeads + h];
      const verify::VectorCheck v = verify::check_vector(c, at.position, xv, y, ex);
      // A non-finite output that fails: not a correctly rounded overflow (verify::output_diff).
      for (const auto& p : v.pairs)
        st.nonfinite_output = st.nonfinite_output || (!p.finite && !p.within());
      verify::add_vector(st.summary, c, v, at, xv, y, ex);
      if (!v.ok() && rec->failing.size() < 4) rec->failing.push_back(t * kDiffHeads + h);
      if (st.first_fail.empty() && !st.summary.findings.empty())
        st.first_fail = st.summary.findings.front().message() + " " + context;
    }
  st.recorded.push_back(std::move(rec));
}

// The hint of a failing differential (verify::advise): a declaration or spec mismatch under which
// every recorded vector of the configuration passes. Calls that returned an error are no vectors:
// no hint then (nothing makes such a run pass).
std::string differential_hint(const Differential& st, const Policy& policy, Dtype d,
                              bool backward) {
  if (st.summary.failures == 0 || st.call_failures > 0) return "";
  std::vector<verify::RecordedVectors> run;
  for (const auto& r : st.recorded) {
    const std::int64_t na = r->spec.n_axes();
    run.push_back(verify::recorded_in_memory(
        r->spec, d, static_cast<std::int64_t>(r->x.size()) / r->spec.head_dim, kDiffHeads,
        r->pos.data(), na, r->x.data(), r->got.data(), r->failing, backward));
  }
  return verify::advise(policy, run).text;
}

// One call shape of one spec. Returns false when the plugin is poisoned (the fault is the
// verdict).
bool differential_call(const plugin::PluginKernel& pk, const Kernel& k, const RopeSpec& spec,
                       const verify::PairChecker& c, const DirectedInputs& in, int shape,
                       Differential& st) {
  const Dtype d = c.dtype();
  const int eb = traits(d).bytes;
  const std::int64_t T = in.tokens(), D = spec.head_dim;
  const std::int64_t hs = shape == 1 ? D + 3 : D;
  const std::int64_t ts = shape == 1 ? kDiffHeads * hs + 5 : kDiffHeads * D;
  std::vector<unsigned char> inb(static_cast<std::size_t>(T * ts * eb)), out(inb.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < kDiffHeads; ++h)
      for (std::int64_t j = 0; j < D; ++j)
        store(d, inb.data(), t * ts + h * hs + j, in.x[(t * kDiffHeads + h) * D + j]);
  TensorArgs a;
  a.dtype = d;
  a.n_tokens = T;
  a.n_heads = kDiffHeads;
  a.token_stride = ts;
  a.head_stride = hs;
  a.positions = in.pos.data();
  a.n_axes = spec.n_axes();
  a.in = inb.data();
  a.out = shape == 2 ? static_cast<void*>(inb.data()) : out.data();
  const KernelStatus status = k.apply(spec, a);
  if (pk.poisoned()) return false;
  if (status == KernelStatus::unsupported) {
    ++st.mismatches;
    if (st.first_mismatch.empty())
      st.first_mismatch = "apply() returned UNSUPPORTED for a spec supports() accepted: " +
                          plugin::describe_call(spec, a);
  } else if (status != KernelStatus::ok) {
    ++st.call_failures;
    if (st.first_fail.empty())
      st.first_fail =
          "apply() returned an error for a supported spec: " + plugin::describe_call(spec, a);
  } else {
    check_outputs(st, c, in, shape == 2 ? inb.data() : out.data(), a,
                  std::string("[") + kShapeNames[shape] + "] " + describe(spec));
  }
  return true;
}

// The differential cell of a configuration from its run.
Cell differential_cell(const Differential& st, int supported) {
  Cell c;
  if (supported == 0 || st.summary.vectors == 0) {
    c = {"coverage", true,
         "coverage: supports() accepted none of the directed specs of the declared domain, so no "
         "vector was checked"};
    c.kind = "coverage_failure";
  } else if (st.failures()) {
    c = {"FAIL", true, std::to_string(st.failures()) + " failure(s); first: " + st.first_fail};
    if (!st.summary.hint.empty()) c.detail += "\n  hint: " + st.summary.hint;
    c.kind = st.nonfinite_output ? "non_finite_output" : "wrong_results";
  } else if (st.mismatches) {
    c = {"mismatch", true,
         std::string(props::kMismatchPrefix) + std::to_string(st.mismatches) +
             " call(s); first: " + st.first_mismatch};
    c.kind = "declaration_mismatch";
  } else {
    c = {"pass", false, ""};
  }
  c.cases = static_cast<int>(st.summary.vectors);
  return c;
}

// The smallest |m| >= 1 inside the declared positions at which some pair's bound reaches its angle
// cap (the declared angle precision no longer constrains the rotation), or -1. Bisection on the
// bound, which grows with |m|; every 8th pair and the last are asked (the angle error grows with
// theta_i, and for the ladder with i).
std::int64_t unconstrained_from(const verify::PairChecker& c, const RopeSpec& s, const Domain& d) {
  const auto mag = [](std::int64_t v) { return v == INT64_MIN ? INT64_MAX : (v < 0 ? -v : v); };
  std::int64_t hi = std::min<std::int64_t>(std::max(mag(d.min_position), mag(d.max_position)),
                                           std::int64_t{1} << 62);
  const std::int64_t n = s.n_pairs();
  const auto capped = [&](std::int64_t m) {
    for (std::int64_t i = 0; i < n; i = i + 8 < n || i == n - 1 ? i + 8 : n - 1)
      if (c.bound(i, static_cast<double>(m)).angle_detail.rad >= 2.0) return true;
    return false;
  };
  if (n == 0 || hi < 1 || !capped(hi)) return -1;
  std::int64_t lo = 0;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (capped(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

// Differential check of one configuration on directed specs and positions. A poisoned plugin
// stops it with the figures so far and no cell (the caller's fault cell is the verdict).
// backward: the same check of apply_backward, run on props::backward_view (B(g, m) as a rotation
// by -m, against s R(-m) g = s R(m)^T g exactly), with every structural variant and coverage rule
// of the forward's: the directed counterpart of the random BackwardMatchesReferenceWithinBound.
void differential(const plugin::PluginKernel& pk, const Kernel& kernel, ConfigResult& cr,
                  std::uint64_t seed, const std::vector<RopeSpec>& extra_specs,
                  const std::vector<std::vector<RopeSpec>>& variant_groups, ref::OracleMode mode,
                  bool backward) {
  const Dtype d = cr.dtype;
  std::mt19937_64 rng(backward ? seed ^ 0x9e3779b97f4a7c15ULL : seed);  // g independent of x
  const std::unique_ptr<Kernel> view = backward ? props::backward_view(kernel) : nullptr;
  const Kernel& k = backward ? *view : kernel;
  const Domain dom = k.domain();
  std::vector<std::vector<RopeSpec>> groups;  // this layout's
  const std::vector<RopeSpec> specs =
      differential_specs(k, d, cr.layout, extra_specs, variant_groups, groups);
  const std::vector<std::int64_t> pos1 = run_positions(kernel, backward);
  int supported = 0;
  std::int64_t unconstrained = -1;
  Differential st;
  bool poisoned = false;
  for (const RopeSpec& spec : specs) {
    if (!k.supports(spec, d)) continue;
    ++supported;
    const DirectedInputs in = directed_inputs(spec, d, pos1, dom, rng, mode);
    const verify::PairChecker c(k.policy(d), spec, d);
    for (int shape = 0; shape < 3 && !poisoned; ++shape) {
      if (shape == 2 && !dom.in_place) continue;  // declared out-of-place only
      poisoned = !differential_call(pk, k, spec, c, in, shape, st);
    }
    if (poisoned) break;
    const std::int64_t from = unconstrained_from(c, spec, dom);
    if (from >= 0 && (unconstrained < 0 || from < unconstrained)) unconstrained = from;
  }
  // Where the rotation stops being constrained, from the bound itself rather than from the
  // directed positions (which jump from 2^24 to 2^31).
  if (st.summary.unconstrained_pairs > 0 && unconstrained >= 0)
    st.summary.min_unconstrained_position = unconstrained;
  st.summary.hint = differential_hint(st, k.policy(d), d, backward);
  cr.diff = st.summary;
  cr.nonfinite_output = st.nonfinite_output;
  if (!poisoned) cr.differential = differential_cell(st, supported);
  const PartialCoverage pc = partial_coverage(k, d, cr.layout, specs);
  const StructuralCoverage sc = structural_coverage(k, d, cr.layout, specs, groups);
  cr.partial_specs = pc.ran;
  cr.structural = sc.ran;
  const std::string gap = pc.gap.empty() ? sc.gap : pc.gap;
  if (!poisoned && !gap.empty() && !cr.differential.failed) {
    cr.differential.text = "coverage";
    cr.differential.failed = true;
    cr.differential.detail = gap;
    cr.differential.kind = "coverage_failure";
  }
}

}  // namespace ropecheck::validate
