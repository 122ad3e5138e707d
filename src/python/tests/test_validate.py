"""rc.validate: every property of the C++ suite on PyTorch kernels (quick budget by default;
the standard-budget run is marked long). Correct kernels pass with honest policies; each broken
one is caught by the check that names its bug."""
import pytest

import kernels
import ropecheck as rc

F32 = rc.Policy(angle="f32", table="f32", arithmetic="f32", recipe="hf_f32")
F16 = rc.Policy(table="f16", arithmetic="f16")
BF16 = rc.Policy(table="bf16", arithmetic="bf16")


def failed_checks(v):
    out = set()
    for c in v.json["configurations"]:
        if c["differential"]["classification"] not in ("pass", "not_applicable"):
            out.add("Differential")
        for name, cell in c["properties"].items():
            if cell["classification"] not in ("pass", "not_applicable"):
                out.add(name)
    return out


def test_hf_rotate_half_passes_in_every_dtype():
    v = rc.validate(kernels.hf_rope, dtypes=["f32", "f16", "bf16"], layouts=["half"],
                    head_dims=[64, 128], policy={"f32": F32, "f16": F16, "bf16": BF16})
    assert v.passed, str(v)
    assert v.json["passed"] and [c["dtype"] for c in v.json["configurations"]] == \
        ["f32", "f16", "bf16"]
    assert "MatchesReferenceWithinBound" in str(v) and "PASS" in str(v)


@pytest.mark.parametrize("fn", [kernels.meta_rope, kernels.gptj_rope])
def test_interleaved_forms_pass(fn):
    v = rc.validate(fn, dtypes=["f32"], layouts=["interleaved"], head_dims=[64, 128], policy=F32)
    assert v.passed, str(v)


def test_linear_scaling_passes():
    v = rc.validate(kernels.hf_rope, dtypes=["f32"], layouts=["half"], scalings=["linear"],
                    policy=F32)
    assert v.passed, str(v)


@pytest.mark.parametrize("fn,layout,expected", [
    (kernels.sin_sign_flipped, "half", "MatchesReferenceWithinBound"),
    (kernels.positions_off_by_one, "half", "ZeroPositionIsIdentity"),
    (kernels.bf16_table, "half", "MatchesReferenceWithinBound"),
    (kernels.exponent_over_head_dim, "half", "MatchesReferenceWithinBound"),
    (kernels.half_pairing_interleaved, "interleaved", "MatchesReferenceWithinBound"),
])
def test_broken_kernel_is_caught(fn, layout, expected):
    # The differential check and the property expected to name the bug (the others would find
    # it too; a failing property's shrinking costs seconds, so the default run keeps to two).
    v = rc.validate(fn, dtypes=["f32"], layouts=[layout], policy=F32,
                    properties=["Differential", expected])
    assert not v.passed
    assert expected in failed_checks(v), str(v)
    assert "Differential" in failed_checks(v)
    assert f"properties=['{expected}']" in str(v)  # the Python replay of the counterexample


def test_in_place_aliasing_is_an_input_modified_fault():
    # An out-of-place kernel that writes into x: the worker's input guard sees it on the first
    # call (the property InputUntouched states the same; the fault ends the configuration first).
    v = rc.validate(kernels.in_place_aliasing, dtypes=["f32"], layouts=["half"], policy=F32)
    assert v.classification == "input_modified", str(v)
    assert "out-of-place call changed" in str(v) and "(token 1, head 0, element 0)" in str(v)


@pytest.mark.parametrize("fn,classification,text", [
    (kernels.raises, "kernel_error", "raised ValueError: kernel exploded"),
    (kernels.wrong_dtype, "kernel_error", "returned torch.float64"),
    (kernels.nan_output, "non_finite_output", "nan"),
])
def test_misbehaving_callable_is_a_clear_failure(fn, classification, text):
    v = rc.validate(fn, dtypes=["f32"], layouts=["half"], policy=F32,
                    properties=["Differential"])
    assert not v.passed and v.classification == classification, str(v)
    assert text in str(v)
    if classification == "kernel_error":
        assert "fn(x=torch.float32" in str(v)  # the offending call


def test_replay_is_deterministic():
    a = rc.validate(kernels.positions_off_by_one, policy=F32, properties=["ZeroPositionIsIdentity"])
    b = rc.validate(kernels.positions_off_by_one, policy=F32, properties=["ZeroPositionIsIdentity"])
    detail = lambda v: v.json["configurations"][0]["properties"]["ZeroPositionIsIdentity"]["detail"]
    assert not a.passed and detail(a) == detail(b)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="dtypes"):
        rc.validate(kernels.hf_rope, dtypes=["f8"])
    with pytest.raises(ValueError, match="budget"):
        rc.validate(kernels.hf_rope, budget="huge")


@pytest.mark.long
def test_standard_budget():
    v = rc.validate(kernels.hf_rope, dtypes=["f32", "bf16"], layouts=["half"], budget="standard",
                    policy={"f32": F32, "bf16": BF16})
    assert v.passed, str(v)
