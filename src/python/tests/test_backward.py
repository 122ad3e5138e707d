"""rc.validate(..., backward=True): the Backward* properties on the gradient autograd computes
through a PyTorch RoPE, and backward_fn= for a backward exposed directly. A custom
torch.autograd.Function with a hand-written backward (the Liger-Kernel / TransformerEngine shape)
passes when its backward is the exact transpose, and each broken backward is flagged by the
property that names its bug."""
import pytest
import torch

import kernels
import ropecheck as rc

F32 = rc.Policy(angle="f32", table="f32", arithmetic="f32", recipe="hf_f32")


def failed_checks(v):
    out = set()
    for c in v.json["configurations"]:
        for name, cell in c["properties"].items():
            if cell["classification"] not in ("pass", "not_applicable"):
                out.add(name)
    return out


def rotate(x, cos, sin, rd, scale=1.0, pairing="half"):
    """s R x on x[..., :rd] (pass-through copied): half (NeoX) or interleaved (GPT-J) pairs."""
    xr, xp = x[..., :rd], x[..., rd:]
    if pairing == "half":
        y = xr * cos + kernels.rotate_half(xr) * sin
    else:  # the same tables read as GPT-J pairs (2i, 2i + 1)
        c = torch.cat((cos[..., : rd // 2], cos[..., : rd // 2]), -1)
        s = torch.cat((sin[..., : rd // 2], sin[..., : rd // 2]), -1)
        c = c.view(*c.shape[:-1], 2, rd // 2).transpose(-1, -2).flatten(-2)
        s = s.view(*s.shape[:-1], 2, rd // 2).transpose(-1, -2).flatten(-2)
        y = xr * c + kernels.rotate_every_two(xr) * s
    return torch.cat((y * scale if scale != 1 else y, xp), dim=-1)


class HandWrittenRope(torch.autograd.Function):
    """y = s R(m) x with a hand-written backward grad_x = s R(m)^T g (sin negated), or one of the
    broken backwards of real training stacks (`bug`)."""

    @staticmethod
    def forward(ctx, x, cos, sin, rd, scale, bug):
        ctx.save_for_backward(cos, sin)
        ctx.rd, ctx.scale, ctx.bug = rd, scale, bug
        return rotate(x, cos, sin, rd, scale)

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        rd, s, bug = ctx.rd, ctx.scale, ctx.bug
        if bug == "sin_not_negated":  # the forward run on the gradient
            gx = rotate(g, cos, sin, rd, s)
        elif bug == "pairing_transposed":  # GPT-J pairs in a NeoX kernel's backward
            gx = rotate(g, cos, -sin, rd, s, pairing="interleaved")
        elif bug == "partner_sin_other_half":
            # TransformerEngine's exact-transpose form, grad_1 = g_1 c + g_2 sin_partner,
            # reading the partner's sin from the other half of a half-width table.
            h = rd // 2
            c, sn = cos[..., :h], sin[..., :h]
            g1, g2 = g[..., :h], g[..., h:rd]
            gx = torch.cat((s * (g1 * c + g2 * sn.roll(h // 2, -1)), s * (g2 * c - g1 * sn),
                            g[..., rd:]), -1)
        elif bug == "scale_twice":
            gx = rotate(g, cos, -sin, rd, s * s)
        else:
            gx = rotate(g, cos, -sin, rd, s)
            if bug == "pass_through_ones":  # Apex PR #1750
                gx = gx.clone()
                gx[..., rd:] = 1.0
        return gx, None, None, None, None, None


def custom_rope(bug=None):
    def fn(x, positions, spec):
        cos, sin = kernels.hf_cos_sin(positions, spec)
        cos, sin = cos.to(x.dtype)[:, None, :], sin.to(x.dtype)[:, None, :]
        return HandWrittenRope.apply(x, cos, sin, spec.rotary_dim, spec.scale, bug)
    fn.__name__ = "custom_rope" + ("_" + bug if bug else "")
    return fn


BACKWARD = ["BackwardMatchesReferenceWithinBound", "BackwardIsAdjoint", "BackwardUndoesForward",
            "BackwardZeroPositionIsIdentity", "BackwardComposesAdditively",
            "BackwardPassThroughIsExact", "BackwardInputUntouched",
            "BackwardInPlaceEqualsOutOfPlace", "BackwardTokensAreIndependent",
            "BackwardComposesAdditivelyPerAxis"]


def test_hand_written_backward_passes_every_backward_property():
    v = rc.validate(custom_rope(), dtypes=["f32"], layouts=["half"], policy=F32,
                    magnitude_scale=True, backward=True)
    assert v.passed, str(v)
    cells = v.json["configurations"][0]["properties"]
    ran = [p for p in BACKWARD if cells[p]["classification"] == "pass"]
    # Not applicable here: in place (declared out-of-place) and the multi-axis property.
    assert set(BACKWARD) - set(ran) == {"BackwardInPlaceEqualsOutOfPlace",
                                        "BackwardComposesAdditivelyPerAxis"}, str(v)
    assert all(cells[p]["cases"] > 0 for p in ran)


def test_autograd_through_plain_torch_ops_passes_in_bf16():
    bf16 = rc.Policy(table="bf16", arithmetic="bf16")
    v = rc.validate(kernels.hf_rope, dtypes=["bf16"], layouts=["half"], policy=bf16,
                    backward=True, properties=BACKWARD[:3])
    assert v.passed, str(v)


@pytest.mark.parametrize("bug,expected", [
    ("sin_not_negated", {"BackwardMatchesReferenceWithinBound", "BackwardIsAdjoint",
                         "BackwardUndoesForward"}),
    ("pairing_transposed", {"BackwardMatchesReferenceWithinBound"}),
    ("partner_sin_other_half", {"BackwardMatchesReferenceWithinBound"}),
    ("scale_twice", {"BackwardMatchesReferenceWithinBound"}),
    ("pass_through_ones", {"BackwardPassThroughIsExact"}),
])
def test_broken_backward_is_flagged(bug, expected):
    v = rc.validate(custom_rope(bug), dtypes=["f32"], layouts=["half"], policy=F32,
                    magnitude_scale=True, backward=True, properties=sorted(expected))
    assert not v.passed
    assert failed_checks(v) == expected, str(v)
    # The forward is correct: the forward properties named alongside pass.
    f = rc.validate(custom_rope(bug), dtypes=["f32"], layouts=["half"], policy=F32,
                    magnitude_scale=True, properties=["MatchesReferenceWithinBound"])
    assert f.passed, str(f)


def test_backward_fn_is_checked_directly():
    def good(g, positions, spec):
        return kernels.hf_rope(g, positions, spec, sin_sign=-1.0)

    def forward_again(g, positions, spec):
        return kernels.hf_rope(g, positions, spec)

    v = rc.validate(kernels.hf_rope, dtypes=["f32"], layouts=["half"], policy=F32,
                    backward_fn=good, properties=BACKWARD[:3])
    assert v.passed, str(v)
    v = rc.validate(kernels.hf_rope, dtypes=["f32"], layouts=["half"], policy=F32,
                    backward_fn=forward_again, properties=["BackwardMatchesReferenceWithinBound"])
    assert not v.passed and failed_checks(v) == {"BackwardMatchesReferenceWithinBound"}
    assert "backward_fn=forward_again" in "\n".join(v.replay), v.replay


def test_without_backward_the_backward_properties_are_not_applicable():
    v = rc.validate(kernels.hf_rope, dtypes=["f32"], layouts=["half"], policy=F32,
                    properties=["BackwardMatchesReferenceWithinBound"])
    assert v.passed
    cell = v.json["configurations"][0]["properties"]["BackwardMatchesReferenceWithinBound"]
    assert cell["classification"] == "not_applicable"
    assert "no backward" in str(v)


def test_non_differentiable_fn_is_a_clear_failure():
    def detached(x, positions, spec):
        return kernels.hf_rope(x.detach(), positions, spec)

    v = rc.validate(detached, dtypes=["f32"], layouts=["half"], policy=F32, backward=True,
                    properties=["BackwardMatchesReferenceWithinBound"])
    assert not v.passed
    assert "backward=True needs a differentiable fn" in str(v)


def grad_dump(tmp_path, bug):
    """A backward dump: grad_y and the grad_x autograd computes through custom_rope(bug)."""
    spec = rc.Spec(head_dim=64, rotary_dim=48, base=1e4, layout="half")
    torch.manual_seed(7)
    positions = torch.tensor([0, 1, 17, 4095, 65536, 131071], dtype=torch.int64)
    x = torch.randn(6, 4, 64, requires_grad=True)
    g = torch.randn(6, 4, 64)
    custom_rope(bug)(x, positions, spec).backward(g)
    path = tmp_path / f"grad_{bug}.safetensors"
    rc.save_dump(path, positions=positions, spec=spec, policy=F32, grad_y=g, grad_x=x.grad)
    return path


def test_check_reads_backward_dumps(tmp_path):
    import subprocess
    ok = subprocess.run([rc.executable(), "check", "--tensors", str(grad_dump(tmp_path, None))],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "grad_y -> grad_x" in ok.stdout
    bad = subprocess.run([rc.executable(), "check", "--tensors",
                          str(grad_dump(tmp_path, "sin_not_negated"))],
                         capture_output=True, text=True)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL grad_y -> grad_x" in bad.stdout, bad.stdout
    ones = subprocess.run([rc.executable(), "check", "--tensors",
                           str(grad_dump(tmp_path, "pass_through_ones"))],
                          capture_output=True, text=True)
    assert ones.returncode == 1 and "pass-through" in ones.stdout, ones.stdout
