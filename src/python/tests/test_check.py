"""rc.check / rc.assert_rope on in-memory tensors: the engine of `ropecheck check`."""
import numpy as np
import pytest
import torch

import kernels
import ropecheck as rc

SPEC = rc.Spec(head_dim=64, rotary_dim=64, layout="half")
F32 = rc.Policy(angle="f32", table="f32", arithmetic="f32", recipe="hf_f32")
BF16 = rc.Policy(angle="f32", table="bf16", arithmetic="bf16", recipe="hf_f32")


def data(dtype, tokens=64, heads=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, heads, SPEC.head_dim, generator=g).to(dtype)
    pos = torch.randint(0, 1 << 16, (tokens,), generator=g)
    return x, pos


@pytest.mark.parametrize("dtype,policy", [(torch.float32, F32), (torch.bfloat16, BF16),
                                          (torch.float16, rc.Policy(table="f16",
                                                                    arithmetic="f16"))])
def test_correct_forward_passes(dtype, policy):
    x, pos = data(dtype)
    r = rc.check(x, kernels.hf_rope(x, pos, SPEC), pos, SPEC, policy=policy)
    assert r.passed, str(r)
    assert r.vectors == 64 * 4 and r.failures == [] and 0 < r.max_utilization <= 1


def test_numpy_inputs_and_threads_do_not_change_the_result():
    x, pos = data(torch.float32)
    y = kernels.hf_rope(x, pos, SPEC)
    a = rc.check(x.numpy(), y.numpy(), pos.numpy(), SPEC, policy=F32, threads=1)
    b = rc.check(x, y, pos, SPEC, policy=F32, threads=3)
    assert (a.max_error_u, a.max_utilization, a.max_error_at) == \
        (b.max_error_u, b.max_utilization, b.max_error_at)


def test_broken_forward_is_located():
    x, pos = data(torch.float32)
    y = kernels.sin_sign_flipped(x, pos, SPEC)
    r = rc.check(x, y, pos, SPEC, policy=F32, max_failures=3)
    assert not r.passed and r.n_failures > 0 and len(r.failures) == 3
    f = r.failures[0]
    assert f.kind == "exceeds_bound" and f.token == 0 and f.head == 0
    assert f.position == int(pos[0]) and f.pair is not None
    assert f.elements == (f.pair, f.pair + 32)
    with pytest.raises(AssertionError, match=r"FAIL x -> y token 0 \(position"):
        rc.assert_rope(x, y, pos, SPEC, policy=F32)


def test_table_precision_is_judged_against_the_declaration():
    x, pos = data(torch.float32)
    y = kernels.bf16_table(x, pos, SPEC)
    assert not rc.check(x, y, pos, SPEC, policy=F32).passed
    assert rc.check(x, y, pos, SPEC, policy=rc.Policy(table="bf16")).passed


def test_truncated_output_is_judged_against_the_declared_rounding():
    # ncnn-style bf16 truncation of the cos/sin cache and of the result: within the toward-zero
    # bound, outside the nearest-even one (the same tensors, two declarations).
    x, pos = data(torch.bfloat16, tokens=256)
    y = kernels.ncnn_bf16_truncating(x, pos, SPEC)
    rz = rc.Policy(table="bf16", table_rounding="toward_zero", output_rounding="toward_zero")
    assert rc.check(x, y, pos, SPEC, policy=rz).passed
    assert not rc.check(x, y, pos, SPEC, policy=rc.Policy(table="bf16")).passed


def test_cuda_fast_math_outputs_are_judged_against_their_declared_policy():
    # The FlashInfer model's f16 outputs at long positions: within the declared fast-math policy
    # (fast_powf_f32, trig_argument turns_f32, trig_error 11.32), outside the same policy
    # declared with an f64 angle and exact trig (the same tensors, two declarations).
    spec = rc.Spec(head_dim=128, layout="half")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 2, 128, generator=g).to(torch.float16)
    pos = torch.randint(1 << 18, 1 << 20, (64,), generator=g)
    y = rc.apply_kernel("flashinfer", x, pos, spec)
    declared = rc.kernel_policy("flashinfer", "f16")
    assert (declared.recipe, declared.trig_argument) == ("fast_powf_f32", "turns_f32")
    assert rc.check(x, y, pos, spec, policy=declared).passed
    f64_angle = rc.Policy(angle="f64", recipe="pow_product", fused=True)
    assert not rc.check(x, y, pos, spec, policy=f64_angle).passed


def test_bad_input_is_a_clear_error():
    x, pos = data(torch.float32)
    with pytest.raises(ValueError, match="same dtype and shape"):
        rc.check(x, x.double(), pos, SPEC)
    with pytest.raises(ValueError, match="positions must have shape"):
        rc.check(x, x, pos[:3], SPEC)
    with pytest.raises(TypeError):
        rc.check(x.numpy().astype(np.int32), x.numpy(), pos, SPEC)


# ---- overflow is a value ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_an_overflowing_correct_output_passes_with_finite_figures(dtype):
    # HF's rotate_half in f32, stored in dtype: inputs of 0.5 to 0.99 of the dtype's largest value
    # rotate to outputs beyond it, stored as the infinity that is their one correct rounding.
    g = torch.Generator().manual_seed(5)
    big = torch.finfo(dtype).max
    sign = torch.randint(0, 2, (16, 2, 64), generator=g) * 2 - 1
    x = ((torch.rand(16, 2, 64, generator=g, dtype=torch.float64) * 0.49 + 0.5) * sign * big)
    x = x.to(dtype)
    pos = torch.randint(1, 1 << 12, (16,), generator=g)
    y = kernels.hf_rope(x.float(), pos, SPEC).to(dtype)
    assert torch.isinf(y).any()
    r = rc.check(x, y, pos, SPEC, policy=F32)
    assert r.passed, str(r)
    assert r.overflowed == int(torch.isinf(y).sum()) and np.isfinite(r.max_error_u)
    assert "read as an overflow" in str(r)
    # The wrong infinity fails, with a finite figure.
    w = y.clone()
    flat = w.view(-1)
    i = int(torch.nonzero(torch.isinf(flat))[0])
    flat[i] = -flat[i]
    bad = rc.check(x, w, pos, SPEC, policy=F32)
    assert not bad.passed and bad.n_failures == 1 and np.isfinite(bad.max_error_u)
    assert bad.failures[0].kind == "non_finite_output" and " u > bound " in bad.failures[0].what


# ---- nothing checked is not a pass --------------------------------------------------------------

@pytest.mark.parametrize("shape,what", [((0, 4, 64), "holds no head vector"),
                                        ((5, 0, 64), "holds no head vector"),
                                        ((3, 2, 64), "has a non-finite input")])
def test_nothing_checked_is_a_coverage_failure(shape, what):
    x = torch.zeros(shape) if shape[0] * shape[1] == 0 else torch.full(shape, float("nan"))
    pos = torch.arange(shape[0])
    r = rc.check(x, x, pos, SPEC, policy=F32)
    assert not r.passed and r.checked == 0 and r.n_failures == 0
    assert r.coverage.startswith("coverage: no element was checked") and what in r.coverage
    assert f"FAIL {r.coverage}" in str(r)
    with pytest.raises(AssertionError, match="coverage: no element was checked"):
        rc.assert_rope(x, x, pos, SPEC, policy=F32)
