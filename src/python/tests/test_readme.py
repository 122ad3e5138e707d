"""Every README code block meant to run is run. Each ```python and ```sh block carries a marker
line before its fence: `<!-- readme-test: run -->` (run here, in order, in one scratch directory
that holds `build` -> the build tree and `src` -> the sources, with the built module on
PYTHONPATH) or `<!-- readme-test: skip: REASON -->` (installs, full builds, templates with
placeholders, fragments). A block without a marker fails the test, so a new example cannot be
left out silently."""
import os
import re
import subprocess
import sys

import pytest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
README = os.path.join(SRC, "README.md")
MARK = re.compile(r"^<!-- readme-test: (run|skip: .+) -->$")


def blocks():
    """(line number, language, marker or None, text) of each ```python / ```sh block."""
    out, lines, i = [], open(README).read().split("\n"), 0
    while i < len(lines):
        m = re.match(r"^```(\w*)$", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        mark = MARK.match(lines[start - 1]) if start else None
        if lang in ("python", "sh"):
            out.append((start + 1, lang, mark.group(1) if mark else None,
                        "\n".join(lines[start + 1:j]) + "\n"))
        i = j + 1
    return out


def test_every_block_is_marked():
    unmarked = [f"README.md:{n} ({lang})" for n, lang, mark, _ in blocks() if mark is None]
    assert not unmarked, "code blocks without a readme-test marker: " + ", ".join(unmarked)


def test_run_blocks_run(tmp_path):
    exe = os.environ["ROPECHECK_EXE"]
    build = os.path.dirname(os.path.abspath(exe))
    os.symlink(build, tmp_path / "build")
    os.symlink(os.path.join(SRC, "src"), tmp_path / "src")
    env = dict(os.environ, PATH=build + os.pathsep + os.environ["PATH"])
    ran = 0
    for n, lang, mark, text in blocks():
        if mark != "run":
            continue
        cmd = [sys.executable, "-c", text] if lang == "python" else ["bash", "-euo", "pipefail",
                                                                     "-c", text]
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, (f"README.md:{n} ({lang}) exited {r.returncode}\n"
                                   f"{text}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")
        ran += 1
    assert ran >= 5
