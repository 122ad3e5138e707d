// Calling ropecheck's own kernels from Python: the built-in kernels and the engine-atlas recipes
// (ropecheck::engine_kernels()), by name, on an in-memory tensor. This is how the engine recipes
// are compared bit for bit with the real PyTorch code they emulate (src/python/tests/
// test_engines_torch.py), and how a user puts an engine's numerics beside their own kernel.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "binding.hpp"
#include "ropecheck/kernel.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"

namespace ropecheck::python {

namespace {

using I64Array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

const Kernel& kernel_arg(const std::string& name) {
  if (const Kernel* k = find_builtin_kernel(name)) return *k;
  if (const Kernel* k = find_engine_kernel(name)) return *k;
  throw py::value_error("unknown kernel '" + name + "' (ropecheck list names them)");
}

// x: C-contiguous raw bits [T, H, head_dim] of `dtype`; positions: [T] int64, or [T, n_axes]
// for a multi-axis spec (M-RoPE's t, h, w per token). Returns the kernel's output as a new array
// of the same raw type and shape.
py::array apply_kernel(const std::string& name, const py::array& x, const std::string& dtype,
                       const I64Array& positions, const RopeSpec& spec_in) {
  const Kernel& k = kernel_arg(name);
  const Dtype d = dtype_arg(dtype, "dtype");
  if (x.ndim() != 3 || x.shape(2) != spec_in.head_dim || !(x.flags() & py::array::c_style))
    throw py::value_error("apply_kernel: x must be C-contiguous [tokens, heads, head_dim=" +
                          std::to_string(spec_in.head_dim) + "]");
  if (x.itemsize() != traits(d).bytes)
    throw py::value_error("apply_kernel: x's element size does not match dtype " + dtype);
  const RopeSpec spec = spec_in.normalized();
  const bool per_axis = positions.ndim() == 2 && positions.shape(1) == spec.n_axes();
  if (!(positions.ndim() == 1 || per_axis) || positions.shape(0) != x.shape(0))
    throw py::value_error("apply_kernel: positions must be [tokens] or [tokens, n_axes=" +
                          std::to_string(spec.n_axes()) + "]");
  if (!k.supports(spec, d))
    throw py::value_error("apply_kernel: " + name + " does not support " + describe(spec) + " in " +
                          dtype);
  py::array out(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + 3));
  KernelStatus st;
  {
    py::gil_scoped_release release;
    TensorArgs a;
    a.dtype = d;
    a.n_tokens = x.shape(0);
    a.n_heads = x.shape(1);
    a.positions = positions.data();
    a.in = x.data();
    a.out = out.mutable_data();
    a.head_stride = spec.head_dim;
    a.token_stride = a.n_heads * spec.head_dim;
    a.n_axes = per_axis ? spec.n_axes() : 1;
    st = k.apply(spec, a);
  }
  if (st != KernelStatus::ok)
    throw py::value_error("apply_kernel: " + name + " returned " +
                          (st == KernelStatus::unsupported ? "unsupported" : "error"));
  return out;
}

}  // namespace

void bind_kernels(py::module_& m) {
  m.def("_apply_kernel", &apply_kernel, py::arg("name"), py::arg("x"), py::arg("dtype"),
        py::arg("positions"), py::arg("spec"));
  m.def(
      "_kernel_names",
      [] {
        std::vector<std::string> v;
        for (const Kernel* k : builtin_kernels()) v.push_back(k->name());
        for (const EngineKernel* k : engine_kernels()) v.push_back(k->name());
        return v;
      },
      "names of the built-in kernels and the engine recipes, in registry order");
  m.def("_kernel_policy", [](const std::string& name, const std::string& dtype) {
    return kernel_arg(name).policy(dtype_arg(dtype, "dtype"));
  });
}

}  // namespace ropecheck::python
