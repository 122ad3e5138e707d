// A correct plugin: ropecheck's own built-in kernel (ROPECHECK_WRAPPED_KERNEL, default "scalar"),
// statically linked into this shared object and exposed ONLY through ropecheck/plugin.h — the
// validator sees exactly what it would see from a third-party kernel: a descriptor, a declared
// policy copied from the built-in kernel, and an apply() receiving the full C spec.
#include <cstdint>
#include <string>

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

bool to_spec(const ropecheck_spec* c, ropecheck::RopeSpec& s) {
  if (c->scaling_kind != ROPECHECK_SCALING_NONE || c->n_axes != 1) return false;
  if (c->layout != ROPECHECK_LAYOUT_INTERLEAVED && c->layout != ROPECHECK_LAYOUT_HALF) return false;
  s.head_dim = c->head_dim;
  s.rotary_dim = c->rotary_dim;
  s.base = c->base;
  s.scale = c->scale;
  s.layout = static_cast<ropecheck::Layout>(c->layout);
  try {
    s = s.normalized();
  } catch (const ropecheck::SpecError&) {
    return false;
  }
  return true;
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
  d.name = "builtin_" ROPECHECK_WRAPPED_KERNEL;
  d.description = "ropecheck's built-in '" ROPECHECK_WRAPPED_KERNEL
                  "' kernel, linked statically and exposed through the plugin ABI only";
  d.layouts = ROPECHECK_LAYOUT_BIT_ALL;
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
