/* ropecheck plugin ABI: how a third-party RoPE kernel is handed to `ropecheck validate`.
 *
 * C99, no C++ types cross the boundary. A plugin is a shared object that exports ONE symbol,
 *
 *     const ropecheck_plugin* ropecheck_plugin_entry(uint32_t host_abi_version);
 *
 * returning a descriptor whose first field is the ABI version the plugin was compiled against.
 * The entry point's name never changes between ABI versions, so the loader can always read the
 * version and refuse a mismatch with a clear message ("plugin built for ABI 1, this ropecheck
 * speaks ABI 2") instead of a missing-symbol error or, worse, a misread struct.
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
 *     static const int64_t dims[] = {64, 128};
 *     static const ropecheck_plugin desc = {
 *         .abi_version = ROPECHECK_PLUGIN_ABI_VERSION, .struct_size = sizeof(ropecheck_plugin),
 *         .name = "my_rope", .description = "my kernel",
 *         .dtypes = ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32),
 *         .layouts = ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF), .head_dims = dims, .n_head_dims =
 * 2, .policies = {[ROPECHECK_DTYPE_F32] = {.angle = ROPECHECK_DTYPE_F32, .table =
 * ROPECHECK_DTYPE_F32, .arithmetic = ROPECHECK_DTYPE_F32, .recipe = ROPECHECK_RECIPE_HF_F32}},
 *         .apply = my_apply,
 *         .min_position = 0, .max_position = INT32_MAX};  // int32, non-negative positions
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
 * reserved fields and keep the version.
 *   1: scaling kind NONE and the interleaved/half layouts only (one position per token).
 *   2: every scaling variant with all its parameters (ropecheck_scaling), the proportional, mrope,
 *      imrope and axial layouts with their sections, n_axes positions per token and optional real
 *      positions. The loader refuses plugins built for ABI 1 (rebuild against this header: a v1
 *      plugin only needs its initializers adjusted, see src/examples/plugins/c_rope.c).
 *   3: the declared DOMAIN is a contract: ropecheck_policy.trig_error, the LADDER_F32 recipe
 *      (ggml / llama.cpp), a declared position range (min_position / max_position), and the flags
 *      MAGNITUDE_SCALE (scale != 1 is only passed to plugins that declare it), NO_IN_PLACE and
 *      LAYOUTS_BITWISE_SYMMETRIC. Every property draws its cases inside the declared domain; an
 *      UNSUPPORTED return for a call inside it is a declaration mismatch (a failure).
 *      Plugins built for ABI 2 are still loaded, with the ABI 2 meaning of their descriptor: the
 *      same struct layout, the new fields read as their defaults (trig_error 2, any position,
 *      in-place calls allowed, layouts compared within the derived bound) and MAGNITUDE_SCALE set,
 *      because ABI 2 always passed scale != 1. ropecheck prints a note saying so; rebuilding
 *      against this header (no source change needed) lets a plugin declare the new fields. */
#define ROPECHECK_PLUGIN_ABI_VERSION 3u
/* The oldest descriptor version the loader accepts (see above). */
#define ROPECHECK_PLUGIN_ABI_VERSION_MIN 2u
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

/* Pairing of rotated dims and which position axis drives each pair (full definitions with the
 * recipes they follow: enum Layout in ropecheck/spec.hpp).
 *   INTERLEAVED  pair i = (2i, 2i+1)
 *   HALF         pair i = (i, i + rotary_dim/2) (HF rotate_half)
 *   PROPORTIONAL pair i = (i, i + head_dim/2), i < rotary_dim/2, theta_i = base^(-2i/head_dim)
 *                (Gemma-style partial rotary)
 *   MROPE        Qwen2-VL: half pairing, pair i driven by axis t, h or w in contiguous chunks of
 *                sections[0..2] pairs
 *   IMROPE       Qwen3-VL: half pairing, pair i driven by h if i % 3 == 1 && i < 3 sections[1],
 *                by w if i % 3 == 2 && i < 3 sections[2], by t otherwise
 *   AXIAL        interleaved pairs; axis a owns sections[a] consecutive pairs with its own ladder
 *                base^(-2j/(2 sections[a])) (2-D vision, CogVideoX 3-D) */
#define ROPECHECK_LAYOUT_INTERLEAVED 0
#define ROPECHECK_LAYOUT_HALF 1
#define ROPECHECK_LAYOUT_PROPORTIONAL 2
#define ROPECHECK_LAYOUT_MROPE 3
#define ROPECHECK_LAYOUT_IMROPE 4
#define ROPECHECK_LAYOUT_AXIAL 5
#define ROPECHECK_LAYOUT_BIT(l) (1u << (l))
#define ROPECHECK_LAYOUT_BIT_1D 0x7u /* interleaved, half, proportional */
#define ROPECHECK_LAYOUT_BIT_ALL 0x3Fu

/* Frequency scaling variant (formulas and the recipes they follow: enum ScalingKind in
 * ropecheck/spec.hpp; parameters: ropecheck_scaling below). A plugin declares the kinds it
 * implements in ropecheck_plugin.scalings; others are skipped without calling it. */
#define ROPECHECK_SCALING_NONE 0
#define ROPECHECK_SCALING_LINEAR 1
#define ROPECHECK_SCALING_DYNAMIC 2
#define ROPECHECK_SCALING_YARN 3
#define ROPECHECK_SCALING_LLAMA3 4
#define ROPECHECK_SCALING_FREQ_FACTORS 5
#define ROPECHECK_SCALING_LONGROPE 6
#define ROPECHECK_SCALING_BIT(k) (1u << (k))
#define ROPECHECK_SCALING_BIT_ALL 0x7Fu

/* ropecheck_plugin.flags */
/* apply() reads ropecheck_tensor.real_positions when it is non-NULL. Without this flag, calls with
 * real-valued positions are skipped without calling the plugin. */
#define ROPECHECK_FLAG_REAL_POSITIONS 0x1u
/* ABI 3: apply() honours spec->scale != 1 (a magnitude multiplying every rotation block). Without
 * this flag every call has scale == 1 exactly; with it, about one call in five has a scale != 1
 * (0.5, 2, or a value in (0.5, 2) that is not a power of two). A scaling variant's attention
 * factor (yarn, longrope) is part of the variant, not of this flag. */
#define ROPECHECK_FLAG_MAGNITUDE_SCALE 0x2u
/* ABI 3: apply() is never called with out == in (an out-of-place-only kernel). Without this flag
 * in-place calls are part of the domain: InPlaceEqualsOutOfPlace compares them bit for bit with
 * the out-of-place result. */
#define ROPECHECK_FLAG_NO_IN_PLACE 0x4u
/* ABI 3: the kernel's half layout applied to P x is bit for bit P times its interleaved layout
 * applied to x (P gathers even then odd rotated dims): the same operations per pair, only the
 * indexing differs. Without this flag LayoutsArePermutations compares the two within the derived
 * pair bound of each call, since two compiled code paths may contract to FMA differently. */
#define ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC 0x8u
/* ABI 3 (additive): a token's result may differ in its last bits with the batch it is computed in
 * (vectorised loops with a scalar tail, work split over threads, a different code path for one
 * token). Without this flag TokensAreIndependent requires each token's result to equal the
 * single-token call bit for bit; with it, the two are compared within twice the derived pair
 * bound (each is within the bound of the same exact value), which still catches a token reading
 * another token's position or data. rc.validate sets it unless batch_invariant=True. */
#define ROPECHECK_FLAG_BATCH_VARIANT 0x10u

/* How the kernel turns (spec, position) into an angle (see Policy in ropecheck/policy.hpp).
 *   POW_PRODUCT: theta_i = pow(base, -2i/rotary_dim) and angle = m * theta_i, both in `angle`.
 *   HF_F32:      inv_freq = 1 / base^(arange(0, rd, 2)/rd) in f32, angle = f32(m) * inv_freq.
 *   LADDER_F32:  ggml / llama.cpp CPU rope (ABI 3): theta_scale = powf(base, -2.0f/rd), then per
 *                token theta = (float)m and, pair after pair, theta *= theta_scale, all in f32:
 *                pair i's angle is m * theta_scale^i with i roundings, and theta_scale's own
 *                error multiplied by i. */
#define ROPECHECK_RECIPE_POW_PRODUCT 0
#define ROPECHECK_RECIPE_HF_F32 1
#define ROPECHECK_RECIPE_LADDER_F32 2
/*   INV_FREQ_F64: inv_freq = 1 / base^(2i/rd) computed in f64, rounded once into `angle`, and
 *                angle = m * inv_freq in `angle` (gemma.cpp's CreateInvTimescale; a kernel that
 *                uses the host's inv_freq_f32 / inv_freq_f64 table declares this). Additive in
 *                ABI 3: a host older than this recipe rejects the value (exit 2), never misreads
 *                it. */
#define ROPECHECK_RECIPE_INV_FREQ_F64 3
/*   FAST_POWF_F32: CUDA under -use_fast_math (FlashInfer's pos_enc.cuh): inv_freq =
 *                __powf(1.0f / float(base), float(2i) / float(rd)) = ex2.approx(y * lg2.approx(x)),
 *                angle = float(m) * inv_freq, all f32; linear scaling multiplies inv_freq by
 *                1.0f / float(factor). Its error is about 9 ln(base) u per unit of 2i/rd, nine
 *                times HF_F32's. Additive in ABI 3, as INV_FREQ_F64. */
#define ROPECHECK_RECIPE_FAST_POWF_F32 4
/*   FAST_POWF_LADDER_F32: ggml / llama.cpp CUDA (-use_fast_math): theta_scale = powf(base,
 *                -2.0f/rd) on the host, inv_freq = __powf(theta_scale, float(i)) on the device,
 *                angle = float(m) * inv_freq, all f32. Additive in ABI 3. */
#define ROPECHECK_RECIPE_FAST_POWF_LADDER_F32 5
/*   VLLM_F32:    vLLM's rotary classes (vllm/model_executor/layers/rotary_embedding/): HF_F32's
 *                inv_freq and product, and the scaling variants as vLLM computes them in f32
 *                (linear divides the f32 position by the factor, YaRN's ramp and blend, llama3's
 *                wave lengths, LongRoPE's factor times the power, one f32 op each; dynamic NTK's
 *                base in f64, then rounded). Unscaled it is HF_F32's angles and bound. Additive in
 *                ABI 3 (appended: no value above changes), as INV_FREQ_F64. */
#define ROPECHECK_RECIPE_VLLM_F32 6

/* ropecheck_policy.rounding (additive in ABI 3): which conversions into storage truncate.
 *   TABLE_TOWARD_ZERO:  cos/sin are rounded toward zero into `table` (when it is narrower than the
 *                       angle precision), e.g. an f32 cache stored as bf16 by `bits >> 16`.
 *   OUTPUT_TOWARD_ZERO: the result is rounded toward zero into the tensor's dtype (ncnn's
 *                       float32_to_bfloat16 in src/mat.h and its x86 float2bfloat helpers
 *                       without AVX512-BF16 truncate both).
 * A truncation errs by up to a whole ulp instead of half of one: the derived bound takes 2 u for
 * that term, and MatchesReferenceWithinBound accepts |got - exact| <= P + ulp with |got| never
 * above |exact| + P. A host that predates these bits reads the bytes as reserved and checks
 * nearest-even, which a truncating kernel fails: never a false PASS. */
#define ROPECHECK_ROUNDING_NEAREST_EVEN 0
#define ROPECHECK_ROUNDING_TABLE_TOWARD_ZERO (1 << 0)
#define ROPECHECK_ROUNDING_OUTPUT_TOWARD_ZERO (1 << 1)
/* TRIG_ARGUMENT_TURNS_F32 (additive in ABI 3): the rounding of the trig argument into turns. The
 * kernel's sin/cos take t = angle * fl32(1/2pi) rounded in f32, then a hardware approximation:
 * CUDA's __sinf / __cosf / __sincosf (sin.approx / cos.approx), and sinf / cosf under
 * -use_fast_math. The angle actually rotated by is off by up to ~2.7 u_f32 of itself (about 0.16
 * rad at an angle of 1e6 rad); declare trig_error 11.32 with it for PTX's documented 2^-20.5. */
#define ROPECHECK_ROUNDING_TRIG_ARGUMENT_TURNS_F32 (1 << 2)
#define ROPECHECK_ROUNDING_ALL                                                    \
  (ROPECHECK_ROUNDING_TABLE_TOWARD_ZERO | ROPECHECK_ROUNDING_OUTPUT_TOWARD_ZERO | \
   ROPECHECK_ROUNDING_TRIG_ARGUMENT_TURNS_F32)

/* Return values of apply(). Any other non-zero value is an error too. */
#define ROPECHECK_OK 0
#define ROPECHECK_UNSUPPORTED 1 /* this spec/dtype is not handled: skipped, not failed */
#define ROPECHECK_ERROR 2

/* ---- the scaling variant: every parameter, explicit ------------------------------------------
 * Fields a kind does not use hold ropecheck's defaults (shown) and must be ignored. Arrays are
 * owned by the host and valid for the duration of the call. */
typedef struct ropecheck_scaling {
  int32_t kind;     /* ROPECHECK_SCALING_* */
  int32_t truncate; /* yarn: 1 = floor/ceil the correction range (HF default), 0 = not (gpt-oss) */
  double factor;    /* linear, dynamic, yarn, llama3 (1) */
  /* yarn, llama3, longrope: the pre-training context (0) */
  int64_t original_max_position_embeddings;
  /* dynamic: L0 of the formula; longrope: the extended context (0) */
  int64_t max_position_embeddings;
  /* dynamic, longrope: the sequence length the table is built for; 0 = none given (dynamic uses
   * L0, longrope the short factors). LongRoPE uses long factors iff seq_len > original, strictly.
   */
  int64_t seq_len;
  double beta_fast, beta_slow;   /* yarn (32, 1) */
  double mscale, mscale_all_dim; /* yarn (DeepSeek); 0 = not given (0, 0) */
  int32_t has_attention_factor;  /* yarn, longrope: 1 if attention_factor is explicit */
  int32_t reserved_i32;
  double attention_factor;                  /* explicit; wins over every derived one */
  double low_freq_factor, high_freq_factor; /* llama3 (1, 4) */
  const double* short_factor;               /* longrope: n_short_factor = rotary_dim/2 values */
  int64_t n_short_factor;
  const double* long_factor; /* longrope: n_long_factor = rotary_dim/2 values */
  int64_t n_long_factor;
  const double* freq_factors; /* freq_factors (GGUF rope_freqs): theta'_i = theta_i / ff[i] */
  int64_t n_freq_factors;
  int64_t reserved_i64[4]; /* 0 */
  double reserved_f64[4];  /* 0 */
} ropecheck_scaling;

/* ---- the spec: everything needed to compute the frequencies ---------------------------------- */
typedef struct ropecheck_spec {
  uint32_t struct_size; /* sizeof(ropecheck_spec) as compiled by the host */
  int32_t layout;       /* ROPECHECK_LAYOUT_* */
  int64_t head_dim;     /* >= 1, may be odd */
  int64_t rotary_dim;   /* even, <= head_dim; dims not in a rotated pair pass through unchanged */
  double base;          /* theta_i = base^(-2i/rotary_dim), base taken as this exact double */
  /* Magnitude s: every block is s * a * [[cos, -sin], [sin, cos]] with a the scaling variant's
   * attention factor (yarn, longrope; 1 for the other kinds). */
  double scale;
  ropecheck_scaling scaling;
  /* Position axes of the layout: 1 for the 1-D layouts, 3 for mrope/imrope, n_sections for
   * axial. */
  int32_t n_axes;
  int32_t reserved_i32;
  /* mrope/imrope: mrope_section (pairs per axis t, h, w); axial: pairs per axis. Sum =
   * rotary_dim/2. NULL / 0 for the 1-D layouts. */
  const int64_t* sections;
  int64_t n_sections;
  int64_t reserved_i64[8]; /* 0; reserved for later ABI-compatible additions */
  double reserved_f64[8];  /* 0 */
} ropecheck_spec;

/* ---- one call's tensors ----------------------------------------------------------------------
 * n_tokens x n_heads vectors of head_dim elements. Element (t, h, j) is at
 * in/out + t * token_stride + h * head_stride + j (strides in ELEMENTS, not bytes), so
 * non-contiguous views are exercised. out may equal in (in-place, unless the plugin declares
 * ROPECHECK_FLAG_NO_IN_PLACE); it never partially overlaps.
 * positions[t * n_axes + a] is token t's position on axis a (int64). n_axes is 1 (one position
 * per token, used on every axis of a multi-axis spec, i.e. t = h = w) or spec->n_axes.
 *
 * What a plugin is called with (ABI 3), and nothing else:
 *   - dtype, layout, scaling kind and head_dim inside the descriptor's masks and head_dims list,
 *     and only specs for which supports() (if given) returned non-zero;
 *   - every position (every axis) inside [min_position, max_position] of the descriptor (any
 *     int64 when both are 0): negative positions (KV-cache shifts, inverse rotations) only when
 *     min_position < 0; the properties draw directed values (0, 1, 2^k - 1, 2^k, 2^k + 1 for the
 *     table and float-conversion edges, the range's own ends) and log-uniform ones;
 *   - n_tokens >= 1, n_heads >= 1 (up to a few dozen tokens and heads in a call);
 *   - strides positive, head_stride >= head_dim, token_stride >= n_heads * head_stride (tokens
 *     outermost, with gaps between heads and tokens in some calls); never zero or negative, never
 *     overlapping vectors. Elements in the gaps must not be written;
 *   - rotary_dim < head_dim (partial rotary, odd numbers of pairs, odd head_dim) whenever the
 *     masks and supports() allow it: such calls are in the domain unless supports() rejects them;
 *   - scale != 1 only with ROPECHECK_FLAG_MAGNITUDE_SCALE; out == in only without
 *     ROPECHECK_FLAG_NO_IN_PLACE;
 *   - inputs: finite values of the whole dtype range (subnormals, zero pairs, values near the
 *     largest finite scaled so that outputs cannot overflow) and, in the special-value checks at
 *     position 0 and in pass-through dims, +-0, +-inf and NaN.
 * An UNSUPPORTED return for such a call is a declaration mismatch: the validation fails with
 * classification `declaration_mismatch` (narrow the masks, head_dims or supports() instead).
 *
 * struct_size (here and in ropecheck_spec): the size of the struct as the HOST compiled it. Fields
 * are only ever appended within an ABI version; a plugin compiled against an older header of the
 * same version reads the fields it knows and must not read beyond struct_size. A plugin sets its
 * descriptor's struct_size to sizeof(ropecheck_plugin) as IT compiled it; the loader refuses a
 * descriptor smaller than the one of the version it declares. */
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
  /* Optional precomputed inverse frequencies of pair i (i < rotary_dim/2, pair order): the
   * unscaled ladder theta_i of the layout (see ROPECHECK_LAYOUT_*) with the scaling variant
   * applied (theta'_i), each correctly rounded from the exact value into f64 and into f32. For
   * kernels whose interface takes a table; a kernel that computes its own frequencies ignores
   * them. The attention factor is NOT folded in. */
  const double* inv_freq_f64;
  const float* inv_freq_f32;
  int64_t n_axes; /* positions per token: 1 or spec->n_axes */
  /* Non-NULL: real-valued positions (same indexing as positions, exact doubles, e.g. CogVideoX
   * linspace grids) replace positions, which is then NULL. Only passed to plugins that declare
   * ROPECHECK_FLAG_REAL_POSITIONS. */
  const double* real_positions;
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
  /* ABI 3, additive: how values are rounded into their storage, a mask of ROPECHECK_ROUNDING_*
   * (0 = round to nearest even everywhere, the default; in earlier ABI 3 headers these bytes were
   * reserved, 0). Unknown bits are refused at load time (exit 2). */
  int32_t rounding;
  /* ABI 3: each cos/sin value, before its rounding into the table precision, is within
   * trig_error units of the angle precision's unit roundoff (absolute) of the exact cos/sin of the
   * kernel's angle. 0 = the default 2 (a correctly rounded or 1-ulp libm such as glibc's
   * sin/cos/sinf/cosf); declare more for fast approximations or tables built by angle addition.
   * Negative or non-finite is refused at load time. (In ABI 2 these bytes were reserved, 0.) */
  double trig_error;
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
  /* Mask of ROPECHECK_SCALING_BIT(k) the kernel implements (NONE is implied; 0 = NONE only). */
  uint32_t scalings;
  uint32_t flags; /* ROPECHECK_FLAG_* */
  /* ABI 3: every position passed to apply() (every axis) lies in [min_position, max_position].
   * Both 0 = any int64 position (the default; in ABI 2 these bytes were reserved, 0). E.g. a kernel
   * taking int32 positions: INT32_MIN, INT32_MAX; non-negative positions only: 0, INT64_MAX. A
   * range without negative positions makes InverseUndoes not applicable and keeps KV-cache shifts
   * non-negative. min_position > max_position is refused at load time. */
  int64_t min_position;
  int64_t max_position;
  /* Optional (NULL = no backward; additive in ABI 3, these bytes were reserved[0], 0): the
   * backward of apply(). tensor->in holds the upstream gradient g of y = apply(x), tensor->out
   * receives grad_x = s R(m)^T g (R(m)^T is the rotation by -m: grad_a = s(c g_a + sin g_b),
   * grad_b = s(c g_b - sin g_a) for each pair), same spec, positions, strides and in-place rule as
   * apply(); pass-through dims take g unchanged. Declared under the same policies and domain as
   * apply(). `ropecheck validate` then runs the Backward* properties; without it they read
   * "n/a (no backward)". Same return values as apply(). */
  int (*apply_backward)(const ropecheck_spec* spec, const ropecheck_tensor* tensor, void* user);
  void* reserved[5];
} ropecheck_plugin;

/* The entry point. host_abi_version lets a plugin that knows several ABI versions return the
 * matching descriptor; a plugin that knows one just returns it. NULL means "cannot serve". */
typedef const ropecheck_plugin* (*ropecheck_plugin_entry_fn)(uint32_t host_abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ROPECHECK_PLUGIN_H */
