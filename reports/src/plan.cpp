// The plan: options -> specs, variant setups and the deterministic work list (plan.hpp).
#include "plan.hpp"

#include <algorithm>
#include <cmath>

namespace ropecheck::reports {

void validate(const Options& o) {
  auto fail = [](const std::string& m) { throw OptionsError(m); };
  if (o.dtypes.empty()) fail("--dtypes: give at least one dtype");
  if (o.head_dims.empty()) fail("--head-dims: give at least one head dim");
  if (o.bases.empty()) fail("--bases: give at least one base");
  if (o.layouts.empty()) fail("--layouts: give at least one layout");
  for (auto h : o.head_dims)
    if (h < 2 || h > 4096)
      fail("--head-dims: each must be in [2, 4096] (got " + std::to_string(h) + ")");
  for (auto b : o.bases)
    if (!std::isfinite(b) || !(b > 1.0)) fail("--bases: each base must be finite and > 1");
  if (o.max_position < 1 || o.max_position > (std::int64_t{1} << 40))
    fail("--max-position must be in [1, 2^40] (got " + std::to_string(o.max_position) + ")");
  if (o.samples < 1 || o.samples > 100000)
    fail("--samples must be in [1, 100000] (got " + std::to_string(o.samples) + ")");
  if (o.threads > 256) fail("--threads must be <= 256");
  if (o.reference_bits != 0 && (o.reference_bits < 64 || o.reference_bits > 100000))
    fail("--ref-bits must be in [64, 100000]");
  if (!(o.safe_budget_u > 0) || !std::isfinite(o.safe_budget_u))
    fail("--safe-budget-u must be finite and > 0");
  if (!(o.fp8_scale > 0) || !std::isfinite(o.fp8_scale) || o.fp8_scale > 0x1p100 ||
      o.fp8_scale < 0x1p-100)
    fail("--fp8-scale must be finite, > 0 and within [2^-100, 2^100]");
  for (std::size_t i = 0; i < o.fp8.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (o.fp8[i] == o.fp8[j]) fail(std::string("--fp8: ") + name(o.fp8[i]) + " given twice");
  if (o.fp8_overflow == Fp8Overflow::inf)
    for (Fp8Format f : o.fp8)
      if (!traits(f).has_inf)
        fail(std::string("--fp8-overflow inf: ") + name(f) +
             " has no infinity (use saturate or nan)");
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    fail("--shard: index " + std::to_string(o.shard_index) + " of " +
         std::to_string(o.shard_count) + " shards (need 0 <= index < count)");
}

namespace {

RopeSpec variant_spec(std::int64_t hd, double base, Scaling sc, Layout l,
                      std::vector<std::int64_t> sections) {
  RopeSpec s;
  s.head_dim = hd;
  s.base = base;
  s.layout = l;
  s.scaling = std::move(sc);
  s.sections = std::move(sections);
  return s.normalized();
}

// Phi-3.5-like LongRoPE factors: smooth short factors near 1, long factors growing to ~40 (the
// published lists' shape; exact values are not needed for a precision description).
Scaling longrope_scaling(bool long_side) {
  Scaling lr;
  lr.kind = ScalingKind::longrope;
  lr.original_max_position_embeddings = 4096;
  lr.max_position_embeddings = 131072;
  lr.seq_len = long_side ? 131072 : 4096;
  for (int i = 0; i < 48; ++i) {
    lr.short_factor.push_back(1.0 + 0.25 * i / 47.0);
    lr.long_factor.push_back(1.0 + 39.0 * (i / 47.0) * (i / 47.0));
  }
  return lr;
}

std::vector<VariantCase> make_variant_cases() {
  std::vector<VariantCase> v;
  auto add = [&](std::string n, std::string model, std::int64_t hd, double base, Scaling sc,
                 Layout l = Layout::half, std::vector<std::int64_t> sections = {}) {
    v.push_back({std::move(n), std::move(model),
                 variant_spec(hd, base, std::move(sc), l, std::move(sections))});
  };
  Scaling lin;
  lin.kind = ScalingKind::linear;
  lin.factor = 4;
  add("linear", "linear position interpolation, factor 4 (HF linear)", 128, 1e4, lin);
  Scaling dyn;
  dyn.kind = ScalingKind::dynamic;
  dyn.factor = 4;
  dyn.max_position_embeddings = 4096;
  dyn.seq_len = 16384;
  add("dynamic", "HF dynamic NTK, factor 4, L0 4096, table built for 16384 tokens", 128, 1e4, dyn);
  add("yarn",
      "DeepSeek-V3-like YaRN: factor 40, original 4096, mscale = mscale_all_dim = 1, "
      "qk_rope_head_dim 64",
      64, 1e4, deepseek_v3_yarn_scaling());
  add("llama3", "Llama-3.1-8B: factor 8, low 1, high 4, original 8192, theta 500000", 128, 5e5,
      llama31_scaling());
  for (const bool long_side : {false, true})
    add(long_side ? "longrope_long" : "longrope_short",
        std::string("Phi-3.5-like LongRoPE (head 96, original 4096, max 131072), seq_len ") +
            (long_side ? "131072: long factors" : "4096: short factors (the switch is strict)"),
        96, 1e4, longrope_scaling(long_side));
  add("mrope",
      "Qwen2-VL M-RoPE, mrope_section [16,24,24], theta 1e6 (one position per token: "
      "t = h = w)",
      128, 1e6, Scaling{}, Layout::mrope, {16, 24, 24});
  return v;
}

}  // namespace

const std::vector<VariantCase>& variant_cases() {
  // Immutable after its thread-safe initialization: a constant table, not process state.
  static const std::vector<VariantCase> cases = make_variant_cases();
  return cases;
}

namespace detail {

namespace {

std::vector<RopeSpec> main_specs(const Options& o) {
  if (o.spec) return {o.spec->normalized()};
  std::vector<RopeSpec> specs;
  for (auto hd : o.head_dims)
    for (auto b : o.bases)
      for (auto l : o.layouts) {
        RopeSpec s;
        s.head_dim = hd;
        s.base = b;
        s.layout = l;
        specs.push_back(s.normalized());
      }
  return specs;
}

// Variant sections: the scalar and simd kernels among `kernels`, a quarter of the samples (the
// statistics are the same, the maxima sampled less).
std::vector<Setup> variant_setups(const Options& o, const std::vector<const Kernel*>& kernels) {
  std::vector<Setup> vs;
  if (!o.variants || o.spec) return vs;
  std::vector<const Kernel*> vkernels;
  for (const Kernel* k : kernels)
    if (k->name() == "scalar" || k->name() == "simd") vkernels.push_back(k);
  if (vkernels.empty()) return vs;
  Options ov = o;
  ov.samples = std::max<std::int64_t>(16, o.samples / 4);
  ov.fp8.clear();  // the FP8 cache section describes the main sweep
  for (const auto& vc : variant_cases()) vs.push_back(Setup{ov, vkernels, {vc.spec}});
  return vs;
}

// The work list. Long sequential searches first so the threads finish together.
std::vector<Unit> work_list(const Plan& p) {
  const int nk = static_cast<int>(p.main.kernels.size());
  const int nd = static_cast<int>(p.main.o.dtypes.size());
  const int ns = static_cast<int>(p.main.specs.size());
  const int nv = static_cast<int>(p.variants.size());
  const int nvk = nv ? static_cast<int>(p.variants.front().kernels.size()) : 0;
  std::vector<Unit> u;
  for (int k = 0; k < nk; ++k)
    for (int di = 0; di < nd; ++di) {
      u.push_back(SafeContextUnit{k, di});
      u.push_back(ScoreOffsetUnit{k, di});
    }
  for (int di = 0; di < nd; ++di)
    for (int si = 0; si < ns; ++si)
      for (int bi = p.n_buckets - 1; bi >= 0; --bi) u.push_back(SweepUnit{di, si, bi});
  for (int vi = 0; vi < nv; ++vi)
    for (int k = 0; k < nvk; ++k)
      for (int di = 0; di < nd; ++di) u.push_back(VariantSafeContextUnit{vi, k, di});
  for (int vi = 0; vi < nv; ++vi)
    for (int di = 0; di < nd; ++di)
      for (int bi = p.n_buckets - 1; bi >= 0; --bi) u.push_back(VariantSweepUnit{vi, di, bi});
  for (int k = 0; k < nk; ++k)
    for (int di = 0; di < nd; ++di) u.push_back(SpecialValuesUnit{k, di});
  return u;
}

}  // namespace

Plan make_plan(const Options& o, const std::vector<const Kernel*>& kernels) {
  validate(o);
  if (kernels.empty()) throw OptionsError("no kernels to report on");
  Plan p;
  p.main = Setup{o, kernels, main_specs(o)};
  p.variants = variant_setups(o, kernels);
  p.n_buckets = sampled_buckets(o.max_position);
  p.units = work_list(p);
  return p;
}

namespace {

struct UnitNamer {
  const Plan& plan;
  std::string dtype(int di) const { return name(plan.main.o.dtypes[di]); }
  std::string kernel_dtype(const char* what, int k, int di) const {
    return std::string(what) + " " + plan.main.kernels[k]->name() + " " + dtype(di);
  }
  std::string operator()(const SafeContextUnit& w) const {
    return kernel_dtype("safe-context search", w.kernel, w.dtype);
  }
  std::string operator()(const ScoreOffsetUnit& w) const {
    return kernel_dtype("score-offset search", w.kernel, w.dtype);
  }
  std::string operator()(const SpecialValuesUnit& w) const {
    return kernel_dtype("special values", w.kernel, w.dtype);
  }
  std::string operator()(const SweepUnit& w) const {
    return "sweep " + dtype(w.dtype) + " " + describe(plan.main.specs[w.spec]) + " bucket " +
           kBuckets[w.bucket].name;
  }
  std::string operator()(const VariantSafeContextUnit& w) const {
    return "variant safe-context search " + variant_cases()[w.variant].name + " " +
           plan.variants[w.variant].kernels[w.kernel]->name() + " " + dtype(w.dtype);
  }
  std::string operator()(const VariantSweepUnit& w) const {
    return "variant sweep " + variant_cases()[w.variant].name + " " + dtype(w.dtype) + " bucket " +
           kBuckets[w.bucket].name;
  }
};

}  // namespace

std::string unit_name(const Plan& plan, const Unit& unit) {
  return std::visit(UnitNamer{plan}, unit);
}

}  // namespace detail

}  // namespace ropecheck::reports
