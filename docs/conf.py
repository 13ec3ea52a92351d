"""Sphinx configuration of the jaxstream documentation (build: see docs/README.md)."""
from __future__ import annotations

import pathlib
import shutil
import sys

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

import jaxstream  # noqa: E402
import apigen  # noqa: E402

project = "jaxstream"
author = "the jaxstream developers"
copyright = "2026, the jaxstream developers"
release = jaxstream.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_nb",
    "sphinx-mathjax-offline",  # MathJax 3 served from the build, not a CDN (the package name has dashes)
]

# Everything the pages need is in the build: no intersphinx, no CDN (MathJax is served locally).
nitpicky = True
# References into other projects cannot be resolved offline; everything of ours must resolve.
nitpick_ignore_regex = [
    (r"py:.*", r"(jax|jaxlib|numpy|np|optax|chex|typing|collections|contextlib|os|pathlib|types|abc)(\..*)?"),
    (r"py:.*", r"(Array|ArrayLike|PRNGKey|Key|Any|Callable|Iterable|Iterator|Sequence|Mapping|Optional|Union)"),
    (r"py:.*", r"(int|float|bool|str|bytes|tuple|list|dict|object|None|NamedTuple|Path|PathLike)"),
]

autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_param = False
napoleon_use_rtype = False
napoleon_use_ivar = True

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the notebooks are stored executed; their make_*_notebook.py scripts re-run them
nb_merge_streams = True

html_theme = "furo"
html_title = f"jaxstream {release}"
html_static_path = ["_static"]
templates_path = []
exclude_patterns = ["_build", "README.md", "Thumbs.db", ".DS_Store", "jupyter_execute"]
suppress_warnings = []


def _copy_notebooks() -> None:
    out = DOCS / "notebooks"
    out.mkdir(exist_ok=True)
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        target = out / nb.name
        if not target.exists() or target.read_bytes() != nb.read_bytes():
            shutil.copyfile(nb, target)


def _copy_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    target = DOCS / "changelog.md"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


_copy_notebooks()
_copy_changelog()
apigen.write_pages(DOCS / "api")


def _escape_bars(app, what, name, obj, options, lines) -> None:
    """Docstrings write math in plain text (|x|, |L| < n_L): a bar there is not a substitution."""
    literal_indent = None
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None and (not line.strip() or indent > literal_indent):
            continue
        literal_indent = None
        if line.rstrip().endswith("::"):
            literal_indent = indent
        if "|" not in line or line.lstrip().startswith(("|", "+")):
            continue
        parts = line.split("``")
        lines[i] = "``".join(part.replace("|", "\\|") if k % 2 == 0 else part for k, part in enumerate(parts))


def setup(app):
    app.connect("autodoc-process-docstring", _escape_bars)
