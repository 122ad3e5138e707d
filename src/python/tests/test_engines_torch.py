"""The PyTorch engine recipes (`hf_eager`, `vllm_native`) against golden sets made by the real
upstream code, bit for bit (ctest engines_torch).

The upstream code never enters this repository: transformers' and vLLM's functions were run by
hand, outside it, and only their inputs and output bits are here, in golden/hf_eager.npz,
golden/vllm_native.npz, golden/vllm_native_scaled.npz (vLLM's scaled classes) and
golden/vllm_native_mrope.npz (MRotaryEmbedding); golden/README.md says how they were made
(repository, file, commit, function, PyTorch version, ATEN_CPU_CAPABILITY, seed) and each file
carries the same in its `meta`. Every golden output element is compared with the engine kernel's (rc.apply_kernel) bit
for bit: an emulation that does not match is a bug or a found engine difference, never a
tolerance. The comparison is shown to fail on a flipped bit and on kernels with another recipe.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ropecheck as rc

GOLDEN = Path(__file__).resolve().parent / "golden"
# dtype -> (NumPy bits type, torch integer view, torch float type)
DTYPES = {"f64": (np.int64, torch.int64, torch.float64),
          "f32": (np.int32, torch.int32, torch.float32),
          "f16": (np.int16, torch.int16, torch.float16),
          "bf16": (np.int16, torch.int16, torch.bfloat16)}
ENGINES = ("hf_eager", "vllm_native")


def load(engine):
    z = np.load(GOLDEN / f"{engine}.npz", allow_pickle=False)
    return {k: z[k] for k in z.files}, json.loads(str(z["meta"]))


GOLD = {e: load(e) for e in ENGINES}


def as_torch(bits, dt):
    npt, it, ft = DTYPES[dt]
    return torch.from_numpy(np.ascontiguousarray(bits).view(npt)).view(it).view(ft)


def bits(t):
    return t.contiguous().view(DTYPES[str_dtype(t)][1]).numpy()


def str_dtype(t):
    return next(k for k, v in DTYPES.items() if v[2] == t.dtype)


def case_inputs(engine, i):
    """(x [tokens, heads, head_dim], positions, spec, golden bits of the rotated dims)."""
    arrays, meta = GOLD[engine]
    c = meta["cases"][i]
    pos = arrays["positions"]
    n = pos.shape[0] * c["heads"] * c["head_dim"]
    x = as_torch(arrays[f"x_{c['dtype']}"][:n], c["dtype"]).reshape(pos.shape[0], c["heads"],
                                                                     c["head_dim"])
    spec = rc.Spec(head_dim=c["head_dim"], rotary_dim=c["rotary_dim"], base=c["base"],
                   layout=c.get("layout", "half"), scale=c.get("attention_scaling", 1.0))
    want = arrays[f"out{i}"].view(DTYPES[c["dtype"]][0])
    return x, torch.from_numpy(pos), spec, want


def mismatches(got, x, want):
    """Elements of the engine's output whose bits differ from the golden set: the rotated dims
    against the upstream output, the pass-through dims against x (upstream cats x's slice back,
    so the golden set stores only the rotated dims)."""
    rd = want.shape[-1]
    g = bits(got)
    return (int(np.count_nonzero(g[..., :rd] != want))
            + int(np.count_nonzero(g[..., rd:] != bits(x)[..., rd:])))


def cases(engine):
    return [pytest.param(i, id=f"{c['dtype']}-hd{c['head_dim']}-rd{c['rotary_dim']}-"
                         f"b{c['base']:g}-{c.get('layout', 'half')}-h{c['heads']}"
                         + (f"-s{c['attention_scaling']:.4g}" if "attention_scaling" in c else ""))
            for i, c in enumerate(GOLD[engine][1]["cases"])]


COMPARED = {e: 0 for e in ENGINES}


@pytest.mark.parametrize("i", cases("hf_eager"))
def test_hf_eager_matches_golden(i):
    x, pos, spec, want = case_inputs("hf_eager", i)
    assert mismatches(rc.apply_kernel("hf_eager", x, pos, spec), x, want) == 0
    COMPARED["hf_eager"] += x.numel()


@pytest.mark.parametrize("i", cases("vllm_native"))
def test_vllm_native_matches_golden(i):
    x, pos, spec, want = case_inputs("vllm_native", i)
    assert mismatches(rc.apply_kernel("vllm_native", x, pos, spec), x, want) == 0
    COMPARED["vllm_native"] += x.numel()


# ---- vLLM's scaled classes (golden/vllm_native_scaled.npz) ---------------------------------------
# Each case names its own positions (`positions<config>`: below the cache's extent `rows`, up to
# its last row) and its variant's parameters; `seq_len` of a LongRoPE case is vLLM's max_model_len.
VLLM_SCALED = load("vllm_native_scaled")
VLLM_SCALING_KEYS = ("factor", "max_position_embeddings", "original_max_position_embeddings",
                "seq_len", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                "low_freq_factor", "high_freq_factor", "short_factor", "long_factor")


def vllm_scaled_spec(c, **change):
    scaling = {"kind": c["kind"], **{k: c[k] for k in VLLM_SCALING_KEYS if k in c}, **change}
    return rc.Spec(head_dim=c["head_dim"], rotary_dim=c["rotary_dim"], base=c["base"],
                   layout=c["layout"], scaling=scaling)


def vllm_scaled_inputs(i, **change):
    arrays, meta = VLLM_SCALED
    c = meta["cases"][i]
    pos = arrays[f"positions{c['config']}"]
    n = pos.shape[0] * c["heads"] * c["head_dim"]
    x = as_torch(arrays[f"x_{c['dtype']}"][:n], c["dtype"]).reshape(pos.shape[0], c["heads"],
                                                                     c["head_dim"])
    want = arrays[f"out{i}"].view(DTYPES[c["dtype"]][0])
    return x, torch.from_numpy(pos), vllm_scaled_spec(c, **change), want


def vllm_scaled_cases(dtype=None):
    return [pytest.param(i, id=f"{c['dtype']}-{c['kind']}-hd{c['head_dim']}-rd{c['rotary_dim']}-"
                         f"b{c['base']:g}-{c['layout']}-f{c.get('factor', 0):g}-rows{c['rows']}")
            for i, c in enumerate(VLLM_SCALED[1]["cases"]) if dtype in (None, c["dtype"])]


@pytest.mark.parametrize("i", vllm_scaled_cases())
def test_vllm_native_scaled_matches_golden(i):
    x, pos, spec, want = vllm_scaled_inputs(i)
    assert mismatches(rc.apply_kernel("vllm_native", x, pos, spec), x, want) == 0
    COMPARED["vllm_native_scaled"] = COMPARED.get("vllm_native_scaled", 0) + x.numel()


def test_scaled_golden_set_covers_the_variants():
    """Every variant vLLM has a class for (but M-RoPE), each in f32/bf16/f16, a non-power-of-two
    linear factor, LongRoPE on both sides of its start-up switch, caches reaching 1M rows."""
    arrays, meta = VLLM_SCALED
    cs = meta["cases"]
    assert {c["kind"] for c in cs} == {"linear", "dynamic", "yarn", "llama3", "longrope"}
    for kind in {c["kind"] for c in cs}:
        assert {c["dtype"] for c in cs if c["kind"] == kind} == {"f32", "bf16", "f16"}
    assert any(c["kind"] == "linear" and c["factor"] not in (2.0, 4.0, 8.0) for c in cs)
    assert any(c["kind"] == "yarn" and c.get("mscale") for c in cs)  # DeepSeek's class
    assert {c["seq_len"] > c["original_max_position_embeddings"]
            for c in cs if c["kind"] == "longrope"} == {True, False}
    assert max(c["rows"] for c in cs) >= 1 << 20
    assert meta["aten_cpu_capability"] == "default"
    for c in cs:  # each case's positions reach its cache's last row and stay below it
        pos = arrays[f"positions{c['config']}"]
        assert pos.max() == c["rows"] - 1 and pos.min() == 0


@pytest.mark.parametrize("i", vllm_scaled_cases("f32"))
def test_positions_past_the_cache_are_not_served(i):
    """vLLM's cache has `rows` rows: the engine serves the last one and labels the next one
    unsupported (the report's "past the cache"), never extrapolating."""
    c = VLLM_SCALED[1]["cases"][i]
    x = torch.ones(1, 1, c["head_dim"])
    spec = vllm_scaled_spec(c)
    rc.apply_kernel("vllm_native", x, torch.tensor([c["rows"] - 1]), spec)
    with pytest.raises(ValueError, match="returned unsupported"):
        rc.apply_kernel("vllm_native", x, torch.tensor([c["rows"]]), spec)


# What vLLM computes differently from HF for the same configuration, each caught by the golden
# set: below the original context, the spec read HF's way gives other bits.
def hf_reading_mismatches(kind, respec):
    """Outputs of vLLM's f32 golden cases of `kind` (positions below the original context) that the
    engine misses when told the HF reading of the configuration, respec(case) -> rc.Spec."""
    wrong = total = 0
    for i, c in enumerate(VLLM_SCALED[1]["cases"]):
        if c["kind"] != kind or c["dtype"] != "f32" or c.get("seq_len", 1 << 30) <= 4096:
            continue
        x, pos, _, want = vllm_scaled_inputs(i)
        orig = c.get("original_max_position_embeddings", c.get("max_position_embeddings"))
        keep = pos < orig
        got = rc.apply_kernel("vllm_native", x[keep], pos[keep], respec(c))
        wrong += mismatches(got, x[keep], want[keep.numpy()])
        total += want[keep.numpy()].size
    return wrong, total


def test_longrope_short_factors_are_caught():
    """HF chooses LongRoPE's factors per call by sequence length: a short prompt in a server whose
    max_model_len passed the original context gets the short factors in HF, the long ones in
    vLLM. Told HF's choice for such a prompt (seq_len 4096), the engine misses vLLM's outputs."""
    wrong, total = hf_reading_mismatches("longrope", lambda c: vllm_scaled_spec(c, seq_len=4096))
    print(f"\nlongrope short factors on vLLM's long-factor golden set: {wrong} of {total} differ")
    assert wrong > total // 2


def test_dynamic_ntk_at_hf_short_length_is_caught():
    """HF keeps the original base until the sequence passes max_position_embeddings; vLLM builds
    one cache with the base of factor * L. Told HF's short-sequence base (the unscaled spec), the
    engine misses vLLM's outputs."""
    wrong, total = hf_reading_mismatches(
        "dynamic", lambda c: rc.Spec(head_dim=c["head_dim"], rotary_dim=c["rotary_dim"],
                                     base=c["base"], layout=c["layout"]))
    print(f"\ndynamic NTK at HF's base below L on vLLM's golden set: {wrong} of {total} differ")
    assert wrong > total // 2


def test_golden_sets_cover_the_sampled_domain():
    """Each set holds f32/f16/bf16 (+ f64 for HF), full and partial rotary, both bases, positions
    past 2^24 (where float(m) rounds) and, for HF, negative ones, made at the scalar CPU loops."""
    for engine, (arrays, meta) in GOLD.items():
        dts = {c["dtype"] for c in meta["cases"]}
        assert {"f32", "f16", "bf16"} <= dts
        assert ("f64" in dts) == (engine == "hf_eager")
        assert any(c["rotary_dim"] < c["head_dim"] for c in meta["cases"])
        assert meta["aten_cpu_capability"] == "default"
        pos = arrays["positions"]
        assert pos.max() > (1 << 24) and (pos.min() < 0) == (engine == "hf_eager")


def test_compared_counts():
    """Printed for the record (pytest -s / the ctest log). Runs after the golden tests: every
    golden element was compared."""
    total = {e: sum(a.size for k, a in GOLD[e][0].items() if k.startswith("out")) for e in ENGINES}
    total["vllm_native_scaled"] = sum(a.size for k, a in VLLM_SCALED[0].items()
                                      if k.startswith("out"))
    print(f"\nengines_torch: golden outputs compared bit for bit: {COMPARED} elements "
          f"({total} of them rotated dims), 0 mismatches")
    for e in total:
        assert COMPARED.get(e, 0) >= total[e] > 0


# ---- the comparison can fail -------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_a_flipped_bit_is_caught(engine):
    """One flipped low bit in the engine's output, in a rotated and in a pass-through element."""
    seen = set()
    for i, c in enumerate(GOLD[engine][1]["cases"]):
        if c["dtype"] in seen or c["rotary_dim"] == c["head_dim"]:
            continue
        seen.add(c["dtype"])
        x, pos, spec, want = case_inputs(engine, i)
        got = rc.apply_kernel(engine, x, pos, spec)
        for idx in ((5, 0, 1), (5, 0, c["head_dim"] - 1)):
            broken = got.clone()
            broken.view(DTYPES[c["dtype"]][1])[idx] ^= 1
            assert mismatches(broken, x, want) == 1
    assert seen == {c["dtype"] for c in GOLD[engine][1]["cases"]}


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_one_rounding_rotation_is_caught(dt):
    """`table_f32` has hf_eager's f32 table but rotates in f32 with one rounding into the model
    dtype (what a fused kernel does) instead of PyTorch's three: a misdeclared HF recipe."""
    wrong = total = 0
    for i, c in enumerate(GOLD["hf_eager"][1]["cases"]):
        if c["dtype"] == dt:
            x, pos, spec, want = case_inputs("hf_eager", i)
            wrong += mismatches(rc.apply_kernel("table_f32", x, pos, spec), x, want)
            total += want.size
    print(f"\ntable_f32 on hf_eager's {dt} golden set: {wrong} of {total} outputs differ")
    assert wrong > total // 100


def test_exact_angles_are_caught():
    """`scalar` computes the angle in f64 (no f32 position / inv_freq / product roundings): at
    long context its f32 outputs differ from vLLM's f32 cache."""
    wrong = total = 0
    for i, c in enumerate(GOLD["vllm_native"][1]["cases"]):
        if c["dtype"] == "f32":
            x, pos, spec, want = case_inputs("vllm_native", i)
            wrong += mismatches(rc.apply_kernel("scalar", x, pos, spec), x, want)
            total += want.size
    print(f"\nscalar on vllm_native's f32 golden set: {wrong} of {total} outputs differ")
    assert wrong > total // 10


def test_vectorized_trig_differs_only_in_the_table():
    """The golden sets were made at PyTorch's scalar CPU loops (glibc cosf/sinf), which the
    kernels reproduce. Its AVX2/AVX-512 loops (SLEEF u10) give an f32 cos table that differs from
    the scalar loop's in some entries by one ulp: what the kernels declare as trig error."""
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


# ---- hf_eager's scaling variants, partial rotary and M-RoPE (golden/hf_eager_scaled.npz) --------
SCALED = np.load(GOLDEN / "hf_eager_scaled.npz", allow_pickle=False)
SCALED_META = json.loads(str(SCALED["meta"]))
# HF takes a call's length as max(position_ids) + 1 (dynamic's update, Phi-3's LongRoPE choice);
# the spec carries it as seq_len.
LENGTH_KINDS = ("dynamic", "longrope")


def scaled_inputs(i, **override):
    """(x, positions [tokens] or [tokens, 3], spec, golden bits) of hf_eager_scaled case i;
    override replaces scaling parameters (the broken engines below)."""
    c = SCALED_META["cases"][i]
    pos = SCALED[c["positions"]]
    n_tok = pos.shape[-1]
    n = n_tok * c["heads"] * c["head_dim"]
    x = as_torch(SCALED[f"x_{c['dtype']}"][:n], c["dtype"]).reshape(n_tok, c["heads"],
                                                                    c["head_dim"])
    scaling = dict(c["spec_scaling"])
    if scaling["kind"] in LENGTH_KINDS:
        scaling["seq_len"] = int(pos.max()) + 1
    scaling.update(override)
    extra = {"sections": c["sections"], "layout": "mrope"} if "sections" in c else {}
    spec = rc.Spec(head_dim=c["head_dim"], rotary_dim=c["rotary_dim"], base=c["base"],
                   **dict({"layout": "half"}, **extra),
                   scaling=None if scaling["kind"] == "none" else scaling)
    positions = torch.from_numpy(np.ascontiguousarray(pos.T if pos.ndim == 2 else pos))
    want = SCALED[f"out{i}"].view(DTYPES[c["dtype"]][0])
    return x, positions, spec, want


def scaled_cases():
    return [pytest.param(i, id=f"{c['variant']}-{c['dtype']}-hd{c['head_dim']}-rd{c['rotary_dim']}-"
                         f"b{c['base']:g}-{c['ctx']}-{i}")
            for i, c in enumerate(SCALED_META["cases"])]


SCALED_COMPARED = [0]


@pytest.mark.parametrize("i", scaled_cases())
def test_hf_eager_scaled_matches_golden(i):
    x, pos, spec, want = scaled_inputs(i)
    assert mismatches(rc.apply_kernel("hf_eager", x, pos, spec), x, want) == 0
    SCALED_COMPARED[0] += x.numel()


def test_scaled_golden_set_covers_every_variant():
    """Every rope_type at f32/bf16/f16, contexts up to 1M and past 2^24; LongRoPE on both sides of
    its switch and dynamic NTK on both of its paths; partial rotary; M-RoPE with distinct axes."""
    cases = SCALED_META["cases"]
    assert {c["variant"] for c in cases} == {"linear", "dynamic", "yarn", "longrope", "llama3",
                                             "partial", "mrope"}
    assert all({c["dtype"] for c in cases if c["variant"] == v} == {"f32", "bf16", "f16"}
               for v in {c["variant"] for c in cases})
    assert SCALED_META["aten_cpu_capability"] == "default"
    for kind, limit in (("longrope", 4096), ("dynamic", 4096)):
        tops = {int(SCALED[c["positions"]].max()) + 1 for c in cases if c["variant"] == kind}
        assert min(tops) <= limit < max(tops)
    assert max(int(SCALED[c["positions"]].max()) for c in cases) >= 1 << 24
    mrope = [SCALED[c["positions"]] for c in cases if c["variant"] == "mrope"]
    assert all(p.ndim == 2 and (p[0] != p[1]).any() and (p[1] != p[2]).any() for p in mrope)
    assert any(c["rotary_dim"] < c["head_dim"] and c["spec_scaling"]["kind"] != "none"
               for c in cases)


def test_scaled_compared_counts():
    total = sum(SCALED[f"out{i}"].size for i in range(len(SCALED_META["cases"])))
    print(f"\nhf_eager_scaled: {SCALED_COMPARED[0]} elements compared bit for bit ({total} rotated),"
          f" 0 mismatches")
    assert SCALED_COMPARED[0] >= total > 0


def first_scaled_case(variant, ctx=None):
    return next(i for i, c in enumerate(SCALED_META["cases"])
                if c["variant"] == variant and c["dtype"] == "f32" and ctx in (None, c["ctx"]))


@pytest.mark.parametrize("variant,ctx,override", [
    ("linear", None, {"factor": 16.0}),                 # the factor applied twice
    ("yarn", "128k", {"attention_factor": 1.1386294361119891 ** 2}),  # mscale applied twice
    ("dynamic", "32k", {"seq_len": 0}),                 # dynamic computed as a constant
    ("longrope", "128k", {"seq_len": 4096}),            # short factors at a long call
    ("llama3", "128k", {"kind": "none"}),               # llama3 computed and not returned
])
def test_broken_scaling_paths_are_caught(variant, ctx, override):
    """hf_eager run on a wrong spec (the reported engine bugs) differs from HF's bits."""
    i = first_scaled_case(variant, ctx)
    x, pos, spec, want = scaled_inputs(i, **override)
    wrong = mismatches(rc.apply_kernel("hf_eager", x, pos, spec), x, want)
    print(f"\n{variant} with {override}: {wrong} of {want.size} outputs differ")
    assert wrong > want.size // 10


# ---- the binding ---------------------------------------------------------------------------------
def test_f32_hf_recipe_is_table_f32():
    """ropecheck's own `table_f32` is the same f32 recipe: equal bits to hf_eager in f32."""
    for i, c in enumerate(GOLD["hf_eager"][1]["cases"]):
        if c["dtype"] == "f32":
            x, pos, spec, _ = case_inputs("hf_eager", i)
            assert bits(rc.apply_kernel("hf_eager", x, pos, spec)).tobytes() == bits(
                rc.apply_kernel("table_f32", x, pos, spec)).tobytes()


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


# ---- vLLM's MRotaryEmbedding (golden/vllm_native_mrope.npz) --------------------------------------
# Qwen2-VL's [16, 24, 24] and smaller sections, partial rotary with an empty t section, text-only
# 1-D positions and t = h = w, Qwen3-VL's interleaved sections (spec layout imrope) and one YaRN
# configuration (which vllm_native refuses: see test_vmrope_yarn_is_yarn_at_four_times_the_context).
# Golden positions are vLLM's [3, tokens] (or [tokens] text only); the engine takes [tokens, 3].
VMROPE = load("vllm_native_mrope")


def vmrope_spec(c, layout=None, sections=None):
    return rc.Spec(head_dim=c["head_dim"], rotary_dim=c["rotary_dim"], base=c["base"],
                   layout=layout or c["layout"], sections=sections or c["sections"])


def vmrope_inputs(i):
    """(x [tokens, heads, head_dim], vLLM's positions array, golden bits of the rotated dims)."""
    arrays, meta = VMROPE
    c = meta["cases"][i]
    pos = arrays[c["positions"]]
    n_tok = pos.shape[-1]
    x = as_torch(arrays[f"x_{c['dtype']}"][:n_tok * c["heads"] * c["head_dim"]],
                 c["dtype"]).reshape(n_tok, c["heads"], c["head_dim"])
    return x, pos, arrays[f"out{i}"].view(DTYPES[c["dtype"]][0])


def vmrope_positions(pos):
    """vLLM's [3, tokens] as the engine's [tokens, 3]; text-only [tokens] as it is."""
    return torch.from_numpy(np.ascontiguousarray(pos.T if pos.ndim == 2 else pos))


def vmrope_cases(scaled=False):
    return [pytest.param(i, id=f"{c['name']}-{c['dtype']}-hd{c['head_dim']}-rd{c['rotary_dim']}-"
                         f"{c['layout']}-{'-'.join(map(str, c['sections']))}-axes{c['n_axes']}")
            for i, c in enumerate(VMROPE[1]["cases"]) if ("scaling" in c) == scaled]


VMROPE_COMPARED = [0]


@pytest.mark.parametrize("i", vmrope_cases())
def test_vllm_native_mrope_matches_golden(i):
    c = VMROPE[1]["cases"][i]
    x, pos, want = vmrope_inputs(i)
    got = rc.apply_kernel("vllm_native", x, vmrope_positions(pos), vmrope_spec(c))
    assert mismatches(got, x, want) == 0
    VMROPE_COMPARED[0] += x.numel()


@pytest.mark.parametrize("i", [p for p in vmrope_cases() if
                               VMROPE[1]["cases"][p.values[0]]["layout"] == "mrope"])
def test_hf_eager_mrope_is_the_same_arithmetic(i):
    """HF's Qwen2-VL M-RoPE (hf_eager, checked on hf_eager_scaled.npz) gives vLLM's bits too: the
    same f32 angle, glibc cosf / sinf, cast to the model dtype and three rounded ops."""
    c = VMROPE[1]["cases"][i]
    x, pos, want = vmrope_inputs(i)
    assert mismatches(rc.apply_kernel("hf_eager", x, vmrope_positions(pos), vmrope_spec(c)),
                      x, want) == 0


def test_vmrope_golden_set_covers_the_variants():
    cases = VMROPE[1]["cases"]
    arrays = VMROPE[0]
    assert {c["dtype"] for c in cases} == {"f32", "bf16", "f16"}
    assert {c["layout"] for c in cases} == {"mrope", "imrope"}
    assert {1, 3} <= {c["n_axes"] for c in cases}
    assert any(c["rotary_dim"] < c["head_dim"] and 0 in c["sections"] for c in cases)
    assert VMROPE[1]["aten_cpu_capability"] == "default"
    for c in cases:  # each configuration reaches its cache's last row; t, h, w differ
        pos = arrays[c["positions"]]
        assert pos.max() == c["rows"] - 1
        if c["n_axes"] == 3 and c["name"] != "qwen2vl_equal":
            assert (pos[0] != pos[1]).any() and (pos[1] != pos[2]).any()
    assert sum(arrays[f"out{i}"].size for i in range(len(cases))) == 110592


def test_vmrope_compared_counts():
    """Runs after the golden tests: every unscaled golden case was compared."""
    want = sum(VMROPE[0][f"out{p.values[0]}"].size for p in vmrope_cases())
    print(f"\nvllm_native MRotaryEmbedding: {VMROPE_COMPARED[0]} elements compared bit for bit "
          f"({want} rotated), 0 mismatches")
    assert VMROPE_COMPARED[0] >= want > 0


@pytest.mark.parametrize("i", [p for p in vmrope_cases() if
                               VMROPE[1]["cases"][p.values[0]]["name"] in ("qwen2vl", "small",
                                                                          "imrope_qwen3vl")])
def test_vmrope_swapped_axes_are_caught(i):
    """An engine that reads h's position for w's sections and back (the columns swapped) misses
    vLLM's outputs on every multimodal case."""
    c = VMROPE[1]["cases"][i]
    x, pos, want = vmrope_inputs(i)
    got = rc.apply_kernel("vllm_native", x, vmrope_positions(pos[[0, 2, 1]]), vmrope_spec(c))
    wrong = mismatches(got, x, want)
    print(f"\n{c['name']} {c['dtype']}: h and w swapped: {wrong} of {want.size} outputs differ")
    assert wrong > want.size // 4


def test_vmrope_past_the_cache_and_negative_positions_are_not_served():
    """MRotaryEmbedding's cache has 4 * max_position_embeddings rows, which the unscaled spec
    does not carry: the engine serves any non-negative position; a negative one (which vLLM's
    cache[positions] would wrap to the last rows) is an error on every axis."""
    c = next(c for c in VMROPE[1]["cases"] if c["name"] == "qwen2vl")
    x = torch.ones(1, 1, c["head_dim"])
    rc.apply_kernel("vllm_native", x, torch.tensor([[c["rows"], 5, 7]]), vmrope_spec(c))
    with pytest.raises(ValueError, match="returned error"):
        rc.apply_kernel("vllm_native", x, torch.tensor([[3, 5, -1]]), vmrope_spec(c))


@pytest.mark.parametrize("i", vmrope_cases(scaled=True))
def test_vmrope_yarn_is_yarn_at_four_times_the_context(i):
    """get_rope's "yarn" with mrope_section builds MRotaryEmbedding with the original context L,
    which it multiplies by 4 for its cache and hands to the base class: YaRN's correction range
    is then computed at 4 L (and the cache has 4 L factor rows). vllm_native refuses M-RoPE with
    YaRN (the config's spec is YaRN at L); vLLM's bits are its 1-D YaRN at 4 L, pair by pair
    from each pair's axis (torch.cat of the sections), and not the YaRN at L."""
    c = VMROPE[1]["cases"][i]
    x, pos, want = vmrope_inputs(i)
    sc = c["scaling"]
    with pytest.raises(ValueError, match="does not support"):
        rc.apply_kernel("vllm_native", x, vmrope_positions(pos),
                        rc.Spec(head_dim=c["head_dim"], base=c["base"], layout="mrope",
                                sections=c["sections"], scaling=sc))

    def assembled(orig, keep):
        spec = rc.Spec(head_dim=c["head_dim"], rotary_dim=c["rotary_dim"], base=c["base"],
                       layout="half", scaling=dict(sc, original_max_position_embeddings=orig))
        per_axis = [rc.apply_kernel("vllm_native", x[keep], torch.from_numpy(pos[a][keep]), spec)
                    for a in range(3)]
        out = x[keep].clone()
        half, start = c["rotary_dim"] // 2, 0
        for a, n in enumerate(c["sections"]):
            for lo in (start, start + half):
                out[..., lo:lo + n] = per_axis[a][..., lo:lo + n]
            start += n
        return mismatches(out, x[keep], want[keep])

    L = sc["original_max_position_embeddings"]
    assert assembled(4 * L, np.arange(pos.shape[1])) == 0
    keep = np.flatnonzero((pos < L * sc["factor"]).all(axis=0))  # within YaRN-at-L's cache
    wrong, total = assembled(L, keep), want[keep].size
    print(f"\n{c['dtype']}: YaRN at the config's L instead of 4 L: {wrong} of {total} differ")
    assert len(keep) >= 8 and wrong > total // 10
