/* ladder_rope: the llama.cpp / ggml CPU rope recipe behind ropecheck/plugin.h, in plain C99 (our
 * own code, written after ggml-cpu's ggml_rope_cache_init, rope_yarn with ext_factor 0 and
 * freq_scale = attn_factor = 1, and ggml_compute_forward_rope_f32/_f16):
 *
 *   theta_scale = powf(base, -2.0f/n_dims)            n_dims = rotary_dim, base as a float
 *   per token:  theta = (float)p                       p an int32 position
 *               pair after pair: cos = cosf(theta), sin = sinf(theta), theta *= theta_scale
 *   rotation in f32:  x0 cos - x1 sin,  x0 sin + x1 cos  (separately rounded: -ffp-contract=off)
 *   dims >= n_dims copied; NORMAL mode = interleaved pairs (2i, 2i+1), NEOX = half (i, i + n/2).
 *
 * Storage f32, or f16 widened exactly to f32 and the f32 result rounded once to nearest even
 * (ggml's two CPU rope types). Declared: angle/table/arithmetic f32, ROPECHECK_RECIPE_LADDER_F32,
 * unfused, trig_error 0 (the default 2: glibc's cosf/sinf are within 1 ulp); int32 positions;
 * no magnitude scale (ggml has none besides YaRN's mscale, not implemented here); both layouts run
 * the same per-pair code (bit for bit symmetric); in-place calls allowed.
 *
 * LADDER_VARIANT (one shared object each, see CMakeLists.txt):
 *   CORRECT                 the kernel above
 *   EXPONENT_OVER_HEAD_DIM  theta_scale = powf(base, -2.0f/head_dim): the partial-rotary bug
 *                           (frequencies of a full-width head on a partial rotary_dim)
 *   DECLARED_HF_F32         the correct kernel declaring ROPECHECK_RECIPE_HF_F32: its ladder error
 *                           (i roundings, theta_scale's error times i) exceeds the HF bound, the
 *                           false alarm that motivated LADDER_F32. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ropecheck/plugin.h"

#define CORRECT 0
#define EXPONENT_OVER_HEAD_DIM 1
#define DECLARED_HF_F32 2

#ifndef LADDER_VARIANT
#define LADDER_VARIANT CORRECT
#endif
#ifndef PLUGIN_NAME
#define PLUGIN_NAME "ladder_rope"
#endif

/* ---- f16 storage: exact widening, one round-to-nearest-even narrowing -------------------------
 */
static float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  uint32_t bits;
  float f;
  if (e == 0x1F) {
    bits = sign | 0x7F800000u | (m << 13); /* inf, NaN (payload kept) */
  } else if (e != 0) {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  } else {
    f = ldexpf((float)m, -24); /* zero or subnormal: m * 2^-24, exact */
    return sign ? -f : f;
  }
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t f32_to_f16(float f) {
  uint32_t x, ax, e, m, q, rem, half, shift;
  memcpy(&x, &f, sizeof x);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu)); /* NaN */
  if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520 (tie to even): inf */
  if (ax >= 0x38800000u) {                                  /* normal: drop 13 bits */
    q = ((ax >> 23) - 112u) << 10 | ((ax & 0x7FFFFFu) >> 13);
    rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q; /* a carry is the next binade */
    return (uint16_t)(sign | q);
  }
  if (ax <= 0x33000000u) return sign; /* <= 2^-25: rounds to zero (the tie goes to even 0) */
  e = ax >> 23;                       /* 102..112: a subnormal result in units of 2^-24 */
  m = (ax & 0x7FFFFFu) | 0x800000u;
  shift = 126u - e;
  q = m >> shift;
  rem = m & ((1u << shift) - 1u);
  half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q; /* 0x400 = the smallest normal */
  return (uint16_t)(sign | q);
}

static float load(const void* p, int32_t dtype, int64_t i) {
  return dtype == ROPECHECK_DTYPE_F32 ? ((const float*)p)[i] : f16_to_f32(((const uint16_t*)p)[i]);
}

static void store(void* p, int32_t dtype, int64_t i, float v) {
  if (dtype == ROPECHECK_DTYPE_F32)
    ((float*)p)[i] = v;
  else
    ((uint16_t*)p)[i] = f32_to_f16(v);
}

/* ---- the kernel ------------------------------------------------------------------------------ */
/* ggml_rope_cache_init for one token: the ladder, pair after pair, in f32. */
static void rope_cache(int64_t p, float theta_scale, int64_t n_pairs, float* c, float* s) {
  float theta = (float)p;
  for (int64_t i = 0; i < n_pairs; ++i) {
    c[i] = cosf(theta);
    s[i] = sinf(theta);
    theta *= theta_scale;
  }
}

/* One head vector: rotate the pairs (both inputs read before either output is written, so
 * in-place calls are safe), copy the dims past rotary_dim bit for bit. */
static void rotate(const ropecheck_spec* sp, const ropecheck_tensor* t, int64_t off, const float* c,
                   const float* s) {
  const int64_t half = sp->rotary_dim / 2;
  const int neox = sp->layout == ROPECHECK_LAYOUT_HALF;
  const size_t es = t->dtype == ROPECHECK_DTYPE_F32 ? 4 : 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = off + (neox ? i : 2 * i), b = off + (neox ? i + half : 2 * i + 1);
    const float x0 = load(t->in, t->dtype, a), x1 = load(t->in, t->dtype, b);
    store(t->out, t->dtype, a, x0 * c[i] - x1 * s[i]);
    store(t->out, t->dtype, b, x0 * s[i] + x1 * c[i]);
  }
  if (t->out != t->in && sp->head_dim > sp->rotary_dim)
    memcpy((char*)t->out + (size_t)(off + sp->rotary_dim) * es,
           (const char*)t->in + (size_t)(off + sp->rotary_dim) * es,
           (size_t)(sp->head_dim - sp->rotary_dim) * es);
}

static int ladder_apply(const ropecheck_spec* sp, const ropecheck_tensor* t, void* user) {
  const int64_t n_pairs = sp->rotary_dim / 2;
  float *c, *s;
  (void)user;
  if (sp->scaling.kind != ROPECHECK_SCALING_NONE || sp->n_axes != 1 || t->n_axes != 1 ||
      (sp->layout != ROPECHECK_LAYOUT_INTERLEAVED && sp->layout != ROPECHECK_LAYOUT_HALF) ||
      (t->dtype != ROPECHECK_DTYPE_F32 && t->dtype != ROPECHECK_DTYPE_F16) || !t->positions)
    return ROPECHECK_UNSUPPORTED; /* outside the declared masks: a host that ignores them */
  if (sp->scale != 1) return ROPECHECK_ERROR; /* never declared MAGNITUDE_SCALE */
  for (int64_t tok = 0; tok < t->n_tokens; ++tok)
    if (t->positions[tok] < INT32_MIN || t->positions[tok] > INT32_MAX)
      return ROPECHECK_ERROR; /* ggml's positions are int32_t; the declared range says so */
#if LADDER_VARIANT == EXPONENT_OVER_HEAD_DIM
  const float theta_scale = powf((float)sp->base, -2.0f / (float)sp->head_dim);
#else
  const float theta_scale = powf((float)sp->base, -2.0f / (float)sp->rotary_dim);
#endif
  c = (float*)malloc(sizeof(float) * (size_t)(2 * n_pairs + 1));
  if (!c) return ROPECHECK_ERROR;
  s = c + n_pairs;
  for (int64_t tok = 0; tok < t->n_tokens; ++tok) {
    rope_cache(t->positions[tok], theta_scale, n_pairs, c, s);
    for (int64_t h = 0; h < t->n_heads; ++h)
      rotate(sp, t, tok * t->token_stride + h * t->head_stride, c, s);
  }
  free(c);
  return ROPECHECK_OK;
}

/* ---- the descriptor -------------------------------------------------------------------------- */
#if LADDER_VARIANT == DECLARED_HF_F32
#define LADDER_RECIPE ROPECHECK_RECIPE_HF_F32
#else
#define LADDER_RECIPE ROPECHECK_RECIPE_LADDER_F32
#endif
/* {angle, table, arithmetic, recipe, fused, rounding, trig_error (0 = the default 2)} */
#define LADDER_POLICY \
  { ROPECHECK_DTYPE_F32, ROPECHECK_DTYPE_F32, ROPECHECK_DTYPE_F32, LADDER_RECIPE, 0, 0, 0.0 }

static const ropecheck_plugin descriptor = {
    ROPECHECK_PLUGIN_ABI_VERSION,
    sizeof(ropecheck_plugin),
    PLUGIN_NAME,
    "ggml / llama.cpp CPU rope: f32 theta ladder (theta *= theta_scale per pair), cosf/sinf, f32 "
    "rotation; f32 and f16 storage",
    ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32) | ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F16),
    ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_INTERLEAVED) |
        ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF),
    NULL, /* any head_dim */
    0,
    {{0, 0, 0, 0, 0, 0, 0.0}, LADDER_POLICY, LADDER_POLICY, {0, 0, 0, 0, 0, 0, 0.0}},
    NULL,
    ladder_apply,
    NULL,
    0, /* scalings: NONE only */
    ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC,
    INT32_MIN, /* positions: int32, as ggml's */
    INT32_MAX,
    NULL, /* apply_backward: none (a forward-only kernel) */
    {NULL, NULL, NULL, NULL, NULL},
};

ROPECHECK_PLUGIN_EXPORT const ropecheck_plugin* ropecheck_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &descriptor;
}
