"""Writes the API reference pages (``docs/api/``) from the package's ``__all__`` lists.

The public API is what ``jaxstream.__all__`` names, followed into every
sub-package and module it names (their own ``__all__``). Each object is
documented once, on the page of the first module that exports it (breadth
first from ``jaxstream``); the other modules that re-export it link there.
``public_api()`` is also what ``tests/test_docs.py`` checks against.
"""
from __future__ import annotations

import importlib
import inspect
import pathlib
import types

ROOT = "jaxstream"


def _module_all(mod: types.ModuleType) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is None:
        raise ValueError(f"public module {mod.__name__} has no __all__")
    return list(names)


def public_api() -> tuple[list[str], dict[str, list[tuple[str, object]]], dict[int, str]]:
    """Modules in page order, each module's (name, object) pairs, and each object's canonical name."""
    order, members, canonical = [], {}, {}
    queue = [ROOT]
    while queue:
        modname = queue.pop(0)
        if modname in members:
            continue
        mod = importlib.import_module(modname)
        order.append(modname)
        members[modname] = []
        for name in _module_all(mod):
            obj = getattr(mod, name)
            members[modname].append((name, obj))
            if inspect.ismodule(obj):
                if obj.__name__.startswith(ROOT + "."):
                    queue.append(obj.__name__)
            elif object_key(obj, name) not in canonical:
                canonical[object_key(obj, name)] = f"{modname}.{name}"
    return order, members, canonical


def is_value(obj) -> bool:
    """A constant or a type alias (documented by a ``#:`` comment), not a class, function or module."""
    if inspect.ismodule(obj) or inspect.isclass(obj):
        return False
    if getattr(obj, "__module__", None) == "typing" or type(obj).__module__ in ("typing", "types"):
        return not inspect.isroutine(obj)  # Union[...], Callable[...]: aliases, though callable
    return not callable(obj)


def object_key(obj, name: str) -> object:
    # A value is the same public object only under the same name: small ints and strings are shared
    # by identity (FORMAT_VERSION = 1 is MOVE_SHIFT = 1).
    if not is_value(obj):
        return id(obj)
    return ("value", name, id(obj))


def attribute_doc(modname: str, name: str) -> str | None:
    """The ``#:`` comment or string after a module-level assignment, searched where the value is defined."""
    from sphinx.pycode import ModuleAnalyzer

    mod = importlib.import_module(modname)
    value = getattr(mod, name)
    candidates = [modname] + sorted(m for m in _all_modules() if m != modname)
    for cand in candidates:
        cmod = importlib.import_module(cand)
        if getattr(cmod, name, _MISSING) is not value:
            continue
        try:
            docs = ModuleAnalyzer.for_module(cand).find_attr_docs()
        except Exception:
            continue
        doc = docs.get(("", name))
        if doc and "".join(doc).strip():
            return "\n".join(doc).strip()
    return None


_MISSING = object()


def _all_modules() -> list[str]:
    base = pathlib.Path(importlib.import_module(ROOT).__file__).parent
    out = []
    for p in base.rglob("*.py"):
        rel = p.relative_to(base.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] in ("__main__",):
            continue
        out.append(".".join(parts))
    return out


def _page(modname: str, members, canonical) -> str:
    lines = [f"# `{modname}`", "", "```{eval-rst}", f".. automodule:: {modname}", "   :no-members:", "```", ""]
    submodules = [(n, o) for n, o in members if inspect.ismodule(o)]
    objects = [(n, o) for n, o in members if not inspect.ismodule(o)]
    if submodules:
        lines += ["## Modules", "", "```{toctree}", ":maxdepth: 1", ""]
        lines += [f"{o.__name__}" for _, o in submodules]
        lines += ["```", ""]
    own = [(n, o) for n, o in objects if canonical.get(object_key(o, n)) == f"{modname}.{n}"]
    elsewhere = [(n, o) for n, o in objects if canonical.get(object_key(o, n)) != f"{modname}.{n}"]
    if own:
        lines += ["## Reference", "", "```{eval-rst}", f".. currentmodule:: {modname}", ""]
        for name, obj in own:
            lines += _directive(modname, name, obj) + [""]
        lines += ["```", ""]
    if elsewhere:
        lines += ["## Also exported here", ""]
        lines += [f"- `{name}`: {{py:obj}}`{canonical[object_key(obj, name)]}`" for name, obj in elsewhere]
        lines += [""]
    return "\n".join(lines)


def _directive(modname: str, name: str, obj) -> list[str]:
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return [f".. autoexception:: {name}"]
    if inspect.isclass(obj):
        if issubclass(obj, tuple) and hasattr(obj, "_fields"):
            return [f".. autoclass:: {name}", "   :no-members:"]
        return [f".. autoclass:: {name}", "   :members:", "   :inherited-members: object"]
    if not is_value(obj):
        return [f".. autofunction:: {name}"]
    doc = attribute_doc(modname, name) or ""
    out = [f".. py:data:: {name}", ""]
    out += ["   " + line if line else "" for line in doc.splitlines()]
    return out


def write_pages(outdir: pathlib.Path) -> list[str]:
    """Writes one page per public module into ``outdir``; returns the module names in order."""
    order, members, canonical = public_api()
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("jaxstream*.md"):
        if old.stem not in order:
            old.unlink()
    for modname in order:
        text = _page(modname, members[modname], canonical)
        path = outdir / f"{modname}.md"
        if not path.exists() or path.read_text() != text:  # keeps Sphinx's incremental build
            path.write_text(text)
    return order
