// ropecheck::kernels: the built-in kernels and their registry. Core only (spec, dtype, policy,
// Kernel interface); tolerances and the exact reference live above and never in here.
//
// Map of this module:
//   registry.cpp, include/ropecheck/kernels/registry.hpp
//                       builtin_kernels() in registry order (the order of every listing and report)
//   common.hpp          BuiltinKernel (supports(), argument checks, checked_apply), dtype dispatch,
//                       one rounding into storage, the pass-through copy, positions
//   scalar.cpp          `scalar`: everything in f64, libm cos/sin; every variant, layout, axis
//   table_f32.cpp       `table_f32`: the HF/vLLM f32 recipe; unscaled interleaved/half only
//   complex.cpp         `complex`: std::complex multiply by polar(s, angle); interleaved/half only
//   simd/               `simd`: f64 angle, own vectorized sin/cos into a table, FMA rotation,
//                       run-time dispatch over per-ISA bodies (map in simd/target.hpp):
//     kernel.cpp          the Kernel, its policy, the token loop, streaming/prefetch choices
//     table.hpp/.cpp      the per-token cos/sin table (angle addition for f32 tables)
//     trig.hpp/.cpp       the sin/cos contracts (max error, valid range, derivation)
//     cpu.cpp             CPU detection, ROPECHECK_SIMD, simd_info.hpp
//     convert.hpp         scalar loads/stores, the rotation formula (portable path, vector tails)
//     isa.hpp             target regions; the rules that keep one ISA's code out of another path
//     body_<path>.cpp     portable, avx2, avx512, avx512bf16; *-inl.hpp: code each body compiles
//   engines/            the engine atlas: one file per production engine's recipe (engine.hpp: the
//                       base class and per-operation rounding helpers); engine_kernels() below
//   tests/kernels_test.cpp
//                       per (kernel, dtype): golden values, exact identities, reference within
//                       bound; simd paths bit for bit; the trig contracts against long double
//
// Adding a kernel: one file <name>.cpp with a BuiltinKernel subclass (name, description, an honest
// policy(d): the bounds, properties and reports judge it by that declaration alone; apply() through
// checked_apply) and a `const Kernel& <name>_kernel()`; one line below (declaration and list
// entry) and the expected order in kernels_test's Registry.OrderNamesAndPolicies. The unit tests,
// properties and reports pick it up from the registry.
// Adding a layout (after spec, reference and bounds know it): the pass-through ranges in
// common.hpp (copy_tail); BuiltinKernel::supports if the basic kernels should run it; for `simd`,
// half_style/half_offset in simd/kernel.cpp, and a head function in every simd/body_*.cpp if its
// pairs are neither (2i, 2i+1) nor (i, i + off). scalar and complex pair through spec.pair().
// Adding a dtype (after dtype.hpp): dispatch_dtype, store_from_double/load_as_double and supports()
// in common.hpp, store_f32 in table_f32.cpp; for `simd`, arith_t/ld1/st1 in simd/convert.hpp, the
// loads/stores of every body and a HeadLoops member of Target (simd/target.hpp). The tests run
// every dtype in kAllDtypes.
#include "ropecheck/kernels/registry.hpp"

#include "ropecheck/kernels/engines.hpp"

namespace ropecheck {
namespace kernels {
const Kernel& scalar_kernel();
const Kernel& table_f32_kernel();
const Kernel& simd_kernel();
const Kernel& complex_kernel();
}  // namespace kernels
namespace engines {
// One declaration per engine recipe (src/kernels/engines/<engine>.cpp).
const EngineKernel& hf_eager_kernel();
const EngineKernel& vllm_native_kernel();
const EngineKernel& ggml_cpu_kernel();
const EngineKernel& flashinfer_kernel();
const EngineKernel& ggml_cuda_kernel();
const EngineKernel& onnxruntime_cpu_kernel();
}  // namespace engines

const std::vector<const Kernel*>& builtin_kernels() {
  static const std::vector<const Kernel*> all = {
      &kernels::scalar_kernel(), &kernels::table_f32_kernel(), &kernels::simd_kernel(),
      &kernels::complex_kernel()};
  return all;
}

const Kernel* find_builtin_kernel(const std::string& name) {
  for (const Kernel* k : builtin_kernels())
    if (k->name() == name) return k;
  return nullptr;
}

const std::vector<const EngineKernel*>& engine_kernels() {
  // Atlas order: one line per engine.
  static const std::vector<const EngineKernel*> all = {
      &engines::hf_eager_kernel(),   &engines::vllm_native_kernel(),
      &engines::ggml_cpu_kernel(),   &engines::ggml_cuda_kernel(),
      &engines::flashinfer_kernel(), &engines::onnxruntime_cpu_kernel()};
  return all;
}

const EngineKernel* find_engine_kernel(const std::string& name) {
  for (const EngineKernel* k : engine_kernels())
    if (k->name() == name) return k;
  return nullptr;
}

}  // namespace ropecheck
