"""Spec, Policy, reference: the bindings of the C++ types and the oracle."""
import json
import math

import numpy as np
import pytest
import torch

import ropecheck as rc


def test_spec_fields_and_defaults():
    s = rc.Spec(head_dim=128, rotary_dim=64, base=10000.0, layout="half")
    assert (s.head_dim, s.rotary_dim, s.base, s.layout) == (128, 64, 10000.0, "half")
    assert s.scaling == "none" and s.scale == 1.0 and s.n_axes == 1
    assert rc.Spec(head_dim=7).rotary_dim == 6  # head_dim rounded down to even
    lin = rc.Spec(head_dim=64, scaling="linear", factor=4.0)
    assert lin.scaling == "linear" and lin.factor == 4.0
    assert rc.Spec(head_dim=64, scaling={"rope_type": "linear", "factor": 2.0}).factor == 2.0


def test_spec_refuses_bad_input():
    with pytest.raises(ValueError):
        rc.Spec(head_dim=64, layout="diagonal")
    with pytest.raises(ValueError):
        rc.Spec(head_dim=64, rotary_dim=65)
    with pytest.raises(TypeError):
        rc.Spec(head_dim=64, fatcor=2.0)


def test_spec_from_hf_config(tmp_path):
    cfg = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
           "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    s = rc.Spec.from_hf_config(cfg)
    assert (s.head_dim, s.base, s.scaling, s.factor) == (128, 500000.0, "linear", 8.0)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    assert rc.Spec.from_hf_config(str(p)) == s


def test_policy():
    p = rc.Policy(angle="f32", table="bf16", arithmetic="bf16", recipe="hf_f32", fused=False)
    assert (p.table, p.arithmetic, p.recipe, p.trig_error) == ("bf16", "bf16", "hf_f32", 2.0)
    with pytest.raises(ValueError):
        rc.Policy(table="f8")


def test_reference_is_the_exact_rotation():
    spec = rc.Spec(head_dim=2, base=10000.0, layout="interleaved")  # theta_0 = 1
    x = np.array([[[1.0, 0.0]], [[1.0, 0.0]], [[0.5, 0.25]]])
    y = rc.reference(x, [0, 1, 0], spec)
    assert y.shape == (3, 1, 2) and y.dtype == np.float64
    assert y[0, 0].tolist() == [1.0, 0.0]
    assert y[1, 0].tolist() == [math.cos(1.0), math.sin(1.0)]  # glibc's are correctly rounded
    assert y[2, 0].tolist() == [0.5, 0.25]
    text = rc.reference(x, [0, 1, 0], spec, digits=30)
    assert text[1][0][0] == "0.540302305868139717400936607443"  # cos 1, 30 digits


def test_reference_takes_torch_bf16_and_passes_dims_through():
    spec = rc.Spec(head_dim=5, rotary_dim=2, layout="half")
    x = torch.randn(4, 3, 5).to(torch.bfloat16)
    y = rc.reference(x, torch.arange(4), spec)
    np.testing.assert_array_equal(y[..., 2:], x[..., 2:].double().numpy())


REPR_SPECS = [
    rc.Spec(head_dim=128, rotary_dim=64, base=10000.0, layout="half"),
    rc.Spec(head_dim=64, layout="interleaved", scale=0.1 + 0.2, base=10000.1 + 0.2),
    rc.Spec(head_dim=80, rotary_dim=40, layout="proportional"),
    rc.Spec(head_dim=128, base=1000000.0, layout="mrope", sections=[16, 24, 24]),
    rc.Spec(head_dim=128, layout="imrope", sections=[24, 20, 20]),
    rc.Spec(head_dim=64, layout="axial", sections=[16, 16]),
    rc.Spec(head_dim=64, scaling="linear", factor=4.0),
    rc.Spec(head_dim=64, scaling="dynamic", factor=2.0, max_position_embeddings=2048,
            seq_len=5000),
    rc.Spec(head_dim=128, base=500000.0, scaling="llama3", factor=8.0, low_freq_factor=1.0,
            high_freq_factor=4.0, original_max_position_embeddings=8192),
    rc.Spec(head_dim=64, scaling="yarn", factor=40.0, original_max_position_embeddings=4096,
            mscale=1.0, mscale_all_dim=1.0, truncate=False, beta_fast=16.0),
    rc.Spec(head_dim=64, scaling="yarn", factor=4.0, original_max_position_embeddings=4096,
            attention_factor=1.25),
    rc.Spec(head_dim=8, scaling="freq_factors", freq_factors=[1.0, 2.0, 4.5, 1e-3]),
    rc.Spec(head_dim=8, scaling="longrope", short_factor=[1.0, 1.5, 2.0, 2.5],
            long_factor=[1.0, 3.0, 5.0, 7.25], original_max_position_embeddings=4096,
            max_position_embeddings=131072, seq_len=8192),
    rc.Spec.from_hf_config({"hidden_size": 4096, "num_attention_heads": 32,
                            "rope_theta": 500000.0,
                            "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 8192}}),
]

REPR_POLICIES = [
    rc.Policy(),
    rc.Policy(angle="f64", table="bf16", arithmetic="bf16", recipe="pow_product", fused=True,
              trig_error=0.1 + 0.2),
    rc.Policy(table="f16", arithmetic="f16", trig_error=3.0),
    rc.Policy(table="bf16", table_rounding="toward_zero", output_rounding="toward_zero"),
    rc.Policy(recipe="fast_powf_f32", fused=True, trig_error=11.32, trig_argument="turns_f32"),
]


@pytest.mark.parametrize("x", REPR_SPECS + REPR_POLICIES, ids=repr)
def test_repr_is_python_that_rebuilds_the_object(x):
    y = eval(repr(x), {"Spec": rc.Spec, "Policy": rc.Policy})
    assert y == x and repr(y) == repr(x) and hash(y) == hash(x)
    assert eval(repr(x), vars(rc)) == x


def test_equality_compares_every_field():
    a = rc.Spec(head_dim=64, scaling="yarn", factor=4.0, original_max_position_embeddings=4096)
    assert a != rc.Spec(head_dim=64, scaling="yarn", factor=4.0,
                        original_max_position_embeddings=4096, attention_factor=1.0)
    assert a != rc.Spec(head_dim=64, scaling="yarn", factor=4.0,
                        original_max_position_embeddings=4096, truncate=False)
    assert rc.Policy() != rc.Policy(trig_error=2.5) and rc.Policy() != rc.Policy(fused=True)
    assert rc.Policy() != rc.Policy(output_rounding="toward_zero")
    assert rc.Policy() != rc.Policy(table_rounding="toward_zero")
    assert rc.Policy().output_rounding == "nearest_even"
    with pytest.raises(ValueError, match="output_rounding"):
        rc.Policy(output_rounding="truncate")
    assert rc.Policy() != rc.Policy(trig_argument="turns_f32")
    assert rc.Policy().trig_argument == "exact"
    with pytest.raises(ValueError, match="trig_argument"):
        rc.Policy(trig_argument="turns")
    assert a != "spec" and rc.Policy() != None  # noqa: E711 (NotImplemented, not TypeError)
