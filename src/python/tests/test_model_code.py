"""Model code as it is: rc.validate on a transformers-style RoPE module of ONE configuration
(spec=, no adapter, HF's [batch, heads, tokens, head_dim] tensors and position_ids), hints that
name a failure's known cause, no silent defaults, torch dtypes wherever dtype names are, and
rc.save_dump without the safetensors package. The module is written here with plain torch in the
shape of transformers' LlamaRotaryEmbedding + apply_rotary_pos_emb (rotate_half)."""
import json
import os
import subprocess
import time

import pytest
import torch

import ropecheck as rc

F32 = rc.Policy(angle="f32", table="f32", arithmetic="f32", recipe="hf_f32")
BF16 = rc.Policy(angle="f32", table="bf16", arithmetic="bf16", recipe="hf_f32")
SPEC = rc.Spec(head_dim=64, rotary_dim=64, base=500000.0, layout="half")


class LlamaRotaryEmbedding(torch.nn.Module):
    """inv_freq as a buffer; forward(x, position_ids) -> (cos, sin) in x's dtype."""

    def __init__(self, head_dim, base):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() /
                                   head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class RopeModule(torch.nn.Module):
    """The model's RoPE step on q: forward(q [B, H, T, D], position_ids [B, T])."""

    def __init__(self, head_dim=64, base=500000.0):
        super().__init__()
        self.rotary_emb = LlamaRotaryEmbedding(head_dim, base)

    def forward(self, q, position_ids):
        cos, sin = self.rotary_emb(q, position_ids)
        return apply_rotary_pos_emb(q, q, cos, sin)[0]


class InterleavedMutant(RopeModule):
    """The layout-swapped mutant: pairs (2i, 2i+1) where the model pairs (i, i + D/2)."""

    def forward(self, q, position_ids):
        cos, sin = self.rotary_emb(q, position_ids)
        half = cos.shape[-1] // 2
        c = cos[..., :half].repeat_interleave(2, dim=-1).unsqueeze(1)
        s = sin[..., :half].repeat_interleave(2, dim=-1).unsqueeze(1)
        x1, x2 = q[..., 0::2], q[..., 1::2]
        rot = torch.stack((-x2, x1), dim=-1).flatten(-2)
        return q * c + rot * s


def test_transformers_style_module_passes_with_spec_and_no_adapter():
    t0 = time.monotonic()
    v = rc.validate(RopeModule(), spec=SPEC, tensor_layout="bhtd", dtypes=["f32", torch.bfloat16],
                    policy={"f32": F32, torch.bfloat16: BF16})
    secs = time.monotonic() - t0
    print(f"transformers-style module: {secs:.1f} s, passed={v.passed}")
    assert v.passed, str(v)
    assert "positions, inputs, tokens and heads" in str(v)  # the coverage line says so
    for c in v.json["configurations"]:
        assert c["layout"] == "half"
        assert c["properties"]["MatchesReferenceWithinBound"]["classification"] == "pass"
        # Other specs are not the model's: relations between specs do not apply.
        assert c["properties"]["LayoutsArePermutations"]["classification"] == "not_applicable"


def test_layout_swapped_mutant_is_flagged_with_a_layout_hint():
    t0 = time.monotonic()
    v = rc.validate(InterleavedMutant(), spec=SPEC, tensor_layout="bhtd", policy=F32,
                    properties=["Differential", "MatchesReferenceWithinBound"])
    secs = time.monotonic() - t0
    print(f"layout mutant: {secs:.1f} s, classification={v.classification}")
    assert not v.passed
    assert v.classification == "wrong_results", str(v)  # not non_finite_output
    assert "the output matches the interleaved layout" in str(v), str(v)


def test_supports_callable_narrows_the_domain():
    calls = []

    def sup(spec, dtype):
        calls.append(dtype)
        return spec.head_dim == 64 and spec.rotary_dim == 64

    def fn(x, positions, spec):
        return RopeModule(spec.head_dim, spec.base)(x, positions)

    v = rc.validate(fn, head_dims=[64, 128], policy=F32, supports=sup, tensor_layout="bhtd",
                    properties=["Differential", "MatchesReferenceWithinBound"])
    assert v.passed, str(v)
    assert calls and set(calls) == {"f32"}


def test_in_place_callable_may_rotate_x_itself():
    def fn(x, positions, spec):  # x [tokens, heads, head_dim]; rotates x[..., :rd] in place
        rd = spec.rotary_dim
        xr = x[..., :rd].transpose(0, 1)[None]  # [1, heads, tokens, rd]
        xr = RopeModule(rd, spec.base)(xr, positions[None])
        x[..., :rd] = xr[0].transpose(0, 1)

    v = rc.validate(fn, head_dims=[64], policy=F32, in_place=True,
                    properties=["Differential", "InputUntouched", "InPlaceEqualsOutOfPlace"])
    assert v.passed, str(v)


def test_no_silent_defaults():
    with pytest.raises(ValueError, match="no Policy for bf16"):
        rc.validate(RopeModule(), spec=SPEC, tensor_layout="bhtd", dtypes=["f32", "bf16"],
                    policy={"f32": F32})
    x = torch.randn(1, 4, 4, 64)  # T == H: bhtd or bthd?
    pos = torch.arange(4)
    with pytest.raises(ValueError, match="tensor_layout"):
        rc.check(x, x, pos, SPEC)
    with pytest.raises(ValueError, match="interleaved, half"):
        rc.Spec(head_dim=64, layout="neox")
    assert rc.Policy(table=torch.bfloat16, arithmetic="bf16") == \
        rc.Policy(table="bf16", arithmetic="bf16")


def test_hf_bf16_under_the_default_policy_names_the_policy_that_describes_it():
    q = torch.randn(1, 8, 64, 64, dtype=torch.bfloat16)
    pos = torch.arange(64)[None] * 97
    y = RopeModule()(q, pos)
    r = rc.check(q, y, pos[0], SPEC, tensor_layout="bhtd")
    print(str(r))
    assert not r.passed
    assert "inf" not in f"{r.max_error_u}"
    # The smallest change of the declaration under which every vector passes (verify::advise):
    # a bf16 table alone already holds here; followed, the check passes.
    assert "declare Policy(table='bf16')" in str(r), str(r)
    assert rc.check(q, y, pos[0], SPEC, policy=rc.Policy(table="bf16"), tensor_layout="bhtd").passed
    assert rc.check(q, y, pos[0], SPEC, policy=BF16, tensor_layout="bhtd").passed


def test_save_dump_is_checked_by_the_cli(tmp_path):
    q = torch.randn(1, 4, 32, 64)
    pos = torch.arange(32) + 4000
    y = RopeModule()(q, pos[None])
    path = tmp_path / "rope_dump.safetensors"
    rc.save_dump(path, x=q, y=y, positions=pos, spec=SPEC, policy=F32, tensor_layout="bhtd")
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    assert header["__metadata__"]["base"] == "500000.0"
    assert header["__metadata__"]["layout"] == "half"
    r = subprocess.run([rc.executable(), "check", "--tensors", str(path)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # The broken input: the mutant's output fails, with the layout named.
    rc.save_dump(path, x=q, y=InterleavedMutant()(q, pos[None]), positions=pos, spec=SPEC,
                 policy=F32, tensor_layout="bhtd")
    r = subprocess.run([rc.executable(), "check", "--tensors", str(path)], capture_output=True,
                       text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "matches the interleaved layout" in r.stdout
    assert not os.path.exists(str(path) + f".tmp{os.getpid()}")


def test_hf_config_and_scaled_specs_reach_the_cli_exactly():
    # hf_config= builds the spec from the config; a scaled spec passes through `validate --spec`
    # unchanged (supports() compares it with ==, so any drift would be a coverage failure).
    cfg = {"hidden_size": 512, "num_attention_heads": 8, "rope_theta": 500000.0,
           "max_position_embeddings": 8192}
    v = rc.validate(RopeModule(), hf_config=cfg, tensor_layout="bhtd", policy=F32,
                    properties=["Differential", "MatchesReferenceWithinBound"])
    assert v.passed, str(v)
    exact = rc.Policy(angle="f64", table="f64", arithmetic="f64", recipe="pow_product")
    llama3 = rc.Spec(head_dim=128, base=500000.0, layout="half", scaling="llama3", factor=8.0,
                     low_freq_factor=1.0, high_freq_factor=4.0,
                     original_max_position_embeddings=8192)

    def fn(x, positions):  # the exact rotation, rounded to x's dtype
        return torch.from_numpy(rc.reference(x, positions, llama3)).to(x.dtype)

    v = rc.validate(fn, spec=llama3, policy=exact,
                    properties=["Differential", "MatchesReferenceWithinBound"])
    assert v.passed, str(v)


def test_shrink_seconds_reaches_the_cli_and_the_replay():
    # One wall-time budget for shrinking, C plugins and Python callables alike (#27, #30): the
    # message names the budget that stopped the shrinking and the replay line repeats it.
    v = rc.validate(InterleavedMutant(), spec=SPEC, tensor_layout="bhtd", policy=F32,
                    properties=["MatchesReferenceWithinBound"], shrink_seconds=0.001)
    assert not v.passed
    assert "--shrink-seconds 0.001" in str(v), str(v)
    assert any("shrink_seconds=0.001" in r for r in v.replay), v.replay
