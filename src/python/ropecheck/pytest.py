"""pytest plugin: `pytest_plugins = ["ropecheck.pytest"]` in a conftest.py gives the fixture
`rope_check`, so a kernel test is a few lines and a failure reads like an assertion failure:

    def test_my_rope(rope_check):
        rope_check.validate(my_rope, dtypes=["f32", "bf16"], layouts=["half"],
                            policy=rc.Policy(table="bf16"))        # every property
        rope_check.check(x, my_rope(x, pos, spec), pos, spec)      # recorded tensors

A failed property shows the coverage/verdict table, the counterexample and the rc.validate call
that replays it; a failed check shows the located failures.
"""

import pytest

import ropecheck as rc


class RopeCheck:
    """validate() / check() of the ropecheck module, failing the test when they do not pass."""

    def validate(self, fn, **kwargs):
        v = rc.validate(fn, **kwargs)
        if not v.passed:
            pytest.fail(f"ropecheck: {getattr(fn, '__name__', 'fn')} failed validation "
                        f"({v.classification})\n{v}", pytrace=False)
        return v

    def check(self, x, y, positions, spec, policy=None, **kwargs):
        r = rc.check(x, y, positions, spec, policy=policy, **kwargs)
        if not r.passed:
            pytest.fail(str(r), pytrace=False)
        return r


@pytest.fixture
def rope_check():
    return RopeCheck()
