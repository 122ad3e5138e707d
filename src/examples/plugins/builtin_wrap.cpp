// A correct plugin: ropecheck's own built-in kernel (ROPECHECK_WRAPPED_KERNEL, default "scalar"),
// statically linked into this shared object and exposed ONLY through ropecheck/plugin.h — the
// validator sees exactly what it would see from a third-party kernel: a descriptor, a declared
// policy copied from the built-in kernel, and an apply() receiving the full C spec (ABI 2: every
// scaling variant and layout, multi-axis and real positions).
//
// ROPECHECK_WRAP_BUG_YARN_MSCALE builds a deliberately broken variant: YaRN's derived attention
// factor uses 0.07 ln f + 1 instead of HF get_mscale's 0.1 ln f + 1 (the 27 % mscale bug), passed
// to the wrapped kernel as an explicit attention factor. Everything else is correct.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ropecheck/kernel.hpp"
#include "ropecheck/plugin.h"

#ifndef ROPECHECK_WRAPPED_KERNEL
#define ROPECHECK_WRAPPED_KERNEL "scalar"
#endif

namespace {

const ropecheck::Kernel* wrapped() {
  static const ropecheck::Kernel* k = ropecheck::find_builtin_kernel(ROPECHECK_WRAPPED_KERNEL);
  return k;
}

std::vector<double> array(const double* p, int64_t n) {
  return p && n > 0 ? std::vector<double>(p, p + n) : std::vector<double>{};
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
  try {
    s = s.normalized();
  } catch (const ropecheck::SpecError&) {
    return false;
  }
  return c->n_axes == s.n_axes();
}

int supports(const ropecheck_spec* c, int32_t dtype, void*) {
  ropecheck::RopeSpec s;
  if (!wrapped() || dtype < 0 || dtype >= ROPECHECK_DTYPE_COUNT || !to_spec(c, s)) return 0;
  return wrapped()->supports(s, static_cast<ropecheck::Dtype>(dtype)) ? 1 : 0;
}

int apply(const ropecheck_spec* c, const ropecheck_tensor* t, void*) {
  ropecheck::RopeSpec s;
  if (!wrapped() || t->dtype < 0 || t->dtype >= ROPECHECK_DTYPE_COUNT || !to_spec(c, s))
    return ROPECHECK_UNSUPPORTED;
  ropecheck::TensorArgs a;
  a.dtype = static_cast<ropecheck::Dtype>(t->dtype);
  a.n_tokens = t->n_tokens;
  a.n_heads = t->n_heads;
  a.token_stride = t->token_stride;
  a.head_stride = t->head_stride;
  a.positions = t->positions;
  a.n_axes = t->n_axes;
  a.real_positions = t->real_positions;
  a.in = t->in;
  a.out = t->out;
  try {
    switch (wrapped()->apply(s, a)) {
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

ropecheck_plugin make_descriptor() {
  ropecheck_plugin d{};
  d.abi_version = ROPECHECK_PLUGIN_ABI_VERSION;
  d.struct_size = sizeof(ropecheck_plugin);
#ifdef ROPECHECK_WRAP_BUG_YARN_MSCALE
  d.name = "broken_yarn_mscale_" ROPECHECK_WRAPPED_KERNEL;
#else
  d.name = "builtin_" ROPECHECK_WRAPPED_KERNEL;
#endif
  d.description = "ropecheck's built-in '" ROPECHECK_WRAPPED_KERNEL
                  "' kernel, linked statically and exposed through the plugin ABI only";
  d.layouts = ROPECHECK_LAYOUT_BIT_ALL;
  d.scalings = ROPECHECK_SCALING_BIT_ALL;
  d.flags = ROPECHECK_FLAG_REAL_POSITIONS;
  const ropecheck::Kernel* k = wrapped();
  for (int i = 0; k && i < ROPECHECK_DTYPE_COUNT; ++i) {
    d.dtypes |= ROPECHECK_DTYPE_BIT(i);
    const ropecheck::Policy p = k->policy(static_cast<ropecheck::Dtype>(i));
    d.policies[i].angle = static_cast<int32_t>(p.angle);
    d.policies[i].table = static_cast<int32_t>(p.table);
    d.policies[i].arithmetic = static_cast<int32_t>(p.arithmetic);
    d.policies[i].recipe = static_cast<int32_t>(p.recipe);
    d.policies[i].fused = p.fused ? 1 : 0;
  }
  d.supports = supports;
  d.apply = apply;
  return d;
}

}  // namespace

extern "C" ROPECHECK_PLUGIN_EXPORT const ropecheck_plugin* ropecheck_plugin_entry(
    uint32_t host_abi_version) {
  static const ropecheck_plugin d = make_descriptor();
  if (!wrapped()) return nullptr;
  return &d;
}
