"""`ropecheck check` on fused RoPE + FP8 quantization + KV-cache write dumps. The kernel here is a
PyTorch model of such a kernel (HF rotate_half in f32, an optional bf16 rounding, the scale in f32,
FP8 by an encoder written independently of ropecheck: nearest of the 256 decoded codes, ties to
the even code), correct and with each of the bugs fused kernels shipped. Positions reach 1M and
the slots are a permutation unrelated to them."""
import math
import subprocess

import numpy as np
import pytest
import torch

import kernels
import ropecheck as rc

F32 = rc.Policy(angle="f32", table="f32", arithmetic="f32", recipe="hf_f32")
BITS = {"e4m3fn": (4, 3, 7), "e4m3fnuz": (4, 3, 8), "e5m2": (5, 2, 15)}


def decode_table(fmt):
    e_bits, m_bits, bias = BITS[fmt]
    out = []
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e, m = (b >> m_bits) & ((1 << e_bits) - 1), b & ((1 << m_bits) - 1)
        if (fmt == "e4m3fn" and e == 15 and m == 7) or (fmt == "e4m3fnuz" and b == 0x80):
            out.append(math.nan)
        elif fmt == "e5m2" and e == 31:
            out.append(s * math.inf if m == 0 else math.nan)
        elif e == 0:
            out.append(s * m * 2.0 ** (1 - bias - m_bits))
        else:
            out.append(s * (1 + m / 2 ** m_bits) * 2.0 ** (e - bias))
    return np.array(out)


def encode(q, fmt, rounding="nearest_even", overflow="saturate"):
    """FP8 bytes of the f32 values q, by brute force over the decoded codes."""
    table = decode_table(fmt)
    finite = np.flatnonzero(np.isfinite(table))
    vals = table[finite]
    top = np.nanmax(vals)
    q = np.asarray(q, dtype=np.float64).ravel()
    out = np.empty(q.size, dtype=np.uint8)
    for i, v in enumerate(q):
        if abs(v) > top and overflow == "saturate":
            v = math.copysign(top, v)
        if rounding == "toward_zero":
            ok = finite[(np.abs(vals) <= abs(v)) & ((vals * v >= 0))]
            best = ok[np.argmax(np.abs(table[ok]))]
        else:
            d = np.abs(vals - v)
            cand = finite[d == d.min()]
            if len(cand) > 1:  # a tie (or the two zeros): the even code, else the sign's zero
                even = [c for c in cand if table[c] != 0 and c % 2 == 0]
                zeros = [c for c in cand if table[c] == 0 and (c >= 128) == (math.copysign(1, v) < 0)]
                cand = even or zeros or list(cand)
            best = cand[0]
        if overflow == "nan" and abs(v) > top:
            # PyTorch's .to(float8_e4m3fn): nearest-even on the grid extended past max, NaN
            # where that is above max (the tie with the extended point goes to max's even code).
            top_code = int(np.flatnonzero(table == top)[0])
            half = (top - table[top_code - 1]) / 2
            if abs(v) > top + half or (abs(v) == top + half and top_code % 2 == 1):
                best = 0x7F if fmt == "e4m3fn" else (0x80 if fmt == "e4m3fnuz" else 0x7E)
        out[i] = best
    return out


def rotate(x, cos, sin, rd):
    """HF rotate_half on x[..., :rd] in x's dtype, the rest passed through."""
    xr, xp = x[..., :rd], x[..., rd:]
    return torch.cat((xr * cos + kernels.rotate_half(xr) * sin, xp), -1)


def fused(x, positions, slots, n_slots, scale, spec, fmt="e4m3fn", bug=None,
          intermediate=None, divide=False, row_offset=0, width=None, one_head=False, paged=None,
          overflow="saturate"):
    """The kernel: rotate x (bf16) in f32, optionally round to bf16, scale, quantize, write."""
    T, H, D = x.shape
    W = width or D
    pos_for_angle = torch.tensor(slots) if bug == "slot_as_position" else positions
    cos, sin = kernels.hf_cos_sin(pos_for_angle.clamp(min=0), spec)
    y = rotate(x.float(), cos[:, None, :], sin[:, None, :], spec.rotary_dim)
    if intermediate == "bf16" or bug == "undeclared_bf16":
        y = y.bfloat16().float()
    s = scale if scale.dim() == 0 else scale[..., None]
    wrong_way = bug == "scale_wrong_way"
    y = (y / s if divide != wrong_way else y * s).float()
    codes = encode(y.numpy(), fmt, "toward_zero" if bug == "truncation" else "nearest_even",
                   overflow)
    codes = codes.reshape(T, H, D)
    cache = np.random.default_rng(3).integers(0, 256, size=(n_slots, H, W), dtype=np.uint8)
    before = cache.copy()
    for t in range(T):
        if slots[t] >= 0 or bug == "padding_writes_last_slot":  # -1 indexes the last row
            cache[slots[t], :, row_offset:row_offset + D] = codes[t]
    shape = (n_slots, W) if one_head else (n_slots, H, W)
    if paged:
        shape = (n_slots // paged, paged) + shape[1:]
    return before.reshape(shape), cache.reshape(shape)


def make_dump(tmp_path, name, bug=None, declare=None, fmt="e4m3fn", granularity="per_tensor",
              H=4, D=64, rd=64, scale_value=0.37, **kw):
    torch.manual_seed(11)
    spec = rc.Spec(head_dim=D, rotary_dim=rd, base=1e4, layout="half")
    positions = torch.tensor([0, 1, 2, 3, 5, 17, 100, 1023, 4095, 4096, 65535, 131071, 131072,
                              262144, 500000, 1000000], dtype=torch.int64)
    T = len(positions)
    n_slots = 32
    slots = list(np.random.default_rng(5).permutation(n_slots - 1)[:T])  # the last row: unused
    slots[3] = slots[9] = -1  # padding tokens: no write
    x = (torch.randn(T, H, D) * 3).bfloat16()
    x[0, 0, :8] = torch.tensor([0.0, -0.0, 1e-3, -1e-3, 2.0 ** -12, 100.0, -100.0, 37.0])
    if granularity == "per_tensor":
        scale = torch.tensor(scale_value, dtype=torch.float32)
    elif granularity == "per_head":
        scale = torch.tensor([0.37, 1.0, 0.011, 2.5], dtype=torch.float32)[:H]
    else:
        scale = (torch.rand(T, H) * 0.5 + 0.01).float()
    before, after = fused(x, positions, slots, n_slots, scale, spec, fmt=fmt, bug=bug, **kw)
    meta = {"fp8_format": fmt, "fp8_overflow": kw.get("overflow", "saturate"),
            "scale_convention": "divide" if kw.get("divide") else "multiply",
            "scale_granularity": granularity,
            "intermediate": kw.get("intermediate") or "none",
            "cache_row_offset": kw.get("row_offset", 0),
            "cache_layout": "sd" if kw.get("one_head") else "shd"}
    meta.update(declare or {})
    path = tmp_path / f"{name}.safetensors"
    rc.save_dump(path, positions=positions, spec=spec, policy=F32, metadata=meta,
                 x=x, slot_mapping=torch.tensor(slots),
                 cache_before=rc.Fp8Bytes(before, fmt), cache_after=rc.Fp8Bytes(after, fmt),
                 scale=scale)
    return path


def run(path):
    r = subprocess.run([rc.executable(), "check", "--tensors", str(path)], capture_output=True,
                       text=True)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.parametrize("fmt", ["e4m3fn", "e4m3fnuz", "e5m2"])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_head", "per_token_head"])
def test_correct_fused_dump_passes(tmp_path, fmt, granularity):
    code, out = run(make_dump(tmp_path, "ok", fmt=fmt, granularity=granularity))
    assert code == 0, out
    assert "PASS" in out and " 0 outside the accepted range" in out


def test_divide_convention_and_bf16_intermediate_pass_when_declared(tmp_path):
    code, out = run(make_dump(tmp_path, "div_bf16", divide=True, intermediate="bf16"))
    assert code == 0, out


def test_overflow_policies(tmp_path):
    # x / 0.02 puts |x| > 8.96 past e4m3fn's 448: saturated to +-448, or NaN as PyTorch's cast.
    sat = make_dump(tmp_path, "sat", divide=True, scale_value=0.02)
    code, out = run(sat)
    assert code == 0, out
    assert " 0 past the format's max" not in out, out  # there is overflow to check
    code, out = run(make_dump(tmp_path, "nan", divide=True, scale_value=0.02, overflow="nan"))
    assert code == 0, out
    # Each kernel declared with the other's policy fails.
    code, out = run(make_dump(tmp_path, "sat_as_nan", divide=True, scale_value=0.02,
                              declare={"fp8_overflow": "nan"}))
    assert code == 1, out
    code, out = run(make_dump(tmp_path, "nan_as_sat", divide=True, scale_value=0.02,
                              overflow="nan", declare={"fp8_overflow": "saturate"}))
    assert code == 1 and "= nan" in out, out


@pytest.mark.parametrize("bug,declare,text", [
    ("scale_wrong_way", None, "outside the accepted range"),
    ("truncation", None, "outside the accepted range"),
    ("undeclared_bf16", None, "outside the accepted range"),
    ("padding_writes_last_slot", None, "no token addresses it"),
    ("slot_as_position", None, "outside the accepted range"),
])
def test_broken_fused_kernel_is_flagged(tmp_path, bug, declare, text):
    code, out = run(make_dump(tmp_path, bug, bug=bug, declare=declare))
    assert code == 1, out
    assert text in out and ("FAIL token" in out or "FAIL slot" in out), out


def test_mla_decoupled_slice_in_a_paged_cache(tmp_path):
    # DeepSeek MLA: one head, rows of 576 = 512 compressed KV + a 64-wide RoPE slice, paged
    # [blocks, block_size, 576].
    kw = dict(H=1, D=64, rd=64, row_offset=512, width=576, one_head=True, paged=16)
    code, out = run(make_dump(tmp_path, "mla", **kw))
    assert code == 0, out
    assert "RoPE slice at element 512" in out
    code, out = run(make_dump(tmp_path, "mla_trunc", bug="truncation", **kw))
    assert code == 1, out


def test_bad_fused_dumps_exit_2(tmp_path):
    path = make_dump(tmp_path, "gran", declare={"scale_granularity": "per_head"})
    code, out = run(path)
    assert code == 2 and "scale_granularity per_head needs 4" in out, out
    path = make_dump(tmp_path, "fmt", declare={"fp8_format": "e5m2"})
    code, out = run(path)
    assert code == 2 and "declared fp8_format e5m2" in out, out


def small_dump(tmp_path, name, positions, slots):
    spec = rc.Spec(head_dim=64, rotary_dim=64, base=1e4, layout="half")
    cache = rc.Fp8Bytes(np.zeros((4, 1, 64), np.uint8), "e4m3fn")
    meta = {"fp8_format": "e4m3fn", "scale_convention": "multiply",
            "scale_granularity": "per_tensor"}
    path = tmp_path / f"{name}.safetensors"
    rc.save_dump(path, positions=torch.tensor(positions), spec=spec, policy=F32, metadata=meta,
                 x=torch.ones(len(positions), 1, 64).bfloat16(),
                 slot_mapping=torch.tensor(slots), cache_before=cache, cache_after=cache,
                 scale=torch.tensor(1.0))
    return path


def test_a_dump_that_checked_nothing_is_not_a_pass(tmp_path):
    # Every token padding (-1): the cache is rightly unchanged, but no byte of the chain was
    # checked: exit 1 with a coverage failure, never PASS.
    code, out = run(small_dump(tmp_path, "empty", [0, 1], [-1, -1]))
    assert code == 1 and "FAIL coverage: no element was checked" in out, out


def test_position_outside_the_oracle_contract_exits_2(tmp_path):
    code, out = run(small_dump(tmp_path, "far", [2 ** 62], [0]))
    assert code == 2 and "outside |m| < 2^62" in out, out
