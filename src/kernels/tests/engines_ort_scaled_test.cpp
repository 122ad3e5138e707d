// onnxruntime_cpu's scaled caches (llama3, YaRN as gptoss.py builds it, LongRoPE's short and long
// caches): bit for bit against the golden set made by ONNX Runtime 1.30.0's CPU op on caches from
// the model builder's own functions (golden/onnxruntime_cpu_scaled.golden, golden/README.md),
// the cache rows against the engine's cache, the cache extent, the kinds the builder does not
// implement, and the declared bound (src/bounds/scaled_f32.cpp) over the models' contexts.
//
// Adding a case: a configuration in the golden set's generator (README.md), re-run, and a row
// in kBoundCases if it is a new shape of spec.
#include "../engines/torch_cpu.hpp"
#include "golden.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#ifndef ROPECHECK_GOLDEN_DIR
#error "ROPECHECK_GOLDEN_DIR must name src/kernels/tests/golden"
#endif

namespace ropecheck {
namespace {

using namespace kernel_tests;

const Kernel& ort() { return *find_engine_kernel("onnxruntime_cpu"); }

struct OrtScaledCase {
  Dtype dtype = Dtype::f32;
  RopeSpec spec;
  std::vector<std::int64_t> pos;
  Bytes in, out, cos, sin;  // cos/sin: the builder's cache rows at pos (n_tokens x rotary_dim/2)
  std::string cache, line;  // which cache the op was fed (single, short, long); the header
  std::int64_t rows = 0;    // that cache's rows
};

// The format golden/README.md describes: case, sf/lf (LongRoPE), pos, in, cos, sin, out; read
// through golden.hpp's one reader.
std::vector<OrtScaledCase> read_ort_scaled(const std::string& file) {
  std::vector<OrtScaledCase> cases;
  for (const GoldenRecord& r : read_golden_records(file)) {
    OrtScaledCase c;
    std::istringstream is(r.line.substr(r.line.find("case") + 4));
    std::string dt, layout, kind;
    std::int64_t n_tok = 0, max_pos = 0, truncate = 1;
    RopeSpec& s = c.spec;
    Scaling& sc = s.scaling;
    is >> dt >> layout >> s.head_dim >> s.rotary_dim >> s.base >> n_tok >> kind >> sc.factor >>
        sc.original_max_position_embeddings >> max_pos >> sc.seq_len >> sc.low_freq_factor >>
        sc.high_freq_factor >> sc.beta_fast >> sc.beta_slow >> truncate >> c.cache >> c.rows;
    if (!is) throw std::runtime_error("golden set: bad case line: " + r.line);
    c.dtype = *parse_dtype(dt);
    s.layout = *parse_layout(layout);
    sc.kind = *parse_scaling_kind(kind);
    sc.truncate = truncate != 0;
    // As the config reader fills it: the extended context for LongRoPE only.
    if (sc.kind == ScalingKind::longrope) sc.max_position_embeddings = max_pos;
    if (r.has("sf"))
      for (const std::string& x : r.at("sf")) sc.short_factor.push_back(std::stod(x));
    if (r.has("lf"))
      for (const std::string& x : r.at("lf")) sc.long_factor.push_back(std::stod(x));
    c.pos = golden_ints(r.at("pos"));
    c.pos.resize(static_cast<std::size_t>(n_tok));
    s = s.normalized();
    c.line = r.line;
    c.in = golden_bits(r.at("in"), c.dtype, n_tok * s.head_dim);
    c.out = golden_bits(r.at("out"), c.dtype, n_tok * s.head_dim);
    c.cos = golden_bits(r.at("cos"), c.dtype, n_tok * s.n_pairs());
    c.sin = golden_bits(r.at("sin"), c.dtype, n_tok * s.n_pairs());
    cases.push_back(c);
  }
  return cases;
}

const std::vector<OrtScaledCase>& golden() {
  static const auto cases = read_ort_scaled("onnxruntime_cpu_scaled.golden");
  return cases;
}

TEST(OrtScaledGolden, MatchesRealCodeBitForBit) {
  ASSERT_EQ(golden().size(), 28u);
  std::int64_t total = 0;
  EXPECT_EQ(golden_mismatches(ort(), golden(), &total, true), 0);
  std::cout << "[onnxruntime_cpu scaled] " << total << " outputs (" << golden().size()
            << " cases: llama3, yarn, longrope short and long; f32, f16; both layouts) equal to "
               "the real ONNX Runtime CPU op bit for bit\n";
  RecordProperty("golden_outputs", std::to_string(total));
}

// The rows the builder's functions wrote are the engine's cache (torch_cpu::hf_inv_freq, the f32
// mscale, token_table), bit for bit, and the engine takes the cache the graph's If takes.
TEST(OrtScaledGolden, CacheIsTheBuildersCache) {
  std::int64_t rows = 0;
  for (const OrtScaledCase& c : golden()) {
    const auto inv = engines::torch_cpu::hf_inv_freq(c.spec);
    const float mscale = static_cast<float>(magnitude_f64(c.spec));
    const Scaling& sc = c.spec.scaling;
    if (sc.kind == ScalingKind::longrope) {
      EXPECT_EQ(c.cache, sc.seq_len > sc.original_max_position_embeddings ? "long" : "short")
          << c.line;
    }
    std::vector<float> cos_t, sin_t;
    for (std::size_t t = 0; t < c.pos.size(); ++t, ++rows) {
      if (c.dtype == Dtype::f16)
        engines::torch_cpu::token_table<Eigen::half>(c.pos[t], inv, mscale, cos_t, sin_t);
      else
        engines::torch_cpu::token_table<float>(c.pos[t], inv, mscale, cos_t, sin_t);
      for (std::int64_t i = 0; i < c.spec.n_pairs(); ++i) {
        const std::int64_t e = static_cast<std::int64_t>(t) * c.spec.n_pairs() + i;
        ASSERT_EQ(cos_t[i], get(c.dtype, c.cos, e)) << c.line << " pos " << c.pos[t] << " i " << i;
        ASSERT_EQ(sin_t[i], get(c.dtype, c.sin, e)) << c.line << " pos " << c.pos[t] << " i " << i;
      }
    }
  }
  std::cout << "[onnxruntime_cpu scaled] " << rows << " cache rows equal to the builder's\n";
}

// Delegates to the engine with a transformed spec: mutations the golden set must catch.
class OrtSpecMutant final : public Kernel {
 public:
  explicit OrtSpecMutant(RopeSpec (*mutate)(RopeSpec)) : mutate_(mutate) {}
  std::string name() const override { return "onnxruntime_cpu_mutant"; }
  std::string description() const override { return ort().description(); }
  Policy policy(Dtype d) const override { return ort().policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override { return ort().supports(s, d); }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    return ort().apply(mutate_(s), a);
  }

 private:
  RopeSpec (*mutate_)(RopeSpec);
};

// What the builder at the cited commit computes for Llama 3.1's own config (its original context
// only inside rope_scaling): old_context_len = max_position_embeddings (131072 for the golden
// set's llama3 cases whose cache has 131072 rows, 16384 for the partial one).
RopeSpec llama3_original_is_context(RopeSpec s) {
  if (s.scaling.kind == ScalingKind::llama3)
    s.scaling.original_max_position_embeddings =
        s.head_dim == 128 && s.rotary_dim == 64 ? 16384 : 131072;
  return s;
}
// LongRoPE's other cache: the If's comparison taken the other way round.
RopeSpec longrope_other_cache(RopeSpec s) {
  Scaling& sc = s.scaling;
  if (sc.kind == ScalingKind::longrope)
    sc.seq_len = sc.seq_len > sc.original_max_position_embeddings ? 0 : sc.max_position_embeddings;
  return s;
}

// The golden set has teeth: llama3 with the context length as its original, LongRoPE's other
// cache, and PyTorch eager's rotation on the same caches (hf_eager, half layout) all differ.
TEST(OrtScaledGolden, MutantsDifferFromRealCode) {
  std::vector<OrtScaledCase> llama3, longrope, half;
  for (const OrtScaledCase& c : golden()) {
    if (c.spec.scaling.kind == ScalingKind::llama3) llama3.push_back(c);
    // Positions every cache serves (the short cache has original rows).
    if (c.spec.scaling.kind == ScalingKind::longrope && c.cache == "short") longrope.push_back(c);
    if (c.spec.layout == Layout::half) half.push_back(c);
  }
  std::int64_t n_llama3 = 0, n_longrope = 0, n_half = 0;
  const std::int64_t bad_llama3 =
      golden_mismatches(OrtSpecMutant(llama3_original_is_context), llama3, &n_llama3, false);
  const std::int64_t bad_longrope =
      golden_mismatches(OrtSpecMutant(longrope_other_cache), longrope, &n_longrope, false);
  const std::int64_t bad_eager =
      golden_mismatches(*find_engine_kernel("hf_eager"), half, &n_half, false);
  std::cout << "[onnxruntime_cpu scaled mutants] llama3 original = context: " << bad_llama3
            << " of " << n_llama3 << "; LongRoPE's other cache: " << bad_longrope << " of "
            << n_longrope << "; PyTorch eager rotation (hf_eager): " << bad_eager << " of "
            << n_half << "\n";
  EXPECT_GT(bad_llama3, n_llama3 / 10);
  EXPECT_GT(bad_longrope, n_longrope / 10);
  EXPECT_GT(bad_eager, 0);
}

// ==== the specs the builder exports, and its cache's extent =====================================
RopeSpec spec_of(std::int64_t hd, std::int64_t rd, Layout l, double base, const Scaling& sc) {
  RopeSpec s = make_spec(hd, rd, l, base);
  s.scaling = sc;
  return s.normalized();
}

Scaling gpt_oss_yarn() {
  Scaling sc;
  sc.kind = ScalingKind::yarn;
  sc.factor = 32;
  sc.original_max_position_embeddings = 4096;
  sc.truncate = false;
  return sc;
}

// LongRoPE 4096 -> 131072 with smooth factors (Phi-3.5-mini's shape), seq_len as given.
Scaling phi_longrope(std::int64_t n_pairs, std::int64_t seq_len) {
  Scaling sc;
  sc.kind = ScalingKind::longrope;
  sc.original_max_position_embeddings = 4096;
  sc.max_position_embeddings = 131072;
  sc.seq_len = seq_len;
  for (std::int64_t i = 0; i < n_pairs; ++i) {
    sc.short_factor.push_back(1.0 + 0.05 * static_cast<double>(i) / static_cast<double>(n_pairs));
    sc.long_factor.push_back(1.0 + 40.0 * static_cast<double>(i) / static_cast<double>(n_pairs));
  }
  return sc;
}

// What make_rope_init has no branch for, or reads differently from the spec: not implemented.
TEST(OrtScaledSpecs, BuilderKindsOnly) {
  const Kernel& k = ort();
  const auto yes = [&](const Scaling& sc, std::int64_t hd = 64) {
    return k.supports(spec_of(hd, hd, Layout::half, 150000, sc), Dtype::f32);
  };
  EXPECT_TRUE(yes(llama31_scaling(), 128));
  EXPECT_TRUE(yes(gpt_oss_yarn()));
  EXPECT_TRUE(yes(phi_longrope(48, 131072), 96));
  Scaling linear;
  linear.kind = ScalingKind::linear;
  linear.factor = 8;
  EXPECT_FALSE(yes(linear));                                     // no linear branch
  EXPECT_FALSE(yes(example_scaling(ScalingKind::dynamic, 32)));  // nor a dynamic one
  Scaling truncated = gpt_oss_yarn();
  truncated.truncate = true;  // the builder never floors/ceils the ramp ends
  EXPECT_FALSE(yes(truncated));
  EXPECT_FALSE(yes(deepseek_v3_yarn_scaling()));  // mscale / mscale_all_dim are not read
  Scaling narrow = gpt_oss_yarn();
  narrow.beta_fast = 10000;  // low <= 0: make_inv_freq_rescaled_with_ntk's assertion
  EXPECT_FALSE(yes(narrow));
  EXPECT_FALSE(k.supports(spec_of(64, 32, Layout::half, 150000, gpt_oss_yarn()), Dtype::f32));
  Scaling given = phi_longrope(48, 0);
  given.attention_factor = 1.2;  // the builder reads short_mscale / long_mscale instead
  EXPECT_FALSE(yes(given, 96));
}

// The op rejects a position past the cache it is given: the short cache ends at the original
// context, the long one at max_position_embeddings.
TEST(OrtScaledSpecs, PastTheCacheIsUnsupported) {
  std::mt19937_64 rng(7);
  const Bytes x = random_tensor(Dtype::f32, 96, rng);
  const auto status = [&](std::int64_t seq_len, std::int64_t p) {
    const RopeSpec s = spec_of(96, 96, Layout::half, 10000, phi_longrope(48, seq_len));
    Bytes y(x.size());
    return apply_contiguous(ort(), s, Dtype::f32, 1, 1, &p, x.data(), y.data());
  };
  EXPECT_EQ(status(4096, 4095), KernelStatus::ok);
  EXPECT_EQ(status(4096, 4096), KernelStatus::unsupported);
  EXPECT_EQ(status(131072, 131071), KernelStatus::ok);
  EXPECT_EQ(status(131072, 131072), KernelStatus::unsupported);
}

// ==== within the declared bound (hf_f32 with the scaling: src/bounds/scaled_f32.cpp) ============
struct OrtBoundCase {
  const char* name;
  RopeSpec spec;
  std::vector<std::int64_t> pos;
};

std::vector<OrtBoundCase> ort_bound_cases() {
  const std::vector<std::int64_t> long_ctx = {0, 1, 4095, 8192, 65535, 131071, 500000, 1000000};
  std::vector<OrtBoundCase> v;
  for (Layout l : {Layout::half, Layout::interleaved}) {
    v.push_back({"llama3", spec_of(128, 128, l, 500000, llama31_scaling()), long_ctx});
    v.push_back({"yarn", spec_of(64, 64, l, 150000, gpt_oss_yarn()), long_ctx});
    v.push_back(
        {"longrope_short", spec_of(96, 96, l, 10000, phi_longrope(48, 4096)), {0, 1, 100, 4095}});
    v.push_back({"longrope_long",
                 spec_of(96, 96, l, 10000, phi_longrope(48, 131072)),
                 {0, 4096, 65535, 131071}});
  }
  return v;
}

TEST(OrtScaledBound, MatchesReferenceWithinBound) {
  std::mt19937_64 rng(0x5CA1ED0Bu);
  for (const OrtBoundCase& c : ort_bound_cases())
    for (Dtype d : {Dtype::f32, Dtype::f16}) {
      ASSERT_TRUE(ort().supports(c.spec, d)) << c.name;
      const double worst = check_against_reference(ort(), c.spec, d, c.pos, 2, rng);
      std::cout << "[onnxruntime_cpu " << c.name << " " << name(c.spec.layout) << " " << name(d)
                << "] worst utilization " << worst << "\n";
    }
}

}  // namespace
}  // namespace ropecheck
