// hf_eager's scaling variants (src/kernels/engines/hf_eager.cpp) against the exact reference
// within the bound its policy declares (hf_f32 with a scaling kind: src/bounds/scaled_f32.cpp),
// and the engines HF's reported bugs describe (a factor applied twice, the wrong attention factor,
// a dynamic table computed as a constant, llama3 computed and not returned) exceeding it. The bit
// for bit comparison with the real HF code is src/python/tests/test_engines_torch.py.
#include "ropecheck/kernels/engines.hpp"
#include "support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace ropecheck {
namespace {

using namespace kernel_tests;

const Kernel& hf() { return *find_engine_kernel("hf_eager"); }

RopeSpec with(std::int64_t hd, std::int64_t rd, double base, Scaling sc,
              std::vector<std::int64_t> sections = {}) {
  RopeSpec s;
  s.head_dim = hd;
  s.rotary_dim = rd;
  s.base = base;
  s.layout = sections.empty() ? Layout::half : Layout::mrope;
  s.sections = std::move(sections);
  s.scaling = std::move(sc);
  return s.normalized();
}

// The model presets of the "Done when" and the other HF paths.
struct Preset {
  std::string name;
  RopeSpec spec;
};

std::vector<double> ramp(std::int64_t n, double a, double b, double p) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(1 + a * std::pow(static_cast<double>(i), p) * b);
  return v;
}

std::vector<Preset> presets() {
  Scaling lin;
  lin.kind = ScalingKind::linear;
  lin.factor = 4;
  Scaling lin25 = lin;
  lin25.factor = 2.5;
  Scaling qwen;  // Qwen2.5: yarn factor 4 of 32768
  qwen.kind = ScalingKind::yarn;
  qwen.factor = 4;
  qwen.original_max_position_embeddings = 32768;
  Scaling untruncated = qwen;
  untruncated.truncate = false;
  Scaling phi;  // Phi-3.5-mini's shape: 4096 -> 131072, 48 factors (synthetic values)
  phi.kind = ScalingKind::longrope;
  phi.original_max_position_embeddings = 4096;
  phi.max_position_embeddings = 131072;
  phi.short_factor = ramp(48, 0.0331, 1, 1.1);
  phi.long_factor = ramp(48, 0.0713, 1, 1.6);
  phi.seq_len = 131072;
  Scaling phi_short = phi;
  phi_short.seq_len = 4096;
  Scaling dyn;
  dyn.kind = ScalingKind::dynamic;
  dyn.factor = 2;
  dyn.max_position_embeddings = 4096;
  dyn.seq_len = 1 << 20;
  Scaling none;
  return {{"llama3 (Llama 3.1, factor 8)", with(128, 128, 500000, llama31_scaling())},
          {"yarn (Qwen2.5, factor 4)", with(128, 128, 1e6, qwen)},
          {"yarn (truncate false)", with(128, 128, 1e6, untruncated)},
          {"yarn (DeepSeek-V3 mscale pair, rope dim 64)",
           with(64, 64, 10000, deepseek_v3_yarn_scaling())},
          {"longrope (Phi-3.5 shape, long)", with(96, 96, 10000, phi)},
          {"longrope (Phi-3.5 shape, short)", with(96, 96, 10000, phi_short)},
          {"linear x4", with(128, 128, 10000, lin)},
          {"linear x2.5", with(128, 128, 500000, lin25)},
          {"dynamic (factor 2 of 4096, at 2^20)", with(128, 128, 10000, dyn)},
          {"partial rotary (Pythia 0.25)", with(128, 32, 10000, none)},
          {"mrope (Qwen2-VL)", with(128, 128, 1e6, none, {16, 24, 24})}};
}

const std::vector<std::int64_t> kPositions = {
    0,      1,       7,        4095,   8191,    32767,         65535,
    131071, 1048575, -1048575, -32767, 1 << 24, (1 << 24) + 3, (1 << 25) + 7};

// The worst error (u) and bound utilization at one position, two heads.
struct Cell {
  double error_u = 0, utilization = 0;
};
Cell at(const Kernel& k, const RopeSpec& spec, Dtype d, std::int64_t m) {
  std::mt19937_64 rng(0x5EED0E39u + static_cast<std::uint64_t>(m));
  const Bytes in = random_tensor(d, 2 * spec.head_dim, rng);
  const Bytes out = run(k, spec, d, {m}, 2, in);
  const verify::PairChecker checker(k.policy(d), spec, d);
  std::vector<double> x(spec.head_dim), y(spec.head_dim);
  Cell c;
  for (std::int64_t h = 0; h < 2; ++h) {
    for (std::int64_t j = 0; j < spec.head_dim; ++j) {
      x[j] = get(d, in, h * spec.head_dim + j);
      y[j] = get(d, out, h * spec.head_dim + j);
    }
    const reference::MpVector exact = reference::apply_blocked(spec, reference::Mp(m), x);
    for (const verify::PairCheck& p :
         verify::check_vector(checker, {m}, x.data(), y.data(), exact).pairs) {
      c.error_u = std::max(c.error_u, p.error_u);
      c.utilization = std::max(c.utilization, p.utilization);
    }
  }
  return c;
}

TEST(HfEagerScaled, EveryPresetWithinItsDeclaredBound) {
  std::mt19937_64 rng(0x5EED0E39u);
  for (const Preset& p : presets())
    for (Dtype d : kAllDtypes) {
      ASSERT_TRUE(hf().supports(p.spec, d)) << p.name << " " << name(d);
      const double worst = check_against_reference(hf(), p.spec, d, kPositions, 2, rng);
      std::cout << "[hf_eager " << name(d) << "] " << p.name << ": worst utilization " << worst
                << "\n";
    }
}

// The figures the issue asks for: max error (u of the dtype, per pair) and bound utilization at
// 32k / 128k / 1M, f32 and bf16 (printed for the record; the bound is asserted above).
TEST(HfEagerScaled, LongContextCells) {
  for (const Preset& p : presets())
    for (Dtype d : {Dtype::f32, Dtype::bf16}) {
      std::cout << "[cells] " << p.name << " " << name(d) << ":";
      for (std::int64_t m : {32767, 131071, 1048575}) {
        const Cell c = at(hf(), p.spec, d, m);
        std::cout << "  m=" << m << " err " << c.error_u << " u (" << c.utilization * 100
                  << "% of bound)";
      }
      std::cout << "\n";
    }
}

// hf_eager run on a wrong spec, declaring hf_eager's policy for the true one: the bugs reported
// against engines' scaling paths.
class Mutant final : public Kernel {
 public:
  Mutant(std::string what, std::function<RopeSpec(RopeSpec)> mutate)
      : what_(std::move(what)), mutate_(std::move(mutate)) {}
  std::string name() const override { return "hf_eager_" + what_; }
  std::string description() const override { return what_; }
  Policy policy(Dtype d) const override { return hf().policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override { return hf().supports(s, d); }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    return hf().apply(mutate_(s), a);
  }

 private:
  std::string what_;
  std::function<RopeSpec(RopeSpec)> mutate_;
};

double worst(const Kernel& k, const RopeSpec& spec, Dtype d) {
  std::mt19937_64 rng(0x5EED0E3Au);
  return check_against_reference(k, spec, d, kPositions, 2, rng, false);
}

TEST(HfEagerScaled, BrokenScalingPathsExceedTheBound) {
  const auto named = [](const std::string& n) {
    for (const Preset& p : presets())
      if (p.name.rfind(n, 0) == 0) return p.spec;
    throw std::runtime_error(n);
  };
  struct Case {
    const char* preset;
    Mutant mutant;
  };
  const std::vector<Case> cases = {
      {"linear x4", Mutant("factor_twice",
                           [](RopeSpec s) {
                             s.scaling.factor *= s.scaling.factor;
                             return s;
                           })},
      {"yarn (Qwen2.5", Mutant("mscale_twice",
                               [](RopeSpec s) {
                                 s.scale = attention_factor_f64(s.scaling, s.ladder_dim());
                                 return s;
                               })},
      {"yarn (DeepSeek", Mutant("mscale_not_divided",
                                [](RopeSpec s) {
                                  s.scaling.mscale_all_dim = 0;  // get_mscale(f, mscale) alone
                                  return s;
                                })},
      {"dynamic", Mutant("dynamic_constant",
                         [](RopeSpec s) {
                           s.scaling.seq_len = 0;  // the table of L0, whatever the length
                           return s;
                         })},
      {"llama3", Mutant("llama3_not_returned",
                        [](RopeSpec s) {
                          s.scaling = Scaling{};
                          return s;
                        })},
      {"longrope (Phi-3.5 shape, long)", Mutant("short_factors",
                                                [](RopeSpec s) {
                                                  s.scaling.seq_len = 0;
                                                  return s;
                                                })},
  };
  for (const Case& c : cases)
    for (Dtype d : {Dtype::f32, Dtype::bf16}) {
      const RopeSpec spec = named(c.preset);
      const double honest = worst(hf(), spec, d), broken = worst(c.mutant, spec, d);
      std::cout << "[" << c.mutant.name() << " " << name(d) << "] worst utilization " << broken
                << " (hf_eager " << honest << ")\n";
      EXPECT_LE(honest, 1.0);
      EXPECT_GT(broken, 1.0) << c.mutant.name();
    }
}

// The scaled bound is HF's f32 one, not section 8's f64 formulas: declared against those (the
// inv_freq_f64 recipe, theta' from f64 rounded once), HF's f32 YaRN blend exceeds it. (Its llama3
// path happens to stay inside that bound at these positions, 0.47 of it: not asserted.)
TEST(HfEagerScaled, F64FormulaBoundIsTooTightForHf) {
  for (const char* n : {"yarn (Qwen2.5"}) {
    RopeSpec spec;
    for (const Preset& p : presets())
      if (p.name.rfind(n, 0) == 0) spec = p.spec;
    Policy f64_formulas = hf().policy(Dtype::f32);
    f64_formulas.recipe = AngleRecipe::inv_freq_f64;
    std::mt19937_64 rng(0x5EED0E3Bu);
    const std::vector<std::int64_t> pos = {4095, 32767, 131071, 1048575, 8000000};
    const double u = check_against_reference(hf(), spec, Dtype::f32, pos, 2, rng, f64_formulas);
    std::cout << "[hf_eager f32] " << n << " judged by the f64-formula bound: " << u << "\n";
    EXPECT_GT(u, 1.0) << n;
  }
}

}  // namespace
}  // namespace ropecheck
