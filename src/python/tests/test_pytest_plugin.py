"""The pytest plugin: a kernel test in a few lines; a failing property reads like an assertion
failure with the counterexample and the Python call that replays it."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import kernels
import ropecheck as rc

HERE = os.path.dirname(os.path.abspath(__file__))


def test_fixture_passes_a_correct_kernel(rope_check):
    v = rope_check.validate(kernels.hf_rope, dtypes=["f32"], layouts=["half"],
                            policy=rc.Policy())
    assert v.passed


def test_a_failing_property_reads_like_an_assertion_failure(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["ropecheck.pytest"]\n')
    (tmp_path / "test_kernel.py").write_text(textwrap.dedent("""
        import kernels
        import ropecheck as rc

        def test_my_rope(rope_check):
            rope_check.validate(kernels.positions_off_by_one, dtypes=["f32"],
                                layouts=["half"], policy=rc.Policy(),
                                properties=["Differential", "ZeroPositionIsIdentity"])
        """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(tmp_path)], capture_output=True, text=True, env=env)
    out = r.stdout
    assert r.returncode == 1, out
    assert "ropecheck: positions_off_by_one failed validation (wrong_results)" in out
    assert "ZeroPositionIsIdentity" in out and "replay in Python:" in out
    assert "rc.validate(fn, " in out and "properties=['ZeroPositionIsIdentity']" in out


def test_the_check_fixture_fails_when_nothing_was_checked(rope_check):
    # An empty dump is not a pass: the fixture fails the test with the coverage sentence.
    spec = rc.Spec(head_dim=64, layout="half")
    x, pos = torch.zeros(0, 2, 64), torch.zeros(0, dtype=torch.int64)
    with pytest.raises(pytest.fail.Exception, match="FAIL coverage: no element was checked"):
        rope_check.check(x, x, pos, spec)
