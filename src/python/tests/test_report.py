"""rc.report: the precision report of a PyTorch callable, swept inside its declared domain, through
the same `ropecheck report` (its kernel served from this process). A correct HF rotate_half kernel
is reported (PASS, figures per dtype, the domain said); a broken one fails the report's checks."""
import json
import os

import pytest

import ropecheck as rc
from kernels import hf_rope

F32 = rc.Policy(angle="f32", table="f32", arithmetic="f32", recipe="hf_f32")
BF16 = rc.Policy(angle="f32", table="bf16", arithmetic="bf16", recipe="hf_f32")


def test_report_of_a_pytorch_kernel(tmp_path):
    out = tmp_path / "rep"
    r = rc.report(hf_rope, out, dtypes=["f32", "bf16"], layouts=["half"], head_dims=[64],
                  bases=[1e4, 5e5], policy={"f32": F32, "bf16": BF16}, samples=16,
                  max_position=70000)
    assert r.passed, r.stderr
    for f in ("report.json", "report.md", "report.html", "junit.xml"):
        assert (out / f).exists()
    doc = r.json
    assert doc["options"]["dtypes"] == ["f32", "bf16"]
    assert doc["options"]["head_dims"] == [64]
    assert doc["options"]["kernels"] == ["hf_rope"]
    # Both dtypes measured at every headline context, within their declared bounds.
    rows = doc["headline"]["rows"]
    assert [row["dtype"] for row in rows] == ["f32", "bf16"]
    assert all(row["supported"] and len(row["at"]) >= 3 for row in rows)
    assert all(c["passed"] for c in doc["checks"])
    assert "Kernel domain" in (out / "report.md").read_text()


def test_report_says_what_lay_outside_the_domain(tmp_path):
    # Declared head dims {64}; asked 64 and 80 through spec-free head_dims? No: the declaration
    # is the request here, so ask a dtype the callable is not declared for via the CLI's axes.
    r = rc.report(hf_rope, tmp_path / "o", dtypes=["f32"], layouts=["half", "interleaved"],
                  head_dims=[64], bases=[1e4], policy=F32, samples=8, max_position=5000,
                  supports=lambda spec, dtype: spec.layout == "half")
    assert r.passed
    assert any("interleaved" in n for n in r.json["domain"]["outside"])


def test_a_broken_kernel_fails_the_report(tmp_path):
    def sin_sign_bug(x, positions, spec):
        return hf_rope(x, positions, spec, sin_sign=-1.0)

    r = rc.report(sin_sign_bug, tmp_path / "b", dtypes=["f32"], layouts=["half"], head_dims=[64],
                  bases=[1e4], policy=F32, samples=8, max_position=5000)
    assert not r.passed and r.returncode == 1
    assert any(not c["passed"] for c in r.json["checks"])
    junit = (tmp_path / "b" / "junit.xml").read_text()
    assert "<failure" in junit


def test_nothing_inside_the_domain_is_refused(tmp_path):
    with pytest.raises(ValueError, match="supports none"):
        rc.report(hf_rope, tmp_path / "n", dtypes=["f32"], layouts=["half"], head_dims=[64],
                  bases=[1e4], policy=F32, samples=8, supports=lambda spec, dtype: False)
    assert not (tmp_path / "n" / "report.json").exists()


def test_report_with_fp8_cache_bytes(tmp_path):
    # The same kernel in bf16, its outputs also quantized into e4m3fn (vLLM's divide convention):
    # every byte inside the chain image of the declared bound; a sin-sign bug puts bytes outside.
    r = rc.report(hf_rope, tmp_path / "f", dtypes=["bf16"], layouts=["half"], head_dims=[64],
                  bases=[1e4], policy=BF16, samples=16, max_position=70000, fp8=["e4m3fn"],
                  fp8_scale=0.5, fp8_convention="divide")
    assert r.passed, r.stderr
    assert r.json["options"]["fp8"] == {"formats": ["e4m3fn"], "scale": 0.5,
                                        "convention": "divide", "overflow": "saturate"}
    (res,) = r.json["results"]
    (f,) = res["fp8"]
    assert f["format"] == "e4m3fn"
    assert [b["elements"] for b in f["buckets"]] == [b["n_elements"] for b in res["buckets"]]
    assert all(b["outside"] == 0 for b in f["buckets"])
    assert "FP8 cache bytes" in (tmp_path / "f" / "report.md").read_text()

    def sin_sign_bug(x, positions, spec):
        return hf_rope(x, positions, spec, sin_sign=-1.0)

    b = rc.report(sin_sign_bug, tmp_path / "g", dtypes=["bf16"], layouts=["half"],
                  head_dims=[64], bases=[1e4], policy=BF16, samples=16, max_position=70000,
                  fp8="e4m3fn")
    assert not b.passed
    failed = {c["check"] for c in b.json["checks"] if not c["passed"]}
    assert "Fp8BytesWithinBound[e4m3fn]" in failed
    with pytest.raises(ValueError, match="--fp8"):
        rc.report(hf_rope, tmp_path / "h", dtypes=["bf16"], layouts=["half"], head_dims=[64],
                  bases=[1e4], policy=BF16, samples=8, fp8=["e4m3"])


# rc.atlas: the engine atlas at a model's config (the same `report --engines --hf-config` as the
# CLI). GPT-J's config: 64 of 256 dims, interleaved; every engine either runs it (in its own
# layout, said per row) or has a "not implemented" row; the call never fails for that reason.
GPTJ = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_positions": 2048, "rotary_dim": 64}


def test_atlas_at_a_models_config(tmp_path):
    r = rc.atlas(tmp_path / "a", hf_config=GPTJ, dtypes=["f32"], samples=8, max_position=4096)
    assert r.returncode == 0, r.stderr
    a = r.json["atlas"]
    assert a["model_spec"].startswith("head_dim=256 rotary_dim=64")
    assert a["rows"], a
    for row in a["rows"]:
        assert row["supported"] or row.get("not_implemented") or row["dtype"] != "f32", row
        assert row["model_layout"] == "interleaved"


def test_atlas_models_unknown_name_refused(tmp_path):
    with pytest.raises(ValueError, match="no preset named 'llama-9'"):
        rc.atlas(tmp_path / "m", models=["llama-9"])
