// The atlas at a model's spec (run_atlas with Options::spec, as `report --hf-config F --engines`
// and `report --models` run it): an engine that rejects the spec gets a "not implemented" row and
// the run goes on; an engine that runs only the other layout is run permuted and named so;
// positions past an engine's cache are labelled, not run; an engine with wrong bits still fails;
// engine_differences finds the wrong bits. Fake engines over the built-in scalar kernel (which
// implements every scaling kind in both 1-D layouts) stand for the production engines, so the test
// holds before and after the engines learn the scaling variants.
#include "ropecheck/reports/model_atlas.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "skew.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace ropecheck::reports {
namespace {

using json = nlohmann::json;

const Kernel& scalar() { return *find_builtin_kernel("scalar"); }

// The scalar kernel behind a narrower declaration: `layout` only, scaled specs optionally
// rejected, a cache of `cache` + 1 positions, or every f32 output scaled by 1 + 2^-6 (2^18 ulps:
// far outside any bound).
class FakeEngine : public Kernel {
 public:
  FakeEngine(std::string name, Layout layout, bool scaled, std::int64_t cache, bool skew)
      : name_(std::move(name)), layout_(layout), scaled_(scaled), cache_(cache), skew_(skew) {}
  std::string name() const override { return name_; }
  std::string description() const override { return "fake engine over scalar"; }
  Policy policy(Dtype d) const override { return scalar().policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override {
    return s.layout == layout_ && (scaled_ || s.scaling.kind == ScalingKind::none) &&
           scalar().supports(s, d);
  }
  Domain domain() const override {
    Domain dm = scalar().domain();
    dm.max_position = cache_;
    return dm;
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (!supports(spec, a.dtype)) return KernelStatus::unsupported;
    const KernelStatus st = scalar().apply(spec, a);
    if (st != KernelStatus::ok || !skew_ || a.dtype != Dtype::f32) return st;
    test::skew_f32_outputs(spec, a);
    return st;
  }

 private:
  std::string name_;
  Layout layout_;
  bool scaled_;
  std::int64_t cache_;
  bool skew_;
};

// A cache its declared domain does not show (vLLM's extent depends on the spec's scaling): apply
// refuses a batch with any position past `cache`, domain() says unlimited.
class HiddenCacheEngine : public FakeEngine {
 public:
  HiddenCacheEngine(std::string name, std::int64_t cache)
      : FakeEngine(std::move(name), Layout::half, true, cache, false), cache_(cache) {}
  Domain domain() const override { return scalar().domain(); }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      if (a.positions[t] > cache_) return KernelStatus::unsupported;
    return FakeEngine::apply(spec, a);
  }

 private:
  std::int64_t cache_;
};

constexpr auto kNoCache = std::numeric_limits<std::int64_t>::max();
const FakeEngine kRight("right", Layout::half, true, kNoCache, false);
const FakeEngine kOther("interleaved_only", Layout::interleaved, true, kNoCache, false);
const FakeEngine kRejects("unscaled_only", Layout::half, false, kNoCache, false);
const FakeEngine kShortCache("short_cache", Layout::half, true, 4095, false);
const FakeEngine kWrong("wrong_bits", Layout::half, true, kNoCache, true);
const HiddenCacheEngine kHiddenCache("hidden_cache", 4095);
const HiddenCacheEngine kPartialCache("partial_cache", 8000);

AtlasEngine atlas_engine(const Kernel& k) {
  return {&k, k.name(), "upstream/" + k.name() + ".py @0000000", "test fake", ""};
}

// Llama 3.1's RoPE at head dim 64 (half layout, as its config reads).
Options model_options() {
  Options o;
  RopeSpec s;
  s.head_dim = 64;
  s.base = 500000;
  s.layout = Layout::half;
  s.scaling = llama31_scaling();
  o.spec = s.normalized();
  o.dtypes = {Dtype::f32, Dtype::bf16};
  o.samples = 16;
  o.max_position = 1 << 15;
  o.threads = 2;
  return o;
}

const json& row_of(const json& doc, const std::string& engine, const std::string& dtype) {
  for (const auto& r : doc["atlas"]["rows"])
    if (r["engine"] == engine && r["dtype"] == dtype) return r;
  static const json none;
  ADD_FAILURE() << "no row " << engine << " " << dtype;
  return none;
}

TEST(ModelAtlas, RejectingEngineGetsItsRowAndTheRestRuns) {
  const json doc = run_atlas(model_options(), {atlas_engine(kRight), atlas_engine(kRejects),
                                               atlas_engine(kOther), atlas_engine(kShortCache)});
  EXPECT_EQ(exit_code(doc), 0) << doc["checks"].dump();
  const json& rej = row_of(doc, "unscaled_only", "f32");
  EXPECT_TRUE(rej.value("not_implemented", false));
  EXPECT_EQ(rej["upstream"], "upstream/unscaled_only.py @0000000");
  EXPECT_NE(render_markdown(doc).find("not implemented (upstream/unscaled_only.py"),
            std::string::npos);
  EXPECT_TRUE(row_of(doc, "right", "f32")["supported"].get<bool>());
  // The other layout: run permuted, said so, and within its bound (the permutation is exact).
  const json& oth = row_of(doc, "interleaved_only", "f32");
  EXPECT_TRUE(oth["supported"].get<bool>());
  EXPECT_EQ(oth["layout"], "interleaved");
  EXPECT_EQ(oth["model_layout"], "half");
  EXPECT_NE(render_markdown(doc).find("interleaved_only (ran interleaved, permuted)"),
            std::string::npos);
  // A cache of 4096 rows: contexts beyond it are labelled, the ones within are figures.
  const json& sc = row_of(doc, "short_cache", "f32");
  ASSERT_TRUE(sc["supported"].get<bool>());
  int past = 0;
  for (const auto& c : sc["at"]) {
    const bool beyond = c["context"].get<std::int64_t>() > 4096;
    EXPECT_EQ(c.value("past_cache", false), beyond) << c.dump();
    past += beyond;
  }
  EXPECT_GT(past, 0);
  EXPECT_NE(render_markdown(doc).find("past the engine's cache"), std::string::npos);
}

TEST(ModelAtlas, NoEngineImplementsTheSpecStillReports) {
  const json doc = run_atlas(model_options(), {atlas_engine(kRejects)});
  EXPECT_EQ(exit_code(doc), 0);
  EXPECT_TRUE(row_of(doc, "unscaled_only", "bf16").value("not_implemented", false));
}

TEST(ModelAtlas, WrongBitsFailInsideTheModelAtlas) {
  const json doc = run_atlas(model_options(), {atlas_engine(kRight), atlas_engine(kWrong)});
  EXPECT_EQ(exit_code(doc), 1);
  bool failed = false;
  for (const auto& c : doc["checks"])
    if (!c["passed"].get<bool>()) {
      EXPECT_EQ(c["dtype"], "f32") << c.dump();
      EXPECT_NE(c["kernel"].get<std::string>().find("wrong_bits"), std::string::npos);
      failed = true;
    }
  EXPECT_TRUE(failed);
}

TEST(ModelAtlas, EngineDifferencesFindTheWrongBits) {
  const RopeSpec s = *model_options().spec;
  const json d = engine_differences(
      s, {{&kRight, Layout::half}, {&kOther, Layout::interleaved}, {&kWrong, Layout::half}},
      {Dtype::f32, Dtype::bf16}, 1 << 15, 1);
  // right vs wrong_bits in f32 (2^-6 relative: ~2^17 u of f32), nothing else: the permuted run
  // of the same kernel gives the same bits, and wrong_bits is exact outside f32.
  ASSERT_EQ(d.size(), 2u) << d.dump();  // right/wrong_bits and interleaved_only/wrong_bits
  for (const auto& r : d) {
    EXPECT_EQ(r["dtype"], "f32");
    EXPECT_GT(r["max_pair_difference_u"].get<double>(), 1e4);
    EXPECT_EQ(r["engines"][1], "wrong_bits");
  }
}

// Positions past a cache the domain does not declare: the sweep's units holding them are refused,
// and the contexts they cover say "not run" instead of the max over the positions that did run
// (which read as the error at that context: a figure for 32k from positions < 4096).
TEST(ModelAtlas, RefusedPositionsAreNotRunNotAFigure) {
  const json doc = run_atlas(model_options(), {atlas_engine(kRight), atlas_engine(kHiddenCache)});
  EXPECT_EQ(exit_code(doc), 0) << doc["checks"].dump();
  const json& hc = row_of(doc, "hidden_cache", "f32");
  ASSERT_TRUE(hc["supported"].get<bool>());
  int not_run = 0;
  for (const auto& c : hc["at"]) {
    const bool beyond = c["context"].get<std::int64_t>() > 4096;
    EXPECT_EQ(c["limited_by"] == "not run", beyond) << c.dump();
    EXPECT_EQ(c["max_pair_u"].is_null(), beyond) << c.dump();
    not_run += beyond;
  }
  EXPECT_GT(not_run, 0);
  EXPECT_EQ(hc["limited_by"], "not run");
  EXPECT_NE(render_markdown(doc).find("not run (positions refused)"), std::string::npos);
}

// A cache that ends inside a sampled bucket (4096-32768 here; vLLM's 131072 rows inside
// 65536-2^20): the batch is refused, each position then runs on its own, so the positions below
// the extent are measured (octaves up to 2^14 carry pairs) and the refused ones are counted; the
// context whose positions include the first refused one has no figure.
TEST(ModelAtlas, CacheInsideABucketServesThePositionsBelowIt) {
  const json doc = run_atlas(model_options(), {atlas_engine(kRight), atlas_engine(kPartialCache)});
  EXPECT_EQ(exit_code(doc), 0) << doc["checks"].dump();
  const json* res = nullptr;
  for (const auto& r : doc["results"])
    if (r["kernel"].get<std::string>().find("partial_cache") != std::string::npos &&
        r["dtype"] == "f32")
      res = &r;
  ASSERT_NE(res, nullptr);
  ASSERT_TRUE(res->contains("positions_refused")) << res->dump();
  EXPECT_GT((*res)["positions_refused"]["min_position"].get<std::int64_t>(), 8000);
  std::int64_t above_4096 = 0;
  for (const auto& o : (*res)["octaves"])
    if (o["position_lo"].get<std::int64_t>() >= 4096)
      above_4096 += o["n_pairs"].get<std::int64_t>();
  EXPECT_GT(above_4096, 0);  // served one position per call
  const json& row = row_of(doc, "partial_cache", "f32");
  EXPECT_NE(row["at"][0]["limited_by"], "not run");                          // 4k
  EXPECT_EQ(row["at"].back()["limited_by"], "not run") << row["at"].back();  // 32k
}

// The angle-vs-rotation split of the engines' scaled f32 recipes on Llama 3.1's RoPE: f32 at long
// context is angle-limited (f32 positions times an f32 inv_freq), and the report must say so and
// give the angle's fix. hf_eager's and vllm_native's angles are reproduced (recipe_f32.hpp);
// ggml_cpu's llama3 ladder is not, and its split comes from the derived bound ("split": "bound").
// Before either, the split charged the inv_freq's few-ulp difference to the rotation and called
// all three arithmetic-limited (angle share 0.32 / 0.32 / 0.14 at 1M), advising a rotation fix.
TEST(ModelAtlas, ScaledF32EnginesAreAngleLimitedAtLongContext) {
  Options o = model_options();
  o.dtypes = {Dtype::f32};
  o.max_position = 1 << 20;
  std::vector<AtlasEngine> engines;
  for (const char* n : {"hf_eager", "vllm_native", "ggml_cpu"})
    engines.push_back(atlas_engine(*find_engine_kernel(n)));
  const json doc = run_atlas(o, engines);
  EXPECT_EQ(exit_code(doc), 0) << doc["checks"].dump();
  for (const char* n : {"hf_eager", "vllm_native", "ggml_cpu"}) {
    const json& r = row_of(doc, n, "f32");
    ASSERT_TRUE(r["supported"].get<bool>()) << n;
    EXPECT_EQ(r["limited_by"], "angle") << n << " " << r.dump();
    EXPECT_GT(r["at"].back()["angle_share"].get<double>(), 0.9) << n;
  }
  bool bound_split = false;
  for (const auto& res : doc["results"])
    for (const auto& b : res["buckets"])
      if (b["angle_vs_rotation"].value("split", std::string()) == "bound") {
        EXPECT_NE(res["kernel"].get<std::string>().find("ggml_cpu"), std::string::npos)
            << res["kernel"];
        bound_split = true;
      }
  EXPECT_TRUE(bound_split);
}

// An engine that refuses the positions past its cache is compared on the positions both engines
// serve, not dropped: before, one refused position in the batch of 64 left the pair out of the
// differences entirely, which reads as "the same bits" (phi-3.5-mini's hf_eager vs vllm_native at
// the atlas's max_position = the cache's row count).
TEST(ModelAtlas, EngineDifferencesCompareWhatBothServe) {
  const RopeSpec s = *model_options().spec;
  json pairs;
  const json d = engine_differences(
      s, {{&kRight, Layout::half}, {&kHiddenCache, Layout::half}, {&kWrong, Layout::half}},
      {Dtype::f32}, 1 << 15, 1, &pairs);
  ASSERT_EQ(pairs.size(), 3u) << pairs.dump();
  for (const auto& p : pairs) {
    const bool hidden = p["engines"][0] == "hidden_cache" || p["engines"][1] == "hidden_cache";
    const auto n = p["positions_compared"].get<std::int64_t>();
    EXPECT_GT(n, 0) << p.dump();
    if (hidden) {
      EXPECT_LT(n, 64) << p.dump();  // positions past 4095 are not compared
    }
    const bool wrong = p["engines"][0] == "wrong_bits" || p["engines"][1] == "wrong_bits";
    EXPECT_EQ(p["elements_differing"].get<std::int64_t>() > 0, wrong) << p.dump();
  }
  // hidden_cache vs wrong_bits differs on the positions both serve.
  bool found = false;
  for (const auto& r : d)
    if (r["engines"][0] == "hidden_cache" && r["engines"][1] == "wrong_bits") {
      found = true;
      EXPECT_LT(r["at_position"].get<std::int64_t>(), 4096);
    }
  EXPECT_TRUE(found) << d.dump();
}

}  // namespace
}  // namespace ropecheck::reports
