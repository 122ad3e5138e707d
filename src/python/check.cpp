// reference() and check() on in-memory tensors. check() is `ropecheck check`'s engine
// (ropecheck::scan over tensorio::memory_tensor refs): same chunks, threads, bounds and located
// findings. Both release the GIL while C++ works; the buffers stay referenced by the caller.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <thread>

#include "binding.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/scan/scan.hpp"
#include "ropecheck/tensorio/tensorio.hpp"
#include "ropecheck/verify/verify.hpp"

namespace ropecheck::python {

namespace {

namespace ref = ropecheck::reference;
namespace tio = ropecheck::tensorio;
using I64Array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using F64Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

// Dynamic NTK and LongRoPE depend on the sequence length: without one, max(position) + 1, the
// length transformers computes at run time (as `ropecheck check`).
RopeSpec with_seq_len(RopeSpec s, const I64Array& positions) {
  const bool needs =
      s.scaling.kind == ScalingKind::dynamic || s.scaling.kind == ScalingKind::longrope;
  if (!needs || s.scaling.seq_len != 0 || positions.size() == 0) return s;
  const std::int64_t* p = positions.data();
  s.scaling.seq_len = *std::max_element(p, p + positions.size()) + 1;
  return s.normalized();
}

// x: [T, H, D] doubles, positions: [T, A] int64 (A = 1 or spec.n_axes). digits > 0: decimal
// strings (a list of lists of lists) instead of the doubles.
py::object reference(const F64Array& x, const I64Array& positions, const RopeSpec& spec_in,
                     int digits) {
  if (x.ndim() != 3 || x.shape(2) != spec_in.head_dim)
    throw py::value_error(
        "reference: x must be [tokens, heads, head_dim=" + std::to_string(spec_in.head_dim) + "]");
  const std::int64_t T = x.shape(0), H = x.shape(1), D = x.shape(2);
  if (positions.ndim() != 2 || positions.shape(0) != T)
    throw py::value_error("reference: positions must be [tokens] or [tokens, axes]");
  const std::int64_t A = positions.shape(1);
  const RopeSpec spec = with_seq_len(spec_in, positions);
  F64Array out({T, H, D});
  std::vector<std::string> text(digits > 0 ? static_cast<std::size_t>(T * H * D) : 0);
  {
    py::gil_scoped_release release;
    ref::set_precision_bits(ref::default_bits(Dtype::f64));
    const ref::Oracle oracle(spec);
    ref::Rotation rot;
    ref::ExactVector exact;
    std::vector<std::int64_t> pos(static_cast<std::size_t>(A));
    double* o = out.mutable_data();
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t a = 0; a < A; ++a) pos[a] = positions.data()[t * A + a];
      oracle.at(pos, rot);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t base = (t * H + h) * D;
        rot.apply(x.data() + base, exact);
        for (std::int64_t j = 0; j < D; ++j) {
          o[base + j] = exact.value(j);
          if (digits > 0) text[base + j] = ref::to_decimal(exact.mp(j), digits);
        }
      }
    }
  }
  if (digits <= 0) return out;
  py::list rows;
  for (std::int64_t t = 0; t < T; ++t) {
    py::list heads;
    for (std::int64_t h = 0; h < H; ++h)
      heads.append(py::cast(std::vector<std::string>(text.begin() + (t * H + h) * D,
                                                     text.begin() + (t * H + h + 1) * D)));
    rows.append(heads);
  }
  return rows;
}

tio::ElemType elem_type(Dtype d) {
  switch (d) {
    case Dtype::f64:
      return tio::ElemType::f64;
    case Dtype::f32:
      return tio::ElemType::f32;
    case Dtype::f16:
      return tio::ElemType::f16;
    default:
      return tio::ElemType::bf16;
  }
}

py::dict location(const verify::Location& l) {
  py::dict d;
  d["batch"] = l.batch;
  d["token"] = l.token;
  d["position"] = l.position;
  d["head"] = l.head;
  d["pair"] = l.pair;
  d["elements"] = py::make_tuple(l.elem_a, l.elem_b);
  d["text"] = l.text();
  return d;
}

py::dict result_dict(const scan::PairResult& r) {
  const verify::Summary& s = r.summary;
  py::list findings;
  for (const auto& f : s.findings) {
    py::dict d = location(f.where);
    d["kind"] = f.kind == verify::FindingKind::exceeds_bound       ? "exceeds_bound"
                : f.kind == verify::FindingKind::non_finite_output ? "non_finite_output"
                                                                   : "passthrough_changed";
    d["what"] = f.what;
    d["message"] = "FAIL " + r.name + " " + f.message();
    findings.append(d);
  }
  py::dict d;
  d["passed"] = r.passed();  // nothing checked is not a pass (scan::PairResult::coverage)
  d["coverage"] = r.coverage();
  d["overflowed"] = s.overflowed;
  d["vectors"] = r.vectors;
  d["checked"] = s.vectors;
  d["skipped_nonfinite"] = r.skipped_nonfinite;
  d["n_failures"] = s.failures;
  d["max_error_u"] = s.max_error_u;
  d["max_utilization"] = s.max_utilization;
  d["max_error_at"] = s.any ? py::object(location(s.max_error_at)) : py::none();
  d["max_utilization_at"] = s.any ? py::object(location(s.max_utilization_at)) : py::none();
  d["failures"] = findings;
  d["hint"] = s.hint;
  return d;
}

// x, y: C-contiguous buffers of `dtype` with the given shape (bf16/f16 as raw 16-bit words);
// positions: [T], or [A, T] axis-major as `check` reads them.
py::dict check(const py::buffer& x, const py::buffer& y, const std::string& dtype,
               const std::vector<std::int64_t>& shape, const I64Array& positions,
               const RopeSpec& spec_in, const Policy& policy, unsigned threads, int max_failures,
               const std::string& tensor_layout) {
  const Dtype d = dtype_arg(dtype, "dtype");
  const py::buffer_info xb = x.request(), yb = y.request();
  const auto bytes = static_cast<py::ssize_t>(tio::elem_bytes(elem_type(d)));
  py::ssize_t n = 1;
  for (auto s : shape) n *= s;
  if (xb.size * xb.itemsize != n * bytes || yb.size * yb.itemsize != n * bytes)
    throw py::value_error("check: x and y must hold the elements of the shape given");
  const RopeSpec spec = with_seq_len(spec_in, positions);
  std::vector<std::int64_t> pshape(positions.shape(), positions.shape() + positions.ndim());
  const auto tx = tio::memory_tensor("x", elem_type(d), shape, xb.ptr);
  const auto ty = tio::memory_tensor("y", elem_type(d), shape, yb.ptr);
  const auto tp = tio::memory_tensor("positions", tio::ElemType::i64, pshape, positions.data());
  scan::ScanOptions so;
  so.threads = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  so.max_failures = max_failures;
  scan::PairResult r;
  try {
    py::gil_scoped_release release;
    ref::set_precision_bits(ref::default_bits(d));
    const ref::Oracle oracle(spec);
    const verify::PairChecker checker(policy, spec, d);
    r = scan::scan_pair("x -> y", tx, ty, tp, tensor_layout, checker, oracle, so);
    // The hint, confirmed on every vector (verify::advise), as `check` gives it.
    if (!r.summary.passed())
      r.summary.hint =
          verify::advise(policy,
                         {scan::recorded_vectors(r, tx, ty, tp, tensor_layout, checker, false)})
              .text;
  } catch (const scan::ScanError& e) {
    throw py::value_error(e.what());
  } catch (const tio::FormatError& e) {
    throw py::value_error(e.what());
  }
  return result_dict(r);
}

}  // namespace

void bind_check(py::module_& m) {
  m.def("_reference", &reference, py::arg("x"), py::arg("positions"), py::arg("spec"),
        py::arg("digits") = 0);
  m.def("_check", &check, py::arg("x"), py::arg("y"), py::arg("dtype"), py::arg("shape"),
        py::arg("positions"), py::arg("spec"), py::arg("policy"), py::arg("threads") = 0,
        py::arg("max_failures") = 10, py::arg("tensor_layout") = "thd");
}

}  // namespace ropecheck::python
