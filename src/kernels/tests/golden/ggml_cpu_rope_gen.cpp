// Generator of ggml_cpu_rope.golden: runs the real ggml CPU rope (ggml_rope_ext through ggml's
// public API, one thread) on fixed-seed inputs and prints inputs, positions and outputs as hex
// bits. Not built by ropecheck: it is compiled against a checkout of ggml-org/ggml (the commit is
// passed in as GGML_COMMIT and written into the file's header) and linked with its ggml,
// ggml-base and ggml-cpu libraries. Only ggml's public headers are used; no ggml code is copied.
//
// Output format (read by engines_native_test):
//   # comment lines
//   case <f32|f16> <interleaved|half> <head_dim> <n_dims> <base> <n_tokens>
//   pos <p_0> ... <p_{n_tokens-1}>
//   in  <hex bits of n_tokens * head_dim elements, token-major>
//   out <hex bits, same shape>
// Mode NORMAL is ropecheck's interleaved layout, NEOX is half; ext_factor 0, freq_scale 1,
// attn_factor 1 (plain RoPE); one head per token.
#include "ggml-cpu.h"
#include "ggml.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#ifndef GGML_COMMIT
#define GGML_COMMIT "unknown"
#endif

namespace {

// Log-uniform magnitudes in [2^-8, 2^8] with random signs, plus a few zeros, as f32.
std::vector<float> inputs(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<double> e(-8, 8);
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) {
    const double m = std::exp2(e(rng)) * ((rng() & 1) ? -1.0 : 1.0);
    v[i] = (rng() % 61 == 0) ? 0.0f : static_cast<float>(m);
  }
  return v;
}

std::uint32_t bits_of(const ggml_tensor* t, int i) {
  if (t->type == GGML_TYPE_F16) return static_cast<const std::uint16_t*>(t->data)[i];
  std::uint32_t b;
  std::memcpy(&b, static_cast<const float*>(t->data) + i, 4);
  return b;
}

void print_bits(const char* tag, const ggml_tensor* t, int n) {
  std::printf("%s", tag);
  for (int i = 0; i < n; ++i)
    std::printf(t->type == GGML_TYPE_F16 ? " %04x" : " %08x", bits_of(t, i));
  std::printf("\n");
}

void run_case(std::mt19937_64& rng, ggml_type type, int mode, int head_dim, int n_dims, float base,
              const std::vector<std::int32_t>& pos) {
  ggml_init_params params = {64 * 1024 * 1024, nullptr, false};
  ggml_context* ctx = ggml_init(params);
  const int n_tok = static_cast<int>(pos.size()), n = n_tok * head_dim;
  ggml_tensor* x = ggml_new_tensor_3d(ctx, type, head_dim, 1, n_tok);
  ggml_tensor* p = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tok);
  const std::vector<float> v = inputs(rng, n);
  for (int i = 0; i < n; ++i) {
    if (type == GGML_TYPE_F16)
      static_cast<ggml_fp16_t*>(x->data)[i] = ggml_fp32_to_fp16(v[i]);
    else
      static_cast<float*>(x->data)[i] = v[i];
  }
  std::memcpy(p->data, pos.data(), pos.size() * sizeof(std::int32_t));
  ggml_tensor* y =
      ggml_rope_ext(ctx, x, p, nullptr, n_dims, mode, 0, base, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
  ggml_cgraph* gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, y);
  ggml_graph_compute_with_ctx(ctx, gf, 1);
  std::printf("case %s %s %d %d %.17g %d\npos", type == GGML_TYPE_F16 ? "f16" : "f32",
              mode == GGML_ROPE_TYPE_NEOX ? "half" : "interleaved", head_dim, n_dims,
              static_cast<double>(base), n_tok);
  for (std::int32_t q : pos) std::printf(" %d", q);
  std::printf("\n");
  print_bits("in", x, n);
  print_bits("out", y, n);
  ggml_free(ctx);
}

}  // namespace

int main() {
  std::printf(
      "# ggml CPU rope golden set: ggml_rope_ext (ext_factor 0, freq_scale 1, attn_factor 1)\n"
      "# made by github.com/ggml-org/ggml @ %s (ggml-cpu backend, 1 thread)\n"
      "# with ropecheck's src/kernels/tests/golden/ggml_cpu_rope_gen.cpp\n",
      GGML_COMMIT);
  std::mt19937_64 rng(0x66D1C0DEu);
  const std::vector<std::int32_t> pos = {
      0, 1, -3, 7, 4095, 32767, 131071, 1048575, 16777217, 16777219, 1000000007, 2147483647};
  struct Dims {
    int head_dim, n_dims;
  };
  for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX})
      for (Dims d : {Dims{64, 64}, Dims{128, 128}, Dims{80, 32}})
        for (float base : {10000.0f, 500000.0f})
          run_case(rng, type, mode, d.head_dim, d.n_dims, base, pos);
  return 0;
}
