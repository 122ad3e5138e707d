"""Run by installed.cmake on the package `cmake --install` wrote: argv[1] the prefix, argv[2] the
tests folder (for the test kernels)."""
import os
import sys

prefix, tests = sys.argv[1], sys.argv[2]
import ropecheck as rc  # noqa: E402  (the installed one: PYTHONPATH is its site dir only)

assert os.path.realpath(rc.__file__).startswith(os.path.realpath(prefix)), rc.__file__
assert os.path.realpath(rc.executable()) == os.path.realpath(os.path.join(prefix, "bin",
                                                                          "ropecheck")), \
    rc.executable()
sys.path.insert(0, tests)
import kernels  # noqa: E402

f32 = rc.Policy(angle="f32", table="f32", arithmetic="f32", recipe="hf_f32")
v = rc.validate(kernels.hf_rope, dtypes=["f32"], layouts=["half"], policy=f32)
assert v.passed, str(v)
v = rc.validate(kernels.sin_sign_flipped, dtypes=["f32"], layouts=["half"], policy=f32,
                properties=["Differential"])
assert not v.passed, str(v)
print("installed package at", os.path.dirname(rc.__file__), "validates with", rc.executable())
