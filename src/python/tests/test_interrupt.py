"""Ctrl-C during rc.validate: the run stops within a second or so, the `ropecheck` process is
killed and reaped (no orphan, no zombie), its temporary files are removed, KeyboardInterrupt
reaches the caller and the interpreter is still usable (a following rc.validate runs). Each
case runs rc.validate in a Python subprocess that gets a real SIGINT."""
import os
import signal
import subprocess
import sys
import time

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))

# argv[1]: what is going on when SIGINT comes
#   waiting  the ropecheck process is stopped (SIGSTOP): rc.validate waits for the next call
#   kernel   the kernel sleeps 0.2 s per call: SIGINT lands in it (time.sleep raises)
#   raises   no signal: the kernel raises KeyboardInterrupt itself on its third call
SCRIPT = r"""
import os, signal, sys, tempfile, time
sys.path.insert(0, sys.argv[2])
import kernels
import ropecheck as rc

MODE = sys.argv[1]


def children():
    me, out = str(os.getpid()), []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2:].split()[1] == me:
            out.append(int(d))
    return out


calls = [0]


def kernel(x, positions, spec):
    calls[0] += 1
    if calls[0] == 3:
        kids = children()
        print("CHILDREN", *kids, flush=True)
        if MODE == "waiting":
            os.kill(kids[0], signal.SIGSTOP)
        if MODE == "raises":
            raise KeyboardInterrupt
    if MODE == "kernel":
        time.sleep(0.2)
    return kernels.hf_rope(x, positions, spec)


try:
    rc.validate(kernel, budget="standard")
    print("NOT INTERRUPTED", flush=True)
except KeyboardInterrupt:
    print("CAUGHT", time.monotonic(), flush=True)  # CLOCK_MONOTONIC: the same in every process
    print("LEFT", *children(), flush=True)  # children still there (alive or zombie)
    print("TMP", *[n for n in os.listdir(tempfile.gettempdir()) if n.startswith("ropecheck-")],
          flush=True)
    v = rc.validate(kernels.hf_rope, properties=["Differential"])
    print("AGAIN", v.passed, flush=True)
    raise
"""


def line(out, key):
    """The words after `key` on its line of out (None when there is no such line)."""
    for ln in out.splitlines():
        if ln.split()[:1] == [key]:
            return ln.split()[1:]
    return None


def first_line(pipe):
    """One line of an unbuffered byte pipe, read a byte at a time: nothing after it is consumed."""
    b = bytearray()
    while not b.endswith(b"\n"):
        c = pipe.read(1)
        if not c:
            break
        b += c
    return b.decode()


@pytest.mark.parametrize("mode", ["waiting", "kernel", "raises"])
def test_ctrl_c_stops_validate(mode, tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    # Unbuffered bytes: communicate() reads the pipe's descriptor directly, so a line that a
    # buffered readline() had already pulled in with the first one ("CAUGHT" follows "CHILDREN"
    # at once in mode raises) would be lost to it.
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, mode, TESTS], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, bufsize=0, env=env)
    try:
        first = first_line(p.stdout)  # "CHILDREN <pid>" at the third kernel call
        assert first.startswith("CHILDREN "), first + p.stderr.read().decode()
        kids = [int(v) for v in first.split()[1:]]
        assert len(kids) == 1  # the ropecheck process
        if mode != "raises":
            time.sleep(1.0)
        t0 = time.monotonic()
        if mode != "raises":
            p.send_signal(signal.SIGINT)
        rest, err = (b.decode() for b in p.communicate(timeout=60))
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    out = first + rest
    assert "KeyboardInterrupt" in err.splitlines()[-1], err
    assert p.returncode == -signal.SIGINT, (p.returncode, out, err)
    assert line(out, "CAUGHT") and "NOT INTERRUPTED" not in out, out
    assert float(line(out, "CAUGHT")[0]) - t0 < 3.0, out  # stopped promptly
    assert line(out, "LEFT") == [], out  # killed and reaped: neither alive nor a zombie
    assert line(out, "TMP") == [], out
    assert line(out, "AGAIN") == ["True"], out + err
    assert not os.path.exists(f"/proc/{kids[0]}")
    assert list(tmp_path.iterdir()) == []
