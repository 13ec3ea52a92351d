"""The README's Python examples run as written (a README that lies is a bug).

Each block runs in a fresh interpreter, as a user would run it: in a test worker that had run many
other files, XLA:CPU aborted while compiling README example 2 on three CI runs in a row
(2026-11-27), and the same block passed in a fresh process each time.
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
ROOT = str(README.parent)


def test_readme_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_example_runs(i, tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAXSTREAM_COMPILATION_CACHE="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    compile(BLOCKS[i], f"README.md[python block {i}]", "exec")  # a syntax error fails here, named
    proc = subprocess.run([sys.executable, "-c", BLOCKS[i]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"README python block {i} failed:\n{proc.stderr[-4000:]}"
    assert proc.stdout.strip(), "every README example prints what it computes"
