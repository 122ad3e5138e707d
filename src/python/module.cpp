// PYBIND11_MODULE(_ropecheck): the pieces are bound by the files of binding.hpp's map.
#include "binding.hpp"

PYBIND11_MODULE(_ropecheck, m) {
  m.doc() = "ropecheck: numerical verification of RoPE kernels (C++ engine)";
  ropecheck::python::bind_spec(m);
  ropecheck::python::bind_check(m);
  ropecheck::python::bind_serve(m);
  ropecheck::python::bind_kernels(m);
}
