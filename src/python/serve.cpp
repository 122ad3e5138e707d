// rc.validate's worker side. `ropecheck validate --worker-fds R,W` runs the properties (RapidCheck
// cannot be linked into this shared object: its static library is not PIC) and sends each kernel
// call here; plugin::serve answers it with the same guarded buffers and guards as a plugin
// worker, and the Python callable computes it.
//
// Two threads. plugin::serve blocks on the pipe and cannot be interrupted, so it runs on a thread
// of its own that never touches Python (signals blocked there); its `apply` (relay) hands each
// call to the thread that called _serve and waits. That thread runs the callable, so the kernel
// runs where the caller does (KeyboardInterrupt, torch's thread-local state), and between calls
// it wakes every 100 ms to run Python's signal handlers (PyErr_CheckSignals, GIL held). A
// handler that raises (Ctrl-C: KeyboardInterrupt) or a callable that raises a BaseException that
// is not an Exception stops the run: `stop()` kills the ropecheck process, which ends the pipe
// and so the serve thread; once it is joined the exception propagates to rc.validate.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "binding.hpp"
#include "ropecheck/plugin/host.hpp"

namespace ropecheck::python {

namespace {

int element_bytes(int dtype) {
  return dtype == ROPECHECK_DTYPE_F64 ? 8 : dtype == ROPECHECK_DTYPE_F32 ? 4 : 2;
}

// The hand-over of one kernel call from the serve thread to the calling thread.
struct Mailbox {
  std::mutex m;
  std::condition_variable cv;
  const ropecheck_spec* spec = nullptr;      // the call waiting to be run (nullptr: none)
  const ropecheck_tensor* tensor = nullptr;  // nullptr: a supports() call for `dtype`
  std::int32_t dtype = 0;
  bool backward = false;  // the call is apply_backward's
  int status = ROPECHECK_OK;
  bool answered = false;
  bool finished = false;  // plugin::serve returned or threw
};

// The Python side of a call: `call(x, dtype, positions, spec) -> (y, None) | (None, error)`,
// a helper of ropecheck/__init__.py that wraps the user's callable (torch conversion, result
// shape and dtype checks, exceptions turned into a message naming the call).
struct PyKernel {
  py::object call;
  py::object backward;    // the same convention for apply_backward (g in, grad_x out), or None
  py::object supports;    // supports(spec, dtype_name) -> bool, or None (the masks decide)
  bool in_place = false;  // the callable may rotate x in place (it gets its own copy)
  std::string error;      // why the last call failed (FaultKind::kernel_error)
  std::string name;
  std::vector<std::int64_t> head_dims;
  Mailbox box;
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

// The positions the callable sees: [tokens] for a 1-D spec, [tokens, n_axes] for a multi-axis
// one (column a: axis a, e.g. t, h, w), also when the call gives one position per token
// (t = h = w), which is repeated on every axis.
py::array_t<std::int64_t> positions_of(const ropecheck_tensor& t, std::int64_t spec_axes) {
  if (spec_axes <= 1 && t.n_axes == 1) {
    py::array_t<std::int64_t> p(t.n_tokens);
    std::memcpy(p.mutable_data(), t.positions, static_cast<std::size_t>(t.n_tokens) * 8);
    return p;
  }
  const std::int64_t A = std::max<std::int64_t>(spec_axes, t.n_axes);
  py::array_t<std::int64_t> p(std::vector<py::ssize_t>{t.n_tokens, A});
  auto* d = p.mutable_data();
  for (std::int64_t i = 0; i < t.n_tokens; ++i)
    for (std::int64_t a = 0; a < A; ++a)
      d[i * A + a] = t.positions[i * t.n_axes + (t.n_axes == 1 ? 0 : a)];
  return p;
}

// One call of the callable (GIL held, calling thread). A BaseException that is not an Exception
// (KeyboardInterrupt, SystemExit, pytest's outcomes) goes to `raised`: the run stops.
int run_call(PyKernel& k, const ropecheck_spec& s, const ropecheck_tensor& t, bool backward,
             std::optional<py::error_already_set>& raised) {
  try {
    const std::int64_t D = s.head_dim;
    const RopeSpec spec = plugin::spec_from_c(s);
    py::array x = gather(t, D, t.in);
    static const char* names[] = {"f64", "f32", "f16", "bf16"};
    py::tuple r =
        (backward ? k.backward : k.call)(x, names[t.dtype], positions_of(t, spec.n_axes()), spec);
    if (!r[1].is_none()) {
      k.error = r[1].cast<std::string>();
      return ROPECHECK_ERROR;
    }
    const auto y = r[0].cast<py::array>();
    if (y.nbytes() != x.nbytes()) {
      k.error = "internal: result of the wrong size";
      return ROPECHECK_ERROR;
    }
    scatter(t, D, y, t.out);
    // x is the kernel's input: an out-of-place kernel that wrote into it must be seen by the
    // worker's input guard, so its bytes go back where they came from. A callable declared in
    // place (in_place=True) may rotate x itself: x is its own copy, the input stays untouched.
    if (t.out != t.in && !k.in_place) scatter(t, D, x, const_cast<void*>(t.in));
    return ROPECHECK_OK;
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_Exception)) {
      raised.emplace(std::move(e));
      k.error = "interrupted";
      return ROPECHECK_ERROR;
    }
    k.error = std::string("internal error serving the call: ") + e.what();
    return ROPECHECK_ERROR;
  } catch (const std::exception& e) {
    k.error = std::string("internal error serving the call: ") + e.what();
    return ROPECHECK_ERROR;
  }
}

// supports(spec, dtype) of the callable's declaration (GIL held, calling thread); an exception
// other than a BaseException that stops the run counts as "not supported".
int run_supports(PyKernel& k, const ropecheck_spec& s, std::int32_t dtype,
                 std::optional<py::error_already_set>& raised) {
  static const char* names[] = {"f64", "f32", "f16", "bf16"};
  try {
    return k.supports(plugin::spec_from_c(s), names[dtype]).cast<bool>() ? 1 : 0;
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_Exception)) raised.emplace(std::move(e));
    return 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// The descriptor's apply (t) and supports (t == nullptr), on the serve thread: hands the call
// over and waits for its answer.
int relay_call(const ropecheck_spec* s, const ropecheck_tensor* t, std::int32_t dtype, void* user,
               bool backward = false) {
  Mailbox& b = static_cast<PyKernel*>(user)->box;
  std::unique_lock<std::mutex> l(b.m);
  b.spec = s;
  b.tensor = t;
  b.dtype = dtype;
  b.backward = backward;
  b.answered = false;
  b.cv.notify_all();
  b.cv.wait(l, [&b] { return b.answered; });
  return b.status;
}

int relay(const ropecheck_spec* s, const ropecheck_tensor* t, void* user) {
  return relay_call(s, t, 0, user);
}

int relay_backward(const ropecheck_spec* s, const ropecheck_tensor* t, void* user) {
  return relay_call(s, t, 0, user, true);
}
int relay_supports(const ropecheck_spec* s, std::int32_t dtype, void* user) {
  return relay_call(s, nullptr, dtype, user);
}

// stop(): the run ends (GIL held). Its own exception is dropped: the one that stopped the run is
// the one to report.
void call_stop(const py::object& stop) {
  try {
    stop();
  } catch (py::error_already_set&) {
  }
}

// The calling thread (GIL released) until the serve thread finishes: runs each relayed call,
// checks for signals between calls. After a stop, calls are answered with an error at once.
void run_calls(PyKernel& k, const py::object& stop, std::optional<py::error_already_set>& raised) {
  Mailbox& b = k.box;
  std::unique_lock<std::mutex> l(b.m);
  for (;;) {
    b.cv.wait_for(l, std::chrono::milliseconds(100), [&b] { return b.spec || b.finished; });
    if (b.spec) {
      const ropecheck_spec* s = std::exchange(b.spec, nullptr);
      const ropecheck_tensor* t = b.tensor;
      const bool backward = b.backward;
      l.unlock();
      int status = ROPECHECK_ERROR;
      {
        py::gil_scoped_acquire gil;
        if (raised) {
          k.error = "interrupted";
          status = t ? ROPECHECK_ERROR : 0;
        } else {
          status = t ? run_call(k, *s, *t, backward, raised) : run_supports(k, *s, b.dtype, raised);
          if (raised) call_stop(stop);
        }
      }
      l.lock();
      b.status = status;
      b.answered = true;
      b.cv.notify_all();
      continue;
    }
    if (b.finished) return;
    if (raised) continue;  // stopped: waiting for the serve thread to see the pipe end
    l.unlock();
    {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        raised.emplace();
        call_stop(stop);
      }
    }
    l.lock();
  }
}

// Asynchronous signals go to the calling thread, where Python's handlers run.
void block_async_signals() {
  sigset_t s;
  sigfillset(&s);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&s, sig);
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

ropecheck_policy c_policy(const Policy& p) {
  ropecheck_policy c{};
  c.angle = static_cast<std::int32_t>(p.angle);
  c.table = static_cast<std::int32_t>(p.table);
  c.arithmetic = static_cast<std::int32_t>(p.arithmetic);
  c.recipe = static_cast<std::int32_t>(p.recipe);
  c.fused = p.fused ? 1 : 0;
  c.trig_error = p.trig_error;
  c.rounding =
      (p.table_rounding == Rounding::toward_zero ? ROPECHECK_ROUNDING_TABLE_TOWARD_ZERO : 0) |
      (p.output_rounding == Rounding::toward_zero ? ROPECHECK_ROUNDING_OUTPUT_TOWARD_ZERO : 0) |
      (p.trig_argument == TrigArgument::turns_f32 ? ROPECHECK_ROUNDING_TRIG_ARGUMENT_TURNS_F32 : 0);
  return c;
}

// desc: name, dtypes/layouts/scalings masks, head_dims, policies {dtype: Policy}, flags,
// min_position, max_position (the domain validate() declares). k owns the strings it points at.
ropecheck_plugin descriptor(const py::dict& desc, PyKernel& k) {
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
  p.apply = &relay;
  if (!k.backward.is_none()) p.apply_backward = &relay_backward;
  if (!k.supports.is_none()) p.supports = &relay_supports;
  p.user = &k;
  p.scalings = desc["scalings"].cast<std::uint32_t>();
  p.flags = desc["flags"].cast<std::uint32_t>();
  p.min_position = desc["min_position"].cast<std::int64_t>();
  p.max_position = desc["max_position"].cast<std::int64_t>();
  return p;
}

// stop: called (GIL held) when a signal handler or the callable raises; it must make the pipe
// end (rc.validate passes the ropecheck process's kill).
void serve(int rfd, int wfd, py::object call, const py::dict& desc, py::object stop) {
  PyKernel k;
  k.call = std::move(call);
  k.name = desc["name"].cast<std::string>();
  k.head_dims = desc["head_dims"].cast<std::vector<std::int64_t>>();
  k.supports = desc.contains("supports") ? py::object(desc["supports"]) : py::object(py::none());
  k.backward = desc.contains("backward") ? py::object(desc["backward"]) : py::object(py::none());
  k.in_place = desc.contains("in_place") && desc["in_place"].cast<bool>();
  const ropecheck_plugin p = descriptor(desc, k);
  std::optional<py::error_already_set> raised;
  std::string broken;  // plugin::serve's error (the pipe broke)
  {
    py::gil_scoped_release release;
    std::thread server([&] {
      block_async_signals();
      try {
        plugin::serve(rfd, wfd, p, [&k] { return std::exchange(k.error, std::string()); });
      } catch (const std::exception& e) {
        broken = e.what();
      }
      std::lock_guard<std::mutex> g(k.box.m);
      k.box.finished = true;
      k.box.cv.notify_all();
    });
    run_calls(k, stop, raised);
    server.join();
  }
  if (raised) throw std::move(*raised);
  // A signal that arrived as the run ended (Ctrl-C in a terminal also ends the ropecheck
  // process, hence the pipe) is raised here rather than somewhere in rc.validate's cleanup.
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  if (!broken.empty()) throw std::runtime_error(broken);
}

}  // namespace

void bind_serve(py::module_& m) {
  m.def("_serve", &serve, py::arg("rfd"), py::arg("wfd"), py::arg("call"), py::arg("desc"),
        py::arg("stop"));
  m.attr("ABI_VERSION") = ROPECHECK_PLUGIN_ABI_VERSION;
  // The descriptor flags validate() sets (ropecheck/plugin.h).
  m.attr("FLAG_MAGNITUDE_SCALE") = ROPECHECK_FLAG_MAGNITUDE_SCALE;
  m.attr("FLAG_NO_IN_PLACE") = ROPECHECK_FLAG_NO_IN_PLACE;
  m.attr("FLAG_LAYOUTS_BITWISE_SYMMETRIC") = ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC;
  m.attr("FLAG_BATCH_VARIANT") = ROPECHECK_FLAG_BATCH_VARIANT;
}

}  // namespace ropecheck::python
