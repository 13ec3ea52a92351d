"""The documentation tells the truth: every public name is documented, every example runs.

- every name of the public API (the modules' ``__all__``, as the API reference lists them) has a
  docstring of its own (a NamedTuple's generated "Name(a, b)" does not count; a constant needs a
  ``#:`` comment);
- every ``>>>`` example in the package passes as a doctest;
- the ``python`` blocks of each page of the user guide run, in order, in one fresh interpreter, as a
  reader would paste them.
"""
import doctest
import importlib
import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
import apigen  # noqa: E402

PAGES = sorted((DOCS / "guides").glob("*.md")) + [DOCS / "index.md"]
FENCE = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)


def _public():
    order, members, canonical = apigen.public_api()
    for modname in order:
        for name, obj in members[modname]:
            if inspect.ismodule(obj) or canonical.get(apigen.object_key(obj, name)) == f"{modname}.{name}":
                yield modname, name, obj


def _own_doc(name, obj):
    doc = obj.__doc__ if inspect.ismodule(obj) else obj.__dict__.get("__doc__") if inspect.isclass(obj) \
        else getattr(obj, "__doc__", None)
    if not doc or not doc.strip():
        return False
    if inspect.isclass(obj) and issubclass(obj, tuple) and doc.startswith(f"{obj.__name__}("):
        return False  # collections.namedtuple's generated docstring
    return True


def test_every_public_name_is_documented():
    missing = []
    for modname, name, obj in _public():
        if not apigen.is_value(obj):
            if not _own_doc(name, obj):
                missing.append(f"{modname}.{name}")
        else:
            pytest.importorskip("sphinx")  # attribute docs (#: comments) are read by Sphinx's analyser
            if not apigen.attribute_doc(modname, name):
                missing.append(f"{modname}.{name} (constant: needs a #: comment)")
    assert not missing, "public names without a docstring:\n" + "\n".join(missing)


def test_the_public_api_is_not_empty():
    names = {f"{m}.{n}" for m, n, _ in _public()}
    assert {"jaxstream.slpc", "jaxstream.pacbo", "jaxstream.run_stream"} <= names, sorted(names)[:20]


def _modules_with_examples():
    out = []
    for modname in sorted(apigen._all_modules()):
        path = pathlib.Path(importlib.util.find_spec(modname).origin)
        if ">>>" in path.read_text(encoding="utf-8"):
            out.append(modname)
    return out


EXAMPLES = _modules_with_examples()


def test_some_modules_have_examples():
    assert len(EXAMPLES) >= 4, EXAMPLES


@pytest.mark.parametrize("modname", EXAMPLES)
def test_docstring_examples_pass(modname, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mod = importlib.import_module(modname)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(mod, modname) if t.examples]
    assert tests, f"{modname} has '>>>' in its source but no doctest was found"
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {modname} failed (output above)"


@pytest.mark.parametrize("page", [p.relative_to(DOCS).as_posix() for p in PAGES])
def test_guide_page_runs(page, tmp_path):
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = FENCE.findall(text)
    if not blocks:
        pytest.skip(f"{page} has no python blocks")
    source = "\n".join(f"# --- block {i}\n{b}" for i, b in enumerate(blocks))
    compile(source, page, "exec")  # a syntax error fails here, named
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAXSTREAM_COMPILATION_CACHE="0", MPLBACKEND="Agg",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", source], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"a python block of docs/{page} failed:\n{proc.stderr[-4000:]}"


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_uses_the_package_only_and_ran_cleanly(path):
    """A notebook imports the package, not `benchmarks/` (its code would not ship with the
    package), and its stored outputs (what the documentation shows) hold no error."""
    import json
    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "benchmarks" not in code and not re.search(r"^\s*(from|import)\s+bench_", code, re.M)
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o.get("output_type") == "error"]


def test_notebooks_are_found():
    assert {p.name for p in NOTEBOOKS} >= {"slpc.ipynb", "pacbo.ipynb", "landmarks.ipynb", "differentiable.ipynb"}
