// The `ropecheck` Python extension (_ropecheck): bindings of the C++ engine, no numerics in
// Python. Map:
//   module.cpp   the module: Spec, Policy, reference(), the in-memory check, the worker
//   spec.cpp     Spec <-> RopeSpec (kwargs, HF config.json), Policy, ropecheck_spec -> Spec
//   check.cpp    reference() through reference::Oracle; check() through ropecheck::scan
//   serve.cpp    rc.validate's worker side: plugin::serve() with a Python callable as `apply`
//   kernel.cpp   apply_kernel(): ropecheck's built-in kernels and engine recipes, by name
// The Python package (ropecheck/__init__.py) converts torch / NumPy tensors to raw buffers and
// back; everything here sees little-endian bytes of a known dtype.
#pragma once

#include <pybind11/pybind11.h>

#include "ropecheck/plugin.h"
#include "ropecheck/policy.hpp"
#include "ropecheck/spec.hpp"

namespace ropecheck::python {

namespace py = pybind11;

void bind_spec(py::module_& m);
void bind_check(py::module_& m);
void bind_serve(py::module_& m);
void bind_kernels(py::module_& m);

// "f32" -> Dtype::f32; ValueError otherwise.
Dtype dtype_arg(const std::string& s, const char* what);
// The same from a str or a torch / NumPy dtype (torch.bfloat16, np.float32).
Dtype dtype_arg(const py::object& o, const char* what);

}  // namespace ropecheck::python
