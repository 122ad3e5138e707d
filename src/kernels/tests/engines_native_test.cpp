// Unit tests of the native and GPU engine kernels (src/kernels/engines/): each emulation against
// the real code where it runs here (a golden set made by the upstream code, compared bit for bit),
// each within the bound of its declared policy, and each failing a policy it does not meet.
//
// Adding an engine: a row of kEngineCases (the specs and positions its engine takes), a golden
// test if its real code ran somewhere, and a PolicyItDoesNotMeet case.
#include "../engines/torch_cpu.hpp"
#include "golden.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace ropecheck {
namespace {

using namespace kernel_tests;

const EngineKernel& engine(const std::string& name) {
  const EngineKernel* k = find_engine_kernel(name);
  if (!k) throw std::runtime_error("no engine kernel " + name);
  return *k;
}

// ==== golden sets made by the real upstream code ===============================================
struct GoldenCase {
  Dtype dtype = Dtype::f32;
  RopeSpec spec;
  std::vector<std::int64_t> pos;
  Bytes in, out;
  Bytes cos, sin;    // the cos/sin cache rows at pos (n_tokens x rotary_dim/2), when given
  std::string line;  // the case header, for messages
};

// The format written by golden/ggml_cpu_rope_gen.cpp (one head per token); the ONNX Runtime set
// adds the cos/sin cache rows it fed the op (golden/README.md).
std::vector<GoldenCase> read_golden(const std::string& file) {
  std::vector<GoldenCase> cases;
  for (const GoldenRecord& r : read_golden_records(file)) {
    GoldenCase c;
    if (r.head.size() < 6) throw std::runtime_error("golden set: short case line " + r.line);
    c.dtype = *parse_dtype(r.head[0]);
    c.spec =
        make_spec(std::stoll(r.head[2]), std::stoll(r.head[3]),
                  r.head[1] == "half" ? Layout::half : Layout::interleaved, std::stod(r.head[4]));
    c.pos = golden_ints(r.at("pos"));
    c.pos.resize(static_cast<std::size_t>(std::stoll(r.head[5])));
    c.line = r.line;
    const std::int64_t n = static_cast<std::int64_t>(c.pos.size()) * c.spec.head_dim;
    c.in = golden_bits(r.at("in"), c.dtype, n);
    c.out = golden_bits(r.at("out"), c.dtype, n);
    const std::int64_t n_rows = static_cast<std::int64_t>(c.pos.size()) * c.spec.n_pairs();
    if (r.has("cos")) c.cos = golden_bits(r.at("cos"), c.dtype, n_rows);
    if (r.has("sin")) c.sin = golden_bits(r.at("sin"), c.dtype, n_rows);
    cases.push_back(c);
  }
  return cases;
}

// golden_mismatches: support.hpp (one comparison for every golden test).

// Delegates to a kernel with a transformed spec: the mutations the golden sets must catch.
class SpecMutant final : public Kernel {
 public:
  SpecMutant(const Kernel& k, RopeSpec (*mutate)(RopeSpec)) : k_(k), mutate_(mutate) {}
  std::string name() const override { return k_.name() + "_mutant"; }
  std::string description() const override { return k_.description(); }
  Policy policy(Dtype d) const override { return k_.policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override { return k_.supports(s, d); }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    return k_.apply(mutate_(s), a);
  }

 private:
  const Kernel& k_;
  RopeSpec (*mutate_)(RopeSpec);
};

RopeSpec base_one_f32_ulp_up(RopeSpec s) {
  s.base = std::nextafter(static_cast<float>(s.base), 1e30f);
  return s;
}

TEST(EngineGolden, GgmlCpuMatchesRealCodeBitForBit) {
  const auto cases = read_golden("ggml_cpu_rope.golden");
  ASSERT_EQ(cases.size(), 24u);
  std::int64_t total = 0;
  EXPECT_EQ(golden_mismatches(engine("ggml_cpu"), cases, &total, true), 0);
  std::cout << "[ggml_cpu] " << total << " outputs (" << cases.size()
            << " cases, f32 and f16) equal to the real ggml CPU rope bit for bit\n";
  RecordProperty("golden_outputs", std::to_string(total));
}

// The golden set has teeth: theta_scale from a base one f32 ulp off, and HF's per-pair pow recipe
// (table_f32: the same f32 rotation, a different angle) both differ from the real code.
TEST(EngineGolden, GgmlCpuMutantsDifferFromRealCode) {
  const auto cases = read_golden("ggml_cpu_rope.golden");
  std::int64_t total = 0;
  const SpecMutant off_base(engine("ggml_cpu"), base_one_f32_ulp_up);
  const std::int64_t bad_base = golden_mismatches(off_base, cases, &total, false);
  const std::int64_t bad_hf =
      golden_mismatches(*find_builtin_kernel("table_f32"), cases, &total, false);
  std::cout << "[ggml_cpu mutants] base + 1 f32 ulp: " << bad_base << " of " << total
            << " outputs differ; per-pair pow recipe (table_f32): " << bad_hf << "\n";
  EXPECT_GT(bad_base, total / 10);
  EXPECT_GT(bad_hf, total / 10);
}

// ONNX Runtime 1.30.0's CPU RotaryEmbedding (contrib and opset 23: equal bits, one output kept),
// f32 and f16, both layouts, partial rotary, positions up to 2^20 - 1 (golden/README.md).
TEST(EngineGolden, OnnxRuntimeCpuMatchesRealCodeBitForBit) {
  const auto cases = read_golden("onnxruntime_cpu.golden");
  ASSERT_EQ(cases.size(), 36u);
  std::int64_t total = 0;
  EXPECT_EQ(golden_mismatches(engine("onnxruntime_cpu"), cases, &total, true), 0);
  std::cout << "[onnxruntime_cpu] " << total << " outputs (" << cases.size()
            << " cases, f32 and f16) equal to the real ONNX Runtime CPU op bit for bit\n";
  RecordProperty("golden_outputs", std::to_string(total));
}

// The cache rows the golden set fed the op (PyTorch's, the model builder's way) are the engine's
// exporter model, torch_cpu::token_table, bit for bit.
TEST(EngineGolden, OnnxRuntimeCpuCacheIsTheExportersCache) {
  std::int64_t rows = 0;
  for (const GoldenCase& c : read_golden("onnxruntime_cpu.golden")) {
    ASSERT_FALSE(c.cos.empty()) << c.line;
    const auto inv_freq = engines::torch_cpu::inv_freq_f32(c.spec.base, c.spec.rotary_dim);
    std::vector<float> cos_t, sin_t;
    for (std::size_t t = 0; t < c.pos.size(); ++t, ++rows) {
      if (c.dtype == Dtype::f16)
        engines::torch_cpu::token_table<Eigen::half>(c.pos[t], inv_freq, 1.0f, cos_t, sin_t);
      else
        engines::torch_cpu::token_table<float>(c.pos[t], inv_freq, 1.0f, cos_t, sin_t);
      for (std::int64_t i = 0; i < c.spec.n_pairs(); ++i) {
        const std::int64_t e = static_cast<std::int64_t>(t) * c.spec.n_pairs() + i;
        ASSERT_EQ(cos_t[i], get(c.dtype, c.cos, e)) << c.line << " pos " << c.pos[t] << " i " << i;
        ASSERT_EQ(sin_t[i], get(c.dtype, c.sin, e)) << c.line << " pos " << c.pos[t] << " i " << i;
      }
    }
  }
  std::cout << "[onnxruntime_cpu] " << rows << " cache rows equal to the exporter's\n";
}

// The golden set has teeth: a cache from a base one f32 ulp off, and PyTorch eager's rotation on
// the same cache (hf_eager: separately rounded products, and in f16 every op rounded to f16;
// half-layout cases, the layout it takes) both differ from the real op.
TEST(EngineGolden, OnnxRuntimeCpuMutantsDifferFromRealCode) {
  const auto cases = read_golden("onnxruntime_cpu.golden");
  std::vector<GoldenCase> half;
  for (const GoldenCase& c : cases)
    if (c.spec.layout == Layout::half) half.push_back(c);
  std::int64_t total = 0, total_half = 0;
  const SpecMutant off_base(engine("onnxruntime_cpu"), base_one_f32_ulp_up);
  const std::int64_t bad_base = golden_mismatches(off_base, cases, &total, false);
  const std::int64_t bad_eager = golden_mismatches(engine("hf_eager"), half, &total_half, false);
  std::cout << "[onnxruntime_cpu mutants] base + 1 f32 ulp: " << bad_base << " of " << total
            << " outputs differ; PyTorch eager rotation (hf_eager): " << bad_eager << " of "
            << total_half << "\n";
  EXPECT_GT(bad_base, 0);
  EXPECT_GT(bad_eager, 0);
}

// ==== within the derived bound of the declared policy
// =============================================
struct EngineCase {
  std::string engine;
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (head_dim, rotary_dim)
  std::vector<std::int64_t> positions;
};

// int32 positions (ggml), up to 2^31 - 1 and around 2^24 where float(m) starts rounding.
const std::vector<std::int64_t> kInt32Positions = {0,
                                                   1,
                                                   -1,
                                                   64,
                                                   -64,
                                                   4096,
                                                   65535,
                                                   -(1 << 20),
                                                   (1 << 24) + 1,
                                                   1000000007,
                                                   (std::int64_t{1} << 31) - 1};

const std::vector<EngineCase> kEngineCases = {
    {"ggml_cpu", {{64, 64}, {128, 128}, {80, 32}, {7, 6}}, kInt32Positions},
    // Cache rows are an int count: non-negative positions below 2^31 - 1. Tail dims (20, 24, 6)
    // take the interleaved remainder's unfused pairs.
    {"onnxruntime_cpu",
     {{64, 64}, {128, 128}, {80, 32}, {80, 20}, {64, 24}, {7, 6}},
     {0, 1, 64, 4095, 32768, 131072, 1000000, (1 << 24) + 1, 1000000007, (1 << 30) + 3}},
};

class EngineWithinBound : public ::testing::TestWithParam<EngineCase> {};

TEST_P(EngineWithinBound, MatchesReferenceWithinBound) {
  const EngineCase& ec = GetParam();
  const Kernel& k = engine(ec.engine);
  std::mt19937_64 rng(0x5EED0E01u);
  double worst = 0;
  for (Dtype d : kAllDtypes)
    for (double base : {10000.0, 500000.0})
      for (Layout l : {Layout::interleaved, Layout::half})
        for (auto [hd, rd] : ec.dims) {
          const RopeSpec spec = make_spec(hd, rd, l, base);
          if (!k.supports(spec, d)) continue;
          worst = std::max(worst, check_against_reference(k, spec, d, ec.positions, 2, rng));
        }
  std::cout << "[" << ec.engine << "] worst utilization of its declared bound " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineWithinBound, ::testing::ValuesIn(kEngineCases),
                         [](const ::testing::TestParamInfo<EngineCase>& p) {
                           return p.param.engine;
                         });

// ==== a declared policy the engine does not meet fails ==========================================
// Delegates to an engine kernel but declares another policy.
class Redeclared final : public Kernel {
 public:
  Redeclared(const Kernel& k, Policy (*declare)(Policy)) : k_(k), declare_(declare) {}
  std::string name() const override { return k_.name() + "_redeclared"; }
  std::string description() const override { return k_.description(); }
  Policy policy(Dtype d) const override { return declare_(k_.policy(d)); }
  bool supports(const RopeSpec& s, Dtype d) const override { return k_.supports(s, d); }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    return k_.apply(s, a);
  }

 private:
  const Kernel& k_;
  Policy (*declare_)(Policy);
};

// Worst utilization of k over a long-context spec (head_dim 128, base 1e4, half layout).
double worst_utilization(const Kernel& k, Dtype d, const std::vector<std::int64_t>& pos) {
  std::mt19937_64 rng(0x5EED0E02u);
  return check_against_reference(k, make_spec(128, 128, Layout::half), d, pos, 2, rng, false);
}

// ggml's ladder declared as HF's per-pair pow (hf_f32): its angle carries i roundings where HF's
// has one, beyond the hf_f32 bound at long context; the honest declaration stays within.
TEST(EnginePolicy, GgmlCpuDeclaredHfF32Fails) {
  const Kernel& k = engine("ggml_cpu");
  const Redeclared as_hf(k, [](Policy p) {
    p.recipe = AngleRecipe::hf_f32;
    return p;
  });
  const std::vector<std::int64_t> pos = {4095, 65535, 1000000, (1 << 24) - 1, 1000000007};
  const double honest = worst_utilization(k, Dtype::f32, pos);
  const double lying = worst_utilization(as_hf, Dtype::f32, pos);
  std::cout << "[ggml_cpu f32] worst utilization: declared ladder_f32 " << honest
            << ", declared hf_f32 " << lying << "\n";
  EXPECT_LE(honest, 1.0);
  EXPECT_GT(lying, 1.0);
}

// ONNX Runtime declared with an f64 angle (what an exporter computing its cache in f64 would
// give): the f32 angle of the model builder's cache errs beyond that bound at long context; the
// honest declaration (hf_f32) stays within.
TEST(EnginePolicy, OnnxRuntimeCpuDeclaredF64AngleFails) {
  const Kernel& k = engine("onnxruntime_cpu");
  const Redeclared as_f64(k, [](Policy p) {
    p.recipe = AngleRecipe::inv_freq_f64;
    p.angle = Dtype::f64;
    return p;
  });
  const std::vector<std::int64_t> pos = {32768, 131072, 1000000};
  for (Dtype d : {Dtype::f32, Dtype::f16}) {
    const double honest = worst_utilization(k, d, pos);
    const double lying = worst_utilization(as_f64, d, pos);
    std::cout << "[onnxruntime_cpu " << name(d) << "] worst utilization: declared hf_f32 " << honest
              << ", declared f64 angle " << lying << "\n";
    EXPECT_LE(honest, 1.0);
    EXPECT_GT(lying, 1.0);
  }
}

}  // namespace
}  // namespace ropecheck
