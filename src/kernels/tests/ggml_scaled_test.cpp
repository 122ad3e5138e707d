// ggml_cpu's scaled and multi-axis rows (src/kernels/engines/ggml_cpu.cpp, ggml_params.hpp):
// bit for bit against the golden set made by the real ggml CPU backend
// (golden/ggml_cpu_scaled.golden, golden/README.md), within the derived bound of its ladder_f32
// policy at 32k-1M and past (bounds.cpp section 1, ladder_yarn.cpp), and broken YaRN engines
// (ext_factor ignored, mscale applied twice) outside it.
#include "golden.hpp"
#include "ropecheck/bounds.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace ropecheck {
namespace {

using namespace kernel_tests;

const Kernel& ggml_cpu() { return *find_engine_kernel("ggml_cpu"); }

struct ScaledCase {
  Dtype dtype = Dtype::f32;
  RopeSpec spec;
  std::int64_t n_tok = 0;
  std::vector<std::int64_t> pos;  // token-major, spec.n_axes() per token
  Bytes in, out;
  std::string kind, line;
};

// What both sets' case lines open with: dtype, layout, head_dim, n_dims, base, n_tok, kind; then
// n_fields in all.
RopeSpec case_spec(const GoldenRecord& r, std::size_t n_fields) {
  const auto& h = r.head;
  if (h.size() < n_fields) throw std::runtime_error("golden set: short case line " + r.line);
  RopeSpec s;
  s.layout = *parse_layout(h[1]);
  s.head_dim = std::stoll(h[2]);
  s.rotary_dim = std::stoll(h[3]);
  s.base = std::stod(h[4]);
  s.scaling.kind = *parse_scaling_kind(h[6]);
  return s;
}

// The scaled set's case line: ..., kind, factor, original context, low, high, sections; llama3's
// rope_freqs is the engine's to compute (the converter's arithmetic): only an explicit
// freq_factors spec takes the ff line.
RopeSpec scaled_spec(const GoldenRecord& r) {
  RopeSpec s = case_spec(r, 14);
  const auto& h = r.head;
  if (s.layout == Layout::mrope)
    s.sections = {std::stoll(h[11]), std::stoll(h[12]), std::stoll(h[13])};
  s.scaling.factor = std::stod(h[7]);
  s.scaling.original_max_position_embeddings = std::stoll(h[8]);
  s.scaling.low_freq_factor = std::stod(h[9]);
  s.scaling.high_freq_factor = std::stod(h[10]);
  if (s.scaling.kind == ScalingKind::freq_factors)
    for (const std::string& x : r.at("ff")) s.scaling.freq_factors.push_back(golden_f32(x));
  return s.normalized();
}

// The LongRoPE set's case line: ..., longrope, original context, max_position_embeddings,
// seq_len; the config's factor lists on the short and long lines (decimal, as config.json has
// them). The params and ff lines (what ggml received) are not read: the engine derives them.
RopeSpec longrope_spec(const GoldenRecord& r) {
  RopeSpec s = case_spec(r, 10);
  const auto& h = r.head;
  s.scaling.original_max_position_embeddings = std::stoll(h[7]);
  s.scaling.max_position_embeddings = std::stoll(h[8]);
  s.scaling.seq_len = std::stoll(h[9]);
  for (const std::string& x : r.at("short")) s.scaling.short_factor.push_back(std::stod(x));
  for (const std::string& x : r.at("long")) s.scaling.long_factor.push_back(std::stod(x));
  return s.normalized();
}

// The formats golden/README.md describes: a case line, then params, ff, pos, in, out (and short,
// long for LongRoPE).
std::vector<ScaledCase> read_scaled(const std::string& file) {
  std::vector<ScaledCase> cases;
  for (const GoldenRecord& r : read_golden_records(file)) {
    ScaledCase c;
    c.dtype = *parse_dtype(r.head.at(0));
    c.n_tok = std::stoll(r.head.at(5));
    c.kind = r.head.at(6);
    c.spec = c.kind == "longrope" ? longrope_spec(r) : scaled_spec(r);
    c.line = r.line;
    // ggml's I32 positions, axis-major (M-RoPE: 4 x n_tok); the spec takes spec.n_axes() per token
    const std::vector<std::int64_t> p = golden_ints(r.at("pos"));
    const std::int64_t na = c.spec.n_axes();
    for (std::int64_t t = 0; t < c.n_tok; ++t)
      for (std::int64_t a = 0; a < na; ++a)
        c.pos.push_back(p.at(static_cast<std::size_t>(a * c.n_tok + t)));
    const std::int64_t n = c.n_tok * c.spec.head_dim;
    c.in = golden_bits(r.at("in"), c.dtype, n);
    c.out = golden_bits(r.at("out"), c.dtype, n);
    cases.push_back(c);
  }
  return cases;
}

Bytes run_axes(const Kernel& k, const ScaledCase& c) {
  Bytes y(c.in.size());
  TensorArgs a;
  a.dtype = c.dtype;
  a.n_tokens = c.n_tok;
  a.n_heads = 1;
  a.positions = c.pos.data();
  a.in = c.in.data();
  a.out = y.data();
  a.token_stride = c.spec.head_dim;
  a.head_stride = c.spec.head_dim;
  a.n_axes = c.spec.n_axes();
  EXPECT_EQ(k.apply(c.spec, a), KernelStatus::ok) << k.name() << " [" << c.line << "]";
  return y;
}

// Mismatching outputs of k per scaling kind (and "total" for all), with the first few reported.
std::map<std::string, std::int64_t> mismatches(const Kernel& k, const std::vector<ScaledCase>& cs,
                                               std::int64_t* total, bool report) {
  std::map<std::string, std::int64_t> bad{{"total", 0}};
  *total = 0;
  for (const ScaledCase& c : cs) {
    const std::string key = c.spec.layout == Layout::mrope ? "mrope+" + c.kind : c.kind;
    if (!k.supports(c.spec, c.dtype)) {
      bad[key] += static_cast<std::int64_t>(c.out.size()) / bytes_of(c.dtype);
      continue;
    }
    const Bytes y = run_axes(k, c);
    const std::int64_t n = static_cast<std::int64_t>(c.out.size()) / bytes_of(c.dtype);
    *total += n;
    bad[key] += 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (raw(c.dtype, y, i) == raw(c.dtype, c.out, i)) continue;
      if (report && bad["total"] < 5)
        ADD_FAILURE() << k.name() << " [" << c.line << "] element " << i << ": got 0x" << std::hex
                      << raw(c.dtype, y, i) << ", real code 0x" << raw(c.dtype, c.out, i)
                      << std::dec;
      ++bad[key];
      ++bad["total"];
    }
  }
  return bad;
}

// Every output of golden/<file> as ggml_cpu computes it, bit for bit, and every case run
// (n_outputs in n_cases cases); the mismatches per scaling kind printed.
void expect_real_code_bits(const std::string& file, std::size_t n_cases, std::int64_t n_outputs) {
  const auto cases = read_scaled(file);
  ASSERT_EQ(cases.size(), n_cases);
  std::int64_t total = 0;
  const auto bad = mismatches(ggml_cpu(), cases, &total, true);
  std::cout << "[ggml_cpu " << file << "] " << total << " outputs in " << cases.size()
            << " cases (f32, f16); mismatches:";
  for (const auto& [k, v] : bad) std::cout << " " << k << "=" << v;
  std::cout << "\n";
  EXPECT_EQ(bad.at("total"), 0);
  EXPECT_EQ(total, n_outputs);
}

TEST(GgmlScaledGolden, MatchesRealCodeBitForBit) {
  // 12 tokens x 2 dtypes x the head dims of the 20 configurations.
  expect_real_code_bits("ggml_cpu_scaled.golden", 40, 12 * 2 * (14 * 128 + 3 * 64 + 96 + 2 * 80));
}

// Delegates to ggml_cpu with a transformed spec: the mistakes the golden set must catch.
class SpecMutant final : public Kernel {
 public:
  explicit SpecMutant(RopeSpec (*mutate)(RopeSpec)) : mutate_(mutate) {}
  std::string name() const override { return "ggml_cpu_mutant"; }
  std::string description() const override { return ""; }
  Policy policy(Dtype d) const override { return ggml_cpu().policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override {
    return ggml_cpu().supports(mutate_(s), d);
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    return ggml_cpu().apply(mutate_(s), a);
  }

 private:
  RopeSpec (*mutate_)(RopeSpec);
};

// YaRN with ext_factor ignored: every pair interpolated, no mscale (a reported engine bug).
RopeSpec yarn_without_ramp(RopeSpec s) {
  if (s.scaling.kind == ScalingKind::yarn) s.scaling.kind = ScalingKind::linear;
  return s;
}
// llama3's rope_freqs from HF's f64 formula (spec.cpp llama3_freq_factors_f64) rounded once to
// f32, instead of the converter's torch float32 arithmetic.
RopeSpec llama3_freqs_from_f64(RopeSpec s) {
  if (s.scaling.kind != ScalingKind::llama3) return s;
  s.scaling.freq_factors = llama3_freq_factors_f64(s);
  s.scaling.kind = ScalingKind::freq_factors;
  return s;
}
// beta_slow 0.9999 at the context 17206 case: the slow correction dim 55.0007, whose ceil is 56
// in f32 too, as it is exactly at beta_slow 1 (55.0000008) where ggml's f32 value is 55.
RopeSpec corr_dim_as_exact(RopeSpec s) {
  if (s.scaling.kind == ScalingKind::yarn && s.scaling.original_max_position_embeddings == 17206)
    s.scaling.beta_slow = 0.9999;
  return s;
}
// The base one f32 ulp up (theta_scale from another powf argument).
RopeSpec base_one_f32_ulp_up(RopeSpec s) {
  s.base = std::nextafter(static_cast<float>(s.base), 1e30f);
  return s;
}

TEST(GgmlScaledGolden, MutantsDifferFromRealCode) {
  const auto cases = read_scaled("ggml_cpu_scaled.golden");
  std::int64_t total = 0;
  const auto no_ramp = mismatches(SpecMutant(yarn_without_ramp), cases, &total, false);
  const auto f64_ff = mismatches(SpecMutant(llama3_freqs_from_f64), cases, &total, false);
  const auto base = mismatches(SpecMutant(base_one_f32_ulp_up), cases, &total, false);
  const auto corr = mismatches(SpecMutant(corr_dim_as_exact), cases, &total, false);
  std::cout << "[ggml_cpu scaled mutants] yarn with ext_factor ignored: " << no_ramp.at("yarn")
            << " differ (+ mrope " << no_ramp.at("mrope+yarn")
            << "); llama3 rope_freqs from the f64 formula: " << f64_ff.at("llama3")
            << " differ; base + 1 f32 ulp: " << base.at("total") << " of " << total << "\n";
  std::cout << "[ggml_cpu scaled mutants] YaRN ramp to the exact ceil 56 at context 17206: "
            << corr.at("yarn") << " differ\n";
  EXPECT_GT(no_ramp.at("yarn"), 12 * 2 * 128);
  EXPECT_GT(corr.at("yarn"), 0);
  EXPECT_GT(base.at("total"), total / 10);
}

// ==== within the derived bound of ladder_f32, at 32k / 128k / 1M and to 2^31 - 1 ===============
const std::vector<std::int64_t> kLongPositions = {
    0,       1,       4095,          32768,      131072,
    1000000, 1048576, (1 << 24) + 1, 1000000007, (std::int64_t{1} << 31) - 1};

const std::vector<std::int64_t> k1MPositions = {4095, 32768, 131072, 1000000, 1048576};

RopeSpec scaled(std::int64_t hd, std::int64_t rd, Layout l, double base, Scaling sc,
                std::vector<std::int64_t> sections = {}) {
  RopeSpec s;
  s.head_dim = hd;
  s.rotary_dim = rd;
  s.layout = l;
  s.base = base;
  s.scaling = sc;
  s.sections = sections;
  return s.normalized();
}
Scaling yarn(double f, std::int64_t orig) {
  Scaling sc;
  sc.kind = ScalingKind::yarn;
  sc.factor = f;
  sc.original_max_position_embeddings = orig;
  return sc;
}
Scaling linear(double f) {
  Scaling sc;
  sc.kind = ScalingKind::linear;
  sc.factor = f;
  return sc;
}

Scaling llama32() {
  Scaling sc = llama31_scaling();
  sc.factor = 32;
  return sc;
}

struct BoundCase {
  std::string name;
  RopeSpec spec;
};
std::vector<BoundCase> bound_cases() {
  return {
      {"linear4", scaled(128, 128, Layout::half, 10000, linear(4))},
      {"linear3", scaled(64, 64, Layout::interleaved, 500000, linear(3))},
      {"freq_factors",
       scaled(128, 128, Layout::half, 500000, example_scaling(ScalingKind::freq_factors, 64))},
      {"llama31", scaled(128, 128, Layout::half, 500000, llama31_scaling())},
      {"llama3_f32x", scaled(64, 64, Layout::interleaved, 500000, llama32())},
      {"yarn_qwen25", scaled(128, 128, Layout::half, 1000000, yarn(4, 32768))},
      {"yarn_gptoss", scaled(64, 64, Layout::half, 150000, yarn(32, 4096))},
      {"yarn_f40", scaled(128, 128, Layout::interleaved, 500000, yarn(40, 4096))},
      {"mrope", scaled(128, 128, Layout::mrope, 1000000, Scaling{}, {16, 24, 24})},
      {"mrope_yarn", scaled(128, 128, Layout::mrope, 1000000, yarn(4, 32768), {16, 24, 24})},
  };
}

TEST(GgmlScaledBound, MatchesReferenceWithinBound) {
  std::mt19937_64 rng(0x5EED0E05u);
  for (const BoundCase& bc : bound_cases())
    for (Dtype d : {Dtype::f32, Dtype::f16}) {
      ASSERT_TRUE(ggml_cpu().supports(bc.spec, d)) << bc.name;
      // Up to 1M the angle term is far below its cap of 2 and the utilization says how tight
      // the derivation is; past 2^24 the f32 angle is off by radians and the bound is the cap.
      const double w1m = check_against_reference(ggml_cpu(), bc.spec, d, k1MPositions, 2, rng);
      const double w = check_against_reference(ggml_cpu(), bc.spec, d, kLongPositions, 2, rng);
      std::cout << "[ggml_cpu " << bc.name << " " << name(d) << "] worst utilization " << w1m
                << " at 4k-1M, " << w << " to 2^31 - 1\n";
    }
}

// ggml_cpu's output times a factor on every rotated element: YaRN's mscale applied twice when the
// factor is ggml's own 1 + 0.1 ln f.
class Rescaled final : public Kernel {
 public:
  explicit Rescaled(float factor) : factor_(factor) {}
  std::string name() const override { return "ggml_cpu_rescaled"; }
  std::string description() const override { return ""; }
  Policy policy(Dtype d) const override { return ggml_cpu().policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override {
    return d == Dtype::f32 && ggml_cpu().supports(s, d);
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    const KernelStatus st = ggml_cpu().apply(s, a);
    if (st == KernelStatus::ok) scale_rotated_f32(s, a, factor_);
    return st;
  }

 private:
  float factor_;
};

TEST(GgmlScaledBound, BrokenYarnFails) {
  const RopeSpec spec = scaled(128, 128, Layout::half, 1000000, yarn(4, 32768));
  const std::vector<std::int64_t> pos = {4095, 32768, 131072, 1000000};
  std::mt19937_64 rng(0x5EED0E06u);
  const double honest = check_against_reference(ggml_cpu(), spec, Dtype::f32, pos, 2, rng);
  const double twice = check_against_reference(
      Rescaled(static_cast<float>(1 + 0.1 * std::log(4.0))), spec, Dtype::f32, pos, 2, rng, false);
  const double no_ramp =
      check_against_reference(SpecMutant(yarn_without_ramp), spec, Dtype::f32, pos, 2, rng, false);
  // One f32 ulp of magnitude too much: what a bound of only section 4's 2u could not tell apart.
  const double ulp =
      check_against_reference(Rescaled(1 + 0x1p-23f), spec, Dtype::f32, pos, 2, rng, false);
  std::cout << "[ggml_cpu yarn f32] worst utilization: honest " << honest << ", mscale twice "
            << twice << ", ext_factor ignored " << no_ramp << ", magnitude + 1 ulp " << ulp << "\n";
  EXPECT_LE(honest, 1.0);
  EXPECT_GT(twice, 1.0);
  EXPECT_GT(no_ramp, 1.0);
}

}  // namespace
}  // namespace ropecheck

namespace ropecheck {
namespace {

// ggml's f32 correction dims against the exact ones: at base 1e4, head_dim 128, beta_slow 1 and
// an original context of 17206 the exact value is 55.0000008 (ceil 56) where ggml's f32
// evaluation rounds to 55 (ceil 55): the ramp moves by one pair, a formula difference, not a
// rounding error, and the bound makes no claim there (ladder_scaled.cpp A). At 32768 it does.
TEST(GgmlScaledBound, NoClaimWhereF32CorrDimsDiffer) {
  const Policy p = ggml_cpu().policy(Dtype::f32);
  const RopeSpec off = scaled(128, 128, Layout::half, 10000, yarn(8, 17206));
  const RopeSpec ok = scaled(128, 128, Layout::half, 10000, yarn(8, 32768));
  EXPECT_TRUE(std::isinf(bounds::angle_error_bound(p, off, 40, 4096).rel));
  EXPECT_TRUE(std::isfinite(bounds::angle_error_bound(p, ok, 40, 4096).rel));
  // The YaRN terms against the plain ladder's at pair 63, position 1M, in units of u = 2^-24.
  RopeSpec plain = ok;
  plain.scaling = {};
  const double u = 0x1p-24;
  std::cout << "[ladder_f32 angle bound, pair 63, m = 1M] unscaled "
            << bounds::angle_error_bound(p, plain, 63, 1000000).rel / u << " u, yarn x8 "
            << bounds::angle_error_bound(p, ok, 63, 1000000).rel / u << " u\n";
}

// ==== LongRoPE as llama.cpp runs Phi-3 (golden/ggml_cpu_longrope.golden)
// ========================== The factor list the other side of llama.cpp's choice (seq_len >
// original): short where long apply and long where short apply.
RopeSpec longrope_other_side(RopeSpec s) {
  Scaling& sc = s.scaling;
  if (sc.kind == ScalingKind::longrope)
    sc.seq_len = sc.seq_len > sc.original_max_position_embeddings
                     ? 0
                     : sc.original_max_position_embeddings + 1;
  return s;
}
// The converter's attention factor left out (max_position_embeddings at the original context:
// the factor is 1).
RopeSpec longrope_without_magnitude(RopeSpec s) {
  if (s.scaling.kind == ScalingKind::longrope)
    s.scaling.max_position_embeddings = s.scaling.original_max_position_embeddings;
  return s;
}

TEST(GgmlLongRopeGolden, MatchesRealCodeBitForBit) {
  // 12 tokens x 2 dtypes x {long, short} x the head dims of the 4 configurations.
  expect_real_code_bits("ggml_cpu_longrope.golden", 16, 12 * 2 * 2 * (96 + 128 + 64 + 80));
}

TEST(GgmlLongRopeGolden, MutantsDifferFromRealCode) {
  const auto cases = read_scaled("ggml_cpu_longrope.golden");
  std::int64_t total = 0;
  const auto side = mismatches(SpecMutant(longrope_other_side), cases, &total, false);
  const auto mag = mismatches(SpecMutant(longrope_without_magnitude), cases, &total, false);
  std::cout << "[ggml_cpu longrope mutants] the other factor list: " << side.at("total") << " of "
            << total << " differ; attention factor left out: " << mag.at("total") << " of " << total
            << "\n";
  EXPECT_GT(side.at("total"), total / 2);
  EXPECT_GT(mag.at("total"), total / 2);
}

// Every configuration of the golden set (both sides, f32 and f16) within the derived bound
// (bounds.cpp section 1 longrope, ladder_scaled.cpp F) at 4k-1M and to 2^31 - 1; the mutants
// above outside it.
TEST(GgmlLongRopeBound, MatchesReferenceWithinBound) {
  std::mt19937_64 rng(0x5EED0E07u);
  for (const ScaledCase& c : read_scaled("ggml_cpu_longrope.golden")) {
    ASSERT_TRUE(ggml_cpu().supports(c.spec, c.dtype)) << c.line;
    const double w1m = check_against_reference(ggml_cpu(), c.spec, c.dtype, k1MPositions, 2, rng);
    const double w = check_against_reference(ggml_cpu(), c.spec, c.dtype, kLongPositions, 2, rng);
    std::cout << "[ggml_cpu " << c.line << "] worst utilization " << w1m << " at 4k-1M, " << w
              << " to 2^31 - 1\n";
  }
}

TEST(GgmlLongRopeBound, BrokenLongRopeFails) {
  const auto cases = read_scaled("ggml_cpu_longrope.golden");
  const RopeSpec phi35_long = cases.at(0).spec;  // Phi-3.5-mini at seq_len 131072: long factors
  ASSERT_GT(phi35_long.scaling.seq_len, phi35_long.scaling.original_max_position_embeddings);
  const std::vector<std::int64_t> pos = {4095, 32768, 131072, 1000000};
  std::mt19937_64 rng(0x5EED0E08u);
  const double honest = check_against_reference(ggml_cpu(), phi35_long, Dtype::f32, pos, 2, rng);
  const double side = check_against_reference(SpecMutant(longrope_other_side), phi35_long,
                                              Dtype::f32, pos, 2, rng, false);
  const double mag = check_against_reference(SpecMutant(longrope_without_magnitude), phi35_long,
                                             Dtype::f32, pos, 2, rng, false);
  std::cout << "[ggml_cpu longrope f32] worst utilization: honest " << honest
            << ", short factors where long apply " << side << ", attention factor left out " << mag
            << "\n";
  EXPECT_LE(honest, 1.0);
  EXPECT_GT(side, 1.0);
  EXPECT_GT(mag, 1.0);
}

}  // namespace
}  // namespace ropecheck
