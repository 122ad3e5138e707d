// rc.validate's worker side. `ropecheck validate --worker-fds R,W` runs the properties (RapidCheck
// cannot be linked into this shared object: its static library is not PIC) and sends each kernel
// call here; plugin::serve answers it with the same guarded buffers and guards as a plugin
// worker, and `apply` below hands the call to the Python callable. The GIL is released while
// serve() waits on the pipe and taken for each call.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "binding.hpp"
#include "ropecheck/plugin/host.hpp"

namespace ropecheck::python {

namespace {

int element_bytes(int dtype) {
  return dtype == ROPECHECK_DTYPE_F64 ? 8 : dtype == ROPECHECK_DTYPE_F32 ? 4 : 2;
}

// The Python side of a call: `call(x, dtype, positions, spec) -> (y, None) | (None, error)`,
// a helper of ropecheck/__init__.py that wraps the user's callable (torch conversion, result
// shape and dtype checks, exceptions turned into a message naming the call).
struct PyKernel {
  py::object call;
  std::string error;  // why the last apply failed (FaultKind::kernel_error)
  std::string name;
  std::vector<std::int64_t> head_dims;
};

// Gathers the strided view into a contiguous [T, H, D] array of raw elements.
py::array gather(const ropecheck_tensor& t, std::int64_t D, const void* from) {
  const int eb = element_bytes(t.dtype);
  py::array a(py::dtype(eb == 8 ? "u8" : eb == 4 ? "u4" : "u2"), {t.n_tokens, t.n_heads, D});
  auto* dst = static_cast<unsigned char*>(a.mutable_data());
  const auto* src = static_cast<const unsigned char*>(from);
  for (std::int64_t i = 0; i < t.n_tokens; ++i)
    for (std::int64_t h = 0; h < t.n_heads; ++h)
      std::memcpy(dst + ((i * t.n_heads + h) * D) * eb,
                  src + (i * t.token_stride + h * t.head_stride) * eb,
                  static_cast<std::size_t>(D * eb));
  return a;
}

void scatter(const ropecheck_tensor& t, std::int64_t D, const py::array& a, void* to) {
  const int eb = element_bytes(t.dtype);
  const auto* src = static_cast<const unsigned char*>(a.data());
  auto* dst = static_cast<unsigned char*>(to);
  for (std::int64_t i = 0; i < t.n_tokens; ++i)
    for (std::int64_t h = 0; h < t.n_heads; ++h)
      std::memcpy(dst + (i * t.token_stride + h * t.head_stride) * eb,
                  src + ((i * t.n_heads + h) * D) * eb, static_cast<std::size_t>(D * eb));
}

int apply(const ropecheck_spec* s, const ropecheck_tensor* t, void* user) {
  auto* k = static_cast<PyKernel*>(user);
  py::gil_scoped_acquire gil;
  try {
    const std::int64_t D = s->head_dim;
    py::array x = gather(*t, D, t->in);
    py::array_t<std::int64_t> pos(t->n_axes == 1
                                      ? std::vector<py::ssize_t>{t->n_tokens}
                                      : std::vector<py::ssize_t>{t->n_tokens, t->n_axes});
    std::memcpy(pos.mutable_data(), t->positions,
                static_cast<std::size_t>(t->n_tokens * t->n_axes) * 8);
    static const char* names[] = {"f64", "f32", "f16", "bf16"};
    py::tuple r = k->call(x, names[t->dtype], pos, spec_from_c(*s));
    if (!r[1].is_none()) {
      k->error = r[1].cast<std::string>();
      return ROPECHECK_ERROR;
    }
    const auto y = r[0].cast<py::array>();
    if (y.nbytes() != x.nbytes()) {
      k->error = "internal: result of the wrong size";
      return ROPECHECK_ERROR;
    }
    scatter(*t, D, y, t->out);
    // x is the kernel's input: an out-of-place kernel that wrote into it must be seen by the
    // worker's input guard, so its bytes go back where they came from.
    if (t->out != t->in) scatter(*t, D, x, const_cast<void*>(t->in));
    return ROPECHECK_OK;
  } catch (const std::exception& e) {
    k->error = std::string("internal error serving the call: ") + e.what();
    return ROPECHECK_ERROR;
  }
}

ropecheck_policy c_policy(const Policy& p) {
  ropecheck_policy c{};
  c.angle = static_cast<std::int32_t>(p.angle);
  c.table = static_cast<std::int32_t>(p.table);
  c.arithmetic = static_cast<std::int32_t>(p.arithmetic);
  c.recipe = static_cast<std::int32_t>(p.recipe);
  c.fused = p.fused ? 1 : 0;
  c.trig_error = p.trig_error;
  return c;
}

// desc: name, dtypes/layouts/scalings masks, head_dims, policies {dtype: Policy}, flags,
// min_position, max_position (the domain validate() declares).
void serve(int rfd, int wfd, py::object call, const py::dict& desc) {
  PyKernel k{std::move(call), "", desc["name"].cast<std::string>(),
             desc["head_dims"].cast<std::vector<std::int64_t>>()};
  ropecheck_plugin p{};
  p.abi_version = ROPECHECK_PLUGIN_ABI_VERSION;
  p.struct_size = sizeof(ropecheck_plugin);
  p.name = k.name.c_str();
  p.description = "Python callable (rc.validate)";
  p.dtypes = desc["dtypes"].cast<std::uint32_t>();
  p.layouts = desc["layouts"].cast<std::uint32_t>();
  p.head_dims = k.head_dims.empty() ? nullptr : k.head_dims.data();
  p.n_head_dims = static_cast<std::int32_t>(k.head_dims.size());
  for (auto kv : desc["policies"].cast<py::dict>())
    p.policies[static_cast<int>(dtype_arg(kv.first.cast<std::string>(), "dtype"))] =
        c_policy(kv.second.cast<Policy>());
  p.apply = &apply;
  p.user = &k;
  p.scalings = desc["scalings"].cast<std::uint32_t>();
  p.flags = desc["flags"].cast<std::uint32_t>();
  p.min_position = desc["min_position"].cast<std::int64_t>();
  p.max_position = desc["max_position"].cast<std::int64_t>();
  py::gil_scoped_release release;
  plugin::serve(rfd, wfd, p, [&k] { return std::exchange(k.error, std::string()); });
}

}  // namespace

void bind_serve(py::module_& m) {
  m.def("_serve", &serve, py::arg("rfd"), py::arg("wfd"), py::arg("call"), py::arg("desc"));
  m.attr("ABI_VERSION") = ROPECHECK_PLUGIN_ABI_VERSION;
}

}  // namespace ropecheck::python
