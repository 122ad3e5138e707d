"""Model code as it is: rc.validate on a transformers-style RoPE module of ONE configuration
(spec=, no adapter, HF's [batch, heads, tokens, head_dim] tensors and position_ids), hints that
name a failure's known cause, no silent defaults, torch dtypes wherever dtype names are, and
rc.save_dump without the safetensors package. The module is written here with plain torch in the
shape of transformers' LlamaRotaryEmbedding + apply_rotary_pos_emb (rotate_half)."""
import json
import math
import os
import re
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


class FirstRowOnlyMutant(RopeModule):
    """The shape of MLX #3949 (ml-explore/mlx issue 3949): a batched single-token decode
    [B > 1, H, 1, D] in which only the first batch row is rotated; the rest come back as they
    went in. Every other shape is rotated correctly."""

    def forward(self, q, position_ids):
        y = super().forward(q, position_ids)
        if q.shape[0] > 1 and q.shape[2] == 1:
            y = y.clone()
            y[1:] = q[1:]
        return y


class BthdModule(RopeModule):
    """The same model code on [B, T, H, D] tensors (transformers' layout before transpose(1, 2))."""

    def forward(self, q, position_ids):
        return super().forward(q.transpose(1, 2), position_ids).transpose(1, 2)


def test_4d_layouts_draw_batches_and_decode_rows():
    shapes = []

    def recording(q, position_ids):
        shapes.append((tuple(q.shape), tuple(position_ids.shape)))
        return RopeModule()(q, position_ids)

    v = rc.validate(recording, spec=SPEC, tensor_layout="bhtd", policy=F32)  # every property
    assert v.passed, str(v)
    assert all(x[0] == p[0] and x[2] == p[1] and x[3] == 64 for x, p in shapes), shapes
    assert any(x[0] > 1 and x[2] == 1 for x, _ in shapes), "no decode shape [B > 1, H, 1, D]"
    assert any(x[0] > 1 and x[2] > 1 for x, _ in shapes), "no batch of sequences"
    assert any(x[0] == 1 and x[2] > 1 for x, _ in shapes), "no single sequence"
    # The correct module on [B, T, H, D] passes as well.
    v = rc.validate(BthdModule(), spec=SPEC, tensor_layout="bthd", policy=F32,
                    properties=["Differential", "MatchesReferenceWithinBound"])
    assert v.passed, str(v)


@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
def test_first_batch_row_only_mutant_fails(layout):
    fn = FirstRowOnlyMutant() if layout == "bhtd" else \
        (lambda q, p: FirstRowOnlyMutant()(q.transpose(1, 2), p).transpose(1, 2))
    v = rc.validate(fn, spec=SPEC, tensor_layout=layout, policy=F32,
                    properties=["Differential", "MatchesReferenceWithinBound"])
    assert not v.passed, str(v)
    assert v.classification == "wrong_results", str(v)


def test_kernel_error_states_the_call_as_fn_received_it():
    def broken(q, position_ids):
        raise RuntimeError("boom")

    v = rc.validate(broken, spec=SPEC, tensor_layout="bhtd", policy=F32,
                    properties=["MatchesReferenceWithinBound"])
    text = str(v) + v.stderr
    assert not v.passed
    m = re.search(r"fn\(x=torch\.float32 \[(\d+), (\d+), (\d+), 64\], positions=torch\.int64 "
                  r"\[(\d+), (\d+)\] \[", text)
    assert m, text
    b, _, t, pb, pt = map(int, m.groups())
    assert (b, t) == (pb, pt), m.group(0)  # x [B, H, T, D] and positions [B, T] as fn got them
    assert "raised RuntimeError: boom" in text, text

    def wrong_shape(q, position_ids):
        return q[0]

    v = rc.validate(wrong_shape, spec=SPEC, tensor_layout="bthd", policy=F32,
                    properties=["MatchesReferenceWithinBound"])
    text = str(v) + v.stderr
    m = re.search(r"returned torch\.float32 \[(\d+), (\d+), 64\], expected torch\.float32 "
                  r"\[(\d+), (\d+), (\d+), 64\]", text)
    assert m, text
    assert [int(g) for g in m.groups()[:2]] == [int(g) for g in m.groups()[3:5]], m.group(0)


def test_hf_config_families_and_refusals():
    # GPT-NeoX / Pythia-1.4B's keys: a quarter of each 128-wide head, rotary_emb_base.
    pythia = {"model_type": "gpt_neox", "hidden_size": 2048, "num_attention_heads": 16,
              "rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 2048}
    s = rc.Spec.from_hf_config(pythia)
    assert (s.head_dim, s.rotary_dim, s.base, s.layout) == (128, 32, 10000.0, "half")
    with pytest.raises(ValueError, match="'rotary_pct' is a RoPE key that is not read"):
        rc.validate(RopeModule(), hf_config={k: v for k, v in pythia.items()
                                             if k not in ("model_type", "rotary_emb_base")},
                    tensor_layout="bhtd", policy=F32)
    gemma3 = {"model_type": "gemma3_text", "head_dim": 64, "hidden_size": 256,
              "num_attention_heads": 4, "rope_theta": 1000000.0, "rope_local_base_freq": 500000.0}
    with pytest.raises(ValueError, match="layer_type="):
        rc.Spec.from_hf_config(gemma3)
    local = rc.Spec.from_hf_config(gemma3, layer_type="sliding_attention")
    assert local == SPEC  # head 64, base 500000, half: the model code above
    v = rc.validate(RopeModule(), spec=local, tensor_layout="bhtd", policy=F32,
                    properties=["Differential"])
    assert v.passed, str(v)


# One notion of magnitude (#37): a YaRN or LongRoPE configuration has magnitude s = scale x its
# attention factor != 1, R(0) = s I and K(K(x,a),b) = s K(x,a+b). Correct code of one
# configuration (here the exact rotation rounded to x's dtype) passes ZeroPositionIsIdentity and
# ComposesAdditively under spec= and hf_config=; the same code with the factor dropped (s -> 1)
# or squared (s -> s^2) fails both.
EXACT = rc.Policy(angle="f64", table="f64", arithmetic="f64", recipe="pow_product")
YARN = rc.Spec(head_dim=128, base=1000000.0, layout="half", scaling="yarn", factor=4.0,
               original_max_position_embeddings=32768)
YARN_AF = math.log(4.0) * 0.1 + 1
YARN_EXPLICIT = rc.Spec(head_dim=128, base=1000000.0, layout="half", scaling="yarn", factor=4.0,
                        original_max_position_embeddings=32768, attention_factor=0.8)
LONGROPE = rc.Spec(head_dim=32, base=10000.0, layout="half", scaling="longrope",
                   original_max_position_embeddings=4096, max_position_embeddings=131072,
                   seq_len=8192, short_factor=[1 + 0.05 * i for i in range(16)],
                   long_factor=[1 + 1.5 * i for i in range(16)])
LONGROPE_AF = math.sqrt(1 + math.log(32) / math.log(4096))
MAGNITUDE = {"yarn": (YARN, YARN_AF), "yarn_explicit": (YARN_EXPLICIT, 0.8),
             "longrope": (LONGROPE, LONGROPE_AF)}
MAG_PROPS = ["ZeroPositionIsIdentity", "ComposesAdditively", "PreservesNorm",
             "MatchesReferenceWithinBound"]


def exact_rotation(spec):
    def fn(x, positions):
        return torch.from_numpy(rc.reference(x, positions, spec)).to(x.dtype)
    return fn


def with_attention_factor(spec, af):
    d = {k: getattr(spec, k) for k in ("head_dim", "base", "layout", "scaling") +
         rc._SCALING_KEYS if getattr(spec, k, None) not in (None, [], ())}
    d["attention_factor"] = af
    return rc.Spec(**d)


def cells(v):
    return {n: c["result"] for c in v.json["configurations"]
            for n, c in c["properties"].items()}


@pytest.mark.parametrize("name", sorted(MAGNITUDE))
def test_scaled_configuration_passes_and_a_dropped_or_squared_factor_fails(name):
    spec, af = MAGNITUDE[name]
    v = rc.validate(exact_rotation(spec), spec=spec, policy=EXACT, properties=MAG_PROPS)
    assert v.passed, str(v)
    print(v.text)  # the property table (pytest -s)
    for bad in (1.0, af * af):
        v = rc.validate(exact_rotation(with_attention_factor(spec, bad)), spec=spec, policy=EXACT,
                        properties=MAG_PROPS[:2])
        assert not v.passed, str(v)
        got = cells(v)
        assert got["ZeroPositionIsIdentity"] == "FAIL" and got["ComposesAdditively"] == "FAIL", got


def test_scaled_hf_config_passes():
    # gpt-oss's YaRN (factor 32, no mscale pair: attention factor 0.1 ln 32 + 1 = 1.35)
    cfg = {"head_dim": 64, "hidden_size": 2880, "num_attention_heads": 64,
           "max_position_embeddings": 131072, "rope_theta": 150000,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                            "beta_slow": 1.0, "truncate": False,
                            "original_max_position_embeddings": 4096}}
    spec = rc.Spec(head_dim=64, base=150000.0, layout="half", scaling="yarn", factor=32.0,
                   original_max_position_embeddings=4096, truncate=False)
    v = rc.validate(exact_rotation(spec), hf_config=cfg, policy=EXACT, properties=MAG_PROPS)
    assert v.passed, str(v)
    v = rc.validate(exact_rotation(with_attention_factor(spec, 1.0)), hf_config=cfg, policy=EXACT,
                    properties=MAG_PROPS[:2])
    assert not v.passed, str(v)
