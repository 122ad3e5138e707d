// The plugin host: loading, ABI checks, and that each hostile example plugin is classified as what
// it does (crash, abort, hang, out-of-bounds write, unwritten output, modified input, exit) while
// the calling process carries on. Plugins are the shared objects of src/examples/plugins.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/plugin/host.hpp"

using namespace ropecheck;
using namespace ropecheck::plugin;

namespace {

double ipc_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string so(const std::string& name) {
  return std::string(ROPECHECK_PLUGIN_DIR) + "/libropecheck_plugin_" + name + ".so";
}

RopeSpec spec_partial(Layout l = Layout::half) {
  RopeSpec s;
  s.head_dim = 10;
  s.rotary_dim = 8;  // two pass-through dims: exercises copy loops
  s.layout = l;
  return s.normalized();
}

struct Call {
  std::vector<std::int64_t> pos{0, 1, 7, 5000};
  std::vector<float> in, out;
  TensorArgs args;
  Call(const RopeSpec& s, std::int64_t n_heads, std::int64_t gap) {
    const std::int64_t n = static_cast<std::int64_t>(pos.size());
    args.dtype = Dtype::f32;
    args.n_tokens = n;
    args.n_heads = n_heads;
    args.head_stride = s.head_dim + gap;
    args.token_stride = n_heads * args.head_stride;
    in.resize(static_cast<std::size_t>(n * args.token_stride));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0.25f * static_cast<float>(i % 13) - 1.0f;
    out.assign(in.size(), -7.0f);
    args.positions = pos.data();
    args.in = in.data();
    args.out = out.data();
  }
};

FaultKind run_hostile(const std::string& name, std::int64_t gap = 0) {
  Options o;
  o.timeout_s = 1.0;
  auto k = PluginKernel::load(so(name), o);
  const auto s = spec_partial();
  Call c(s, 2, gap);
  EXPECT_EQ(k->apply(s, c.args), KernelStatus::error) << name;
  EXPECT_TRUE(k->poisoned());
  if (k->faults().empty()) return FaultKind::none;
  // Poisoned: a second call fails fast without running the plugin again.
  EXPECT_EQ(k->apply(s, c.args), KernelStatus::error);
  EXPECT_EQ(k->faults().size(), 1u);
  std::cerr << "  " << name << ": " << k->faults().front().message() << "\n";
  return k->faults().front().kind;
}

}  // namespace

TEST(PluginHost, GoodPluginMatchesBuiltinBitForBit) {
  auto k = PluginKernel::load(so("builtin_scalar"));
  EXPECT_EQ(k->name(), "builtin_scalar");
  const Kernel* ref = find_builtin_kernel("scalar");
  ASSERT_NE(ref, nullptr);
  for (Dtype d : kAllDtypes) {
    EXPECT_EQ(k->policy(d).angle, ref->policy(d).angle);
    EXPECT_EQ(k->policy(d).arithmetic, ref->policy(d).arithmetic);
  }
  for (Layout l : {Layout::interleaved, Layout::half})
    for (std::int64_t gap : {0, 3}) {  // contiguous, and a strided view with gaps
      const auto s = spec_partial(l);
      Call a(s, 3, gap), b(s, 3, gap);
      ASSERT_EQ(k->apply(s, a.args), KernelStatus::ok);
      ASSERT_EQ(ref->apply(s, b.args), KernelStatus::ok);
      EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4));
      // In place.
      Call c(s, 3, gap);
      c.args.out = c.in.data();
      ASSERT_EQ(k->apply(s, c.args), KernelStatus::ok);
      for (std::int64_t t = 0; t < 4; ++t)
        for (std::int64_t h = 0; h < 3; ++h)
          for (std::int64_t j = 0; j < s.head_dim; ++j) {
            const auto off = t * a.args.token_stride + h * a.args.head_stride + j;
            EXPECT_EQ(c.in[off], b.out[off]);
          }
      EXPECT_FALSE(k->poisoned());
    }
}

TEST(PluginHost, CorrectCPluginHasNoFaults) {
  auto k = PluginKernel::load(so("c_correct"));
  const auto s = spec_partial();
  Call c(s, 2, 1);
  EXPECT_EQ(k->apply(s, c.args), KernelStatus::ok);
  EXPECT_FALSE(k->poisoned());
  EXPECT_FALSE(k->supports(s, Dtype::f16));  // declared f64/f32 only
}

TEST(PluginHost, LoadErrors) {
  try {
    PluginKernel::load(so("c_wrong_abi"));
    ADD_FAILURE() << "wrong ABI loaded";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("ABI version 99"), std::string::npos) << e.what();
  }
  try {
    PluginKernel::load(so("c_no_entry"));
    ADD_FAILURE() << "plugin without entry point loaded";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("ropecheck_plugin_entry"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PluginKernel::load("/nonexistent/libnothing.so"), LoadError);
  // A file that is not a shared object.
  EXPECT_THROW(PluginKernel::load(__FILE__), LoadError);
}

// ROPECHECK_RECIPE_VLLM_F32 (appended in ABI 3): vllm_native behind the ABI declares its own
// vllm_f32 policy and the host reads it as such; a value past the last recipe, and VLLM_F32 in an
// ABI 2 descriptor (ABI 2 knew POW_PRODUCT and HF_F32), are refused at load time.
TEST(PluginHost, VllmRecipeIsDeclarable) {
  auto k = PluginKernel::load(so("engine_vllm_native"));
  const Kernel* engine = find_engine_kernel("vllm_native");
  ASSERT_NE(engine, nullptr);
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    SCOPED_TRACE(name(d));
    EXPECT_EQ(engine->policy(d).recipe, AngleRecipe::vllm_f32);
    EXPECT_EQ(k->policy(d).recipe, AngleRecipe::vllm_f32);
    EXPECT_EQ(k->policy(d).table, engine->policy(d).table);
  }
  for (const char* refused : {"c_recipe_past_last", "c_abi2_vllm_recipe"}) {
    try {
      PluginKernel::load(so(refused));
      ADD_FAILURE() << refused << " loaded";
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find("invalid precision policy for dtype f32"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(PluginHost, HostilePluginsAreClassified) {
  EXPECT_EQ(run_hostile("c_hostile_segfault"), FaultKind::crashed);
  EXPECT_EQ(run_hostile("c_hostile_abort"), FaultKind::crashed);
  EXPECT_EQ(run_hostile("c_hostile_hang"), FaultKind::timeout);
  // Contiguous: the last vector's extra element lands in the canary past the output buffer.
  EXPECT_EQ(run_hostile("c_hostile_oob_write"), FaultKind::out_of_bounds_write);
  // The one-past-the-vector write lands in a gap of a strided view, not only past the buffer.
  // (In place it copies in[head_dim] onto itself: harmless, and rightly not reported.)
  EXPECT_EQ(run_hostile("c_hostile_oob_write", 2), FaultKind::out_of_bounds_write);
  EXPECT_EQ(run_hostile("c_hostile_unwritten"), FaultKind::unwritten_output);
  EXPECT_EQ(run_hostile("c_hostile_modify_input"), FaultKind::input_modified);
  EXPECT_EQ(run_hostile("c_hostile_exit"), FaultKind::exited);
  EXPECT_EQ(run_hostile("c_hostile_noop"), FaultKind::unwritten_output);
}

TEST(PluginHost, CrashedWorkerIsReplacedAfterReset) {
  auto k = PluginKernel::load(so("c_hostile_abort"));
  const auto s = spec_partial();
  Call c(s, 1, 0);
  EXPECT_EQ(k->apply(s, c.args), KernelStatus::error);
  const auto& f = k->faults().front();
  EXPECT_EQ(f.signal, 6);
  EXPECT_NE(f.message().find("crashed (signal 6, SIGABRT) in config dtype=f32"), std::string::npos)
      << f.message();
  k->reset();
  EXPECT_EQ(k->apply(s, c.args), KernelStatus::error);  // a fresh worker, which aborts again
  EXPECT_EQ(k->faults().size(), 1u);
}

TEST(PluginHost, StdoutGarbageDoesNotDisturb) {
  auto k = PluginKernel::load(so("c_hostile_stdout"));
  auto good = PluginKernel::load(so("c_correct"));
  const auto s = spec_partial();
  Call a(s, 2, 0), b(s, 2, 0);
  EXPECT_EQ(k->apply(s, a.args), KernelStatus::ok);
  EXPECT_EQ(good->apply(s, b.args), KernelStatus::ok);
  EXPECT_EQ(a.out, b.out);
}

// ---- plugins hostile to the worker's channel (src/examples/plugins/hostile_channel.h) ----------
// Each misbehaves on f64 calls only: the f64 call is classified, and the next call (f32, after
// reset) runs on a fresh worker and is correct. The CLI twin of this table is
// Validate/channel_* (tests/CMakeLists.txt), which also checks exit status and validation.json.
namespace {

struct ChannelCase {
  const char* plugin;
  FaultKind f64;  // none: the f64 call succeeds (the misbehaviour is harmless to the host)
};

const ChannelCase kChannelCases[] = {
    {"random_fds", FaultKind::protocol_violation},
    {"huge_header", FaultKind::protocol_violation},
    {"truncated_hang", FaultKind::protocol_violation},
    {"unasked_type", FaultKind::protocol_violation},
    {"unasked_id", FaultKind::protocol_violation},
    {"wrong_shape", FaultKind::protocol_violation},
    {"fork_hold", FaultKind::exited},
    {"stderr_flood", FaultKind::none},
    {"alloc_forever", FaultKind::out_of_memory},
    {"supports_hang", FaultKind::timeout},
    {"close_fds", FaultKind::exited},
};

template <class T>
KernelStatus call_on(const PluginKernel& k, Dtype d, std::vector<T>& out) {
  const auto s = spec_partial();
  const std::vector<std::int64_t> pos{0, 1, 7, 5000};
  std::vector<T> in(static_cast<std::size_t>(4 * 2 * s.head_dim));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<T>(0.25 * (i % 13) - 1.0);
  out.assign(in.size(), T(-7));
  TensorArgs a;
  a.dtype = d;
  a.n_tokens = 4;
  a.n_heads = 2;
  a.head_stride = s.head_dim;
  a.token_stride = 2 * s.head_dim;
  a.positions = pos.data();
  a.in = in.data();
  a.out = out.data();
  return k.apply(s, a);
}

}  // namespace

TEST(PluginHost, ChannelHostilePluginsAreClassifiedAndTheNextCallRunsOnAFreshWorker) {
  for (const ChannelCase& c : kChannelCases) {
    Options o;
    o.timeout_s = 2.0;
    o.memory_limit = std::uint64_t{256} << 20;
    const double t0 = ipc_now();
    auto k = PluginKernel::load(so(std::string("c_channel_") + c.plugin), o);
    std::vector<double> out64;
    const KernelStatus st = call_on(*k, Dtype::f64, out64);
    const FaultKind got = k->faults().empty() ? FaultKind::none : k->faults().front().kind;
    EXPECT_EQ(got, c.f64) << c.plugin << ": "
                          << (k->faults().empty() ? "" : k->faults()[0].message());
    // A fault in supports() reads as unsupported, in apply() as an error.
    EXPECT_EQ(st == KernelStatus::ok, c.f64 == FaultKind::none) << c.plugin;
    if (!k->faults().empty()) {
      EXPECT_FALSE(k->faults().front().message().empty());
      std::cerr << "  " << c.plugin << ": " << k->faults().front().message().substr(0, 200) << "\n";
    }
    k->reset();
    std::vector<float> out32;
    EXPECT_EQ(call_on(*k, Dtype::f32, out32), KernelStatus::ok) << c.plugin;
    EXPECT_FALSE(k->poisoned()) << c.plugin;
    std::vector<float> ref32;
    auto good = PluginKernel::load(so("c_correct"));
    ASSERT_EQ(call_on(*good, Dtype::f32, ref32), KernelStatus::ok);
    EXPECT_EQ(out32, ref32) << c.plugin;
    std::cerr << "  " << c.plugin << ": " << ipc_now() - t0 << " s\n";
  }
}
