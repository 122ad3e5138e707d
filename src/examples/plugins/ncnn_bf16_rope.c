/* ncnn's bf16 RotaryEmbed on x86, behind ropecheck/plugin.h: a kernel that TRUNCATES on purpose.
 *
 * Upstream (read, not linked: ncnn is not a Debian package): Tencent/ncnn
 * @ a4d2ea1d4422c9e849f166fd7a4aefb52f942f6a
 *   src/layer/x86/rotaryembed_bf16s.h, rotaryembed_bf16s(): the scalar tail widens the pair and
 *     its cos/sin entries from bf16 to f32, forms the two rotated components as unfused f32
 *     products and differences, and narrows each result to bf16 with ncnn's conversion
 *     (interleaved: pairs (2i, 2i+1); otherwise (i, i + embed_dim/2); embed_dim is the whole row:
 *     no partial rotary). The AVX/AVX-512 loops compute the same products with fused
 *     multiply-adds and narrow by dropping the low 16 bits unless the CPU has AVX512-BF16
 *     (src/layer/x86/x86_usability.h).
 *   src/mat.h, ncnn's f32 -> bf16 conversion keeps the high 16 bits of the f32 pattern: round
 *     toward zero.
 * The cos/sin caches are inputs of the layer (bottom_blobs[1], [2]): an exported model computes
 * them in f32 as Hugging Face does (inv_freq = 1 / base^(arange(0, d, 2)/d), f32(m) * inv_freq,
 * cos/sin in f32) and ncnn stores them as bf16 with the same float32_to_bfloat16 (cast_float32_
 * to_bfloat16). This plugin builds them so, with glibc cosf/sinf, and runs the scalar tail
 * (-ffp-contract=off: unfused, as declared).
 *
 * Declared policy (bf16): angle f32 (hf_f32), table bf16, arithmetic f32, and
 * rounding = TABLE_TOWARD_ZERO | OUTPUT_TOWARD_ZERO: the honest declaration, which must PASS.
 * Test twins (PLUGIN_VARIANT):
 *   0 HONEST            as above
 *   1 DECLARED_NEAREST  the same code declared nearest-even (rounding 0): must FAIL, with the hint
 *                       that the outputs lean toward zero
 *   2 ROUND_AWAY        declared toward zero but stores by rounding AWAY from zero (bits + 0xffff
 *                       when the low half is non-zero): within a whole ulp, so only the direction
 *                       check of MatchesReferenceWithinBound can catch it
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ropecheck/plugin.h"

#define HONEST 0
#define DECLARED_NEAREST 1
#define ROUND_AWAY 2
#ifndef PLUGIN_VARIANT
#define PLUGIN_VARIANT HONEST
#endif
#ifndef PLUGIN_NAME
#define PLUGIN_NAME "ncnn_bf16_rope"
#endif

static float bf16_to_f32(uint16_t v) {
  const uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ncnn's float32_to_bfloat16: the top 16 bits (NaN stays NaN: its payload's top bits survive). */
static uint16_t f32_to_bf16_rz(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}

static uint16_t store_bf16(float f) {
#if PLUGIN_VARIANT == ROUND_AWAY
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  const int finite = (u & 0x7f800000u) != 0x7f800000u;
  if (finite && (u & 0xffffu) != 0) u += 0x10000u; /* one ulp up in magnitude */
  return (uint16_t)(u >> 16);
#else
  return f32_to_bf16_rz(f);
#endif
}

static int supports(const ropecheck_spec* s, int32_t dtype, void* user) {
  (void)user;
  return dtype == ROPECHECK_DTYPE_BF16 && s->rotary_dim == s->head_dim && s->n_axes == 1 &&
         s->scaling.kind == ROPECHECK_SCALING_NONE &&
         (s->layout == ROPECHECK_LAYOUT_INTERLEAVED || s->layout == ROPECHECK_LAYOUT_HALF);
}

static int apply(const ropecheck_spec* s, const ropecheck_tensor* t, void* user) {
  if (!supports(s, t->dtype, user) || t->n_axes != 1) return ROPECHECK_UNSUPPORTED;
  const int64_t d = s->head_dim, half = d / 2;
  const int inter = s->layout == ROPECHECK_LAYOUT_INTERLEAVED;
  const uint16_t* in = (const uint16_t*)t->in;
  uint16_t* out = (uint16_t*)t->out;
  for (int64_t tok = 0; tok < t->n_tokens; ++tok) {
    const float m = (float)t->positions[tok];
    for (int64_t i = 0; i < half; ++i) {
      /* the exported graph's f32 cache, stored by ncnn as truncated bf16 */
      const float inv_freq = 1.0f / powf((float)s->base, (float)(2 * i) / (float)d);
      const float ang = m * inv_freq;
      const float cos_val = bf16_to_f32(f32_to_bf16_rz(cosf(ang)));
      const float sin_val = bf16_to_f32(f32_to_bf16_rz(sinf(ang)));
      for (int64_t h = 0; h < t->n_heads; ++h) {
        const int64_t off = tok * t->token_stride + h * t->head_stride;
        const int64_t a = off + (inter ? 2 * i : i), b = off + (inter ? 2 * i + 1 : i + half);
        const float x0 = bf16_to_f32(in[a]), x1 = bf16_to_f32(in[b]);
        const float y0 = x0 * cos_val - x1 * sin_val;
        const float y1 = x0 * sin_val + x1 * cos_val;
        out[a] = store_bf16(y0);
        out[b] = store_bf16(y1);
      }
    }
  }
  return ROPECHECK_OK;
}

/* PLUGIN_ROUNDING may be set from outside: the load-time refusal test declares an unknown bit. */
#ifdef PLUGIN_ROUNDING
#elif PLUGIN_VARIANT == DECLARED_NEAREST
#define PLUGIN_ROUNDING ROPECHECK_ROUNDING_NEAREST_EVEN
#else
#define PLUGIN_ROUNDING \
  (ROPECHECK_ROUNDING_TABLE_TOWARD_ZERO | ROPECHECK_ROUNDING_OUTPUT_TOWARD_ZERO)
#endif

static const ropecheck_plugin descriptor = {
    ROPECHECK_PLUGIN_ABI_VERSION,
    sizeof(ropecheck_plugin),
    PLUGIN_NAME,
    "ncnn x86 RotaryEmbed, bf16 storage (Tencent/ncnn src/layer/x86/rotaryembed_bf16s.h @ "
    "a4d2ea1): f32 cache truncated to bf16, f32 rotation, result truncated to bf16",
    ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_BF16),
    ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_INTERLEAVED) |
        ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF),
    NULL,
    0,
    {
        /* {angle, table, arithmetic, recipe, fused, rounding, trig_error (0 = the default 2)} */
        {0, 0, 0, 0, 0, 0, 0.0},
        {0, 0, 0, 0, 0, 0, 0.0},
        {0, 0, 0, 0, 0, 0, 0.0},
        {ROPECHECK_DTYPE_F32, ROPECHECK_DTYPE_BF16, ROPECHECK_DTYPE_F32, ROPECHECK_RECIPE_HF_F32, 0,
         PLUGIN_ROUNDING, 0.0},
    },
    supports,
    apply,
    NULL,
    0, /* scalings: NONE only */
    ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC,
    0, /* any int64 position */
    0,
    NULL, /* apply_backward: none (a forward-only kernel) */
    {NULL, NULL, NULL, NULL, NULL},
};

ROPECHECK_PLUGIN_EXPORT const ropecheck_plugin* ropecheck_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &descriptor;
}
