"""Opens the built documentation in headless Chromium and checks what a reader would see.

Usage (after the Sphinx build, see docs/README.md)::

    python docs/check_render.py [docs/_build/html] [--screens DIR] [--chromium PATH]

Checks, failing with a list of what is wrong:

- every internal link of every page points to a file of the build;
- no page raises a JavaScript error or fails to load one of its resources;
- the start page shows its pictures (loaded, not broken) and a navigation of the guides;
- a page with formulas has them typeset by MathJax (served from the build, no network), with no
  MathJax error;
- a guide shows highlighted Python, the API reference shows functions and classes with their
  signatures, a notebook page shows its stored figures.

Screenshots of the pages it opens go to ``--screens`` (default ``<html>/../screens``): look at them.
"""
from __future__ import annotations

import argparse
import functools
import html.parser
import http.server
import pathlib
import posixpath
import shutil
import sys
import threading
import urllib.parse

# (page, what it must show): the pages opened in the browser.
PAGES = {
    "index.html": "pictures",
    "guides/slpc.html": "code",
    "guides/pacbo.html": "code",
    "guides/landmarks.html": "code",
    "internals/slpc.html": "math",
    "internals/pacbo.html": "math",
    "internals/landmarks.html": "math",
    "api/jaxstream.html": "api",
    "notebooks/slpc.html": "pictures",
}


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("href", "src"):
            if tag in ("a", "img", "script", "link") and attrs.get(key):
                self.links.append(attrs[key])


def broken_links(root: pathlib.Path) -> list[str]:
    """Internal links (href/src) of every page that name no file of the build."""
    bad = []
    for page in sorted(root.rglob("*.html")):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for link in parser.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or url.netloc or not url.path:
                continue  # external, or a fragment of this page
            target = (page.parent / urllib.parse.unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                bad.append(f"{page.relative_to(root)}: {link}")
    return bad


def _chromium(path: str | None) -> str | None:
    for cand in [path, shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")]:
        if cand and pathlib.Path(cand).exists():
            return cand
    return None  # Playwright's own browser, if `playwright install chromium` was run


def check_pages(root: pathlib.Path, screens: pathlib.Path, chromium: str | None) -> list[str]:
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    screens.mkdir(parents=True, exist_ok=True)
    problems = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=_chromium(chromium), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(f"JavaScript error: {exc}"))
            page.on("requestfailed", lambda req: errors.append(f"failed to load {req.url}"))
            page.on("response", lambda r: r.status >= 400 and errors.append(f"HTTP {r.status}: {r.url}"))
            for path, kind in PAGES.items():
                errors.clear()
                page.goto(base + path, wait_until="networkidle")
                problems += [f"{path}: {e}" for e in _check(page, kind)]
                problems += [f"{path}: {e}" for e in errors]
                page.screenshot(path=str(screens / (posixpath.splitext(path)[0].replace("/", "_") + ".png")),
                                full_page=False)
            browser.close()
    finally:
        server.shutdown()
    return problems


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _check(page, kind: str) -> list[str]:
    out = []
    nav = page.locator(".sidebar-tree a.reference").count()
    if nav < 10:
        out.append(f"the navigation shows {nav} links (expected the guides, examples and reference)")
    if kind == "pictures":
        sizes = page.eval_on_selector_all("article img", "imgs => imgs.map(i => [i.complete, i.naturalWidth])")
        if not sizes:
            out.append("no picture")
        out += [f"picture {i} is broken" for i, (done, w) in enumerate(sizes) if not done or w == 0]
    elif kind == "math":
        if not page.evaluate("() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)"):
            return out + ["MathJax is not loaded"]
        page.evaluate("() => MathJax.startup.promise")
        n = page.locator("mjx-container").count()
        if n == 0:
            out.append("no formula typeset by MathJax")
        if page.locator("mjx-merror, .MathJax_Error").count():
            out.append("MathJax reports an error in a formula")
        raw = page.locator("article .math").evaluate_all("els => els.filter(e => !e.querySelector('mjx-container')).length")
        if raw:
            out.append(f"{raw} formulas left as raw TeX")
    elif kind == "code":
        if page.locator("div.highlight-python pre").count() < 3:
            out.append("fewer than 3 highlighted Python blocks")
        if page.locator("div.highlight-python pre span.n").count() == 0:
            out.append("Python blocks are not highlighted")
    elif kind == "api":
        if page.locator("dl.py.function dt.sig").count() < 5:
            out.append("fewer than 5 documented functions with signatures")
        if page.locator("dl.py.class").count() < 3:
            out.append("fewer than 3 documented classes")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", nargs="?", default=str(pathlib.Path(__file__).parent / "_build" / "html"))
    ap.add_argument("--screens", default=None, help="directory for the screenshots")
    ap.add_argument("--chromium", default=None, help="a Chromium executable (default: chromium on PATH)")
    args = ap.parse_args(argv)
    root = pathlib.Path(args.html).resolve()
    if not (root / "index.html").exists():
        print(f"{root}/index.html does not exist: build the site first (docs/README.md)", file=sys.stderr)
        return 2
    screens = pathlib.Path(args.screens) if args.screens else root.parent / "screens"
    problems = [f"broken link {b}" for b in broken_links(root)]
    problems += check_pages(root, screens, args.chromium)
    pages = len(list(root.rglob("*.html")))
    if problems:
        print(f"{len(problems)} problems in the rendered site ({pages} pages):", *problems, sep="\n  ")
        return 1
    print(f"rendered site OK: {pages} pages, links resolve; {len(PAGES)} pages opened in Chromium, "
          f"screenshots in {screens}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
