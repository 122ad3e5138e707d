"""The PyTorch engine recipes (`hf_eager`, `vllm_native`) against the real upstream code, bit for
bit (ctest engines_torch).

The upstream functions are written below as the upstream files write them, in plain torch (the
libraries themselves are not installed here), each quoted from the commit cited beside it
(Apache-2.0, the copyright of their authors). They run in this process's PyTorch on sampled
inputs; the engine kernel runs on the same inputs through rc.apply_kernel; every output element
is compared bit for bit. An emulation that does not match is a bug, not a tolerance.

PyTorch runs with ATEN_CPU_CAPABILITY=default (set by the ctest): its scalar CPU loops call glibc
cosf/sinf, as the kernels do. Its AVX2/AVX-512 loops call SLEEF's u10 cos/sin instead, which
differ from glibc by one ulp in some entries; the kernels model that as trig error
(torch_cpu.hpp), and test_vectorized_trig_differs_only_in_the_table counts it.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ropecheck as rc

DTYPES = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16,
          "bf16": torch.bfloat16}


# ---- huggingface/transformers ------------------------------------------------------------------
# src/transformers/modeling_rope_utils.py @ 0044e3b3facff1a1ad60b235c69d5b45beae75a4,
# _compute_default_rope_parameters (dim = int(head_dim * partial_rotary_factor)):
def hf_compute_default_rope_parameters(base, dim, device=None):
    attention_factor = 1.0  # Unused in this type of RoPE
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float().to(device) / dim))
    return inv_freq, attention_factor


# src/transformers/models/llama/modeling_llama.py @ 5dd4a63548857797727ae73eeb6a6e886ea02a3e,
# LlamaRotaryEmbedding.forward (default rope_type), rotate_half, apply_rotary_pos_emb:
def hf_llama_rotary_forward(inv_freq, attention_scaling, x, position_ids):
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    device_type = x.device.type
    device_type = device_type if isinstance(device_type, str) and device_type != "mps" else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
    cos = cos * attention_scaling
    sin = sin * attention_scaling
    return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def hf_rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (hf_rotate_half(q) * sin)
    k_embed = (k * cos) + (hf_rotate_half(k) * sin)
    return q_embed, k_embed


def hf_eager(x, positions, head_dim, rotary_dim, base, attention_scaling=1.0):
    """x: [tokens, heads, head_dim] -> the model's [batch=1, heads, seq, head_dim] layout and back.
    Partial rotary as the models with rotary_pct / partial_rotary_factor do it
    (src/transformers/models/gpt_neox/modeling_gpt_neox.py @
    203bf6f1c524062b3c109da5ff67e61f483407e7, GPTNeoXAttention.forward: query_rot =
    query[..., :rotary_ndims], query_pass = query[..., rotary_ndims:], rotate, torch.cat)."""
    q = x.permute(1, 0, 2)[None]
    inv_freq, attention_factor = hf_compute_default_rope_parameters(base, rotary_dim)
    cos, sin = hf_llama_rotary_forward(inv_freq, attention_scaling * attention_factor, q,
                                       positions[None, :])
    query_rot, query_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    query_rot, _ = hf_apply_rotary_pos_emb(query_rot, query_rot, cos, sin)
    q = torch.cat((query_rot, query_pass), dim=-1)
    return q[0].permute(1, 0, 2).contiguous()


# ---- vllm-project/vllm -------------------------------------------------------------------------
# vllm/model_executor/layers/rotary_embedding/base.py @ 04458da08417899fc04046216c986d28abeb85af,
# RotaryEmbedding._compute_inv_freq / _compute_cos_sin_cache / __init__ / forward_native.
def vllm_compute_inv_freq(base, rotary_dim):
    inv_freq = 1.0 / (base**(torch.arange(
        0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
    return inv_freq


def vllm_compute_cos_sin_cache(base, rotary_dim, t):
    """Upstream builds t = torch.arange(max_position_embeddings, dtype=torch.float) and the whole
    cache; forward_native then index_selects the token rows. Every entry is elementwise in t, so
    the caller passes the selected rows of that same arange (a cache of 2^25 rows would not fit)."""
    inv_freq = vllm_compute_inv_freq(base, rotary_dim)
    freqs = torch.einsum("i,j -> ij", t, inv_freq)
    cos = freqs.cos()
    sin = freqs.sin()
    cache = torch.cat((cos, sin), dim=-1)
    return cache


# vllm/model_executor/layers/rotary_embedding/common.py @
# 002d181a55a03803d7d69547846630069d2378b8, apply_rotary_emb_torch:
def vllm_apply_rotary_emb_torch(x, cos, sin, is_neox_style):
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if is_neox_style:
        x1, x2 = torch.chunk(x, 2, dim=-1)
    else:
        x1 = x[..., ::2]
        x2 = x[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if is_neox_style:
        return torch.cat((o1, o2), dim=-1)
    else:
        return torch.stack((o1, o2), dim=-1).flatten(-2)


def vllm_forward_native(cos_sin_cache, positions, query, head_size, rotary_dim, is_neox_style):
    positions = positions.flatten()
    num_tokens = positions.shape[0]
    cos_sin = cos_sin_cache.index_select(0, positions)
    cos, sin = cos_sin.chunk(2, dim=-1)
    query_shape = query.shape
    query = query.view(num_tokens, -1, head_size)
    query_rot = query[..., :rotary_dim]
    query_pass = query[..., rotary_dim:]
    query_rot = vllm_apply_rotary_emb_torch(query_rot, cos, sin, is_neox_style)
    query = torch.cat((query_rot, query_pass), dim=-1).reshape(query_shape)
    return query


def vllm_native(x, positions, head_dim, rotary_dim, base, is_neox_style):
    """The model dtype is x's (RotaryEmbedding(dtype=...): cache = cache.to(dtype))."""
    max_position_embeddings = int(positions.max()) + 1
    t = torch.arange(max_position_embeddings, dtype=torch.float)
    if max_position_embeddings <= 1 << 16:  # the whole cache, as upstream
        cache = vllm_compute_cos_sin_cache(base, rotary_dim, t).to(x.dtype)
        return vllm_forward_native(cache, positions, x, head_dim, rotary_dim, is_neox_style)
    rows = vllm_compute_cos_sin_cache(base, rotary_dim, t.index_select(0, positions)).to(x.dtype)
    index = torch.arange(positions.shape[0])
    return vllm_forward_native(rows, index, x, head_dim, rotary_dim, is_neox_style)


# ---- sampled inputs ----------------------------------------------------------------------------
def sample_x(gen, n_tokens, n_heads, head_dim, dtype):
    """Normal values at magnitudes 2^-6..2^6, plus zeros, signed zeros and tiny values."""
    x = torch.randn(n_tokens, n_heads, head_dim, generator=gen, dtype=torch.float64)
    x = x * torch.exp2(torch.randint(-6, 7, x.shape, generator=gen).double())
    flat = x.view(-1)
    flat[:: 97] = 0.0
    flat[1:: 101] = -0.0
    flat[2:: 89] *= 1e-30 if dtype in (torch.float64, torch.float32) else 1e-6
    return x.to(dtype)


def sample_positions(gen, n, nonneg):
    """Short context, up to 2^20, around 2^24 (where float(m) starts to round) and up to 2^25."""
    parts = [torch.arange(0, 8), torch.randint(0, 4096, (n,), generator=gen),
             torch.randint(0, 1 << 20, (n,), generator=gen),
             torch.randint((1 << 24) - 64, (1 << 24) + 4096, (n,), generator=gen),
             torch.randint(1 << 24, 1 << 25, (n,), generator=gen)]
    if not nonneg:
        parts.append(-torch.randint(1, 1 << 20, (n,), generator=gen))
    return torch.cat(parts).to(torch.int64)


def bits(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16 or t.dtype == torch.float16:
        return t.view(torch.int16).numpy()
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int64).numpy()


def mismatches(a, b):
    return int(np.count_nonzero(bits(a) != bits(b)))


HF_CASES = [(dt, hd, rd, base) for dt in ("f64", "f32", "bf16", "f16")
            for hd, rd in ((64, 64), (128, 128), (128, 64)) for base in (1e4, 5e5)]
VLLM_CASES = [(dt, hd, rd, base, neox) for dt in ("f32", "bf16", "f16")
              for hd, rd in ((64, 64), (128, 128), (128, 32)) for base in (1e4, 5e5)
              for neox in (True, False)]
COMPARED = {"hf_eager": 0, "vllm_native": 0}


def test_pytorch_runs_its_scalar_cpu_loops():
    assert os.environ.get("ATEN_CPU_CAPABILITY") == "default", (
        "run with ATEN_CPU_CAPABILITY=default (the ctest sets it): the kernels reproduce "
        "PyTorch's scalar CPU loops")


@pytest.mark.parametrize("dt,hd,rd,base", HF_CASES)
def test_hf_eager_bit_for_bit(dt, hd, rd, base):
    gen = torch.Generator().manual_seed(hd * 7 + rd + int(base) % 1000 + len(dt))
    pos = sample_positions(gen, 24, nonneg=False)
    x = sample_x(gen, pos.shape[0], 3, hd, DTYPES[dt])
    spec = rc.Spec(head_dim=hd, rotary_dim=rd, base=base, layout="half")
    want = hf_eager(x, pos, hd, rd, base)
    got = rc.apply_kernel("hf_eager", x, pos, spec)
    assert mismatches(want, got) == 0
    COMPARED["hf_eager"] += want.numel()


@pytest.mark.parametrize("scaling", [0.75, 1.1386294361119891])  # YaRN-like 0.1 ln 4 + 1
def test_hf_eager_attention_scaling_bit_for_bit(scaling):
    gen = torch.Generator().manual_seed(11)
    pos = sample_positions(gen, 16, nonneg=False)
    for dt in ("f32", "bf16"):
        x = sample_x(gen, pos.shape[0], 2, 128, DTYPES[dt])
        spec = rc.Spec(head_dim=128, base=5e5, layout="half", scale=scaling)
        want = hf_eager(x, pos, 128, 128, 5e5, attention_scaling=scaling)
        assert mismatches(want, rc.apply_kernel("hf_eager", x, pos, spec)) == 0
        COMPARED["hf_eager"] += want.numel()


@pytest.mark.parametrize("dt,hd,rd,base,neox", VLLM_CASES)
def test_vllm_native_bit_for_bit(dt, hd, rd, base, neox):
    gen = torch.Generator().manual_seed(hd * 5 + rd + int(base) % 1000 + len(dt) + neox)
    pos = sample_positions(gen, 24, nonneg=True)
    x = sample_x(gen, pos.shape[0], 3, hd, DTYPES[dt])
    spec = rc.Spec(head_dim=hd, rotary_dim=rd, base=base,
                   layout="half" if neox else "interleaved")
    want = vllm_native(x, pos, hd, rd, base, neox)
    got = rc.apply_kernel("vllm_native", x, pos, spec)
    assert mismatches(want, got) == 0
    COMPARED["vllm_native"] += want.numel()


def test_vllm_native_whole_cache_path():
    """Positions below 2^16: the whole upstream cache is built and index_selected."""
    gen = torch.Generator().manual_seed(5)
    pos = torch.randint(0, 5000, (64,), generator=gen)
    x = sample_x(gen, 64, 4, 128, torch.bfloat16)
    want = vllm_native(x, pos, 128, 128, 1e4, True)
    got = rc.apply_kernel("vllm_native", x, pos, rc.Spec(head_dim=128, layout="half"))
    assert mismatches(want, got) == 0
    COMPARED["vllm_native"] += want.numel()


def test_compared_counts():
    """Printed for the record (pytest -s / the ctest log): outputs compared bit for bit."""
    print(f"\nengines_torch: outputs compared bit for bit: {COMPARED}, 0 mismatches")
    assert COMPARED["hf_eager"] > 100000 and COMPARED["vllm_native"] > 100000


# ---- the comparison can fail -------------------------------------------------------------------
def hf_eager_one_rounding(x, positions, head_dim, rotary_dim, base):
    """A plausible wrong emulation: the same table, the rotation in f32 with one rounding into
    the model dtype (what a fused kernel does) instead of PyTorch's three."""
    q = x.permute(1, 0, 2)[None]
    inv_freq, _ = hf_compute_default_rope_parameters(base, rotary_dim)
    cos, sin = hf_llama_rotary_forward(inv_freq, 1.0, q, positions[None, :])
    qf = q.float()
    out = (qf * cos.float()) + (hf_rotate_half(qf) * sin.float())
    return out.to(x.dtype)[0].permute(1, 0, 2).contiguous()


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_one_rounding_rotation_is_caught(dt):
    gen = torch.Generator().manual_seed(3)
    pos = sample_positions(gen, 24, nonneg=True)
    x = sample_x(gen, pos.shape[0], 3, 128, DTYPES[dt])
    spec = rc.Spec(head_dim=128, base=1e4, layout="half")
    got = rc.apply_kernel("hf_eager", x, pos, spec)
    assert mismatches(hf_eager(x, pos, 128, 128, 1e4), got) == 0
    wrong = mismatches(hf_eager_one_rounding(x, pos, 128, 128, 1e4), got)
    assert wrong > 100, f"only {wrong} outputs differ"


def test_table_in_f64_is_caught():
    """Another wrong emulation: exact (f64) angles. Differs at long context in f32."""
    gen = torch.Generator().manual_seed(4)
    pos = sample_positions(gen, 24, nonneg=True)
    x = sample_x(gen, pos.shape[0], 2, 64, torch.float32)
    spec = rc.Spec(head_dim=64, base=1e4, layout="interleaved")
    inv = 1.0 / (1e4 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    ang = pos.double()[:, None] * inv[None, :]
    cache = torch.cat((ang.cos(), ang.sin()), dim=-1).float()
    wrong = vllm_forward_native(cache, torch.arange(pos.shape[0]), x, 64, 64, False)
    assert mismatches(wrong, rc.apply_kernel("vllm_native", x, pos, spec)) > 100


def test_vectorized_trig_differs_only_in_the_table():
    """Under PyTorch's AVX2/AVX-512 loops (SLEEF) the upstream f32 table differs from the scalar
    loop's in some entries by one ulp: what the kernels declare as trig error, not reproduce."""
    code = ("import torch;t=torch.arange(1<<16,dtype=torch.float)[:,None]*"
            "(1.0/(1e4**(torch.arange(0,128,2,dtype=torch.float)/128)))[None,:];"
            "import sys;sys.stdout.buffer.write(t.cos().numpy().tobytes())")
    runs = {}
    for cap in ("default", "avx2"):
        env = dict(os.environ, ATEN_CPU_CAPABILITY=cap)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             check=True).stdout
        runs[cap] = np.frombuffer(out, dtype=np.float32)
    a, b = runs["default"], runs["avx2"]
    differ = a != b
    ulps = np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))
    print(f"\nAVX2 vs scalar cos table: {int(differ.sum())} of {a.size} entries differ, "
          f"max {int(ulps.max())} ulp")
    assert ulps.max() <= 1


# ---- the binding ---------------------------------------------------------------------------------
def test_f32_hf_recipe_is_table_f32():
    """ropecheck's own `table_f32` is the same f32 recipe: equal bits to hf_eager in f32."""
    gen = torch.Generator().manual_seed(8)
    pos = sample_positions(gen, 16, nonneg=False)
    x = sample_x(gen, pos.shape[0], 2, 128, torch.float32)
    spec = rc.Spec(head_dim=128, rotary_dim=64, layout="half")
    assert mismatches(rc.apply_kernel("hf_eager", x, pos, spec),
                      rc.apply_kernel("table_f32", x, pos, spec)) == 0


def test_apply_kernel_refuses_bad_calls():
    x = torch.zeros(2, 1, 64, dtype=torch.bfloat16)
    pos = torch.tensor([0, 1])
    spec = rc.Spec(head_dim=64, layout="half")
    assert {"hf_eager", "vllm_native", "scalar"} <= set(rc.kernel_names())
    assert rc.kernel_policy("vllm_native", "bf16").arithmetic == "bf16"
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        rc.apply_kernel("nope", x, pos, spec)
    with pytest.raises(ValueError, match="head_dim=32"):
        rc.apply_kernel("hf_eager", x, pos, rc.Spec(head_dim=32))
    with pytest.raises(ValueError, match="does not support"):  # vLLM's class has no scale
        rc.apply_kernel("vllm_native", x, pos, rc.Spec(head_dim=64, scale=0.5))
    with pytest.raises(ValueError, match="returned error"):  # positions index the cache
        rc.apply_kernel("vllm_native", x, torch.tensor([0, -1]), spec)
    y = rc.apply_kernel("hf_eager", x[:, 0, :], pos, spec)  # [tokens, head_dim] works too
    assert y.shape == (2, 64) and y.dtype == torch.bfloat16
