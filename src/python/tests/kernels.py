"""PyTorch RoPE kernels for the tests: correct ones (HF rotate_half, Meta complex, GPT-J
interleaved, linear scaling, Qwen2-VL M-RoPE) and broken ones, each with the bug real kernels
have had. All written the way their models write them, none using ropecheck."""

import torch


def inv_freq(spec, exponent_dim=None):
    """HF / Meta: 1 / base^(arange(0, rd, 2) / rd) in f32 (exponent_dim: the head_dim bug)."""
    rd = spec.rotary_dim
    d = exponent_dim or rd
    inv = 1.0 / (spec.base ** (torch.arange(0, rd, 2, dtype=torch.int64).float() / d))
    if spec.scaling == "linear":
        inv = inv / spec.factor
    return inv


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def cos_sin(angles):
    """cos/sin of f32 angles in f32, as transformers does (emb.cos(), emb.sin()). Debian's torch
    1.13 on CPU is not bitwise batch-invariant here: the same angle's cos can differ in its last
    bit between a 1-token and a 6-token call (seen: rotary_dim 98, position 131071), which is why
    rc.validate compares tokens within the bound unless batch_invariant=True."""
    return angles.cos(), angles.sin()


def hf_cos_sin(positions, spec, exponent_dim=None, offset=0):
    freqs = (positions + offset).float()[:, None] * inv_freq(spec, exponent_dim)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return cos_sin(emb)


def hf_rope(x, positions, spec, sin_sign=1.0, table=None, exponent_dim=None, offset=0):
    """transformers' apply_rotary_pos_emb with partial rotary (x[..., :rd] rotated)."""
    rd = spec.rotary_dim
    cos, sin = hf_cos_sin(positions, spec, exponent_dim, offset)
    if table is not None:  # a cos/sin cache kept in another precision
        cos, sin = cos.to(table).float(), sin.to(table).float()
    cos, sin = cos.to(x.dtype)[:, None, :], sin.to(x.dtype)[:, None, :]
    xr, xp = x[..., :rd], x[..., rd:]
    y = xr * cos + rotate_half(xr) * (sin_sign * sin)
    return torch.cat((y, xp), dim=-1)


def meta_rope(x, positions, spec):
    """Llama's reference: freqs_cis = torch.polar(1, m * theta), view_as_complex (interleaved)."""
    rd = spec.rotary_dim
    freqs = 1.0 / (spec.base ** (torch.arange(0, rd, 2)[: rd // 2].float() / rd))
    freqs = torch.outer(positions.float(), freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xr = x[..., :rd].float().reshape(*x.shape[:-1], -1, 2)
    out = torch.view_as_real(torch.view_as_complex(xr.contiguous()) * freqs_cis[:, None, :])
    return torch.cat((out.flatten(-2).type_as(x), x[..., rd:]), dim=-1)


def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def gptj_rope(x, positions, spec):
    """GPT-J: sinusoid einsum, duplicate_interleave, rotate_every_two (stack + flatten)."""
    rd = spec.rotary_dim
    sinusoid = torch.einsum("i,j->ij", positions.float(), inv_freq(spec))
    cos, sin = cos_sin(sinusoid)
    sin = torch.repeat_interleave(sin, 2, dim=-1)[:, None, :].to(x.dtype)
    cos = torch.repeat_interleave(cos, 2, dim=-1)[:, None, :].to(x.dtype)
    xr = x[..., :rd]
    return torch.cat((xr * cos + rotate_every_two(xr) * sin, x[..., rd:]), dim=-1)


def mrope_cos_sin(positions, spec, axes=(0, 1, 2)):
    """Qwen2-VL: cos/sin of one ladder over rotary_dim for each axis t, h, w ([3, T, rd]), then
    apply_multimodal_rotary_pos_emb's split: chunk i of mrope_section * 2 is taken from axis
    i % 3. positions: [T, 3] (HF's position_ids [3, batch, T], transposed, batch 1)."""
    freqs = positions.T.float()[:, :, None] * inv_freq(spec)[None, None, :]  # [3, T, rd/2]
    cos, sin = cos_sin(torch.cat((freqs, freqs), dim=-1))
    split = list(spec.sections) * 2

    def pick(t):
        return torch.cat([m[axes[i % 3]] for i, m in enumerate(t.split(split, dim=-1))], dim=-1)

    return pick(cos), pick(sin)


def qwen2vl_mrope(x, positions, spec, axes=(0, 1, 2), sin_sign=1.0):
    """Qwen2-VL's multimodal rotary embedding (half pairing, partial rotary as hf_rope); a 1-D
    spec goes to hf_rope."""
    if spec.layout != "mrope":
        return hf_rope(x, positions, spec)
    rd = spec.rotary_dim
    cos, sin = mrope_cos_sin(positions, spec, axes)
    cos, sin = cos.to(x.dtype)[:, None, :], sin.to(x.dtype)[:, None, :]
    xr, xp = x[..., :rd], x[..., rd:]
    return torch.cat((xr * cos + rotate_half(xr) * (sin_sign * sin), xp), dim=-1)


def batch_dependent(x, positions, spec):
    """Correct, but a batch of more than one token is rotated in f64 and rounded once, a single
    token in the tensor's dtype: last-bit differences between a token batched and alone, each
    within the bound of an f32-arithmetic policy (a vectorised body with a scalar tail)."""
    if x.shape[0] > 1:
        return hf_rope(x.double(), positions, spec).to(x.dtype)
    return hf_rope(x, positions, spec)


# ---- broken ----------------------------------------------------------------------------------

def sin_sign_flipped(x, positions, spec):
    return hf_rope(x, positions, spec, sin_sign=-1.0)


def positions_off_by_one(x, positions, spec):
    return hf_rope(x, positions, spec, offset=1)


def bf16_table(x, positions, spec):
    return hf_rope(x, positions, spec, table=torch.bfloat16)


def truncate_to_bf16(t):
    """f32 -> bf16 by keeping the top 16 bits (round toward zero), as ncnn's float32_to_bfloat16."""
    bits = t.float().contiguous().view(torch.int32) & -65536  # 0xffff0000 as int32
    return bits.view(torch.float32).to(torch.bfloat16)  # exact: already a bf16 value


def ncnn_bf16_truncating(x, positions, spec):
    """ncnn's x86 bf16 RotaryEmbed (rotaryembed_bf16s.h): f32 cos/sin truncated to bf16, the
    rotation in f32, the result truncated to bf16. Defined for bf16 inputs, full rotary."""
    cos, sin = hf_cos_sin(positions, spec)
    cos = truncate_to_bf16(cos).float()[:, None, :]
    sin = truncate_to_bf16(sin).float()[:, None, :]
    xf = x.float()
    return truncate_to_bf16(xf * cos + rotate_half(xf) * sin)


def exponent_over_head_dim(x, positions, spec):
    return hf_rope(x, positions, spec, exponent_dim=spec.head_dim)


def half_pairing_interleaved(x, positions, spec):
    """Declared interleaved, pairs (i, i + rd/2) as rotate_half does."""
    return hf_rope(x, positions, spec)


def in_place_aliasing(x, positions, spec):
    """Writes the first half into x, then reads the overwritten half for the second."""
    rd, h = spec.rotary_dim, spec.rotary_dim // 2
    cos, sin = hf_cos_sin(positions, spec)
    cos, sin = cos.to(x.dtype)[:, None, :h], sin.to(x.dtype)[:, None, :h]
    x1, x2 = x[..., :h], x[..., h:rd]
    x[..., :h] = x1 * cos - x2 * sin
    x[..., h:rd] = x2 * cos + x1 * sin  # x1 is already rotated
    return x


def raises(x, positions, spec):
    raise ValueError("kernel exploded")


def wrong_dtype(x, positions, spec):
    return hf_rope(x.double(), positions, spec)


def nan_output(x, positions, spec):
    y = hf_rope(x, positions, spec)
    y[..., 0] = float("nan")
    return y


def first_position_broadcast(x, positions, spec):
    """positions[0] used for every token (the decode-step bug)."""
    return hf_rope(x, positions[:1].expand_as(positions), spec)


def mrope_h_w_swapped(x, positions, spec):
    """M-RoPE reading the h sections from the w positions and back (position_ids rows swapped)."""
    return qwen2vl_mrope(x, positions, spec, axes=(0, 2, 1))


def mrope_sin_sign_flipped(x, positions, spec):
    """M-RoPE turning the wrong way (transposed rotation)."""
    return qwen2vl_mrope(x, positions, spec, sin_sign=-1.0)


def mrope_sections_in_wrong_order(x, positions, spec):
    """M-RoPE taking the chunks of mrope_section from axes w, h, t instead of t, h, w."""
    return qwen2vl_mrope(x, positions, spec, axes=(2, 1, 0))
