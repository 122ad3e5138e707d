/* ropecheck plugin ABI: how a third-party RoPE kernel is handed to `ropecheck validate`.
 *
 * C99, no C++ types cross the boundary. A plugin is a shared object that exports ONE symbol,
 *
 *     const ropecheck_plugin* ropecheck_plugin_entry(uint32_t host_abi_version);
 *
 * returning a descriptor whose first field is the ABI version the plugin was compiled against.
 * The entry point's name never changes between ABI versions, so the loader can always read the
 * version and refuse a mismatch with a clear message ("plugin built for ABI 2, this ropecheck
 * speaks ABI 1") instead of a missing-symbol error or, worse, a misread struct.
 *
 * The kernel receives the FULL spec and computes its own inverse frequencies and angles: that is
 * where real RoPE bugs live (exponent over head_dim, f32 positions, bf16 tables...). A table of
 * inverse frequencies is also passed for kernels whose real interface takes one; using it means
 * the frequency computation is not under test.
 *
 * Isolation: ropecheck loads the plugin in a child process; a crash, abort, exit() or hang there is
 * reported ("crashed (signal 11) in config ...") and never takes the oracle down. Output buffers
 * are pre-filled with a sentinel and surrounded by canary regions: an element left unwritten, a
 * write outside the output view, or a write to the input of an out-of-place call is reported.
 * Anything the plugin prints on stdout is redirected to stderr.
 *
 * Minimal plugin (see src/examples/plugins/ for complete ones):
 *
 *     #include "ropecheck/plugin.h"
 *     static int my_apply(const ropecheck_spec* s, const ropecheck_tensor* t, void* user) {...}
 *     static const ropecheck_plugin desc = {
 *         ROPECHECK_PLUGIN_ABI_VERSION, sizeof(ropecheck_plugin), "my_rope", "my kernel",
 *         ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32), ROPECHECK_LAYOUT_BIT_ALL, NULL, 0,
 *         {{...policy for f64...}, {...f32...}, {...f16...}, {...bf16...}},
 *         NULL, my_apply, NULL};
 *     ROPECHECK_PLUGIN_EXPORT const ropecheck_plugin* ropecheck_plugin_entry(uint32_t v) {
 *       (void)v; return &desc;
 *     }
 */
#ifndef ROPECHECK_PLUGIN_H
#define ROPECHECK_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of the structs or semantics below. Additive changes use the
 * reserved fields and keep the version. */
#define ROPECHECK_PLUGIN_ABI_VERSION 1u
#define ROPECHECK_PLUGIN_ENTRY_SYMBOL "ropecheck_plugin_entry"

#if defined(_WIN32)
#define ROPECHECK_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ROPECHECK_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- vocabulary (values equal ropecheck's C++ enums: Dtype, Layout, ScalingKind, AngleRecipe) */

/* Storage / precision formats. Element types: f64 = double, f32 = float, f16 = IEEE binary16
 * bits (uint16_t), bf16 = bfloat16 bits (uint16_t, the top half of an f32). */
#define ROPECHECK_DTYPE_F64 0
#define ROPECHECK_DTYPE_F32 1
#define ROPECHECK_DTYPE_F16 2
#define ROPECHECK_DTYPE_BF16 3
#define ROPECHECK_DTYPE_COUNT 4
#define ROPECHECK_DTYPE_BIT(d) (1u << (d))
#define ROPECHECK_DTYPE_BIT_ALL 0xFu

/* interleaved: pair i = (2i, 2i+1); half: pair i = (i, i + rotary_dim/2) (HF rotate_half). */
#define ROPECHECK_LAYOUT_INTERLEAVED 0
#define ROPECHECK_LAYOUT_HALF 1
#define ROPECHECK_LAYOUT_BIT(l) (1u << (l))
#define ROPECHECK_LAYOUT_BIT_ALL 0x3u

/* Frequency scaling variant. Only NONE exists in ABI 1; later variants (linear, dynamic NTK,
 * YaRN, llama3, LongRoPE) are new values whose parameters go in ropecheck_spec.scaling_params.
 * A kernel that does not know a kind must return ROPECHECK_UNSUPPORTED. */
#define ROPECHECK_SCALING_NONE 0

/* How the kernel turns (spec, position) into an angle (see Policy in ropecheck/kernel.hpp).
 *   POW_PRODUCT: theta_i = pow(base, -2i/rotary_dim) and angle = m * theta_i, both in `angle`.
 *   HF_F32:      inv_freq = 1 / base^(arange(0, rd, 2)/rd) in f32, angle = f32(m) * inv_freq. */
#define ROPECHECK_RECIPE_POW_PRODUCT 0
#define ROPECHECK_RECIPE_HF_F32 1

/* Return values of apply(). Any other non-zero value is an error too. */
#define ROPECHECK_OK 0
#define ROPECHECK_UNSUPPORTED 1 /* this spec/dtype is not handled: skipped, not failed */
#define ROPECHECK_ERROR 2

/* ---- the spec: everything needed to compute the frequencies ---------------------------------- */
typedef struct ropecheck_spec {
  uint32_t struct_size; /* sizeof(ropecheck_spec) as compiled by the host */
  int32_t layout;       /* ROPECHECK_LAYOUT_* */
  int64_t head_dim;     /* >= 1, may be odd */
  int64_t rotary_dim;   /* even, <= head_dim; dims >= rotary_dim pass through unchanged */
  double base;          /* theta_i = base^(-2i/rotary_dim), base taken as this exact double */
  double scale;         /* magnitude s: every block is s * [[cos, -sin], [sin, cos]] */
  int32_t scaling_kind; /* ROPECHECK_SCALING_*; NONE in ABI 1 */
  /* Multi-axis RoPE (M-RoPE, 2-D vision): number of position axes. 1 in ABI 1; positions then
   * hold n_tokens * n_axes values, axis-major within a token. */
  int32_t n_axes;
  double scaling_params[16]; /* meaning depends on scaling_kind; all 0 for NONE */
  int64_t axis_sections[8];  /* pairs per axis for multi-axis RoPE; 0 when n_axes == 1 */
  int64_t reserved_i64[8];   /* 0; reserved for later ABI-compatible additions */
  double reserved_f64[8];    /* 0 */
} ropecheck_spec;

/* ---- one call's tensors ----------------------------------------------------------------------
 * n_tokens x n_heads vectors of head_dim elements. Element (t, h, j) is at
 * in/out + t * token_stride + h * head_stride + j (strides in ELEMENTS, not bytes), so
 * non-contiguous views are exercised. out may equal in (in-place); it never partially overlaps.
 * positions[t] is token t's position (int64, may be negative). */
typedef struct ropecheck_tensor {
  uint32_t struct_size; /* sizeof(ropecheck_tensor) as compiled by the host */
  int32_t dtype;        /* ROPECHECK_DTYPE_* of in and out */
  int64_t n_tokens;
  int64_t n_heads;
  int64_t token_stride;
  int64_t head_stride;
  const int64_t* positions;
  const void* in;
  void* out;
  /* Optional precomputed theta_i = base^(-2i/rotary_dim), i < rotary_dim/2, each correctly
   * rounded from the exact value into f64 and into f32. For kernels whose interface takes a
   * table; a kernel that computes its own frequencies ignores them. */
  const double* inv_freq_f64;
  const float* inv_freq_f32;
  void* reserved_ptr[4];
  int64_t reserved_i64[4];
} ropecheck_tensor;

/* ---- declared precision policy (per dtype): what the error bounds are derived from ---------- */
typedef struct ropecheck_policy {
  int32_t angle;      /* ROPECHECK_DTYPE_* precision of theta_i and m * theta_i */
  int32_t table;      /* precision cos/sin are held in before the rotation */
  int32_t arithmetic; /* precision of the rotation's multiply-adds */
  int32_t recipe;     /* ROPECHECK_RECIPE_* */
  int32_t fused;      /* 1 if the rotation uses FMA (one rounding per output) */
  int32_t reserved[3];
} ropecheck_policy;

/* ---- the descriptor ------------------------------------------------------------------------- */
typedef struct ropecheck_plugin {
  uint32_t abi_version; /* ROPECHECK_PLUGIN_ABI_VERSION the plugin was compiled with */
  uint32_t struct_size; /* sizeof(ropecheck_plugin) as compiled by the plugin */
  const char* name;     /* short identifier, [A-Za-z0-9_.-] */
  const char* description;
  uint32_t dtypes;  /* mask of ROPECHECK_DTYPE_BIT(d) */
  uint32_t layouts; /* mask of ROPECHECK_LAYOUT_BIT(l) */
  /* Supported head dims (NULL / 0 = any). A finer filter goes in supports(). */
  const int64_t* head_dims;
  int32_t n_head_dims;
  ropecheck_policy policies[ROPECHECK_DTYPE_COUNT]; /* indexed by ROPECHECK_DTYPE_* */
  /* Optional (NULL = the masks above decide): non-zero if (spec, dtype) is supported. */
  int (*supports)(const ropecheck_spec* spec, int32_t dtype, void* user);
  /* Required: rotate. Returns ROPECHECK_OK, ROPECHECK_UNSUPPORTED or an error code. */
  int (*apply)(const ropecheck_spec* spec, const ropecheck_tensor* tensor, void* user);
  void* user; /* passed back to supports() and apply() */
  void* reserved[8];
} ropecheck_plugin;

/* The entry point. host_abi_version lets a plugin that knows several ABI versions return the
 * matching descriptor; a plugin that knows one just returns it. NULL means "cannot serve". */
typedef const ropecheck_plugin* (*ropecheck_plugin_entry_fn)(uint32_t host_abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ROPECHECK_PLUGIN_H */
