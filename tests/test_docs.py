"""Every example in the README and docs/ runs, and prints what the docs say it prints."""

from __future__ import annotations

import doctest
import functools
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SEED = ROOT.parent / "shared" / "seed" / "online-dynamics.txt"
BLOCK = re.compile(r"```python\n(.*?)```\n(?:\s*```text\n(.*?)```)?", re.S)
BASH = re.compile(r"```bash\n(.*?)```\n(?:\s*```text\n(.*?)```)?", re.S)


def _examples():
    for path in DOCS:
        for k, match in enumerate(BLOCK.finditer(path.read_text(encoding="utf-8"))):
            yield f"{path.name}-{k}", match.group(1), match.group(2)


EXAMPLES = {name: (code, expected) for name, code, expected in _examples()}
# the README's and the design document's examples by default, docs/'s other pages' under slow
DEFAULT = ("README.md-", "design-document.md-")


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)


@functools.cache
def _started(names: tuple[str, ...]) -> dict:
    """The selected examples at once, one interpreter a core: they are independent and mostly
    compile."""
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    return {name: pool.submit(_run, EXAMPLES[name][0]) for name in names}


@pytest.mark.parametrize("name", [name if name.startswith(DEFAULT) else pytest.param(name, marks=pytest.mark.slow)
                                  for name in EXAMPLES])
def test_example_prints_what_the_docs_say(name, request):
    """Run in a fresh interpreter, as a reader would (no x64 from conftest)."""
    selected = tuple(item.callspec.params["name"] for item in request.session.items
                     if getattr(item, "originalname", None) == "test_example_prints_what_the_docs_say")
    done = _started(selected)[name].result()
    assert done.returncode == 0, done.stderr[-3000:]
    expected = EXAMPLES[name][1]
    if expected is not None:
        assert done.stdout.rstrip() == expected.rstrip()


def test_design_document_examples_are_verbatim():
    if not SEED.is_file():
        pytest.skip("the design document is not beside this checkout")
    seed = SEED.read_text(encoding="utf-8")
    copies = list(BLOCK.finditer((ROOT / "docs" / "design-document.md").read_text(encoding="utf-8")))
    assert len(copies) == 5
    for match in copies:
        assert match.group(1).rstrip() in seed
        assert match.group(2).strip() in seed


def test_wrapper_docstring_examples():
    from dense_armor.utility.learn import online_dynamics

    result = doctest.testmod(online_dynamics, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0


def test_ci_runs_the_readme_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.search(r"## Set-up: two commands\n\n```bash\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert len(commands) == 2 and all(command in ci for command in commands)


@pytest.mark.slow
def test_the_cli_page_examples_run_and_print_what_it_says(tmp_path):
    """The bash blocks of docs/cli.md between its "run: begin" and "run: end" marks, in order,
    in one folder, with the installed command; ``...`` in the printed text stands for anything."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    part = text[text.index("<!-- run: begin") : text.index("<!-- run: end")]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    checker = doctest.OutputChecker()
    blocks = list(BASH.finditer(part))
    assert len(blocks) >= 8
    for match in blocks:
        done = subprocess.run(["bash", "-e", "-c", match.group(1)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=600)
        assert done.returncode == 0, (match.group(1), done.stderr[-3000:])
        if match.group(2) is not None:
            want, got = match.group(2).rstrip() + "\n", done.stdout.rstrip() + "\n"
            assert checker.check_output(want, got, doctest.ELLIPSIS), f"{match.group(1)}\n--- printed:\n{got}"
