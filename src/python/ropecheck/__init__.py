"""ropecheck: numerical verification of RoPE (rotary position embedding) kernels.

The numerics are the C++ engine's (the `_ropecheck` extension and the `ropecheck` executable);
this file only moves tensors in and out:

    spec = Spec(head_dim=128, rotary_dim=64, base=10000.0, layout="half")
    pol = Policy(angle="f32", table="f32", arithmetic="f32", recipe="hf_f32")
    y = reference(x, positions, spec)          # exact outputs, float64 NumPy
    r = check(x, y, positions, spec, policy=pol)   # `ropecheck check` on in-memory tensors
    v = validate(fn, dtypes=["f32", "bf16"], layouts=["half"], head_dims=[64, 128], policy=pol)

validate() runs `ropecheck validate` (RapidCheck lives in the executable, not in this shared
object) and serves its kernel calls here: the executable sends each call over a pipe, the
extension runs `fn(x, positions, spec)` on it, in the calling thread, and sends the result back
(serve.cpp). Ctrl-C stops it: the executable is killed and reaped, KeyboardInterrupt propagates.
"""

import inspect
import json
import os
import subprocess
import tempfile
import traceback

import numpy as np

from . import _ropecheck
from ._ropecheck import Policy, Spec

__all__ = ["Spec", "Policy", "reference", "check", "assert_rope", "validate", "report",
           "CheckResult", "Failure", "ValidationResult", "ReportResult", "executable", "save_dump", "apply_kernel",
           "kernel_names", "kernel_policy", "Fp8Bytes"]

_DTYPES = ("f64", "f32", "f16", "bf16")
_LAYOUTS = ("interleaved", "half", "proportional", "mrope", "imrope", "axial")
_SCALINGS = ("none", "linear", "dynamic", "yarn", "llama3", "freq_factors", "longrope")
_RAW = {"f64": np.uint64, "f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}
_NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16}


def _torch():
    import torch  # only the torch paths need it
    return torch


def _is_torch(t):
    return type(t).__module__.startswith("torch")


def _torch_dtypes():
    torch = _torch()
    return {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16",
            torch.bfloat16: "bf16"}


def _raw(t, what):
    """(C-contiguous NumPy array of the elements' bits, dtype name) of a torch / NumPy tensor."""
    if _is_torch(t):
        torch = _torch()
        names = _torch_dtypes()
        if t.dtype not in names:
            raise TypeError(f"{what}: dtype {t.dtype} is not float64/float32/float16/bfloat16")
        d = names[t.dtype]
        t = t.detach().cpu().contiguous()
        if d == "bf16":
            return t.view(torch.int16).numpy().view(np.uint16), d
        return t.numpy().view(_RAW[d]), d
    a = np.asarray(t)
    for d, nt in _NUMPY.items():
        if a.dtype == nt:
            return np.ascontiguousarray(a).view(_RAW[d]), d
    raise TypeError(f"{what}: dtype {a.dtype} is not float64/float32/float16 (bfloat16: pass a "
                    "torch tensor)")


def _as_float64(t):
    """Exact values as float64 (every f16/bf16/f32 value is a double)."""
    if _is_torch(t):
        return t.detach().cpu().to(_torch().float64).numpy()
    return np.asarray(t, dtype=np.float64)


def _positions_np(positions):
    p = positions.detach().cpu().numpy() if _is_torch(positions) else np.asarray(positions)
    if p.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers (int64/int32), got {p.dtype}")
    return np.ascontiguousarray(p, dtype=np.int64)


def executable():
    """The `ropecheck` executable validate() runs: env ROPECHECK_EXE, else the one recorded at
    configure / install time."""
    exe = os.environ.get("ROPECHECK_EXE")
    if exe:
        return exe
    from . import _paths
    return _paths.EXE


# ---- reference -----------------------------------------------------------------------------

def reference(x, positions, spec, digits=None):
    """The exact rotation of x (values taken exactly), correctly rounded to float64: a NumPy
    array shaped like x ([tokens, heads, head_dim] or [tokens, head_dim]). With digits=N, nested
    lists of decimal strings with N significant digits instead.

    positions: [tokens] (every axis at that position) or [tokens, n_axes]."""
    xv = _as_float64(x)
    squeeze = xv.ndim == 2
    if squeeze:
        xv = xv[:, None, :]
    if xv.ndim != 3:
        raise ValueError("reference: x must be [tokens, heads, head_dim] or [tokens, head_dim]")
    p = _positions_np(positions)
    if p.ndim == 1:
        p = p[:, None]
    out = _ropecheck._reference(np.ascontiguousarray(xv), np.ascontiguousarray(p), spec,
                                int(digits or 0))
    if squeeze:
        out = out[:, 0, :] if not digits else [row[0] for row in out]
    return out


# ---- ropecheck's own kernels and the engine recipes ----------------------------------------

def kernel_names():
    """Names of the built-in kernels and the engine-atlas recipes (`ropecheck list`)."""
    return list(_ropecheck._kernel_names())


def kernel_policy(name, dtype):
    """The Policy kernel `name` declares for dtype ("f32", "bf16", ...)."""
    return _ropecheck._kernel_policy(name, dtype)


def apply_kernel(name, x, positions, spec):
    """Kernel `name` (a built-in kernel or an engine recipe such as "hf_eager") applied to x
    ([tokens, heads, head_dim] or [tokens, head_dim], torch or NumPy, f64/f32/f16/bf16) at the
    integer positions [tokens] (or [tokens, n_axes] for a multi-axis spec such as M-RoPE: t, h,
    w per token): a new tensor of x's kind, dtype and shape."""
    raw, d = _raw(x, "x")
    squeeze = raw.ndim == 2
    if squeeze:
        raw = raw[:, None, :]
    p = _positions_np(positions)
    out = _ropecheck._apply_kernel(name, np.ascontiguousarray(raw), d, p, spec)
    if squeeze:
        out = out[:, 0, :]
    if _is_torch(x):
        return _torch_view(np.ascontiguousarray(out), d).clone()
    return out.view(_NUMPY[d])


# ---- check ---------------------------------------------------------------------------------

class Failure:
    """One located failure: token, position (one per axis), head, pair, elements (a, b), kind
    (exceeds_bound, non_finite_output, passthrough_changed), what (error vs bound) and the line
    `ropecheck check` prints (message)."""

    def __init__(self, d):
        self.kind = d["kind"]
        self.batch = d["batch"] if d["batch"] >= 0 else None
        self.token = d["token"]
        self.position = d["position"][0] if len(d["position"]) == 1 else tuple(d["position"])
        self.head = d["head"]
        self.pair = d["pair"] if d["pair"] >= 0 else None
        self.elements = tuple(d["elements"]) if d["pair"] >= 0 else None
        self.what = d["what"]
        self.message = d["message"]

    def __repr__(self):
        return f"Failure({self.message!r})"

    def __str__(self):
        return self.message


class CheckResult:
    """What check() found: passed, max_error_u (max per-pair error in units of the dtype's unit
    roundoff), max_utilization (max error / derived bound), failures (the first located ones),
    n_failures, vectors / checked / skipped_nonfinite, and where each maximum is."""

    def __init__(self, d, spec, policy, dtype):
        self.passed = d["passed"]
        self.max_error_u = d["max_error_u"]
        self.max_utilization = d["max_utilization"]
        self.failures = [Failure(f) for f in d["failures"]]
        self.n_failures = d["n_failures"]
        self.vectors = d["vectors"]
        self.checked = d["checked"]
        self.skipped_nonfinite = d["skipped_nonfinite"]
        self.max_error_at = (d["max_error_at"] or {}).get("text")
        self.max_utilization_at = (d["max_utilization_at"] or {}).get("text")
        # A known cause the first failure's pattern matches (other layout, a narrower policy,
        # pass-through dims at partial rotary), or "".
        self.hint = d.get("hint", "")
        # "" or why nothing was checked (no vector, every input non-finite): then not passed.
        self.coverage = d.get("coverage", "")
        # Outputs read as an overflow (+-inf: the values that round to it), counted apart.
        self.overflowed = d.get("overflowed", 0)
        self.spec, self.policy, self.dtype = spec, policy, dtype

    def __bool__(self):
        return self.passed

    def __str__(self):
        lines = [f"ropecheck check: {'PASS' if self.passed else 'FAIL'}: {self.checked} of "
                 f"{self.vectors} vectors checked ({self.dtype}), {self.n_failures} failure(s)",
                 f"  spec {self.spec!r}", f"  declared {self.policy!r}",
                 f"  max err [u]   {self.max_error_u:.4g} at {self.max_error_at}",
                 f"  max err/bound {self.max_utilization:.4g} at {self.max_utilization_at}"]
        if self.coverage:
            lines.append(f"FAIL {self.coverage}")
        lines += [f.message for f in self.failures]
        if self.n_failures > len(self.failures):
            lines.append(f"... {self.n_failures - len(self.failures)} more failure(s)")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        if self.skipped_nonfinite:
            lines.append(f"note: {self.skipped_nonfinite} vector(s) with non-finite input not "
                         "checked")
        if self.overflowed:
            lines.append(f"note: {self.overflowed} output element(s) read as an overflow "
                         "(the values that round to them)")
        return "\n".join(lines)

    __repr__ = __str__


def check(x, y, positions, spec, policy=None, threads=None, max_failures=10,
          tensor_layout=None):
    """`ropecheck check` on in-memory tensors: y (the kernel's output for x) against the exact
    rotation, within the per-pair bound derived from the DECLARED policy (default: HF's f32
    recipe). x, y: NumPy or torch tensors, same dtype (f64/f32/f16, bf16 from torch) and shape,
    [tokens, heads, head_dim] (tensor_layout thd; td for 2-D, bhtd for 4-D unless given; a 4-D
    tensor with as many heads as tokens needs tensor_layout, bhtd and bthd being alike).
    positions: int [tokens] or [batch, tokens], or per axis [tokens, n_axes]. threads: default
    every core; the result does not depend on it."""
    policy = policy if policy is not None else Policy()
    xr, dx = _raw(x, "x")
    yr, dy = _raw(y, "y")
    if dx != dy or xr.shape != yr.shape:
        raise ValueError(f"check: x is {dx} {list(xr.shape)}, y is {dy} {list(yr.shape)}: they "
                         "must have the same dtype and shape")
    if tensor_layout is None and xr.ndim == 4 and xr.shape[1] == xr.shape[2]:
        raise ValueError(f"check: x is {list(xr.shape)}: with as many heads as tokens it could be "
                         "[batch, heads, tokens, head_dim] or [batch, tokens, heads, head_dim]; "
                         "give tensor_layout='bhtd' or 'bthd'")
    tl = tensor_layout or {2: "td", 3: "thd", 4: "bhtd"}.get(xr.ndim)
    if tl is None:
        raise ValueError(f"check: x has rank {xr.ndim}; give tensor_layout (td/thd/bhtd/bthd)")
    p = _positions_np(positions)
    if p.ndim == 2 and spec.n_axes > 1 and p.shape[1] == spec.n_axes:
        p = np.ascontiguousarray(p.T)  # the scan reads positions axis-major, as HF's
    d = _ropecheck._check(xr, yr, dx, list(xr.shape), p, spec, policy, int(threads or 0),
                          int(max_failures), tl)
    return CheckResult(d, spec, policy, dx)


def assert_rope(x, y, positions, spec, policy=None, **kw):
    """check(), raising AssertionError with the located failures when it does not pass."""
    r = check(x, y, positions, spec, policy=policy, **kw)
    if not r.passed:
        raise AssertionError(str(r))
    return r


# ---- dumps ---------------------------------------------------------------------------------

_ST_DTYPES = {"f64": "F64", "f32": "F32", "f16": "F16", "bf16": "BF16"}


def _metadata(spec, policy, tensor_layout):
    """The dump's __metadata__ (string values): the spec keys, the policy and tensor_layout, as
    `ropecheck check` reads them."""
    md = {}
    for k, v in _spec_keys(spec).items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            v = ",".join(repr(e) for e in v)
        md[k] = v if isinstance(v, str) else repr(v)
    if policy is not None:
        md.update({"angle_precision": policy.angle, "table_precision": policy.table,
                   "arithmetic_precision": policy.arithmetic, "angle_recipe": policy.recipe,
                   "fused": "true" if policy.fused else "false",
                   "trig_error": repr(policy.trig_error),
                   "table_rounding": policy.table_rounding,
                   "output_rounding": policy.output_rounding,
                   "trig_argument": policy.trig_argument})
    if tensor_layout is not None:
        md["tensor_layout"] = tensor_layout
    return md


class Fp8Bytes:
    """An FP8 tensor's bytes (NumPy / torch uint8, any shape) labelled with its format, for
    save_dump: "e4m3fn" and "e4m3fnuz" are written as safetensors F8_E4M3, "e5m2" as F8_E5M2
    (what they mean is the dump's declared fp8_format). PyTorch builds with float8 dtypes can pass
    their float8 tensors to save_dump directly."""

    def __init__(self, data, fmt):
        if fmt not in ("e4m3fn", "e4m3fnuz", "e5m2"):
            raise ValueError(f"Fp8Bytes: format '{fmt}' is not e4m3fn, e4m3fnuz or e5m2")
        a = data.detach().cpu().numpy() if _is_torch(data) else np.asarray(data)
        if a.dtype != np.uint8:
            raise TypeError(f"Fp8Bytes: the bytes must be uint8, got {a.dtype}")
        self.data, self.st = np.ascontiguousarray(a), "F8_E5M2" if fmt == "e5m2" else "F8_E4M3"


def _dump_entry(name, t):
    """(raw NumPy array, safetensors dtype) of one tensor of a dump."""
    if name in ("positions", "slot_mapping"):
        return _positions_np(t), "I64"
    if isinstance(t, Fp8Bytes):
        return t.data, t.st
    if _is_torch(t):
        f8 = {getattr(_torch(), n, None): st for n, st in
              (("float8_e4m3fn", "F8_E4M3"), ("float8_e4m3fnuz", "F8_E4M3"),
               ("float8_e5m2", "F8_E5M2"))}
        f8.pop(None, None)
        if t.dtype in f8:
            return t.detach().cpu().contiguous().view(_torch().uint8).numpy(), f8[t.dtype]
        if t.dtype == _torch().uint8:
            return t.detach().cpu().contiguous().numpy(), "U8"
    elif np.asarray(t).dtype == np.uint8:
        return np.ascontiguousarray(t), "U8"
    raw, d = _raw(t, name)
    return raw, _ST_DTYPES[d]


def save_dump(path, *, positions, spec, policy=None, tensor_layout=None, metadata=None,
              **tensors):
    """Writes a safetensors dump for `ropecheck check --tensors PATH` without the `safetensors`
    package: the tensors given by name (x and y, or q/q_out and k/k_out, or a backward's grad_y
    and grad_x = s R(m)^T grad_y; torch or NumPy, f64 /
    f32 / f16, bf16 from torch), positions (int64/int32) and the __metadata__ `check` reads (the
    spec's keys, the declared policy when given, tensor_layout when given, and the string keys of
    metadata=, e.g. a fused FP8 cache dump's chain). A fused RoPE + FP8 quantization + cache-write
    dump gives x, slot_mapping, cache_before, cache_after (Fp8Bytes, uint8, or torch float8) and
    scale (docs/check.md, "Fused FP8 cache writes"). The file is written to a temporary name and
    renamed, so PATH is never half-written."""
    if not tensors:
        raise ValueError("save_dump: give the tensors by name, e.g. x=..., y=...")
    entries = []
    for name, t in list(tensors.items()) + [("positions", positions)]:
        raw, st = _dump_entry(name, t)
        entries.append((name, st, list(raw.shape), raw.tobytes()))
    header, offset = {}, 0
    for name, st, shape, data in entries:
        header[name] = {"dtype": st, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header["__metadata__"] = _metadata(spec, policy, tensor_layout)
    header["__metadata__"].update({str(k): str(v) for k, v in (metadata or {}).items()})
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)  # the data starts 8-byte aligned
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(len(hj).to_bytes(8, "little"))
            f.write(hj)
            for e in entries:
                f.write(e[3])
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# ---- validate ------------------------------------------------------------------------------

def _torch_view(raw, dtype):
    """A torch tensor sharing raw's memory (so writes into x reach the worker's input guard)."""
    torch = _torch()
    if dtype == "bf16":
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(raw.view(_NUMPY[dtype]))


def _describe_call(x, positions, spec):
    """The call as fn received it: x and positions after the layout's transposition and batching
    (their shapes and dtypes, the first positions in fn's own order)."""
    pos = positions.flatten().tolist()
    shown = ",".join(str(v) for v in pos[:8]) + (",..." if len(pos) > 8 else "")
    return (f"fn(x={x.dtype} {list(x.shape)}, positions={positions.dtype} "
            f"{list(positions.shape)} [{shown}], spec={spec!r})")


def _takes_spec(fn):
    """Whether fn is called fn(x, positions, spec) (else fn(x, positions): model code of one
    configuration). An nn.Module is read through its forward."""
    target = getattr(fn, "forward", fn)
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return True
    n = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            n += 1
    return n >= 3


def _batch_rows(pos):
    """How many batch rows B the tokens of one call are split into for the 4-D layouts: 1 (one
    sequence, T = tokens), tokens (a decode step: T = 1, each row at its own position) or a
    divisor in between (B > 1 and T > 1), a function of the call's own numbers, so a call drawn
    again (shrinking, in-place vs out-of-place) gets the same shape. About two in three calls
    of more than one token have B > 1. Failures still name the token in call order: token
    b*T + t is row b, column t of fn's call."""
    n = pos.shape[0]
    if n < 2:
        return 1
    mids = [b for b in range(2, n) if n % b == 0]
    flat = pos.reshape(-1)
    pick = (n + int(flat[0]) + int(flat[-1])) % 3
    return (1, n, mids[len(mids) // 2] if mids else n)[pick]


def _to_layout(x, pos, tensor_layout):
    """x [tokens, heads, head_dim] and its positions as fn takes them: thd unchanged; bhtd
    [B, heads, T, head_dim] and bthd [B, T, heads, head_dim] with positions [B, T] (HF's
    position_ids; multi-axis: [n_axes, B, T]), the tokens in order, row b holding tokens
    b*T ... b*T + T - 1 (_batch_rows). Each output vector is still checked against its own
    token's input and position."""
    if tensor_layout == "thd":
        return x, pos
    b = _batch_rows(pos)
    n, h, d = x.shape
    xb = x.reshape(b, n // b, h, d)
    p = pos.reshape(b, n // b) if pos.dim() == 1 else pos.t().reshape(-1, b, n // b)
    return (xb.permute(0, 2, 1, 3) if tensor_layout == "bhtd" else xb), p


def _from_layout(y, tensor_layout):
    """fn's result in its layout (xa's shape: checked first) -> [tokens, heads, head_dim]."""
    if tensor_layout == "thd":
        return y
    yb = y.permute(0, 2, 1, 3) if tensor_layout == "bhtd" else y
    return yb.reshape(-1, yb.shape[2], yb.shape[3])


def _kernel_call(fn, in_place, tensor_layout="thd"):
    """The callable serve.cpp invokes per kernel call: (y raw bits, None) or (None, why)."""
    torch = _torch()
    with_spec = _takes_spec(fn)

    def call(x_raw, dtype, positions, spec):
        x = _torch_view(x_raw, dtype)
        pos = torch.from_numpy(positions)
        xa, pa = _to_layout(x, pos, tensor_layout)
        try:
            y = fn(xa, pa, spec) if with_spec else fn(xa, pa)
        except Exception as e:  # the kernel's own exception: a failure of this call
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return None, (f"{_describe_call(xa, pa, spec)} raised {type(e).__name__}: {e} "
                          f"({os.path.basename(tb.filename)}:{tb.lineno} in {tb.name})")
        if y is None and in_place:
            y = xa
        if not isinstance(y, torch.Tensor):
            return None, (f"{_describe_call(xa, pa, spec)} returned {type(y).__name__}, "
                          "expected a torch.Tensor")
        if y.dtype != xa.dtype or tuple(y.shape) != tuple(xa.shape):
            return None, (f"{_describe_call(xa, pa, spec)} returned {y.dtype} "
                          f"{list(y.shape)}, expected {xa.dtype} {list(xa.shape)}")
        y = _from_layout(y, tensor_layout).detach().cpu().contiguous()
        if dtype == "bf16":
            return y.view(torch.int16).numpy().view(np.uint16), None
        return y.numpy().view(_RAW[dtype]), None

    return call


def _autograd_backward(fn):
    """fn's backward as autograd computes it, in fn's own calling convention (g in, grad_x out):
    grad_x = d<fn(x), g>/dx at x = g reversed along head_dim (RoPE is linear, so the point does not
    matter for a correct kernel; an x unrelated to g keeps a backward that returns its input, or
    one that reads the saved x, from passing by accident). A torch.autograd.Function with a
    hand-written backward is called exactly as training calls it."""
    torch = _torch()
    with_spec = _takes_spec(fn)

    def backward(g, positions, spec):
        x = g.detach().flip(-1).clone().requires_grad_(True)
        xin = x.clone()  # an in-place fn may write into its argument, never into a leaf
        y = fn(xin, positions, spec) if with_spec else fn(xin, positions)
        if y is None:
            y = xin
        if not isinstance(y, torch.Tensor):
            raise TypeError(f"fn returned {type(y).__name__}, expected a torch.Tensor")
        if not y.requires_grad:
            raise RuntimeError("fn's output does not depend on x through autograd (no grad_fn): "
                               "backward=True needs a differentiable fn; give backward_fn= for "
                               "a kernel that exposes its backward directly")
        (gx,) = torch.autograd.grad(y, x, grad_outputs=g.to(y.dtype))
        return gx

    return backward


def _mask(names, allowed, what):
    m = 0
    for n in names:
        if n not in allowed:
            raise ValueError(f"{what}: '{n}' is not one of {', '.join(allowed)}")
        m |= 1 << allowed.index(n)
    return m


class ValidationResult:
    """What validate() found: passed, returncode, text (the coverage/verdict table `ropecheck
    validate` prints; str(v)), json (its validation.json), replay (Python calls that rerun each
    failed check), stderr."""

    def __init__(self, returncode, text, data, stderr, replay):
        self.returncode = returncode
        self.passed = returncode == 0
        self.text = text
        self.json = data
        self.stderr = stderr
        self.replay = replay
        self.classification = (data or {}).get("classification")

    def __bool__(self):
        return self.passed

    def __str__(self):
        if self.passed or not self.replay:
            return self.text
        return (self.text.rstrip("\n") + "\n\nreplay in Python:\n" +
                "\n".join("  " + r for r in self.replay) + "\n")

    __repr__ = __str__


def _replay(data, call):
    """One rc.validate call per failed check: the same domain, seed and budget, one property.
    call: validate()'s arguments; those left at their defaults are not repeated."""
    defaults = {k: p.default for k, p in inspect.signature(validate).parameters.items()}
    kw = {k: v for k, v in call.items()
          if k in ("budget", "seed") or not _same(v, defaults.get(k))}
    for k in ("dtypes", "layouts", "properties"):
        kw.pop(k, None)
    out = []
    for c in (data or {}).get("configurations", []):
        cells = dict(c.get("properties", {}), Differential=c.get("differential", {}))
        for name in [n for n, cell in cells.items() if "replay" in cell]:
            args = dict(dtypes=[c["dtype"]], layouts=[c["layout"]], properties=[name], **kw)
            out.append("rc.validate(fn, " + ", ".join(f"{k}={_literal(v)}" for k, v in
                                                      args.items()) + ")")
    return out


def _same(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return type(a) is type(b) and a == b


def _literal(v):
    """v as Python source: Spec and Policy repr as the calls that rebuild them; tuples as lists."""
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_literal(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(e)}" for k, e in v.items()) + "}"
    if isinstance(v, (Policy, Spec)):
        return "rc." + repr(v)
    if callable(v) and hasattr(v, "__name__"):  # supports=: the caller's function, by its name
        return v.__name__
    if _is_torch(v):  # a torch dtype (dtypes=[torch.bfloat16])
        return str(v)
    return repr(v)


def _declaration(fn, dtypes, layouts, head_dims, policy, in_place, magnitude_scale, scalings,
                 min_position, max_position, layouts_bitwise_symmetric, batch_invariant, name,
                 spec, hf_config, supports, tensor_layout):
    """What validate() and report() declare about fn, as the served worker's descriptor:
    (dtype names, layouts, the one spec or None, desc)."""
    dtypes = [_ropecheck._dtype_name(d, "dtypes") for d in dtypes]
    if tensor_layout not in ("thd", "bhtd", "bthd"):
        raise ValueError(f"tensor_layout: '{tensor_layout}' is not thd, bhtd or bthd")
    if hf_config is not None:
        if spec is not None:
            raise ValueError("give spec= or hf_config=, not both")
        spec = Spec.from_hf_config(hf_config)
    if spec is not None:
        layouts, head_dims = [spec.layout], [spec.head_dim]
        scalings = [] if spec.scaling == "none" else [spec.scaling]
        magnitude_scale = magnitude_scale or spec.scale != 1
        supports = _only(spec, supports)
    policies = _policies(policy, dtypes)
    flags = ((0 if in_place else _ropecheck.FLAG_NO_IN_PLACE) |
             (_ropecheck.FLAG_MAGNITUDE_SCALE if magnitude_scale else 0) |
             (_ropecheck.FLAG_LAYOUTS_BITWISE_SYMMETRIC if layouts_bitwise_symmetric else 0) |
             (0 if batch_invariant else _ropecheck.FLAG_BATCH_VARIANT))
    desc = {"name": name or getattr(fn, "__name__", type(fn).__name__),
            "dtypes": _mask(dtypes, _DTYPES, "dtypes"),
            "layouts": _mask(layouts, _LAYOUTS, "layouts"),
            "scalings": _mask(scalings, _SCALINGS, "scalings"),
            "head_dims": list(head_dims or []), "policies": policies, "flags": flags,
            "min_position": int(min_position), "max_position": int(max_position),
            "in_place": bool(in_place)}
    if supports is not None:
        desc["supports"] = supports
    return dtypes, list(layouts), spec, desc


class ReportResult:
    """What report() wrote: passed (every check of the report holds), returncode (0/1), out (the
    directory with report.json, report.md, report.html, junit.xml), json (report.json), text
    (what `ropecheck report` printed), stderr (its progress and the domain notes)."""

    def __init__(self, returncode, out, text, stderr):
        self.returncode = returncode
        self.passed = returncode == 0
        self.out = out
        self.text = text
        self.stderr = stderr
        with open(os.path.join(out, "report.json")) as f:
            self.json = json.load(f)
        self.headline = self.json.get("headline", {})

    def __bool__(self):
        return self.passed

    def __str__(self):
        return (f"ropecheck report of {self.json['options']['kernels'][0]}: "
                f"{'PASS' if self.passed else 'FAIL'} ({self.out}/report.html)\n" +
                self.headline.get("verdict", ""))

    __repr__ = __str__


def report(fn, out, dtypes=("f32",), layouts=("half",), head_dims=(64, 128), policy=None,
           bases=(1e4, 1e6), samples=None, seed=1, in_place=False, magnitude_scale=False,
           min_position=0, max_position=0, layouts_bitwise_symmetric=False,
           batch_invariant=False, timeout=10.0, name=None, spec=None, hf_config=None,
           supports=None, tensor_layout="thd", fp8=(), fp8_scale=1.0, fp8_convention="multiply",
           fp8_overflow="saturate"):
    """The precision report of `ropecheck report` (report.json, report.md, report.html,
    junit.xml in `out`) for the Python kernel fn(x, positions, spec) -> y, swept only inside the
    domain declared here (the arguments mean what they mean for validate()): the dtypes, layouts,
    head dims and bases fn is declared to take, positions up to max_position (when set) or 2^20.
    What of the request lay outside the domain is said in report.json's "domain" and at the top
    of report.md/html. spec= / hf_config=: fn implements that one configuration (full rotary and
    unscaled: the report sweeps head dim x base x layout). samples: vectors per kernel x dtype x
    spec x position bucket (default the CLI's). fp8: FP8 cache formats ("e4m3fn", "e4m3fnuz",
    "e5m2"): every output also quantized into each (per-tensor fp8_scale, fp8_convention
    "multiply" or "divide", fp8_overflow), the report's "FP8 cache bytes" section; fn still runs in
    `dtypes`. Returns a ReportResult; raises ValueError when `ropecheck report` refuses the call
    (exit 2: e.g. nothing of the sweep inside the domain, an unknown FP8 format)."""
    dtypes, layouts, spec, desc = _declaration(
        fn, dtypes, layouts, head_dims, policy, in_place, magnitude_scale, (), min_position,
        max_position, layouts_bitwise_symmetric, batch_invariant, name, spec, hf_config, supports,
        tensor_layout)
    if spec is not None:
        if spec.scaling != "none" or spec.rotary_dim != spec.head_dim or spec.sections:
            raise ValueError("report(spec=...): the report sweeps full-rotary unscaled specs "
                             f"(head dim x base x layout); this spec is {spec!r}")
        head_dims, bases = [spec.head_dim], [spec.base]
    args = [executable(), "report", "--dtypes", ",".join(dtypes), "--layouts", ",".join(layouts),
            "--bases", ",".join(repr(float(b)) for b in bases), "--seed", str(seed),
            "--timeout", str(timeout), "--out", os.fspath(out)]
    if head_dims:
        args += ["--head-dims", ",".join(str(int(h)) for h in head_dims)]
    if samples is not None:
        args += ["--samples", str(int(samples))]
    if max_position:
        args += ["--max-position", str(min(int(max_position), 1 << 20))]
    if isinstance(fp8, str):
        fp8 = [fp8]
    if fp8:
        args += ["--fp8", ",".join(fp8), "--fp8-scale", repr(float(fp8_scale)),
                 "--fp8-convention", str(fp8_convention), "--fp8-overflow", str(fp8_overflow)]
    with tempfile.TemporaryDirectory(prefix="ropecheck-") as tmp:
        code, text, stderr, serve_error = _run_served(
            args, tmp, _kernel_call(fn, in_place, tensor_layout), desc)
    if code == 2:
        raise ValueError(f"ropecheck report refused the call: {stderr.strip()}")
    if serve_error:
        raise RuntimeError(f"ropecheck report: the kernel's worker failed: {serve_error}")
    return ReportResult(code, os.fspath(out), text, stderr)


def validate(fn, dtypes=("f32",), layouts=("half",), head_dims=(64, 128), policy=None,
             budget="quick", seed=1, in_place=False, magnitude_scale=False, scalings=(),
             min_position=0, max_position=0, layouts_bitwise_symmetric=False,
             batch_invariant=False, properties=None, timeout=10.0, name=None, spec=None,
             hf_config=None, supports=None, tensor_layout="thd", shrink_seconds=None,
             backward=False, backward_fn=None):
    """Every property of the C++ suite, with `ropecheck validate`'s definitions, bounds and
    coverage rules, on the Python kernel fn(x, positions, spec) -> y.

    Model code as it is: spec=Spec(...) or hf_config="config.json" (a path or the parsed dict)
    says fn implements exactly that one configuration (a fixed base, head_dim, rotary_dim, layout
    and scaling): fn may then take (x, positions) only, the layout, head dim, scaling and scale
    flag follow from the spec, and the properties draw positions, inputs, tokens and heads only
    (the coverage line says so). supports=callable(spec, dtype_name) -> bool narrows the domain
    further (the C ABI's supports()). tensor_layout: "thd" (default, [tokens, heads, head_dim]),
    "bhtd" (HF's [batch, heads, tokens, head_dim], positions [batch, tokens] as position_ids) or
    "bthd" ([batch, tokens, heads, head_dim]); fn returns its result in the same layout. The 4-D
    layouts get one sequence, single-token decode rows ([B, heads, 1, head_dim], each row at its
    own position) and shapes in between; every vector is checked on its own. dtypes and the keys
    of a policy dict may be torch dtypes (torch.bfloat16) as well as names ("bf16").

    x: CPU torch tensor [tokens, heads, head_dim] of the dtype under test; positions: int64
    [tokens] for the 1-D layouts, [tokens, spec.n_axes] for the multi-axis ones (mrope, imrope,
    axial; column a is axis a's position, e.g. t, h, w); spec: a Spec. fn runs in the calling
    thread. The declared domain is a plain PyTorch RoPE function's unless told otherwise:
    out-of-place (in_place=True: fn may rotate x in place and return it or None), scale 1
    (magnitude_scale=True: spec.scale may differ), no scaling variant (scalings=["linear", ...]),
    any int64 position (min_position/max_position), the head dims given (None: any).
    policy: a Policy for every dtype, or {dtype: Policy}.
    batch_invariant: False (PyTorch's CPU kernels do not promise it): TokensAreIndependent
    compares each token's batched result with its single-token result within twice the derived
    pair bound; True: bit for bit. layouts_bitwise_symmetric: the same for LayoutsArePermutations
    (interleaved vs half).

    shrink_seconds: wall time one failing property may spend shrinking its counterexample
    (`ropecheck validate --shrink-seconds`; None: by budget, quick 1 s, standard 3 s, deep 20 s;
    all shrinking of the run shares 5 times that). The time fn spends counts in it: a failing
    run ends within its cases' time plus about that pool, with the smallest counterexample found.

    backward=True: also the Backward* properties, on the gradient autograd computes through fn
    (a torch.autograd.Function with a hand-written backward is called as training calls it):
    grad_x for an upstream gradient g must be s R(m)^T g within the derived bound, satisfy
    <fn(x), g> = <x, grad_x>, undo the forward, copy the pass-through gradient, and so on
    (docs/check.md, "Backward kernels"). backward_fn=callable: the same properties on a backward
    the kernel exposes directly, called as fn is (g in place of x; returns grad_x). Without either
    they read n/a.

    Ctrl-C (or a signal handler that raises, or fn raising KeyboardInterrupt / SystemExit) stops
    the run: the `ropecheck` process is killed and reaped, its files removed, and the exception
    propagates."""
    call = {k: v for k, v in locals().items() if k != "fn"}
    dtypes, layouts, spec, desc = _declaration(
        fn, dtypes, layouts, head_dims, policy, in_place, magnitude_scale, scalings, min_position,
        max_position, layouts_bitwise_symmetric, batch_invariant, name, spec, hf_config, supports,
        tensor_layout)
    if backward and backward_fn is not None:
        raise ValueError("give backward=True (autograd through fn) or backward_fn=, not both")
    if backward_fn is not None:
        desc["backward"] = _kernel_call(backward_fn, False, tensor_layout)
    elif backward:
        desc["backward"] = _kernel_call(_autograd_backward(fn), False, tensor_layout)
    args = [executable(), "validate", "--dtypes", ",".join(dtypes), "--layouts",
            ",".join(layouts), "--budget", budget, "--seed", str(seed), "--timeout", str(timeout)]
    if properties:
        args += ["--properties", ",".join(properties)]
    if shrink_seconds is not None:
        args += ["--shrink-seconds", str(float(shrink_seconds))]
    if spec is not None:
        args += ["--spec", json.dumps(_spec_keys(spec))]
    with tempfile.TemporaryDirectory(prefix="ropecheck-") as tmp:
        jpath = os.path.join(tmp, "validation.json")
        code, text, stderr, serve_error = _run_served(
            args + ["--json", jpath], tmp, _kernel_call(fn, in_place, tensor_layout), desc)
        data = None
        if os.path.exists(jpath):
            with open(jpath) as f:
                data = json.load(f)
    if code == 2:
        raise ValueError(f"ropecheck validate refused the call: {stderr.strip()}")
    if serve_error and code == 0:
        code = 1
        text += f"\nworker: {serve_error}\n"
    return ValidationResult(code, text, data, stderr, _replay(data, call))


def _only(spec, supports):
    """supports() of a function of one configuration: that spec (and the user's filter)."""
    def only(s, dtype):
        return s == spec and (supports is None or bool(supports(s, dtype)))
    return only


def _policies(policy, dtypes):
    """{dtype name: Policy} for every requested dtype. A dict must name each of them: a dtype it
    lacks would otherwise be judged by a policy nobody declared (a false FAIL or PASS)."""
    if policy is None:
        return {d: Policy() for d in dtypes}
    if not isinstance(policy, dict):
        return {d: policy for d in dtypes}
    named = {_ropecheck._dtype_name(k, "policy key"): p for k, p in policy.items()}
    missing = [d for d in dtypes if d not in named]
    if missing:
        raise ValueError(f"policy: no Policy for {', '.join(missing)} (the dict names "
                         f"{', '.join(named) or 'none'}); give one per requested dtype, e.g. "
                         "{'bf16': Policy(table='bf16', arithmetic='bf16')}")
    return {d: named[d] for d in dtypes}


def _spec_keys(spec):
    """The spec as the keys of `ropecheck check --spec` / a dump's __metadata__ (strings and
    numbers, exact: Python floats print as their shortest round-trip form)."""
    keys = {"head_dim": spec.head_dim, "rotary_dim": spec.rotary_dim, "base": spec.base,
            "layout": spec.layout, "scale": spec.scale}
    if spec.sections:
        keys["sections"] = list(spec.sections)
    if spec.scaling != "none":
        keys["scaling"] = spec.scaling
        for k in _SCALING_KEYS:
            v = getattr(spec, k, None)
            if v is None or (isinstance(v, (list, tuple)) and not v):
                continue
            keys[k] = list(v) if isinstance(v, (list, tuple)) else v
    return keys


_SCALING_KEYS = ("factor", "original_max_position_embeddings", "max_position_embeddings",
                 "seq_len", "beta_fast", "beta_slow", "truncate", "mscale", "mscale_all_dim",
                 "attention_factor", "low_freq_factor", "high_freq_factor", "short_factor",
                 "long_factor", "freq_factors")


def _run_served(args, tmp, call, desc):
    """Runs `ropecheck validate|report --worker-fds` and serves its kernel calls until it ends:
    (returncode, stdout, stderr, the worker's error or None). Whatever interrupts it (Ctrl-C),
    the process is killed and reaped before the exception propagates."""
    req_r, req_w = os.pipe()  # requests: ropecheck -> here
    rep_r, rep_w = os.pipe()  # replies: here -> ropecheck
    args = args + ["--worker-fds", f"{rep_r},{req_w}"]
    # Files, not pipes: nobody reads a pipe while this thread serves kernel calls.
    with open(os.path.join(tmp, "out"), "w+") as out, \
            open(os.path.join(tmp, "err"), "w+") as err:
        try:
            proc = subprocess.Popen(args, stdout=out, stderr=err, pass_fds=(rep_r, req_w))
        except BaseException:
            for fd in (req_r, rep_w):
                os.close(fd)
            raise
        finally:
            os.close(rep_r)
            os.close(req_w)
        serve_error = None
        try:
            try:
                # proc.kill ends the pipe: serve() returns once a signal handler raised.
                _ropecheck._serve(req_r, rep_w, call, desc, proc.kill)
            except RuntimeError as e:
                serve_error = str(e)
            finally:
                os.close(req_r)
                os.close(rep_w)
            code = proc.wait()
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                proc.wait()
            raise
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read(), serve_error
