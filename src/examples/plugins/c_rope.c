/* A RoPE kernel written against ropecheck/plugin.h in plain C99, and its deliberately broken and
 * hostile variants (one source, one shared object per PLUGIN_MODE) used by the tests of
 * `ropecheck validate`.
 *
 * The correct kernel computes its own frequencies: theta_i = pow(base, -2i/rotary_dim) and the
 * angle m * theta_i in double, cos/sin in double, the rotation in double, and one rounding into
 * the storage dtype (f64 or f32). That is the policy it declares. It multiplies by spec->scale
 * (ROPECHECK_FLAG_MAGNITUDE_SCALE) and runs the same code for both layouts, only the indices differ
 * (ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC); any int64 position, in-place calls allowed.
 *
 * Modes (each modelled on a real failure; the test asserts how ropecheck classifies it):
 *   CORRECT     the kernel above
 *   SIN_SIGN    sin sign flipped (rotates by -angle): still a rotation, caught by
 *               MatchesReferenceWithinBound
 *   SEGFAULT    dereferences NULL               -> "crashed (signal 11)"
 *   ABORT       abort()                         -> "crashed (signal 6)"
 *   HANG        spins forever                   -> timeout
 *   OOB_WRITE   pass-through copy loop runs to j <= head_dim: one element past each vector
 *   UNWRITTEN   out-of-place call writes only the rotated dims (pass-through left unwritten)
 *   MODIFY_IN   rotates in the input buffer, then copies to the output (in-place code reused)
 *   NAN_OUT     emits NaN for the first pair beyond position 1000
 *   STDOUT      prints garbage on stdout, otherwise correct (must PASS)
 *   EXIT        calls exit(3)                   -> "exited (status 3)"
 *   NOOP        returns success without writing anything
 *   NAN_ZERO_PAIR  normalizes each pair by its norm (x / |x| rotated, times |x|): NaN for a zero
 *               pair, correct elsewhere; a finite input gave a non-finite output ->
 *               "non_finite_output" (the directed differential inputs have no zero pair)
 *   UNSUPPORTED_NEGATIVE  returns UNSUPPORTED for a negative position, which its descriptor
 *               (any int64 position) does not exclude -> declaration_mismatch, with the hint
 *               "declare .min_position = 0"
 *   UNSUPPORTED_IN_PLACE  returns UNSUPPORTED for in == out, declared allowed -> the hint
 *               "set ROPECHECK_FLAG_NO_IN_PLACE"
 *   IN_PLACE_ALIAS  stores a pair's first output, then reads its first input back for the second
 *               output: correct out of place, wrong in place (the classic aliasing bug of a
 *               kernel written for out != in)
 *   20 and up   hostile to the worker's channel: hostile_channel.h
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ropecheck/plugin.h"

#define CORRECT 0
#define SIN_SIGN 1
#define SEGFAULT 2
#define ABORT 3
#define HANG 4
#define OOB_WRITE 5
#define UNWRITTEN 6
#define MODIFY_IN 7
#define NAN_OUT 8
#define STDOUT 9
#define EXIT 10
#define NOOP 11
#define NAN_ZERO_PAIR 12
#define UNSUPPORTED_NEGATIVE 13
#define UNSUPPORTED_IN_PLACE 14
#define IN_PLACE_ALIAS 15

#ifndef PLUGIN_MODE
#define PLUGIN_MODE CORRECT
#endif
#ifndef PLUGIN_NAME
#define PLUGIN_NAME "c_rope"
#endif
#if PLUGIN_MODE >= 20
#include "hostile_channel.h"
#endif
#ifndef PLUGIN_SUPPORTS
#define PLUGIN_SUPPORTS NULL
#endif
/* Optional restriction knobs (the restricted NaN-zero-pair twin): PLUGIN_HEAD_DIMS=64,96,128 and
 * PLUGIN_MIN_POSITION / PLUGIN_MAX_POSITION (0, 0 = any int64 position). */
#ifdef PLUGIN_HEAD_DIMS
static const int64_t plugin_head_dims[] = {PLUGIN_HEAD_DIMS};
#define PLUGIN_HEAD_DIMS_PTR plugin_head_dims
#define PLUGIN_N_HEAD_DIMS ((int32_t)(sizeof plugin_head_dims / sizeof plugin_head_dims[0]))
#else
#define PLUGIN_HEAD_DIMS_PTR NULL
#define PLUGIN_N_HEAD_DIMS 0
#endif
#ifndef PLUGIN_MIN_POSITION
#define PLUGIN_MIN_POSITION 0
#endif
#ifndef PLUGIN_MAX_POSITION
#define PLUGIN_MAX_POSITION 0
#endif

static double load_elem(const void* p, int dtype, int64_t i) {
  return dtype == ROPECHECK_DTYPE_F64 ? ((const double*)p)[i] : (double)((const float*)p)[i];
}

/* v is the exact-arithmetic double result; the float cast is the one storage rounding. */
static void store_elem(void* p, int dtype, int64_t i, double v) {
  if (dtype == ROPECHECK_DTYPE_F64)
    ((double*)p)[i] = v;
  else
    ((float*)p)[i] = (float)v;
}

/* The hostile modes that misbehave before any arithmetic. Returns -1 to go on computing. */
static int misbehave_first(const ropecheck_tensor* t) {
  (void)t;
#if PLUGIN_MODE == SEGFAULT
  *(volatile int*)(t->reserved_ptr[0]) = 1; /* reserved_ptr[0] is NULL */
#elif PLUGIN_MODE == ABORT
  abort();
#elif PLUGIN_MODE == HANG
  for (volatile int spin = 1; spin;) {
  }
#elif PLUGIN_MODE == EXIT
  exit(3); /* deliberately: the host must report "exited (status 3)", not die with it */
#elif PLUGIN_MODE == NOOP
  return ROPECHECK_OK;
#elif PLUGIN_MODE == STDOUT
  printf("debug: rope apply n_tokens=%lld \x01\x02 garbage {\"not\": json\n",
         (long long)t->n_tokens);
  fflush(stdout);
#endif
  return -1;
}

/* The rotated pairs of the vector at element offset base_off, at position m. */
static void rotate_pairs(const ropecheck_spec* s, const ropecheck_tensor* t, double m,
                         int64_t base_off) {
  const int64_t rd = s->rotary_dim, half = rd / 2;
  const int dt = t->dtype;
#if PLUGIN_MODE == MODIFY_IN
  void* work = (void*)t->in; /* the bug: the input is used as scratch */
#else
  void* work = t->out;
#endif
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = s->layout == ROPECHECK_LAYOUT_INTERLEAVED ? 2 * i : i;
    const int64_t b = s->layout == ROPECHECK_LAYOUT_INTERLEAVED ? 2 * i + 1 : i + half;
    const double theta = pow(s->base, -2.0 * (double)i / (double)rd);
    const double ang = m * theta;
    const double c = cos(ang);
#if PLUGIN_MODE == SIN_SIGN
    const double sn = -sin(ang);
#else
    const double sn = sin(ang);
#endif
    const double xa = load_elem(t->in, dt, base_off + a);
    const double xb = load_elem(t->in, dt, base_off + b);
#if PLUGIN_MODE == NAN_ZERO_PAIR
    const double r = sqrt(xa * xa + xb * xb); /* 0/0 for a zero pair */
    double oa = s->scale * r * ((xa / r) * c - (xb / r) * sn);
    double ob = s->scale * r * ((xa / r) * sn + (xb / r) * c);
#else
    double oa = s->scale * (xa * c - xb * sn);
    double ob = s->scale * (xa * sn + xb * c);
#endif
#if PLUGIN_MODE == NAN_OUT
    if (i == 0 && fabs(m) > 1000) oa = ob = NAN;
#endif
    store_elem(work, dt, base_off + a, oa);
#if PLUGIN_MODE == IN_PLACE_ALIAS
    ob = s->scale * (load_elem(t->in, dt, base_off + a) * sn + xb * c); /* out == in: oa */
#endif
    store_elem(work, dt, base_off + b, ob);
  }
#if PLUGIN_MODE == MODIFY_IN
  for (int64_t j = 0; j < rd; ++j)
    store_elem(t->out, dt, base_off + j, load_elem(t->in, dt, base_off + j));
#endif
}

/* The dims past rotary_dim are copied unchanged. */
static void copy_pass_through(const ropecheck_spec* s, const ropecheck_tensor* t,
                              int64_t base_off) {
  const int64_t rd = s->rotary_dim, hd = s->head_dim;
  const int dt = t->dtype;
#if PLUGIN_MODE == OOB_WRITE
  for (int64_t j = rd; j <= hd; ++j)
#elif PLUGIN_MODE == UNWRITTEN
  if (t->in == t->out) /* the bug: assumes in-place, where pass-through is already there */
    for (int64_t j = rd; j < hd; ++j)
#else
  for (int64_t j = rd; j < hd; ++j)
#endif
    store_elem(t->out, dt, base_off + j, load_elem(t->in, dt, base_off + j));
}

static int c_apply(const ropecheck_spec* s, const ropecheck_tensor* t, void* user) {
  (void)user;
  /* This kernel implements unscaled 1-D interleaved/half RoPE only (its descriptor says so; the
   * check guards against a host that ignores the masks). */
  if (s->scaling.kind != ROPECHECK_SCALING_NONE || s->n_axes != 1 || t->n_axes != 1 ||
      (s->layout != ROPECHECK_LAYOUT_INTERLEAVED && s->layout != ROPECHECK_LAYOUT_HALF))
    return ROPECHECK_UNSUPPORTED;
  if (t->dtype != ROPECHECK_DTYPE_F64 && t->dtype != ROPECHECK_DTYPE_F32)
    return ROPECHECK_UNSUPPORTED;
#if PLUGIN_MODE >= 20
  ch_misbehave(s, t);
#endif
#if PLUGIN_MODE == UNSUPPORTED_NEGATIVE
  for (int64_t tok = 0; tok < t->n_tokens; ++tok)
    if (t->positions[tok] < 0) return ROPECHECK_UNSUPPORTED;
#elif PLUGIN_MODE == UNSUPPORTED_IN_PLACE
  if (t->in == t->out) return ROPECHECK_UNSUPPORTED;
#endif
  const int early = misbehave_first(t);
  if (early >= 0) return early;
  for (int64_t tok = 0; tok < t->n_tokens; ++tok) {
    const double m = (double)t->positions[tok];
    for (int64_t h = 0; h < t->n_heads; ++h) {
      const int64_t base_off = tok * t->token_stride + h * t->head_stride;
      rotate_pairs(s, t, m, base_off);
      copy_pass_through(s, t, base_off);
    }
  }
  return ROPECHECK_OK;
}

/* The backward (PLUGIN_BACKWARD; 0: none, the descriptor's apply_backward is NULL):
 *   1  correct: grad_x = s R(m)^T g, i.e. the forward's code at position -m (sin negated), and
 *      the pass-through gradient copied
 *   2  the forward run on the gradient (sin not negated): the "backward = forward" bug
 *   3  correct rotation, but 1.0 written into the pass-through gradient (Apex PR #1750)
 *   4  correct on a contiguous gradient; on a strided one (head_stride > head_dim: a separate
 *      path for non-contiguous gradients) the forward runs on it: a bug on one structural path,
 *      which only the directed backward differential calls with values checked */
#ifndef PLUGIN_BACKWARD
#define PLUGIN_BACKWARD 0
#endif
#if PLUGIN_BACKWARD
static int c_apply_backward(const ropecheck_spec* s, const ropecheck_tensor* t, void* user) {
  (void)user;
  if (s->scaling.kind != ROPECHECK_SCALING_NONE || s->n_axes != 1 || t->n_axes != 1 ||
      (s->layout != ROPECHECK_LAYOUT_INTERLEAVED && s->layout != ROPECHECK_LAYOUT_HALF) ||
      (t->dtype != ROPECHECK_DTYPE_F64 && t->dtype != ROPECHECK_DTYPE_F32))
    return ROPECHECK_UNSUPPORTED;
  for (int64_t tok = 0; tok < t->n_tokens; ++tok) {
    const double m = (double)t->positions[tok];
    for (int64_t h = 0; h < t->n_heads; ++h) {
      const int64_t base_off = tok * t->token_stride + h * t->head_stride;
      const int forward =
          PLUGIN_BACKWARD == 2 || (PLUGIN_BACKWARD == 4 && t->head_stride != s->head_dim);
      rotate_pairs(s, t, forward ? m : -m, base_off);
      copy_pass_through(s, t, base_off);
#if PLUGIN_BACKWARD == 3
      for (int64_t j = s->rotary_dim; j < s->head_dim; ++j)
        store_elem(t->out, t->dtype, base_off + j, 1.0);
#endif
    }
  }
  return ROPECHECK_OK;
}
#define PLUGIN_APPLY_BACKWARD c_apply_backward
#else
#define PLUGIN_APPLY_BACKWARD NULL
#endif

/* Test-only knobs: a plugin built for another ABI, and a shared object without the entry point.
 * PLUGIN_ABI=2u builds the ABI 2 descriptor of this kernel (same struct layout, the ABI 3 fields
 * left at 0 as an ABI 2 plugin had them): the loader must still accept it, with defaults. */
#ifndef PLUGIN_ABI
#define PLUGIN_ABI ROPECHECK_PLUGIN_ABI_VERSION
#endif
#ifndef PLUGIN_ENTRY
#define PLUGIN_ENTRY ropecheck_plugin_entry
#endif
/* PLUGIN_F32_RECIPE: the f32 policy's declared recipe (default POW_PRODUCT, what the code does);
 * a value past the ABI's last recipe must be refused at load time. */
#ifndef PLUGIN_F32_RECIPE
#define PLUGIN_F32_RECIPE ROPECHECK_RECIPE_POW_PRODUCT
#endif

/* ABI 3 flags: the kernel multiplies by spec->scale, and both layouts run the same code with other
 * indices (bit for bit symmetric). An ABI 2 descriptor had no such flags. */
#if PLUGIN_ABI >= 3
#define PLUGIN_FLAGS (ROPECHECK_FLAG_MAGNITUDE_SCALE | ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC)
#else
#define PLUGIN_FLAGS 0u
#endif

static const ropecheck_plugin descriptor = {
    PLUGIN_ABI,
    sizeof(ropecheck_plugin),
    PLUGIN_NAME,
    "C99 RoPE: f64 angle, cos/sin and rotation, one rounding into the storage dtype",
    ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F64) | ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32),
    ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_INTERLEAVED) |
        ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF),
    PLUGIN_HEAD_DIMS_PTR,
    PLUGIN_N_HEAD_DIMS,
    {
        /* {angle, table, arithmetic, recipe, fused, rounding, trig_error (0 = the default 2:
         * glibc's cos/sin are within 1 ulp)} */
        /* f64: everything in f64 */
        {ROPECHECK_DTYPE_F64, ROPECHECK_DTYPE_F64, ROPECHECK_DTYPE_F64,
         ROPECHECK_RECIPE_POW_PRODUCT, 0, 0, 0.0},
        /* f32: computed in f64, rounded once into f32 */
        {ROPECHECK_DTYPE_F64, ROPECHECK_DTYPE_F64, ROPECHECK_DTYPE_F64, PLUGIN_F32_RECIPE, 0, 0,
         0.0},
        {0, 0, 0, 0, 0, 0, 0.0},
        {0, 0, 0, 0, 0, 0, 0.0},
    },
    PLUGIN_SUPPORTS,
    c_apply,
    NULL,
    0, /* scalings: NONE only */
    PLUGIN_FLAGS,
    PLUGIN_MIN_POSITION, /* min_position, max_position: 0, 0 = any int64 position */
    PLUGIN_MAX_POSITION,
    PLUGIN_APPLY_BACKWARD,
    {NULL, NULL, NULL, NULL, NULL},
};

ROPECHECK_PLUGIN_EXPORT const ropecheck_plugin* PLUGIN_ENTRY(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &descriptor;
}
