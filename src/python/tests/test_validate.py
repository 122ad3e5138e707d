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


def mrope_cells(v):
    return next(c for c in v.json["configurations"] if c["layout"] == "mrope")["properties"]


def test_truncating_bf16_kernel_passes_declared_toward_zero_only():
    # ncnn truncates into bf16 on purpose (#29): declared so, the derived bound takes a whole ulp
    # for the table and the result and the kernel passes; declared nearest-even it fails, and the
    # hint names the declaration that fits.
    rz = rc.Policy(table="bf16", arithmetic="f32", table_rounding="toward_zero",
                   output_rounding="toward_zero")
    kw = dict(dtypes=["bf16"], layouts=["half"], head_dims=[64, 128],
              supports=lambda spec, dtype: spec.rotary_dim == spec.head_dim)
    v = rc.validate(kernels.ncnn_bf16_truncating, policy=rz, **kw)
    assert v.passed, str(v)
    assert v.json["configurations"][0]["policy"]["output_rounding"] == "toward_zero"
    v = rc.validate(kernels.ncnn_bf16_truncating, policy=rc.Policy(table="bf16", arithmetic="f32"),
                    properties=["Differential"], **kw)
    assert not v.passed
    assert "Differential" in failed_checks(v)
    # The hint names the smallest declaration under which every differential vector passes
    # (verify::advise); followed, the whole validation passes.
    assert "declare Policy(output_rounding='toward_zero')" in str(v), str(v)
    followed = rc.Policy(table="bf16", arithmetic="f32", output_rounding="toward_zero")
    assert rc.validate(kernels.ncnn_bf16_truncating, policy=followed, **kw).passed


def test_qwen2vl_mrope_passes():
    # Multi-axis calls give the kernel positions [tokens, 3] (t, h, w); the per-axis properties
    # draw distinct positions per axis. half is declared too: EqualAxesReduceToOneDimensional
    # compares the t = h = w call with the 1-D one (mrope alone: not applicable).
    v = rc.validate(kernels.qwen2vl_mrope, dtypes=["f32"], layouts=["half", "mrope"],
                    policy=F32)
    assert v.passed, str(v)
    for name in ["ComposesAdditivelyPerAxis", "ScoresDependOnlyOnAxisOffsets",
                 "EqualAxesReduceToOneDimensional", "MatchesReferenceWithinBound"]:
        assert mrope_cells(v)[name]["classification"] == "pass", (name, str(v))


def test_mrope_only_kernel_is_exercised_by_the_one_dimensional_properties():
    # Declared mrope alone: the 1-D properties call its specs with one position per token (t = h
    # = w), so they run rather than being not applicable; only EqualAxesReduceToOneDimensional
    # (no 1-D twin), the layout pair, partial rotary and in-place are.
    v = rc.validate(kernels.qwen2vl_mrope, dtypes=["f32"], layouts=["mrope"], policy=F32)
    assert v.passed, str(v)
    cells = mrope_cells(v)
    na = {n for n, c in cells.items() if c["classification"] == "not_applicable"}
    backward = {n for n in na if n.startswith("Backward")}  # no backward=True: all ten
    assert len(backward) == 10 and all("no backward" in cells[n]["detail"] for n in backward)
    assert na - backward == {"EqualAxesReduceToOneDimensional", "LayoutsArePermutations",
                             "PassThroughIsExact", "InPlaceEqualsOutOfPlace"}, str(v)
    v = rc.validate(kernels.mrope_sin_sign_flipped, dtypes=["f32"], layouts=["mrope"],
                    policy=F32, properties=["Differential", "MatchesReferenceWithinBound"])
    assert failed_checks(v) == {"Differential", "MatchesReferenceWithinBound"}, str(v)


@pytest.mark.parametrize("fn", [kernels.mrope_h_w_swapped, kernels.mrope_sections_in_wrong_order])
def test_broken_mrope_is_caught_by_the_per_axis_property(fn):
    # Invisible with t = h = w (EqualAxesReduceToOneDimensional passes): only the properties with
    # distinct per-axis positions see it.
    v = rc.validate(fn, dtypes=["f32"], layouts=["half", "mrope"], policy=F32,
                    properties=["ComposesAdditivelyPerAxis", "EqualAxesReduceToOneDimensional"])
    assert not v.passed
    assert mrope_cells(v)["ComposesAdditivelyPerAxis"]["classification"] == "wrong_results", \
        str(v)
    assert mrope_cells(v)["EqualAxesReduceToOneDimensional"]["classification"] == "pass", str(v)
    assert "properties=['ComposesAdditivelyPerAxis']" in str(v)


def test_replay_lines_are_python_that_repeats_the_call():
    pol = {"f32": F32}
    v = rc.validate(kernels.positions_off_by_one, dtypes=["f32"], layouts=["half"], policy=pol,
                    head_dims=[64], properties=["ZeroPositionIsIdentity"], seed=7,
                    scalings=["linear"], batch_invariant=True, timeout=20.0)
    assert not v.passed and len(v.replay) == 1, str(v)
    compile(v.replay[0], "<replay>", "eval")
    seen = {}

    class Rc:
        Policy, Spec = rc.Policy, rc.Spec

        @staticmethod
        def validate(fn, **kw):
            seen.update(kw)

    eval(v.replay[0], {"rc": Rc, "fn": None})
    assert seen == dict(dtypes=["f32"], layouts=["half"], properties=["ZeroPositionIsIdentity"],
                        policy=pol, head_dims=[64], seed=7, budget="quick", scalings=["linear"],
                        batch_invariant=True, timeout=20.0), v.replay[0]
    assert "  " + v.replay[0] in str(v)


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
    # shrink_seconds=0: the call budget alone, which stops shrinking at the same place every run
    # (the wall-time budget may stop it earlier on a loaded machine; the failing case is the same).
    a = rc.validate(kernels.positions_off_by_one, policy=F32, properties=["ZeroPositionIsIdentity"],
                    shrink_seconds=0)
    b = rc.validate(kernels.positions_off_by_one, policy=F32, properties=["ZeroPositionIsIdentity"],
                    shrink_seconds=0)
    detail = lambda v: v.json["configurations"][0]["properties"]["ZeroPositionIsIdentity"]["detail"]
    assert not a.passed and detail(a) == detail(b)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="dtypes"):
        rc.validate(kernels.hf_rope, dtypes=["f8"])
    with pytest.raises(ValueError, match="budget"):
        rc.validate(kernels.hf_rope, budget="huge")


@pytest.mark.long
def test_batch_dependent_kernel_passes_unless_declared_batch_invariant():
    # By default a token batched and alone are compared within twice the bound: passes. Declared
    # batch-invariant, the same kernel's last-bit differences are a failure.
    v = rc.validate(kernels.batch_dependent, dtypes=["f32"], layouts=["half"], policy=F32,
                    properties=["TokensAreIndependent", "MatchesReferenceWithinBound"])
    assert v.passed, str(v)
    v = rc.validate(kernels.batch_dependent, dtypes=["f32"], layouts=["half"], policy=F32,
                    properties=["TokensAreIndependent"], batch_invariant=True)
    assert failed_checks(v) == {"TokensAreIndependent"}, str(v)
    assert "!= batched" in str(v)


def test_first_position_broadcast_is_caught_within_the_bound():
    v = rc.validate(kernels.first_position_broadcast, dtypes=["f32"], layouts=["half"],
                    policy=F32, properties=["TokensAreIndependent"])
    assert failed_checks(v) == {"TokensAreIndependent"}, str(v)
    assert "declared batch-variant, compared within twice the bound" in str(v)


def test_standard_budget():
    v = rc.validate(kernels.hf_rope, dtypes=["f32", "bf16"], layouts=["half"], budget="standard",
                    policy={"f32": F32, "bf16": BF16})
    assert v.passed, str(v)
