"""The size budget a maintainer can hold in their head (issue 53): no module over 500 lines, no
module docstring over 40, no function body over 60, no function over 8 parameters unless the
comment line above it gives the reason (``# Wide signature: ...``)."""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "jaxstream"
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _functions(tree):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _body_lines(fn) -> int:
    body = fn.body[1:] if ast.get_docstring(fn) else fn.body
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def _n_params(fn) -> int:
    a = fn.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)


def _reason_above(lines, fn) -> bool:
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    return first >= 2 and lines[first - 2].strip().startswith("# Wide signature:")


def test_the_budget_finds_what_it_looks_for():
    src = ("def f(a, b, c, d, e, f, g, h, i):\n    return 1\n\n"
           "# Wide signature: a reason.\ndef g(a, b, c, d, e, f, g, h, i):\n    return 1\n\n"
           "def h():\n" + "    x = 1\n" * 61)
    tree, lines = ast.parse(src), src.split("\n")
    fns = {fn.name: fn for fn in _functions(tree)}
    assert _n_params(fns["f"]) == 9 and not _reason_above(lines, fns["f"])
    assert _reason_above(lines, fns["g"])
    assert _body_lines(fns["h"]) == 61


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_within_budget(path):
    src = path.read_text()
    lines = src.split("\n")
    assert src.count("\n") <= 500, f"{path.name}: {src.count(chr(10))} lines"
    tree = ast.parse(src)
    doc = ast.get_docstring(tree) or ""
    assert doc.count("\n") + 1 <= 40, f"{path.name}: module docstring of {doc.count(chr(10)) + 1} lines"
    for fn in _functions(tree):
        assert _body_lines(fn) <= 60, f"{path.name}:{fn.lineno} {fn.name}: body of {_body_lines(fn)} lines"
        assert _n_params(fn) <= 8 or _reason_above(lines, fn), (
            f"{path.name}:{fn.lineno} {fn.name}: {_n_params(fn)} parameters without a '# Wide signature:' reason")
