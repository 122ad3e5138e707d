// A plugin around ropecheck's own built-in kernel or engine recipe (ROPECHECK_WRAPPED_KERNEL,
// default "scalar"; a name of builtin_kernels() or of engine_kernels()), statically linked into
// this shared object and exposed ONLY through ropecheck/plugin.h — the validator sees exactly what
// it would see from a third-party kernel: a descriptor, a declared policy copied from the built-in
// kernel (trig_error included), and an apply() receiving the full C spec (every scaling variant and
// layout, multi-axis and real positions).
//
// Map: the compile-time knobs below decide the DECLARED DOMAIN (what production kernels look like:
// a few head dims, int32 or non-negative positions, no magnitude scale, one layout) and, for the
// broken twins, one bug applied in the adapter around the correct kernel. Everything is a compile
// definition so that the plugin list stays a table (restricted_plugins.cmake); a new restriction is
// a knob in section 1 plus its check in host_broke_contract(), a new bug a knob in section 3 (and
// its line in kDescription).
//
// 1. Domain knobs (defaults: unrestricted, as builtin_scalar)
//   ROPECHECK_WRAP_NAME            descriptor name (default builtin_<kernel>)
//   ROPECHECK_WRAP_HEAD_DIMS       e.g. 64,128: the descriptor's head_dims list (default any)
//   ROPECHECK_WRAP_MIN_POSITION    declared position range, e.g. INT32_MIN / INT32_MAX or
//   ROPECHECK_WRAP_MAX_POSITION    0 / INT64_MAX (default any int64; with a range the kernel takes
//                                  integer positions only: no ROPECHECK_FLAG_REAL_POSITIONS)
//   ROPECHECK_WRAP_NO_SCALE        no ROPECHECK_FLAG_MAGNITUDE_SCALE (scale must be exactly 1)
//   ROPECHECK_WRAP_LAYOUTS         layout mask (default ROPECHECK_LAYOUT_BIT_ALL)
//   ROPECHECK_WRAP_SCALINGS        scaling mask (default ROPECHECK_SCALING_BIT_ALL)
//   ROPECHECK_WRAP_DTYPES          dtype mask (default ROPECHECK_DTYPE_BIT_ALL)
//   ROPECHECK_WRAP_PARTIAL_DIVISOR N  supports() accepts rotary_dim = head_dim and head_dim / N
//                                  only (a kernel with two paths: full, and gemma.cpp's half-rope
//                                  layers / ChatGLM at N = 2, GPT-NeoX's quarter at N = 4)
//   ROPECHECK_WRAP_PARTIAL_NUMERATOR K  with PARTIAL_DIVISOR N: rotary_dim = K head_dim / N
//                                  instead (3 and 4: three quarters, a ratio of no model list)
//   ROPECHECK_WRAP_PARTIAL_ROTARY_DIM R  supports() accepts rotary_dim = head_dim and R only
//                                  (R = 2: partial rotary of one pair only, a coverage gap)
//   ROPECHECK_WRAP_MIN_HEAD_DIM N  supports() accepts head_dim >= N only (a vector path that needs
//                                  a whole register of pairs)
//   ROPECHECK_WRAP_FULL_ROTARY_ONLY  supports() accepts rotary_dim = head_dim rounded down to
//                                  even only (an odd head_dim's last dim passes through)
//   ROPECHECK_WRAP_ODD_HEAD_DIM_MAX N  supports() accepts an odd head_dim only up to N (an odd
//                                  tail handled by a scalar path for tiny heads: a coverage gap)
//   ROPECHECK_WRAP_SCALING_HEAD_DIM N  supports() accepts a scaling kind other than none only at
//                                  head_dim N (a scaled template instantiated for one head dim)
//   ROPECHECK_WRAP_SCALE_HEAD_DIM N  supports() accepts scale != 1 only at head_dim N
// 2. apply() returns ROPECHECK_ERROR (and says why on stderr) for any call outside the declared
//    domain, so a host that breaks the ABI 3 contract is caught rather than silently served.
// 3. Bug knobs (broken twins; each a real bug class, the rest of the kernel correct):
//   ROPECHECK_WRAP_BUG_YARN_MSCALE           YaRN's attention factor 0.07 ln f + 1 instead of HF
//                                            get_mscale's 0.1 ln f + 1 (the 27 % mscale bug)
//   ROPECHECK_WRAP_BUG_SIN_SIGN              every position negated: rotation by -angle, i.e.
//                                            the sin sign flipped
//   ROPECHECK_WRAP_BUG_POSITION_OFF_BY_ONE   position + 1 (1-based positions)
//   ROPECHECK_WRAP_BUG_FIRST_POSITION_BROADCAST  token 0's position used for every token
//   ROPECHECK_WRAP_BUG_PASS_THROUGH_ZEROED   dims outside the rotated pairs zeroed, not copied
//   ROPECHECK_WRAP_BUG_LAST_PAIR_SKIPPED     the last rotated pair left as the input (a loop
//                                            bound one pair short)
//   ROPECHECK_WRAP_BUG_EXPONENT_OVER_HEAD_DIM  when rotary_dim < head_dim, inv_freq's exponent
//                                            taken over head_dim instead of rotary_dim
//                                            (base^(-2i/head_dim)): the partial path alone wrong
//                                            (with FULL_ROTARY_ONLY: the odd head_dim path alone)
//   ROPECHECK_WRAP_BUG_SCALE_SQUARED         the magnitude scale applied twice (folded into the
//                                            table and multiplied again): s^2 for s != 1
//   ROPECHECK_WRAP_BUG_MAGNITUDE_DROPPED     the whole magnitude s (scale x YaRN/LongRoPE
//                                            attention factor) ignored: cos/sin unscaled
//   ROPECHECK_WRAP_BUG_MAGNITUDE_SQUARED     s^2 for the whole magnitude (scale and attention
//                                            factor folded into the table and multiplied again)
//   Regime bugs: each wrong in one regime of one scaling kind only, right everywhere else.
//   ROPECHECK_WRAP_BUG_DYNAMIC_BELOW         dynamic NTK without max(seq_len, L0): below the
//                                            trained length f L/L0 - (f - 1) enters the power
//                                            as is, negative -> NaN (vLLM #52665)
//   ROPECHECK_WRAP_BUG_DYNAMIC_AT            dynamic NTK at seq_len == L0 built for L0 + 1
//                                            (the boundary counted as beyond it; synthetic)
//   ROPECHECK_WRAP_BUG_DYNAMIC_ABOVE         dynamic NTK's exponent dim/(dim-2) dropped: only
//                                            above L0 is the power's argument != 1
//   ROPECHECK_WRAP_BUG_LONGROPE_SHORT        LongRoPE long factors on the short side too
//   ROPECHECK_WRAP_BUG_LONGROPE_LONG         LongRoPE short factors on the long side too
//   ROPECHECK_WRAP_BUG_YARN_TRUNCATE_IGNORED YaRN's correction range always floored/ceiled
//                                            (truncate: false ignored)
//   ROPECHECK_WRAP_BUG_YARN_NEVER_TRUNCATE   YaRN's correction range never floored/ceiled
//   ROPECHECK_WRAP_BUG_YARN_NO_PAIR_FACTOR_DROPPED  YaRN without an mscale pair (and no explicit
//                                            factor) gets attention factor 1, not 0.1 ln f + 1
//                                            (mscale defaulted to 1 = mscale_all_dim)
//   ROPECHECK_WRAP_BUG_YARN_PAIR_IGNORED     YaRN's mscale / mscale_all_dim ignored: 0.1 ln f + 1
//   ROPECHECK_WRAP_BUG_YARN_EXPLICIT_FACTOR_IGNORED  YaRN's explicit attention_factor ignored
//   ROPECHECK_WRAP_BUG_LLAMA3_SMOOTH_INVERTED  llama3's middle band interpolates with smooth and
//                                            1 - smooth swapped (both outer bands right)
//   ROPECHECK_WRAP_BUG_LINEAR_FACTOR_BF16    linear scaling by 1/factor rounded to bf16 (exact
//                                            for a power-of-two factor only)
//   (A bf16 cos/sin table cannot be injected around a kernel that computes its own: not here.)
// 4. Declaration knob (the kernel correct, its declared policy understated):
//   ROPECHECK_WRAP_DECLARE_F32_ROTATION      every dtype's policy declares an f32 table and f32
//                                            arithmetic: what a recipe that rounds once into a
//                                            bf16/f16 output would declare, wrong for one that
//                                            rounds the table and every op into it (hf_eager,
//                                            vllm_native); validate must catch it
//   ROPECHECK_WRAP_DECLARE_RECIPE=r          every dtype's policy declares the angle recipe
//                                            ropecheck::AngleRecipe::r instead of the kernel's
//                                            (ggml_cpu's f32 ladder declared hf_f32: the ladder's
//                                            error grows with the pair index, which hf_f32's bound
//                                            does not allow); validate must catch it
//   ROPECHECK_WRAP_DECLARE_F64_ANGLE         every dtype's policy declares an f64 angle (recipe
//                                            pow_product) and exact libm trig: FlashInfer's f32
//                                            fast-math angle declared as if it were formed in f64;
//                                            validate must catch it at long positions
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <string>
#include <type_traits>
#include <vector>

#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/plugin.h"

#ifndef ROPECHECK_WRAPPED_KERNEL
#define ROPECHECK_WRAPPED_KERNEL "scalar"
#endif
#ifndef ROPECHECK_WRAP_LAYOUTS
#define ROPECHECK_WRAP_LAYOUTS ROPECHECK_LAYOUT_BIT_ALL
#endif
#ifndef ROPECHECK_WRAP_SCALINGS
#define ROPECHECK_WRAP_SCALINGS ROPECHECK_SCALING_BIT_ALL
#endif
#ifndef ROPECHECK_WRAP_DTYPES
#define ROPECHECK_WRAP_DTYPES ROPECHECK_DTYPE_BIT_ALL
#endif
#if defined(ROPECHECK_WRAP_MIN_POSITION) != defined(ROPECHECK_WRAP_MAX_POSITION)
#error "ROPECHECK_WRAP_MIN_POSITION and ROPECHECK_WRAP_MAX_POSITION go together"
#endif

namespace {

// ---- 1. the declared domain --------------------------------------------------------------------
constexpr std::uint32_t kDtypes = ROPECHECK_WRAP_DTYPES;
constexpr std::uint32_t kLayouts = ROPECHECK_WRAP_LAYOUTS;
constexpr std::uint32_t kScalings = ROPECHECK_WRAP_SCALINGS | ROPECHECK_SCALING_BIT(0);
#ifdef ROPECHECK_WRAP_HEAD_DIMS
constexpr std::int64_t kHeadDims[] = {ROPECHECK_WRAP_HEAD_DIMS};
constexpr int kNHeadDims = static_cast<int>(sizeof(kHeadDims) / sizeof(kHeadDims[0]));
#else
constexpr const std::int64_t* kHeadDims = nullptr;
constexpr int kNHeadDims = 0;
#endif
#ifdef ROPECHECK_WRAP_MIN_POSITION
constexpr std::int64_t kMinPosition = ROPECHECK_WRAP_MIN_POSITION;
constexpr std::int64_t kMaxPosition = ROPECHECK_WRAP_MAX_POSITION;
constexpr bool kRealPositions = false;  // a kernel with an integer position type
static_assert(kMinPosition <= kMaxPosition, "empty position range");
#else
constexpr std::int64_t kMinPosition = 0, kMaxPosition = 0;  // 0, 0 = any int64
constexpr bool kRealPositions = true;
#endif
#ifdef ROPECHECK_WRAP_NO_SCALE
constexpr bool kMagnitudeScale = false;
#else
constexpr bool kMagnitudeScale = true;
#endif
const ropecheck::Kernel* wrapped() {
  static const ropecheck::Kernel* k = [] {
    const ropecheck::Kernel* b = ropecheck::find_builtin_kernel(ROPECHECK_WRAPPED_KERNEL);
    return b ? b : ropecheck::find_engine_kernel(ROPECHECK_WRAPPED_KERNEL);
  }();
  return k;
}

// The policy the descriptor declares for dtype d: the kernel's own, or the understated one.
ropecheck::Policy declared_policy(const ropecheck::Kernel& k, ropecheck::Dtype d) {
  ropecheck::Policy p = k.policy(d);  // vllm_native's vllm_f32 too: ROPECHECK_RECIPE_VLLM_F32
#ifdef ROPECHECK_WRAP_DECLARE_F32_ROTATION
  p.table = p.arithmetic = ropecheck::Dtype::f32;
#endif
#ifdef ROPECHECK_WRAP_DECLARE_RECIPE
  p.recipe = ropecheck::AngleRecipe::ROPECHECK_WRAP_DECLARE_RECIPE;
#endif
#ifdef ROPECHECK_WRAP_DECLARE_F64_ANGLE
  p.angle = ropecheck::Dtype::f64;
  p.recipe = ropecheck::AngleRecipe::pow_product;
  p.trig_argument = ropecheck::TrigArgument::exact;
  p.trig_error = 2;
#endif
  return p;
}

const char* descriptor_name() {
#if defined(ROPECHECK_WRAP_NAME)
  return ROPECHECK_WRAP_NAME;
#elif defined(ROPECHECK_WRAP_BUG_YARN_MSCALE)
  return "broken_yarn_mscale_" ROPECHECK_WRAPPED_KERNEL;
#else
  return "builtin_" ROPECHECK_WRAPPED_KERNEL;
#endif
}

bool in_mask(std::uint32_t mask, std::int64_t v) { return v >= 0 && v < 32 && (mask >> v & 1u); }

bool head_dim_declared(std::int64_t hd) {
  for (int i = 0; i < kNHeadDims; ++i)
    if (kHeadDims[i] == hd) return true;
  return kNHeadDims == 0;
}

// rotary_dim as the knob ROPECHECK_WRAP_PARTIAL_DIVISOR restricts it (any when unset).
bool rotary_dim_declared([[maybe_unused]] std::int64_t hd, [[maybe_unused]] std::int64_t rd) {
#if defined(ROPECHECK_WRAP_PARTIAL_DIVISOR) && defined(ROPECHECK_WRAP_PARTIAL_NUMERATOR)
  return rd == hd ||
         rd * (ROPECHECK_WRAP_PARTIAL_DIVISOR) == hd * (ROPECHECK_WRAP_PARTIAL_NUMERATOR);
#elif defined(ROPECHECK_WRAP_PARTIAL_DIVISOR)
  return rd == hd || rd * (ROPECHECK_WRAP_PARTIAL_DIVISOR) == hd;
#elif defined(ROPECHECK_WRAP_PARTIAL_ROTARY_DIM)
  return rd == hd || rd == (ROPECHECK_WRAP_PARTIAL_ROTARY_DIM);
#else
  return true;
#endif
}

// The shape restrictions of section 1 beyond head dims and rotary dims (any when unset).
bool shape_accepted([[maybe_unused]] const ropecheck_spec* c) {
#if defined(ROPECHECK_WRAP_MIN_HEAD_DIM)
  if (c->head_dim < (ROPECHECK_WRAP_MIN_HEAD_DIM)) return false;
#endif
#if defined(ROPECHECK_WRAP_FULL_ROTARY_ONLY)
  if (c->rotary_dim != c->head_dim - c->head_dim % 2) return false;
#endif
#if defined(ROPECHECK_WRAP_ODD_HEAD_DIM_MAX)
  if (c->head_dim % 2 && c->head_dim > (ROPECHECK_WRAP_ODD_HEAD_DIM_MAX)) return false;
#endif
#if defined(ROPECHECK_WRAP_SCALING_HEAD_DIM)
  if (c->scaling.kind != ROPECHECK_SCALING_NONE && c->head_dim != (ROPECHECK_WRAP_SCALING_HEAD_DIM))
    return false;
#endif
#if defined(ROPECHECK_WRAP_SCALE_HEAD_DIM)
  if (c->scale != 1 && c->head_dim != (ROPECHECK_WRAP_SCALE_HEAD_DIM)) return false;
#endif
  return true;
}

bool position_declared(std::int64_t p) {
  return (kMinPosition == 0 && kMaxPosition == 0) || (p >= kMinPosition && p <= kMaxPosition);
}

// ---- the C spec -> RopeSpec (and the YaRN mscale bug, which lives in the variant) -------------
std::vector<double> array(const double* p, int64_t n) {
  return p && n > 0 ? std::vector<double>(p, p + n) : std::vector<double>{};
}

void inject_yarn_mscale_bug([[maybe_unused]] ropecheck::Scaling& sc) {
#ifdef ROPECHECK_WRAP_BUG_YARN_MSCALE
  if (sc.kind == ropecheck::ScalingKind::yarn && !sc.attention_factor) {
    const auto gm = [&](double k, double m) {
      return sc.factor <= 1 ? 1.0 : k * m * std::log(sc.factor) + 1;
    };
    sc.attention_factor = (sc.mscale != 0 && sc.mscale_all_dim != 0)
                              ? gm(0.07, sc.mscale) / gm(0.1, sc.mscale_all_dim)
                              : gm(0.07, 1.0);
  }
#endif
}

bool to_spec(const ropecheck_spec* c, ropecheck::RopeSpec& s) {
  if (c->layout < ROPECHECK_LAYOUT_INTERLEAVED || c->layout > ROPECHECK_LAYOUT_AXIAL) return false;
  const ropecheck_scaling& cs = c->scaling;
  if (cs.kind < ROPECHECK_SCALING_NONE || cs.kind > ROPECHECK_SCALING_LONGROPE) return false;
  s.head_dim = c->head_dim;
  s.rotary_dim = c->rotary_dim;
  s.base = c->base;
  s.scale = c->scale;
  s.layout = static_cast<ropecheck::Layout>(c->layout);
  if (c->sections && c->n_sections > 0) s.sections.assign(c->sections, c->sections + c->n_sections);
  ropecheck::Scaling& sc = s.scaling;
  sc.kind = static_cast<ropecheck::ScalingKind>(cs.kind);
  sc.factor = cs.factor;
  sc.original_max_position_embeddings = cs.original_max_position_embeddings;
  sc.max_position_embeddings = cs.max_position_embeddings;
  sc.seq_len = cs.seq_len;
  sc.beta_fast = cs.beta_fast;
  sc.beta_slow = cs.beta_slow;
  sc.truncate = cs.truncate != 0;
  sc.mscale = cs.mscale;
  sc.mscale_all_dim = cs.mscale_all_dim;
  if (cs.has_attention_factor) sc.attention_factor = cs.attention_factor;
  sc.low_freq_factor = cs.low_freq_factor;
  sc.high_freq_factor = cs.high_freq_factor;
  sc.short_factor = array(cs.short_factor, cs.n_short_factor);
  sc.long_factor = array(cs.long_factor, cs.n_long_factor);
  sc.freq_factors = array(cs.freq_factors, cs.n_freq_factors);
  inject_yarn_mscale_bug(sc);
  try {
    s = s.normalized();
  } catch (const ropecheck::SpecError&) {
    return false;
  }
  return c->n_axes == s.n_axes();
}

// ---- 2. the host's side of the contract ---------------------------------------------------------
// The first way the call leaves the declared domain, or "" when it stays inside.
std::string host_broke_contract(const ropecheck_spec* c, const ropecheck_tensor* t) {
  if (!in_mask(kDtypes, t->dtype)) return "dtype " + std::to_string(t->dtype) + " not declared";
  if (!in_mask(kLayouts, c->layout)) return "layout " + std::to_string(c->layout) + " not declared";
  if (!in_mask(kScalings, c->scaling.kind))
    return "scaling kind " + std::to_string(c->scaling.kind) + " not declared";
  if (!head_dim_declared(c->head_dim))
    return "head_dim " + std::to_string(c->head_dim) + " not declared";
  if (!rotary_dim_declared(c->head_dim, c->rotary_dim))
    return "rotary_dim " + std::to_string(c->rotary_dim) + " not accepted by supports()";
  if (!shape_accepted(c))
    return "a shape supports() does not accept (head_dim, rotary_dim, scaling)";
  if (!kMagnitudeScale && c->scale != 1)
    return "scale " + std::to_string(c->scale) + " without ROPECHECK_FLAG_MAGNITUDE_SCALE";
  if (t->real_positions && !kRealPositions)
    return "real positions without ROPECHECK_FLAG_REAL_POSITIONS";
  const std::int64_t n = t->n_tokens * t->n_axes;
  for (std::int64_t i = 0; t->positions && i < n; ++i)
    if (!position_declared(t->positions[i]))
      return "position " + std::to_string(t->positions[i]) + " outside the declared range";
  return {};
}

// ---- 3. the bugs of the broken twins, applied around the correct kernel -----------------------
// Positions as the buggy kernel sees them (int64 arithmetic wraps like the kernel's would).
template <class P>
void adapt_positions([[maybe_unused]] std::vector<P>& p, [[maybe_unused]] std::int64_t n_axes) {
  for ([[maybe_unused]] P& v : p) {
#if defined(ROPECHECK_WRAP_BUG_SIN_SIGN)
    if constexpr (std::is_integral_v<P>)
      v = static_cast<P>(0u - static_cast<std::uint64_t>(v));
    else
      v = -v;
#elif defined(ROPECHECK_WRAP_BUG_POSITION_OFF_BY_ONE)
    if constexpr (std::is_integral_v<P>)
      v = static_cast<P>(static_cast<std::uint64_t>(v) + 1u);
    else
      v = v + 1;
#endif
  }
#ifdef ROPECHECK_WRAP_BUG_FIRST_POSITION_BROADCAST
  for (std::size_t i = static_cast<std::size_t>(n_axes); i < p.size(); ++i)
    p[i] = p[i % static_cast<std::size_t>(n_axes)];
#endif
}

std::size_t elem_size(std::int32_t dtype) {
  return dtype == ROPECHECK_DTYPE_F64 ? 8 : dtype == ROPECHECK_DTYPE_F32 ? 4 : 2;
}

// What a bug rewrites after the call: element indices inside a vector and, for a skipped pair,
// their input bytes of every vector saved before the call (in-place calls overwrite them).
struct Elements {
  std::vector<std::int64_t> dims;  // element indices inside a vector
  std::vector<unsigned char> saved;
};

template <class F>
void for_each_element(const ropecheck_tensor* t, const std::vector<std::int64_t>& dims, F f) {
  for (std::int64_t tok = 0; tok < t->n_tokens; ++tok)
    for (std::int64_t h = 0; h < t->n_heads; ++h)
      for (std::int64_t j : dims) f(tok * t->token_stride + h * t->head_stride + j);
}

// Dims the bug rewrites after the call: the pass-through dims, or the last pair's two elements.
Elements bug_dims([[maybe_unused]] const ropecheck::RopeSpec& s) {
  Elements e;
#if defined(ROPECHECK_WRAP_BUG_PASS_THROUGH_ZEROED)
  for (std::int64_t j = 0; j < s.head_dim; ++j)
    if (s.is_passthrough(j)) e.dims.push_back(j);
#elif defined(ROPECHECK_WRAP_BUG_LAST_PAIR_SKIPPED)
  if (s.n_pairs() > 0) {
    const auto [a, b] = s.pair(s.n_pairs() - 1);
    e.dims = {a, b};
  }
#endif
  return e;
}

// Before the call (in may be out): keep the input of the skipped pair.
void save_inputs(const ropecheck_tensor* t, Elements& e) {
#ifdef ROPECHECK_WRAP_BUG_LAST_PAIR_SKIPPED
  const std::size_t es = elem_size(t->dtype);
  const auto* in = static_cast<const unsigned char*>(t->in);
  for_each_element(t, e.dims, [&](std::int64_t k) {
    e.saved.insert(e.saved.end(), in + k * es, in + (k + 1) * es);
  });
#else
  (void)t, (void)e;
#endif
}

// After the call: zeros (pass-through zeroed) or the saved inputs (last pair skipped).
void rewrite_outputs(const ropecheck_tensor* t, const Elements& e) {
  const std::size_t es = elem_size(t->dtype);
  auto* out = static_cast<unsigned char*>(t->out);
  std::size_t next = 0;
  for_each_element(t, e.dims, [&](std::int64_t k) {
    if (e.saved.empty())
      std::memset(out + k * es, 0, es);  // +0 in every dtype
    else
      std::memcpy(out + k * es, e.saved.data() + es * next++, es);
  });
}

// A NaN cos/sin table: every rotated element NaN (the quiet NaN of the dtype).
void write_nan(const ropecheck_tensor* t, const ropecheck::RopeSpec& s) {
  const std::size_t es = elem_size(t->dtype);
  std::vector<std::int64_t> dims;
  for (std::int64_t j = 0; j < s.head_dim; ++j)
    if (!s.is_passthrough(j)) dims.push_back(j);
  const std::uint64_t nan = t->dtype == ROPECHECK_DTYPE_F64   ? 0x7ff8000000000000ull
                            : t->dtype == ROPECHECK_DTYPE_F32 ? 0x7fc00000u
                            : t->dtype == ROPECHECK_DTYPE_F16 ? 0x7e00u
                                                              : 0x7fc0u;
  auto* out = static_cast<unsigned char*>(t->out);
  for_each_element(t, dims, [&](std::int64_t k) { std::memcpy(out + k * es, &nan, es); });
}

// ---- the C entry points ---------------------------------------------------------------------
int supports(const ropecheck_spec* c, int32_t dtype, void*) {
  ropecheck::RopeSpec s;
  if (!wrapped() || !in_mask(kDtypes, dtype) || !in_mask(kLayouts, c->layout) ||
      !in_mask(kScalings, c->scaling.kind) || !head_dim_declared(c->head_dim) ||
      !rotary_dim_declared(c->head_dim, c->rotary_dim) || !shape_accepted(c) || !to_spec(c, s))
    return 0;
  return wrapped()->supports(s, static_cast<ropecheck::Dtype>(dtype)) ? 1 : 0;
}

// The magnitude bugs: s = scale x attention factor dropped or squared (YaRN and LongRoPE carry an
// attention factor; an explicit one replaces the derived one in the kernel's spec).
void adapt_magnitude([[maybe_unused]] ropecheck::RopeSpec& s) {
#if defined(ROPECHECK_WRAP_BUG_MAGNITUDE_DROPPED) || defined(ROPECHECK_WRAP_BUG_MAGNITUDE_SQUARED)
  ropecheck::Scaling& sc = s.scaling;
  const bool af =
      sc.kind == ropecheck::ScalingKind::yarn || sc.kind == ropecheck::ScalingKind::longrope;
  const double f = ropecheck::attention_factor_f64(sc, s.ladder_dim());
#if defined(ROPECHECK_WRAP_BUG_MAGNITUDE_DROPPED)
  s.scale = 1;
  if (af) sc.attention_factor = 1.0;
#else
  s.scale *= s.scale;
  if (af) sc.attention_factor = f * f;
#endif
#endif
}

// The dynamic NTK base vLLM #52665 computes: the formula with seq_len as given (L < L0 too). NaN
// when f L/L0 - (f - 1) < 0 (a negative number to the fractional power dim/(dim-2)).
[[maybe_unused]] double dynamic_base_unclamped(const ropecheck::RopeSpec& s) {
  const ropecheck::Scaling& sc = s.scaling;
  const double L0 = static_cast<double>(sc.max_position_embeddings);
  const double L = sc.seq_len > 0 ? static_cast<double>(sc.seq_len) : L0;
  const double d = static_cast<double>(s.ladder_dim());
  return s.base * std::pow(sc.factor * L / L0 - (sc.factor - 1), d / (d - 2));
}

// The regime bugs: the variant the buggy kernel computes, as a spec of the correct kernel (a
// changed parameter, or a base / per-pair factors computed the buggy way). Every regime the bug
// does not touch keeps the spec as it was, so those stay bit for bit the correct kernel's.
// nan_out: the buggy kernel's table is NaN (the caller writes NaN into every rotated element).
void adapt_regime([[maybe_unused]] ropecheck::RopeSpec& s,
                  [[maybe_unused]] bool* nan_out = nullptr) {
  using ropecheck::ScalingKind;
  [[maybe_unused]] ropecheck::Scaling& sc = s.scaling;
#if defined(ROPECHECK_WRAP_BUG_DYNAMIC_BELOW)
  if (sc.kind == ScalingKind::dynamic && sc.seq_len > 0 &&
      sc.seq_len < sc.max_position_embeddings) {
    const double b = dynamic_base_unclamped(s);
    if (!(b > 1) || !std::isfinite(b)) {
      if (nan_out) *nan_out = true;
      return;
    }
    sc = {};
    s.base = b;
  }
#elif defined(ROPECHECK_WRAP_BUG_DYNAMIC_AT)
  if (sc.kind == ScalingKind::dynamic && sc.seq_len == sc.max_position_embeddings)
    sc.seq_len = sc.max_position_embeddings + 1;
#elif defined(ROPECHECK_WRAP_BUG_DYNAMIC_ABOVE)
  if (sc.kind == ScalingKind::dynamic && sc.seq_len > sc.max_position_embeddings) {
    const double L0 = static_cast<double>(sc.max_position_embeddings);
    s.base *= sc.factor * static_cast<double>(sc.seq_len) / L0 - (sc.factor - 1);
    sc = {};
  }
#elif defined(ROPECHECK_WRAP_BUG_LONGROPE_SHORT)
  if (sc.kind == ScalingKind::longrope && sc.seq_len <= sc.original_max_position_embeddings)
    sc.short_factor = sc.long_factor;
#elif defined(ROPECHECK_WRAP_BUG_LONGROPE_LONG)
  if (sc.kind == ScalingKind::longrope && sc.seq_len > sc.original_max_position_embeddings)
    sc.long_factor = sc.short_factor;
#elif defined(ROPECHECK_WRAP_BUG_YARN_TRUNCATE_IGNORED)
  if (sc.kind == ScalingKind::yarn) sc.truncate = true;
#elif defined(ROPECHECK_WRAP_BUG_YARN_NEVER_TRUNCATE)
  if (sc.kind == ScalingKind::yarn) sc.truncate = false;
#elif defined(ROPECHECK_WRAP_BUG_YARN_NO_PAIR_FACTOR_DROPPED)
  if (sc.kind == ScalingKind::yarn && !sc.attention_factor &&
      !(sc.mscale != 0 && sc.mscale_all_dim != 0))
    sc.attention_factor = 1.0;
#elif defined(ROPECHECK_WRAP_BUG_YARN_PAIR_IGNORED)
  if (sc.kind == ScalingKind::yarn && !sc.attention_factor) sc.mscale = sc.mscale_all_dim = 0;
#elif defined(ROPECHECK_WRAP_BUG_YARN_EXPLICIT_FACTOR_IGNORED)
  if (sc.kind == ScalingKind::yarn) sc.attention_factor.reset();
#elif defined(ROPECHECK_WRAP_BUG_LLAMA3_SMOOTH_INVERTED)
  if (sc.kind == ScalingKind::llama3) {
    // theta' = theta / ff (freq_factors): ff = 1 and f in the outer bands (theta / 1 and
    // theta / f, as llama3 computes them), the middle band's ff with smooth -> 1 - smooth.
    std::vector<double> ff = ropecheck::llama3_freq_factors_f64(s);
    const double orig = static_cast<double>(sc.original_max_position_embeddings);
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      double& v = ff[static_cast<std::size_t>(i)];
      if (v == 1.0 || v == sc.factor) continue;
      const auto [j, dim] = s.ladder(i);
      const double freq =
          std::pow(s.base, -2.0 * static_cast<double>(j) / static_cast<double>(dim));
      const double smooth = (orig * freq / (2 * std::numbers::pi) - sc.low_freq_factor) /
                            (sc.high_freq_factor - sc.low_freq_factor);
      v = 1 / (smooth / sc.factor + (1 - smooth));
    }
    sc = {};
    sc.kind = ScalingKind::freq_factors;
    sc.freq_factors = ff;
  }
#elif defined(ROPECHECK_WRAP_BUG_LINEAR_FACTOR_BF16)
  if (sc.kind == ScalingKind::linear)
    sc.factor = 1.0 / ropecheck::round_to_dtype(1.0 / sc.factor, ropecheck::Dtype::bf16);
#endif
}

// The spec as the buggy kernel uses it: base^(-2i/head_dim) = (base^(rotary_dim/head_dim))^(-2i/
// rotary_dim), so the exponent bug is the correct kernel called with that base.
ropecheck::RopeSpec adapt_spec(ropecheck::RopeSpec s, bool& nan_out) {
#ifdef ROPECHECK_WRAP_BUG_EXPONENT_OVER_HEAD_DIM
  if (s.rotary_dim < s.head_dim)
    s.base = std::pow(s.base, static_cast<double>(s.rotary_dim) / static_cast<double>(s.head_dim));
#endif
#ifdef ROPECHECK_WRAP_BUG_SCALE_SQUARED
  s.scale *= s.scale;
#endif
  adapt_magnitude(s);
  adapt_regime(s, &nan_out);
  return s;
}

ropecheck::KernelStatus call_wrapped(const ropecheck::RopeSpec& s, const ropecheck_tensor* t) {
  ropecheck::TensorArgs a;
  a.dtype = static_cast<ropecheck::Dtype>(t->dtype);
  a.n_tokens = t->n_tokens;
  a.n_heads = t->n_heads;
  a.token_stride = t->token_stride;
  a.head_stride = t->head_stride;
  a.n_axes = t->n_axes;
  a.in = t->in;
  a.out = t->out;
  const std::size_t n = static_cast<std::size_t>(t->n_tokens * t->n_axes);
  std::vector<std::int64_t> pos;
  std::vector<double> real;
  if (t->positions) pos.assign(t->positions, t->positions + n);
  if (t->real_positions) real.assign(t->real_positions, t->real_positions + n);
  adapt_positions(pos, t->n_axes);
  adapt_positions(real, t->n_axes);
  a.positions = t->positions ? pos.data() : nullptr;
  a.real_positions = t->real_positions ? real.data() : nullptr;
  Elements e = bug_dims(s);
  save_inputs(t, e);
  bool nan_table = false;
  const ropecheck::RopeSpec buggy = adapt_spec(s, nan_table);
  const ropecheck::KernelStatus st = wrapped()->apply(buggy, a);
  if (st == ropecheck::KernelStatus::ok && !e.dims.empty()) rewrite_outputs(t, e);
  if (st == ropecheck::KernelStatus::ok && nan_table) write_nan(t, s);
  return st;
}

int apply(const ropecheck_spec* c, const ropecheck_tensor* t, void*) {
  try {
    const std::string broken = host_broke_contract(c, t);
    if (!broken.empty()) {
      std::fprintf(stderr, "%s: call outside the declared domain: %s\n", descriptor_name(),
                   broken.c_str());
      return ROPECHECK_ERROR;
    }
    ropecheck::RopeSpec s;
    if (!wrapped() || !to_spec(c, s)) return ROPECHECK_UNSUPPORTED;
    switch (call_wrapped(s, t)) {
      case ropecheck::KernelStatus::ok:
        return ROPECHECK_OK;
      case ropecheck::KernelStatus::unsupported:
        return ROPECHECK_UNSUPPORTED;
      case ropecheck::KernelStatus::error:
        return ROPECHECK_ERROR;
    }
  } catch (...) {  // no C++ exception may cross the C boundary
  }
  return ROPECHECK_ERROR;
}

// The declared domain is printed by validate itself; the description names the bug, if any.
constexpr const char* kDescription =
    "ropecheck's built-in '" ROPECHECK_WRAPPED_KERNEL
    "' kernel, linked statically and exposed through the plugin ABI only"
#ifdef ROPECHECK_WRAP_DECLARE_F32_ROTATION
    "; DECLARED (understated): f32 table and f32 arithmetic"
#endif
#ifdef ROPECHECK_WRAP_DECLARE_RECIPE
    "; DECLARED (wrong): another angle recipe than the kernel's"
#endif
#ifdef ROPECHECK_WRAP_DECLARE_F64_ANGLE
    "; DECLARED (wrong): an f64 angle and exact trig"
#endif
#if defined(ROPECHECK_WRAP_BUG_YARN_MSCALE)
    "; BUG: YaRN attention factor 0.07 ln f + 1"
#elif defined(ROPECHECK_WRAP_BUG_SIN_SIGN)
    "; BUG: sin sign flipped (positions negated)"
#elif defined(ROPECHECK_WRAP_BUG_POSITION_OFF_BY_ONE)
    "; BUG: position + 1"
#elif defined(ROPECHECK_WRAP_BUG_FIRST_POSITION_BROADCAST)
    "; BUG: token 0's position used for every token"
#elif defined(ROPECHECK_WRAP_BUG_PASS_THROUGH_ZEROED)
    "; BUG: pass-through dims zeroed"
#elif defined(ROPECHECK_WRAP_BUG_LAST_PAIR_SKIPPED)
    "; BUG: last rotated pair not rotated"
#elif defined(ROPECHECK_WRAP_BUG_EXPONENT_OVER_HEAD_DIM)
    "; BUG: partial rotary's inv_freq exponent over head_dim"
#elif defined(ROPECHECK_WRAP_BUG_SCALE_SQUARED)
    "; BUG: magnitude scale applied twice"
#elif defined(ROPECHECK_WRAP_BUG_MAGNITUDE_DROPPED)
    "; BUG: magnitude (scale x attention factor) dropped"
#elif defined(ROPECHECK_WRAP_BUG_MAGNITUDE_SQUARED)
    "; BUG: magnitude (scale x attention factor) squared"
#elif defined(ROPECHECK_WRAP_BUG_DYNAMIC_BELOW)
    "; BUG: dynamic NTK below the trained length without max(seq_len, L0) (vLLM #52665)"
#elif defined(ROPECHECK_WRAP_BUG_DYNAMIC_AT)
    "; BUG: dynamic NTK at the trained length built for one more"
#elif defined(ROPECHECK_WRAP_BUG_DYNAMIC_ABOVE)
    "; BUG: dynamic NTK exponent dim/(dim-2) dropped"
#elif defined(ROPECHECK_WRAP_BUG_LONGROPE_SHORT)
    "; BUG: LongRoPE long factors on the short side"
#elif defined(ROPECHECK_WRAP_BUG_LONGROPE_LONG)
    "; BUG: LongRoPE short factors on the long side"
#elif defined(ROPECHECK_WRAP_BUG_YARN_TRUNCATE_IGNORED)
    "; BUG: YaRN truncate false ignored"
#elif defined(ROPECHECK_WRAP_BUG_YARN_NEVER_TRUNCATE)
    "; BUG: YaRN never truncates"
#elif defined(ROPECHECK_WRAP_BUG_YARN_NO_PAIR_FACTOR_DROPPED)
    "; BUG: YaRN without mscale pair gets attention factor 1"
#elif defined(ROPECHECK_WRAP_BUG_YARN_PAIR_IGNORED)
    "; BUG: YaRN mscale pair ignored"
#elif defined(ROPECHECK_WRAP_BUG_YARN_EXPLICIT_FACTOR_IGNORED)
    "; BUG: YaRN explicit attention_factor ignored"
#elif defined(ROPECHECK_WRAP_BUG_LLAMA3_SMOOTH_INVERTED)
    "; BUG: llama3 middle band smooth inverted"
#elif defined(ROPECHECK_WRAP_BUG_LINEAR_FACTOR_BF16)
    "; BUG: linear 1/factor rounded to bf16"
#endif
    ;

ropecheck_plugin make_descriptor() {
  ropecheck_plugin d{};
  d.abi_version = ROPECHECK_PLUGIN_ABI_VERSION;
  d.struct_size = sizeof(ropecheck_plugin);
  d.name = descriptor_name();
  d.description = kDescription;
  d.layouts = kLayouts;
  d.scalings = kScalings;
  d.head_dims = kHeadDims;
  d.n_head_dims = kNHeadDims;
  d.min_position = kMinPosition;
  d.max_position = kMaxPosition;
  // The wrapped kernel's own claims, as its Domain states them: the built-in kernels and most
  // engines run one code path per pair for every layout (bitwise symmetric), onnxruntime_cpu's
  // interleaved tail rounds otherwise (not symmetric: compared within the bound).
  const ropecheck::Kernel* k = wrapped();
  const ropecheck::Domain dom = k ? k->domain() : ropecheck::Domain{};
  d.flags = (dom.layouts_bitwise_symmetric ? ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC : 0u) |
            (dom.batch_invariant ? 0u : ROPECHECK_FLAG_BATCH_VARIANT) |
            (dom.in_place ? 0u : ROPECHECK_FLAG_NO_IN_PLACE) |
            (kRealPositions ? ROPECHECK_FLAG_REAL_POSITIONS : 0u) |
            (kMagnitudeScale ? ROPECHECK_FLAG_MAGNITUDE_SCALE : 0u);
  for (int i = 0; k && i < ROPECHECK_DTYPE_COUNT; ++i) {
    if (!in_mask(kDtypes, i)) continue;
    d.dtypes |= ROPECHECK_DTYPE_BIT(i);
    const ropecheck::Policy p = declared_policy(*k, static_cast<ropecheck::Dtype>(i));
    d.policies[i].angle = static_cast<int32_t>(p.angle);
    d.policies[i].table = static_cast<int32_t>(p.table);
    d.policies[i].arithmetic = static_cast<int32_t>(p.arithmetic);
    d.policies[i].recipe = static_cast<int32_t>(p.recipe);
    d.policies[i].fused = p.fused ? 1 : 0;
    d.policies[i].trig_error = p.trig_error;
    d.policies[i].rounding =
        (p.table_rounding == ropecheck::Rounding::toward_zero ? ROPECHECK_ROUNDING_TABLE_TOWARD_ZERO
                                                              : 0) |
        (p.output_rounding == ropecheck::Rounding::toward_zero
             ? ROPECHECK_ROUNDING_OUTPUT_TOWARD_ZERO
             : 0) |
        (p.trig_argument == ropecheck::TrigArgument::turns_f32
             ? ROPECHECK_ROUNDING_TRIG_ARGUMENT_TURNS_F32
             : 0);
  }
  d.supports = supports;
  d.apply = apply;
  return d;
}

}  // namespace

extern "C" ROPECHECK_PLUGIN_EXPORT const ropecheck_plugin* ropecheck_plugin_entry(
    uint32_t host_abi_version) {
  (void)host_abi_version;
  static const ropecheck_plugin d = make_descriptor();
  if (!wrapped()) return nullptr;
  return &d;
}
