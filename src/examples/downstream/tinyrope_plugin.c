/* The ropecheck adapter of tinyrope: translates the plugin ABI (ropecheck/plugin.h, C99) into the
 * library's own call. It declares the precision policy the library really has; ropecheck derives
 * its bounds from that declaration, so declaring more precision than the kernel has would make
 * honest results fail, and declaring less would hide bugs. */
#include <stddef.h>

#include "ropecheck/plugin.h"
#include "tinyrope.h"

/* The scaling kind moved into a struct in ABI 2; the adapter builds against either header. */
#if ROPECHECK_PLUGIN_ABI_VERSION >= 2
#define SPEC_SCALING_KIND(s) ((s)->scaling.kind)
#else
#define SPEC_SCALING_KIND(s) ((s)->scaling_kind)
#endif

static int tinyrope_apply(const ropecheck_spec* s, const ropecheck_tensor* t, void* user) {
  (void)user;
  /* Plain RoPE only: scaled-frequency variants and multi-axis positions are not implemented. */
  if (SPEC_SCALING_KIND(s) != ROPECHECK_SCALING_NONE || s->n_axes != 1)
    return ROPECHECK_UNSUPPORTED;
  if (s->layout != ROPECHECK_LAYOUT_INTERLEAVED && s->layout != ROPECHECK_LAYOUT_HALF)
    return ROPECHECK_UNSUPPORTED;
  if (t->dtype != ROPECHECK_DTYPE_F32) return ROPECHECK_UNSUPPORTED;
  tinyrope_config cfg;
  cfg.head_dim = s->head_dim;
  cfg.rotary_dim = s->rotary_dim;
  cfg.base = s->base;
  cfg.scale = s->scale;
  cfg.neox = s->layout == ROPECHECK_LAYOUT_HALF;
  return tinyrope_f32(&cfg, t->positions, t->n_tokens, t->n_heads, t->token_stride, t->head_stride,
                      (const float*)t->in, (float*)t->out) == 0
             ? ROPECHECK_OK
             : ROPECHECK_ERROR;
}

/* Designated initializers (C99): fields this adapter does not use stay zero, whatever fields a
 * later, additive revision of the header appends. */
static const ropecheck_plugin descriptor = {
    .abi_version = ROPECHECK_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(ropecheck_plugin),
    .name = "tinyrope",
    .description = "tinyrope_f32: HF/vLLM recipe in f32 (example downstream project)",
    .dtypes = ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32),
    .layouts = ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_INTERLEAVED) |
               ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF),
    /* f32 everywhere: inv_freq, angle (HF recipe: f32(position) * inv_freq), cos/sin table by
     * cosf/sinf (trig_error left 0: the default 2, a 1-ulp libm), unfused rotation (tinyrope is
     * built with -ffp-contract=off). */
    .policies = {[ROPECHECK_DTYPE_F32] = {.angle = ROPECHECK_DTYPE_F32,
                                          .table = ROPECHECK_DTYPE_F32,
                                          .arithmetic = ROPECHECK_DTYPE_F32,
                                          .recipe = ROPECHECK_RECIPE_HF_F32,
                                          .fused = 0}},
    .apply = tinyrope_apply,
#if ROPECHECK_PLUGIN_ABI_VERSION >= 3
    /* tinyrope folds cfg.scale into its cos/sin table, and its two layouts run the same loop with
     * other indices. Any int64 position (converted to f32 as HF does), in-place calls allowed:
     * min_position = max_position = 0 and no NO_IN_PLACE flag. */
    .flags = ROPECHECK_FLAG_MAGNITUDE_SCALE | ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC,
#endif
};

ROPECHECK_PLUGIN_EXPORT const ropecheck_plugin* ropecheck_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &descriptor;
}
