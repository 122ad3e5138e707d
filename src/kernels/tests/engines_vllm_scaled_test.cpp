// vllm_native's scaled classes (src/kernels/engines/vllm_native.cpp) against the exact rotation of
// their specs, within the bound of the declared vllm_f32 policy (src/bounds/scaled_vllm.cpp), the
// cache extent (positions past it are unsupported, not extrapolated), and mutants with the bugs
// engines shipped (a factor applied twice, mscale applied twice, the scaling computed and not
// used, LongRoPE's short factors where vLLM takes the long ones) that must break that bound.
// Bit-for-bit agreement with vLLM's own classes is the python test's (test_engines_torch.py,
// golden/vllm_native_scaled.npz).
#include "ropecheck/kernels/engines.hpp"
#include "support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace ropecheck {
namespace {

using namespace kernel_tests;

const Kernel& vllm() { return *find_engine_kernel("vllm_native"); }

RopeSpec with(RopeSpec s, const std::function<void(Scaling&)>& set) {
  set(s.scaling);
  return s;
}

// A variant's parameters: L = max_position_embeddings, orig = original_max_position_embeddings,
// seq = seq_len (dynamic: factor * L; LongRoPE: vLLM's max_model_len).
RopeSpec scaled(std::int64_t hd, std::int64_t rd, Layout l, double base, ScalingKind k, double f,
                std::int64_t L, std::int64_t orig = 0, std::int64_t seq = 0) {
  RopeSpec s = make_spec(hd, rd, l, base);
  s.scaling.kind = k;
  s.scaling.factor = f;
  s.scaling.max_position_embeddings = L;
  s.scaling.original_max_position_embeddings = orig;
  s.scaling.seq_len = seq;
  return s;
}

std::vector<double> ramp_factors(std::int64_t n, double hi) {
  std::vector<double> f;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i) / static_cast<double>(n - 1);
    f.push_back(1.0 + (hi - 1.0) * x * x);
  }
  return f;
}

struct ScaledCase {
  std::string name;
  RopeSpec spec;
  std::int64_t rows;  // the cache's extent as vLLM builds it
};

// The configurations of the golden set (the python test), as specs.
std::vector<ScaledCase> scaled_cases() {
  constexpr Layout H = Layout::half, I = Layout::interleaved;
  using K = ScalingKind;
  const auto deepseek = [](Scaling& s) {
    s.mscale = 1.0;
    s.mscale_all_dim = 0.8;
  };
  const auto phi = [](Scaling& s) {
    s.short_factor = ramp_factors(48, 1.2);
    s.long_factor = ramp_factors(48, 40.0);
  };
  return {
      {"linear4", scaled(128, 128, H, 1e4, K::linear, 4, 4096), 16384},
      {"linear3", scaled(128, 128, H, 1e4, K::linear, 3, 4096), 12288},
      {"linear2.5_gptj", scaled(64, 64, I, 1e4, K::linear, 2.5, 2048), 5120},
      {"linear8_1M", scaled(128, 128, H, 5e5, K::linear, 8, 131072), 1048576},
      {"dynamic2", scaled(128, 128, H, 1e4, K::dynamic, 2, 4096, 0, 8192), 8192},
      {"dynamic4_partial", scaled(64, 32, H, 1e4, K::dynamic, 4, 32768, 0, 131072), 131072},
      {"yarn_qwen25", scaled(128, 128, H, 1e6, K::yarn, 4, 0, 32768), 131072},
      {"yarn32", scaled(64, 64, H, 150000, K::yarn, 32, 0, 4096), 131072},
      {"yarn8_1M", scaled(128, 128, H, 1e6, K::yarn, 8, 0, 131072), 1048576},
      {"deepseek", with(scaled(64, 64, I, 1e4, K::yarn, 40, 0, 4096), deepseek), 163840},
      {"llama31", scaled(128, 128, H, 5e5, K::llama3, 8, 131072, 8192), 131072},
      {"llama3_32", scaled(64, 64, H, 5e5, K::llama3, 32, 32768, 8192), 32768},
      {"longrope_long", with(scaled(96, 96, H, 1e4, K::longrope, 1, 131072, 4096, 131072), phi),
       131072},
      {"longrope_short", with(scaled(96, 96, H, 1e4, K::longrope, 1, 131072, 4096, 4096), phi),
       4096},
  };
}

std::vector<std::int64_t> positions_below(std::int64_t rows) {
  std::vector<std::int64_t> p;
  for (std::int64_t m : {0, 1, 7, 100, 4095, 4096, 8191, 32767, 65535, 131071, 524287, 1048575})
    if (m < rows) p.push_back(m);
  p.push_back(rows - 1);
  return p;
}

// Each case, every dtype: within the declared bound; the worst utilization printed (how much of
// the bound the arithmetic uses: the bound is not loose when this is a sizeable fraction).
TEST(VllmScaled, WithinDeclaredBound) {
  for (const ScaledCase& c : scaled_cases())
    for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
      ASSERT_TRUE(vllm().supports(c.spec, d)) << c.name;
      std::mt19937_64 rng(0x5EED0E03u);
      const double w = check_against_reference(vllm(), c.spec, d, positions_below(c.rows), 2, rng);
      std::cout << "[vllm_native " << c.name << " " << name(d) << "] worst utilization " << w
                << "\n";
    }
}

// The cache extent: the last row is served, the next is not (unsupported, never extrapolated).
TEST(VllmScaled, PositionsPastTheCacheAreNotServed) {
  for (const ScaledCase& c : scaled_cases()) {
    const std::int64_t hd = c.spec.head_dim;
    std::vector<float> x(static_cast<std::size_t>(hd), 0.5f), y(x.size());
    for (std::int64_t m : {c.rows - 1, c.rows}) {
      const KernelStatus st =
          apply_contiguous(vllm(), c.spec, Dtype::f32, 1, 1, &m, x.data(), y.data());
      EXPECT_EQ(st, m < c.rows ? KernelStatus::ok : KernelStatus::unsupported)
          << c.name << " at " << m;
    }
  }
}

// ==== mutants: each must break the bound of the honest declaration ============================
class Mutant final : public Kernel {
 public:
  using Change = std::function<RopeSpec(const RopeSpec&)>;
  Mutant(Change change, float post_scale = 1) : change_(std::move(change)), post_(post_scale) {}
  std::string name() const override { return "vllm_native_mutant"; }
  std::string description() const override { return "vllm_native with a bug"; }
  Policy policy(Dtype d) const override { return vllm().policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override { return vllm().supports(s, d); }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    const KernelStatus st = vllm().apply(change_(s), a);
    if (st != KernelStatus::ok || post_ == 1) return st;
    scale_rotated_f32(s, a, post_);  // f32 only: the magnitude applied once more
    return st;
  }

 private:
  Change change_;
  float post_;
};

// Positions below `below` (the mutant's own cache may be shorter: LongRoPE's short one).
double mutant_utilization(const Kernel& k, const ScaledCase& c, std::int64_t below) {
  std::mt19937_64 rng(0x5EED0E04u);
  return check_against_reference(k, c.spec, Dtype::f32, positions_below(std::min(c.rows, below)), 2,
                                 rng, false);
}

TEST(VllmScaled, MutantsBreakTheBound) {
  const auto cases = scaled_cases();
  const auto find = [&](const std::string& n) {
    for (const auto& c : cases)
      if (c.name == n) return c;
    throw std::runtime_error(n);
  };
  struct M {
    std::string what, on;
    Mutant k;
  };
  const std::vector<M> mutants = {
      {"linear factor applied twice (position and inv_freq)", "linear4",
       Mutant([](const RopeSpec& s) { return with(s, [](Scaling& c) { c.factor *= c.factor; }); })},
      {"YaRN mscale applied twice", "yarn_qwen25",
       Mutant([](const RopeSpec& s) { return s; }, static_cast<float>(0.1 * std::log(4.0) + 1))},
      {"DeepSeek mscale pair applied twice", "deepseek",
       Mutant([](const RopeSpec& s) { return s; },
              static_cast<float>(magnitude_f64(find("deepseek").spec)))},
      {"llama3 computed and not returned (unscaled)", "llama31",
       Mutant([](const RopeSpec& s) { return with(s, [](Scaling& c) { c = Scaling{}; }); })},
      {"dynamic NTK at the original base (HF below L)", "dynamic2",
       Mutant([](const RopeSpec& s) { return with(s, [](Scaling& c) { c = Scaling{}; }); })},
      {"LongRoPE short factors where max_model_len chose long", "longrope_long",
       Mutant([](const RopeSpec& s) {
         return with(s, [](Scaling& c) { c.seq_len = c.original_max_position_embeddings; });
       })},
  };
  for (const M& m : mutants) {
    const ScaledCase c = find(m.on);
    const std::int64_t below = m.on == "longrope_long" ? 4096 : c.rows;
    const double honest = mutant_utilization(vllm(), c, below);
    const double broken = mutant_utilization(m.k, c, below);
    std::cout << "[vllm_native " << m.on << "] " << m.what << ": worst utilization " << broken
              << " (the engine itself: " << honest << ")\n";
    EXPECT_LE(honest, 1.0) << m.what;
    EXPECT_GT(broken, 1.0) << m.what;
  }
}

}  // namespace
}  // namespace ropecheck
