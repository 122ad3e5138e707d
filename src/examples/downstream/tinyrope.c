/* The production recipe of HF transformers / vLLM, all in f32:
 *   inv_freq = 1 / base^(arange(0, rd, 2) / rd)   (f32)
 *   angle    = float(position) * inv_freq          (f32)
 *   out      = x * cos + rotate_half(x) * sin      (f32, separately rounded products)
 * That is exactly the precision policy the plugin adapter declares to ropecheck, which derives its
 * error bound from it (the bound grows with the position because the angle is f32).
 *
 * TINYROPE_BUG_POSITION_OFF_BY_ONE (CMake option EXAMPLE_INJECT_BUG) injects a real bug class:
 * positions treated as 1-based, so every token is rotated by one step too many. */
#include "tinyrope.h"

#include <math.h>
#include <stdlib.h>

int tinyrope_f32(const tinyrope_config* cfg, const int64_t* positions, int64_t n_tokens,
                 int64_t n_heads, int64_t token_stride, int64_t head_stride, const float* in,
                 float* out) {
  const int64_t hd = cfg->head_dim, rd = cfg->rotary_dim, np = rd / 2;
  if (rd < 0 || rd % 2 != 0 || rd > hd) return -1;
  float* tab = (float*)malloc(sizeof(float) * (size_t)(3 * np + 1));
  if (!tab) return -1;
  float *inv_freq = tab, *cos_t = tab + np, *sin_t = tab + 2 * np;
  const float base_f = (float)cfg->base, rd_f = (float)rd, scale_f = (float)cfg->scale;
  for (int64_t i = 0; i < np; ++i) inv_freq[i] = 1.0f / powf(base_f, (float)(2 * i) / rd_f);

  for (int64_t t = 0; t < n_tokens; ++t) {
#ifdef TINYROPE_BUG_POSITION_OFF_BY_ONE
    const float m = (float)(positions[t] + 1);
#else
    const float m = (float)positions[t];
#endif
    for (int64_t i = 0; i < np; ++i) {
      const float angle = m * inv_freq[i];
      cos_t[i] = cosf(angle) * scale_f;
      sin_t[i] = sinf(angle) * scale_f;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t off = t * token_stride + h * head_stride;
      for (int64_t i = 0; i < np; ++i) {
        const int64_t a = cfg->neox ? i : 2 * i;
        const int64_t b = cfg->neox ? i + np : 2 * i + 1;
        /* Both inputs are read before either output is written: in-place safe. */
        const float xa = in[off + a], xb = in[off + b];
        const float c = cos_t[i], s = sin_t[i];
        out[off + a] = xa * c + (-xb) * s;
        out[off + b] = xb * c + xa * s;
      }
      if (out != in)
        for (int64_t j = rd; j < hd; ++j) out[off + j] = in[off + j];
    }
  }
  free(tab);
  return 0;
}
