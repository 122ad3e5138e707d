"""Every code block of the README and of the manual (docs/*.md) meant to run is run. Each ```python
and ```sh block carries a marker line before its fence: `<!-- readme-test: run -->` (run here) or
`<!-- readme-test: skip: REASON -->` (installs, full builds, templates with placeholders,
fragments). A block without a marker fails the test, so a new example cannot be left out
silently. The run-blocks of one page run in order in one scratch directory of that page (it holds
`build` -> the build tree and `src` -> the sources, with the built module on PYTHONPATH): a page's
examples may build on each other, never on another page's, so each page can be followed alone.
Every relative link of those pages and of the module maps (a module directory's README.md) must
name a file or directory that exists and, with `#anchor`, a heading of that page."""
import glob
import os
import re
import subprocess
import sys

import pytest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PAGES = ["README.md"] + sorted(os.path.relpath(p, SRC)
                               for p in glob.glob(os.path.join(SRC, "docs", "*.md")))
# The module maps (README.md of a module directory) are checked for links too.
MAPS = sorted(os.path.relpath(p, SRC) for pattern in ("*/README.md", "src/*/README.md")
              for p in glob.glob(os.path.join(SRC, pattern)))
MARK = re.compile(r"^<!-- readme-test: (run|skip: .+) -->$")
FENCE = re.compile(r"^```(\w*)$")


def read(page):
    with open(os.path.join(SRC, page), encoding="utf-8") as f:
        return f.read()


def blocks(page):
    """(line number, language, marker or None, text) of each ```python / ```sh block."""
    out, lines, i = [], read(page).split("\n"), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
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


def prose(page):
    """The page with every fenced block blanked (code may hold brackets that are not links)."""
    out, inside = [], False
    for line in read(page).split("\n"):
        if line.startswith("```"):
            inside = not inside
            out.append("")
        else:
            out.append("" if inside else line)
    return "\n".join(out)


def anchors(page):
    """GitHub's heading ids: lower case, punctuation other than '-' and '_' dropped, spaces to
    '-', a repeated id suffixed -1, -2, ..."""
    seen, out = {}, set()
    for line in prose(page).split("\n"):
        m = re.match(r"^#+ (.*)$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_block_is_marked():
    unmarked = [f"{page}:{n} ({lang})" for page in PAGES for n, lang, mark, _ in blocks(page)
                if mark is None]
    assert not unmarked, "code blocks without a readme-test marker: " + ", ".join(unmarked)


def test_manual_has_run_blocks():
    # The pages the README links to exist, and the manual is not all skipped.
    assert len(PAGES) >= 5, PAGES
    assert sum(mark == "run" for page in PAGES for _, _, mark, _ in blocks(page)) >= 5


@pytest.mark.parametrize("page", [p for p in PAGES if any(m == "run" for _, _, m, _ in blocks(p))])
def test_run_blocks_run(page, tmp_path):
    exe = os.environ["ROPECHECK_EXE"]
    build = os.path.dirname(os.path.abspath(exe))
    os.symlink(build, tmp_path / "build")
    os.symlink(os.path.join(SRC, "src"), tmp_path / "src")
    env = dict(os.environ, PATH=build + os.pathsep + os.environ["PATH"])
    for n, lang, mark, text in blocks(page):
        if mark != "run":
            continue
        cmd = [sys.executable, "-c", text] if lang == "python" else ["bash", "-euo", "pipefail",
                                                                     "-c", text]
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, (f"{page}:{n} ({lang}) exited {r.returncode}\n"
                                   f"{text}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")


def test_relative_links_resolve():
    broken = []
    for page in PAGES + MAPS:
        text = prose(page)
        for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            line = text.count("\n", 0, m.start()) + 1
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(os.path.join(SRC, dest)):
                broken.append(f"{page}:{line}: {target} (no file {dest})")
            elif anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
                broken.append(f"{page}:{line}: {target} (no heading #{anchor} in {dest})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_ci_runs_the_readme_test_command():
    # .ci/run is CI's entry point and promises to run exactly the README's test command.
    tests = [text.strip() for _, lang, mark, text in blocks("README.md")
             if lang == "sh" and "ctest" in text and ".ci/install-deps --tests" in text]
    assert len(tests) == 1, tests
    ci = [line for line in read(".ci/run").split("\n")
          if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == [tests[0]], (ci, tests[0])
